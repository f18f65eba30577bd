// Package quantize re-quantises the weights of a GGUF model, as llama.cpp's quantize tool does
// with --pure and no importance matrix: every 2-D (or 3-D expert) weight that llama.cpp would
// quantise gets the target type, encoded by host/quant's reference quantisers, so the tensor
// bytes equal llama.cpp's; 1-D tensors and the tensors llama.cpp never quantises (norms,
// routers, convolutions, position embeddings, …) keep their type. Metadata is copied, with
// general.file_type and general.quantization_version set as llama.cpp sets them.
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
	Type dtype.Type
	// AllowFallback keeps a tensor whose row length is not a whole number of the target type's
	// blocks in its current type (with a warning) instead of failing.
	AllowFallback bool
	// AllowRequantize accepts already-quantised inputs (they are dequantised first, losing
	// precision twice).
	AllowRequantize bool
	// Workers quantise rows in parallel (0: GOMAXPROCS). Output bytes never depend on it.
	Workers int
	// Warn receives warnings (may be nil).
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
	Why  string // why a weight was not converted ("" if it was, or needs no change)
}

// FileType returns llama.cpp's general.file_type (llama_ftype) for an all-t model.
func FileType(t dtype.Type) (uint32, error) {
	m := map[dtype.Type]uint32{
		dtype.F32: 0, dtype.F16: 1, dtype.Q4_0: 2, dtype.Q4_1: 3, dtype.Q8_0: 7, dtype.Q5_0: 8,
		dtype.Q5_1: 9, dtype.Q2_K: 10, dtype.Q3_K: 12, dtype.Q4_K: 15, dtype.Q5_K: 17, dtype.Q6_K: 18,
		dtype.BF16: 32,
	}
	ft, ok := m[t]
	if !ok {
		return 0, fmt.Errorf("quantize: no llama.cpp file type for %s", t)
	}
	return ft, nil
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

// Plan decides each tensor's fate without converting anything.
func Plan(f *gguf.File, o Options) ([]Action, error) {
	if _, err := quant.Lookup(o.Type); err != nil {
		return nil, err
	}
	if _, err := FileType(o.Type); err != nil {
		return nil, err
	}
	var out []Action
	for _, t := range f.Tensors {
		a := Action{Name: t.Name, From: t.Type, To: t.Type, Dims: t.Dims}
		switch {
		case empty(t.Dims):
			a.Why = "empty (a dimension is 0): kept as it is"
		case !Quantizable(t.Name, nDims(t.Dims)):
			a.Why = "not quantised (1-D or excluded by name)"
		case t.Dims[0]%int64(o.Type.BlockSize()) != 0:
			msg := fmt.Sprintf("tensor %q: row length %d is not a multiple of the %s block size %d", t.Name, t.Dims[0], o.Type, o.Type.BlockSize())
			if !o.AllowFallback {
				return nil, fmt.Errorf("quantize: %s (use --allow-fallback to keep it as %s)", msg, t.Type)
			}
			a.Why = msg + "; kept as " + t.Type.String()
		case t.Type != dtype.F32 && t.Type != dtype.F16 && t.Type != dtype.BF16 && t.Type != o.Type && !o.AllowRequantize:
			return nil, fmt.Errorf("quantize: tensor %q is already %s; requantising needs --allow-requantize", t.Name, t.Type)
		default:
			if _, err := quant.Lookup(t.Type); err != nil {
				return nil, fmt.Errorf("quantize: tensor %q: %w", t.Name, err)
			}
			a.To = o.Type
		}
		out = append(out, a)
	}
	return out, nil
}

// Write re-quantises f into out.
func Write(f *gguf.File, out io.Writer, o Options) ([]Action, error) {
	plan, err := Plan(f, o)
	if err != nil {
		return nil, err
	}
	ft, _ := FileType(o.Type)
	w := gguf.NewWriterFrom(f)
	w.Set("general.file_type", gguf.U32(ft))
	w.Set("general.quantization_version", gguf.U32(2))
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
	for i, a := range plan {
		ti := f.Tensors[i]
		data := f.Data(ti)
		if a.Why != "" && o.Warn != nil && strings.Contains(a.Why, "kept as") {
			o.Warn(a.Why)
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
