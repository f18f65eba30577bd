package reference

import (
	"fmt"
	"math"
	"slices"

	"verity/device/dtype"
	"verity/host/gguf"
	"verity/host/quant"
)

// Options select what the reference emulates.
type Options struct {
	// ActQuant converts the activation of every matrix product as ggml's CPU backend does
	// before its dot products (see the package documentation). Off, every product is plain
	// float64.
	ActQuant bool
}

// Model is a model decoded for the reference forward pass: every weight as float64. It does
// not refer to the gguf.File after Load, and it is safe for concurrent use.
type Model struct {
	cfg         Config
	opt         Options
	embd        *matrix   // token_embd: row t is the embedding of token t
	output      *matrix   // output.weight, or token_embd when tied
	outNorm     []float64 // output_norm
	ropeFactors []float64 // rope_freqs.weight (HeadDim/2 frequency divisors), or nil
	layers      []layer
}

type layer struct {
	attnNorm, ffnNorm []float64
	qNorm, kNorm      []float64 // qwen3: per-head RMSNorm weights of q and k (HeadDim)
	wq, wk, wv, wo    *matrix
	gate, up, down    *matrix
}

// Config returns the hyper-parameters the model was loaded with.
func (m *Model) Config() Config { return m.cfg }

// Load decodes the model in f. It fails, naming the key or tensor, on an unsupported
// architecture or feature (errors wrapping ErrUnsupported), missing or misshapen tensors,
// tensor types host/quant cannot decode, and tensors the forward pass would not use.
func Load(f *gguf.File, opt Options) (*Model, error) {
	c, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	l := loader{f: f, used: map[string]bool{}, actQuant: opt.ActQuant}
	m := &Model{opt: opt}
	E, D := c.NEmbd, c.HeadDim
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, fmt.Errorf("reference: tensor %q is missing", "token_embd.weight")
	}
	if len(emb.Dims) != 2 || emb.Dims[1] < 1 || emb.Dims[1] > math.MaxInt32 {
		return nil, fmt.Errorf("reference: tensor %q has dims %v, want [%d, n_vocab]", emb.Name, emb.Dims, E)
	}
	c.NVocab = int(emb.Dims[1])
	if m.embd, err = l.matrix("token_embd.weight", E, c.NVocab); err != nil {
		return nil, err
	}
	if m.outNorm, err = l.vector("output_norm.weight", E); err != nil {
		return nil, err
	}
	c.Tied = !l.has("output.weight")
	m.output = m.embd
	if !c.Tied {
		if m.output, err = l.matrix("output.weight", E, c.NVocab); err != nil {
			return nil, err
		}
	}
	if archTraits[c.Arch].ropeFactors && l.has("rope_freqs.weight") {
		c.RopeFactors = true
		if m.ropeFactors, err = l.vector("rope_freqs.weight", D/2); err != nil {
			return nil, err
		}
	}
	m.layers = make([]layer, c.NLayer)
	for i := range m.layers {
		if err := l.layer(&m.layers[i], c, fmt.Sprintf("blk.%d.", i)); err != nil {
			return nil, err
		}
	}
	for _, t := range f.Tensors {
		if !l.used[t.Name] {
			return nil, fmt.Errorf("reference: tensor %q is not part of the %s graph the reference implements: %w", t.Name, c.Arch, ErrUnsupported)
		}
	}
	m.cfg = c
	return m, nil
}

// loader decodes the tensors of a file and records which ones it used.
type loader struct {
	f        *gguf.File
	used     map[string]bool
	actQuant bool
}

func (l *loader) has(name string) bool {
	_, ok := l.f.Tensor(name)
	return ok
}

