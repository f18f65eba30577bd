// Package quantize re-quantises the weights of a GGUF model as llama.cpp's quantize tool does
// without an importance matrix: for a file type (Q4_K_M, Q8_0, …) every weight gets the type
// llama.cpp's mix chooses for it (mix.go), or with Pure the file type's base type, encoded by
// host/quant's reference quantisers, so that the tensor bytes equal llama.cpp's; the tensors
// are written in llama.cpp's order, so the files are byte-identical too. 1-D tensors and the
// tensors llama.cpp never quantises (norms, routers, convolutions, position embeddings, …)
// keep their type. Metadata is copied, with general.file_type and
// general.quantization_version set as llama.cpp sets them.
package quantize

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"verity/device/dtype"
	"verity/host/gguf"
	"verity/host/quant"
)

// Options control a re-quantisation.
type Options struct {
	MixOptions
	// AllowRequantize accepts already-quantised inputs (they are dequantised first, losing
	// precision twice).
	AllowRequantize bool
	// Workers quantise rows in parallel (0: GOMAXPROCS). Output bytes never depend on it.
	Workers int
	// Warn receives warnings (may be nil): the tensors whose rows made their type fall back.
	Warn func(msg string)
	// Progress is called with the number of input bytes processed so far and the total.
	Progress func(done, total int64)
}

// Action is what happens to one tensor.
type Action struct {
	Name string
	From dtype.Type
	To   dtype.Type
	Dims []int64
	Why  string // why a weight was not converted, or was converted to a fallback type ("" otherwise)
}

// Quantizable reports whether llama.cpp's quantiser converts a tensor of this name and rank.
func Quantizable(name string, nDims int) bool {
	if nDims < 2 || !strings.HasSuffix(name, "weight") {
		return false
	}
	for _, s := range []string{
		"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
		"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
		"indexer.q_proj.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
		"sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
	} {
		if strings.Contains(name, s) {
			return false
		}
	}
	if strings.Contains(name, "time_mix_") {
		for _, s := range []string{"first", "w0", "w1", "w2", "v0", "v1", "v2", "a0", "a1", "a2", "g1", "g2", "decay_w1", "decay_w2", "lerp_fused"} {
			if strings.Contains(name, "time_mix_"+s+".weight") {
				return false
			}
		}
	}
	return name != "position_embd.weight" && name != "token_types.weight"
}

// nDims is ggml_n_dims: the rank ignoring trailing dims of size 1.
func nDims(d []int64) int {
	n := len(d)
	for n > 1 && d[n-1] == 1 {
		n--
	}
	return n
}

// empty reports whether a tensor of dims d has no elements.
func empty(d []int64) bool {
	for _, n := range d {
		if n == 0 {
			return true
		}
	}
	return false
}

// ModelOf reads what a mix needs to know of f's model from its metadata.
func ModelOf(f *gguf.File) (Model, error) {
	m := Model{Arch: f.Architecture()}
	first := func(key string) (int, error) {
		v, ok := f.Lookup(key)
		if !ok {
			return 0, nil
		}
		if v.Type() == gguf.TypeArray { // per-layer values: llama.cpp reads the first layer's
			ns, err := f.Ints(key)
			if err != nil || len(ns) == 0 {
				return 0, err
			}
			return int(ns[0]), nil
		}
		n, err := f.Int(key)
		return int(n), err
	}
	var err error
	p := m.Arch + "."
	for _, k := range []struct {
		key string
		dst *int
	}{{"block_count", &m.NLayer}, {"attention.head_count", &m.NHead}, {"attention.head_count_kv", &m.NHeadKV}, {"expert_count", &m.NExpert}} {
		if *k.dst, err = first(p + k.key); err != nil {
			return Model{}, fmt.Errorf("quantize: %w", err)
		}
	}
	if m.NHeadKV == 0 {
		m.NHeadKV = m.NHead // llama.cpp's default: no grouped K/V
	}
	return m, nil
}