func (l *loader) layer(ly *layer, c Config, p string) error {
	E, F, D := c.NEmbd, c.NFF, c.HeadDim
	var err error
	for _, v := range []struct {
		dst  *[]float64
		name string
		n    int
	}{{&ly.attnNorm, "attn_norm.weight", E}, {&ly.ffnNorm, "ffn_norm.weight", E}} {
		if *v.dst, err = l.vector(p+v.name, v.n); err != nil {
			return err
		}
	}
	if c.QKNorm {
		if ly.qNorm, err = l.vector(p+"attn_q_norm.weight", D); err != nil {
			return err
		}
		if ly.kNorm, err = l.vector(p+"attn_k_norm.weight", D); err != nil {
			return err
		}
	}
	for _, w := range []struct {
		dst      **matrix
		name     string
		in, rows int
	}{
		{&ly.wq, "attn_q.weight", E, c.NHead * D},
		{&ly.wk, "attn_k.weight", E, c.NHeadKV * D},
		{&ly.wv, "attn_v.weight", E, c.NHeadKV * D},
		{&ly.wo, "attn_output.weight", c.NHead * D, E},
		{&ly.gate, "ffn_gate.weight", E, F},
		{&ly.up, "ffn_up.weight", E, F},
		{&ly.down, "ffn_down.weight", F, E},
	} {
		if *w.dst, err = l.matrix(p+w.name, w.in, w.rows); err != nil {
			return err
		}
	}
	return nil
}

// tensor finds name, checks its dims against want (trailing 1s ignored, as ggml does) and
// decodes it to float64.
func (l *loader) tensor(name string, want ...int) (gguf.TensorInfo, []float64, error) {
	t, ok := l.f.Tensor(name)
	if !ok {
		return t, nil, fmt.Errorf("reference: tensor %q is missing", name)
	}
	dims := slices.Clone(t.Dims)
	for len(dims) > len(want) && dims[len(dims)-1] == 1 {
		dims = dims[:len(dims)-1]
	}
	ok = len(dims) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = dims[i] == int64(want[i])
	}
	if !ok {
		return t, nil, fmt.Errorf("reference: tensor %q has dims %v, want %v", name, t.Dims, want)
	}
	f, err := quant.Lookup(t.Type)
	if err != nil {
		return t, nil, fmt.Errorf("reference: tensor %q: %w (%w)", name, err, ErrUnsupported)
	}
	data := l.f.Data(t)
	n := int(t.Elements())
	if data == nil || quant.Check(t.Type, n, len(data)) != nil {
		return t, nil, fmt.Errorf("reference: tensor %q: data of %d bytes does not hold %d %s values", name, len(data), n, t.Type)
	}
	v32 := make([]float32, n)
	f.Dequantize(v32, data)
	v := make([]float64, n)
	for i, x := range v32 {
		v[i] = float64(x)
	}
	l.used[name] = true
	return t, v, nil
}

// vector decodes a 1-D tensor of n values.
func (l *loader) vector(name string, n int) ([]float64, error) {
	_, v, err := l.tensor(name, n)
	return v, err
}

// matrix decodes a weight of y = W·x with in inputs and rows outputs (GGUF dims [in, rows]).
func (l *loader) matrix(name string, in, rows int) (*matrix, error) {
	t, v, err := l.tensor(name, in, rows)
	if err != nil {
		return nil, err
	}
	return newMatrix(name, t.Type, rows, in, v, l.f.Data(t), l.actQuant)
}

// newMatrix makes a matrix of the decoded values w of a tensor stored as data in type t. With
// actQuant it also resolves the activation type and, for Q4_1 and Q5_1, keeps the block offsets.
func newMatrix(name string, t dtype.Type, rows, cols int, w []float64, data []byte, actQuant bool) (*matrix, error) {
	m := &matrix{name: name, vecDot: dtype.F32, rows: rows, cols: cols, w: w}
	if actQuant {
		var err error
		if m.vecDot, err = vecDotType(t); err != nil {
			return nil, fmt.Errorf("reference: tensor %q: %w", name, err)
		}
		if t == dtype.Q4_1 || t == dtype.Q5_1 {
			m.mins = blockMins(t, data)
		}
	}
	return m, nil
}

// blockMins returns the offset m of every block of a Q4_1 or Q5_1 tensor: the fp16 at byte 2 of
// each block.
func blockMins(t dtype.Type, data []byte) []float64 {
	bb := t.BlockBytes()
	out := make([]float64, len(data)/bb)
	for i := range out {
		out[i] = halfAt(data[i*bb+2:])
	}
	return out
}