// Plan decides each tensor's fate without converting anything. The actions are in the order
// Write writes the tensors (FileOrder).
func Plan(f *gguf.File, o Options) ([]Action, error) {
	base := o.FileType.Base()
	if !o.FileType.Known() {
		return nil, fmt.Errorf("quantize: unknown file type %d", uint32(o.FileType))
	}
	if _, err := quant.Lookup(base); err != nil {
		return nil, err
	}
	m, err := ModelOf(f)
	if err != nil {
		return nil, err
	}
	ts := make([]Tensor, len(f.Tensors))
	for i, t := range f.Tensors {
		ts[i] = Tensor{Name: t.Name, Type: t.Type, Dims: t.Dims}
	}
	FileOrder(ts)
	choices, err := Mix(m, ts, o.MixOptions)
	if err != nil {
		return nil, err
	}
	out := make([]Action, len(ts))
	for i, t := range ts {
		c := choices[i]
		a := Action{Name: t.Name, From: t.Type, To: c.Type, Dims: t.Dims}
		switch {
		case empty(t.Dims):
			a.To, a.Why = t.Type, "empty (a dimension is 0): kept as it is"
		case a.To == a.From:
		case t.Type.Quantized() && !o.AllowRequantize:
			return nil, fmt.Errorf("quantize: tensor %q is already %s; requantising needs --allow-requantize", t.Name, t.Type)
		default:
			if _, err := quant.Lookup(t.Type); err != nil {
				return nil, fmt.Errorf("quantize: tensor %q: %w", t.Name, err)
			}
			if _, err := quant.Lookup(a.To); err != nil {
				return nil, fmt.Errorf("quantize: tensor %q: %w", t.Name, err)
			}
			if c.Wanted != c.Type {
				a.Why = fmt.Sprintf("rows of %d values are not whole %s blocks: %s instead", t.Dims[0], c.Wanted, c.Type)
			}
		}
		out[i] = a
	}
	return out, nil
}

// Write re-quantises f into out.
func Write(f *gguf.File, out io.Writer, o Options) ([]Action, error) {
	plan, err := Plan(f, o)
	if err != nil {
		return nil, err
	}
	// llama.cpp removes these two keys and appends them, in this order.
	w := gguf.NewWriterFrom(f)
	w.Delete("general.quantization_version")
	w.Delete("general.file_type")
	w.Set("general.quantization_version", gguf.U32(2)) // GGML_QNT_VERSION
	w.Set("general.file_type", gguf.U32(uint32(o.FileType)))
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var total, done int64
	for _, t := range f.Tensors {
		total += t.Size
	}
	var mu sync.Mutex
	report := func(n int64) {
		if o.Progress == nil {
			return
		}
		mu.Lock()
		done += n
		d := done
		mu.Unlock()
		o.Progress(d, total)
	}
	for _, a := range plan {
		ti, _ := f.Tensor(a.Name)
		data := f.Data(ti)
		if a.Why != "" && o.Warn != nil && !strings.HasPrefix(a.Why, "empty") {
			o.Warn(fmt.Sprintf("tensor %q: %s", a.Name, a.Why))
		}
		if a.To == a.From {
			if err := w.AddTensor(a.Name, a.To, a.Dims, data); err != nil {
				return nil, err
			}
			report(ti.Size)
			continue
		}
		a := a
		if err := w.AddTensorFunc(a.Name, a.To, a.Dims, func(dst io.Writer) error {
			b, err := convert(data, a.From, a.To, a.Dims[0], workers)
			if err != nil {
				return fmt.Errorf("quantize: tensor %q: %w", a.Name, err)
			}
			report(int64(len(data)))
			_, err = dst.Write(b)
			return err
		}); err != nil {
			return nil, err
		}
	}
	if _, err := w.WriteTo(out); err != nil {
		return nil, err
	}
	return plan, nil
}

// convert decodes rows of type from and encodes them as type to, rows in parallel.
func convert(src []byte, from, to dtype.Type, rowLen int64, workers int) ([]byte, error) {
	fin, err := quant.Lookup(from)
	if err != nil {
		return nil, err
	}
	fout, err := quant.Lookup(to)
	if err != nil {
		return nil, err
	}
	inRow, err := from.RowBytes(rowLen)
	if err != nil {
		return nil, err
	}
	outRow, err := to.RowBytes(rowLen)
	if err != nil {
		return nil, err
	}
	if inRow == 0 || outRow == 0 {
		return nil, fmt.Errorf("rows of %d elements cannot be converted", rowLen)
	}
	rows := int64(len(src)) / inRow
	dst := make([]byte, rows*outRow)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := rows*int64(w)/int64(workers), rows*int64(w+1)/int64(workers)
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals := make([]float32, rowLen)
			for r := lo; r < hi; r++ {
				fin.Dequantize(vals, src[r*inRow:(r+1)*inRow])
				fout.Quantize(dst[r*outRow:(r+1)*outRow], vals)
			}
		}()
	}
	wg.Wait()
	return dst, nil
}
