package reference

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

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
	// CacheK and CacheV round every key (after RoPE) and value to the K/V cache's element type
	// before attention reads it, as Verity's store does: F16 or BF16 to nearest even (through
	// float32), F32 to float32; the zero value is F32. Without RoundCache keys and values stay
	// float64.
	RoundCache     bool
	CacheK, CacheV dtype.Type
	// GELUF16 computes the Gemma families' GELU as ggml's CPU backend does: through a float16
	// table, its argument and result rounded to float16 (gemma.go). Off, it is exact.
	GELUF16 bool
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

	// gdnHeadsBlocked makes value head h of a Gated DeltaNet read query/key head
	// h / (SSMVHeads/SSMKHeads) (HF's repeat_interleave) instead of h mod SSMKHeads. It is
	// wrong for GGUF files and exists so that the tests can show the difference matters.
	gdnHeadsBlocked bool
}

// mixerKind is what a layer does between attn_norm and the residual add.
type mixerKind int

const (
	plainAttention mixerKind = iota // llama, qwen3
	gatedAttention                  // qwen35moe full attention: Wq gives [q_h | gate_h] per head
	deltaNetMixer                   // qwen35moe Gated DeltaNet
)

type layer struct {
	mixer             mixerKind
	attnNorm, ffnNorm []float64 // ffnNorm is post_attention_norm for qwen35moe
	qNorm, kNorm      []float64 // qwen3, qwen35moe: per-head RMSNorm weights of q and k (HeadDim)
	wq, wk, wv, wo    *matrix
	bq, bk, bv, bo    []float64 // projection biases (nil where there are none)
	gate, up, down    *matrix   // the dense SwiGLU FFN (llama, qwen3)
	gdn               *deltaNet // deltaNetMixer layers
	moe               *moe      // qwen35moe, and llama with experts

	// Gemma families: the sandwich norms after attention and the feed-forward (gemma2,
	// gemma3; nil otherwise), the layer's sliding window (0: every position) and its RoPE
	// base and scaling (0: the model's).
	attnPostNorm, ffnPostNorm []float64
	window                    int
	ropeBase, ropeScale       float64
}

// deltaNet holds the weights of a Gated DeltaNet layer; C = 2·nk·dk + nv·dv is the number of
// channels of its convolution.
type deltaNet struct {
	qkv   *matrix   // attn_qkv: n → C channels [q: nk·dk | k: nk·dk | v: nv·dv], head-major
	z     *matrix   // attn_gate: n → nv·dv, the output gate
	beta  *matrix   // ssm_beta: n → nv
	alpha *matrix   // ssm_alpha: n → nv
	out   *matrix   // ssm_out: nv·dv → E
	conv  []float64 // ssm_conv1d: channel c's K taps at [c·K, (c+1)·K), oldest input first
	dt    []float64 // ssm_dt.bias (nv)
	a     []float64 // ssm_a (nv): −exp(A_log), as stored
	norm  []float64 // ssm_norm (dv)
}

// moe holds the weights of a mixture-of-experts feed-forward: routed experts, plus for
// qwen35moe a shared expert (nil for a Mixtral-style llama).
type moe struct {
	router         *matrix   // ffn_gate_inp: n → NExpert logits
	gate, up, down []*matrix // ffn_{gate,up,down}_exps, one matrix per expert
	shGate, shUp   *matrix   // ffn_gate_shexp, ffn_up_shexp
	shDown         *matrix   // ffn_down_shexp
	shInp          *matrix   // ffn_gate_inp_shexp: one row, the shared expert's gate logit
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
	if c.Gemma && c.Arch != "gemma3" && !c.Tied {
		return nil, fmt.Errorf("reference: %s has no output.weight (llama.cpp's head is token_embd): %w", c.Arch, ErrUnsupported)
	}
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
	if archTraits[c.Arch].longRope {
		// llama.cpp divides by the short factors for contexts up to the original one — the
		// reference's forward passes — and by the long ones past it
		if l.has("rope_factors_long.weight") {
			if _, err := l.vector("rope_factors_long.weight", c.NRot/2); err != nil {
				return nil, err
			}
		}
		if l.has("rope_factors_short.weight") {
			c.RopeFactors = true
			if m.ropeFactors, err = l.vector("rope_factors_short.weight", c.NRot/2); err != nil {
				return nil, err
			}
		}
	}
	m.layers = make([]layer, c.NLayer)
	for i := range m.layers {
		if err := l.layer(&m.layers[i], c, i); err != nil {
			return nil, err
		}
		if c.Gemma {
			if err := l.gemmaLayer(&m.layers[i], c, i); err != nil {
				return nil, err
			}
		}
	}
	for _, t := range f.Tensors {
		if !l.used[t.Name] && !isMTP(c, t.Name) {
			return nil, fmt.Errorf("reference: tensor %q is not part of the %s graph the reference implements: %w", t.Name, c.Arch, ErrUnsupported)
		}
	}
	m.cfg = c
	return m, nil
}

// isMTP reports whether name belongs to the multi-token-prediction blocks of a qwen35moe file
// (blk.N.* with N past the trunk), which the forward pass does not run.
func isMTP(c Config, name string) bool {
	if c.NextN == 0 {
		return false
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return false
	}
	num, _, ok := strings.Cut(rest, ".")
	n, err := strconv.Atoi(num)
	return ok && err == nil && n >= c.NLayer && n < c.NLayer+c.NextN
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

func (l *loader) layer(ly *layer, c Config, i int) error {
	p := fmt.Sprintf("blk.%d.", i)
	if archTraits[c.Arch].hybrid {
		return l.hybridLayer(ly, c, i, p)
	}
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
	tr := archTraits[c.Arch]
	specs := []matrixSpec{{&ly.wo, "attn_output.weight", c.NHead * D, E}}
	if tr.fused && l.has(p+"attn_qkv.weight") { // rows q, then k, then v
		qkv, err := l.matrix(p+"attn_qkv.weight", E, (c.NHead+2*c.NHeadKV)*D)
		if err != nil {
			return err
		}
		ly.wq, ly.wk, ly.wv = qkv.slice(0, c.NHead*D), qkv.slice(c.NHead*D, (c.NHead+c.NHeadKV)*D), qkv.slice((c.NHead+c.NHeadKV)*D, (c.NHead+2*c.NHeadKV)*D)
	} else {
		specs = append(specs,
			matrixSpec{&ly.wq, "attn_q.weight", E, c.NHead * D},
			matrixSpec{&ly.wk, "attn_k.weight", E, c.NHeadKV * D},
			matrixSpec{&ly.wv, "attn_v.weight", E, c.NHeadKV * D})
	}
	if err := l.matrices(p, specs); err != nil {
		return err
	}
	for _, b := range []struct {
		dst  *[]float64
		name string
		n    int
		req  bool
	}{{&ly.bq, "attn_q.bias", c.NHead * D, tr.qkvBias}, {&ly.bk, "attn_k.bias", c.NHeadKV * D, tr.qkvBias},
		{&ly.bv, "attn_v.bias", c.NHeadKV * D, tr.qkvBias}, {&ly.bo, "attn_output.bias", E, false}} {
		if !b.req && !(tr.optionalBias && l.has(p+b.name)) {
			continue
		}
		if *b.dst, err = l.vector(p+b.name, b.n); err != nil {
			return err
		}
	}
	if c.NExpert > 0 { // Mixtral-style experts, no shared expert
		ly.moe, err = l.moe(c, p)
		return err
	}
	if tr.fused { // ffn_up holds the gate's rows, then the up projection's
		gu, err := l.matrix(p+"ffn_up.weight", E, 2*F)
		if err != nil {
			return err
		}
		ly.gate, ly.up = gu.slice(0, F), gu.slice(F, 2*F)
		return l.matrices(p, []matrixSpec{{&ly.down, "ffn_down.weight", F, E}})
	}
	return l.matrices(p, []matrixSpec{
		{&ly.gate, "ffn_gate.weight", E, F},
		{&ly.up, "ffn_up.weight", E, F},
		{&ly.down, "ffn_down.weight", F, E},
	})
}

// matrixSpec names a matrix of a layer and its shape.
type matrixSpec struct {
	dst      **matrix
	name     string
	in, rows int
}

func (l *loader) matrices(prefix string, specs []matrixSpec) error {
	for _, w := range specs {
		var err error
		if *w.dst, err = l.matrix(prefix+w.name, w.in, w.rows); err != nil {
			return err
		}
	}
	return nil
}

// hybridLayer loads layer i of a qwen35moe file: gated full attention or a Gated DeltaNet,
// then the MoE feed-forward.
func (l *loader) hybridLayer(ly *layer, c Config, i int, p string) error {
	E, D := c.NEmbd, c.HeadDim
	var err error
	if ly.attnNorm, err = l.vector(p+"attn_norm.weight", E); err != nil {
		return err
	}
	if ly.ffnNorm, err = l.vector(p+"post_attention_norm.weight", E); err != nil {
		return err
	}
	if c.Recurrent[i] {
		ly.mixer = deltaNetMixer
		if ly.gdn, err = l.deltaNet(c, p); err != nil {
			return err
		}
	} else {
		ly.mixer = gatedAttention
		if ly.qNorm, err = l.vector(p+"attn_q_norm.weight", D); err != nil {
			return err
		}
		if ly.kNorm, err = l.vector(p+"attn_k_norm.weight", D); err != nil {
			return err
		}
		if err := l.matrices(p, []matrixSpec{
			{&ly.wq, "attn_q.weight", E, 2 * c.NHead * D},
			{&ly.wk, "attn_k.weight", E, c.NHeadKV * D},
			{&ly.wv, "attn_v.weight", E, c.NHeadKV * D},
			{&ly.wo, "attn_output.weight", c.NHead * D, E},
		}); err != nil {
			return err
		}
	}
	ly.moe, err = l.moe(c, p)
	return err
}

func (l *loader) deltaNet(c Config, p string) (*deltaNet, error) {
	E, nk, nv, dk := c.NEmbd, c.SSMKHeads, c.SSMVHeads, c.SSMHeadDim
	C := 2*nk*dk + nv*dk
	g := &deltaNet{}
	if err := l.matrices(p, []matrixSpec{
		{&g.qkv, "attn_qkv.weight", E, C},
		{&g.z, "attn_gate.weight", E, nv * dk},
		{&g.beta, "ssm_beta.weight", E, nv},
		{&g.alpha, "ssm_alpha.weight", E, nv},
		{&g.out, "ssm_out.weight", nv * dk, E},
	}); err != nil {
		return nil, err
	}
	var err error
	if _, g.conv, err = l.tensor(p+"ssm_conv1d.weight", c.ConvKernel, C); err != nil {
		return nil, err
	}
	for _, v := range []struct {
		dst  *[]float64
		name string
		n    int
	}{{&g.dt, "ssm_dt.bias", nv}, {&g.a, "ssm_a", nv}, {&g.norm, "ssm_norm.weight", dk}} {
		if *v.dst, err = l.vector(p+v.name, v.n); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (l *loader) moe(c Config, p string) (*moe, error) {
	E, NE, FE, FS := c.NEmbd, c.NExpert, c.NFFExp, c.NFFShared
	e := &moe{}
	specs := []matrixSpec{{&e.router, "ffn_gate_inp.weight", E, NE}}
	if archTraits[c.Arch].hybrid { // the shared expert
		specs = append(specs,
			matrixSpec{&e.shGate, "ffn_gate_shexp.weight", E, FS},
			matrixSpec{&e.shUp, "ffn_up_shexp.weight", E, FS},
			matrixSpec{&e.shDown, "ffn_down_shexp.weight", FS, E},
			matrixSpec{&e.shInp, "ffn_gate_inp_shexp.weight", E, 1})
	}
	if err := l.matrices(p, specs); err != nil {
		return nil, err
	}
	for _, x := range []struct {
		dst      *[]*matrix
		name     string
		in, rows int
	}{
		{&e.gate, "ffn_gate_exps.weight", E, FE},
		{&e.up, "ffn_up_exps.weight", E, FE},
		{&e.down, "ffn_down_exps.weight", FE, E},
	} {
		var err error
		if *x.dst, err = l.experts(p+x.name, x.in, x.rows, NE); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// tensor finds name, checks its dims against want (trailing 1s ignored on both sides, as ggml
// does: a GGUF writer drops them) and
// decodes it to float64.
func (l *loader) tensor(name string, want ...int) (gguf.TensorInfo, []float64, error) {
	t, ok := l.f.Tensor(name)
	if !ok {
		return t, nil, fmt.Errorf("reference: tensor %q is missing", name)
	}
	dims := slices.Clone(t.Dims)
	for len(dims) > 1 && dims[len(dims)-1] == 1 {
		dims = dims[:len(dims)-1]
	}
	wdims := slices.Clone(want)
	for len(wdims) > 1 && wdims[len(wdims)-1] == 1 {
		wdims = wdims[:len(wdims)-1]
	}
	ok = len(dims) == len(wdims)
	for i := 0; ok && i < len(wdims); i++ {
		ok = dims[i] == int64(wdims[i])
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

// experts decodes the stacked expert weights of a 3-D tensor (GGUF dims [in, rows, n]): expert
// e's matrix is the e-th block of rows·in values, and of rows·RowBytes(in) bytes.
func (l *loader) experts(name string, in, rows, n int) ([]*matrix, error) {
	t, v, err := l.tensor(name, in, rows, n)
	if err != nil {
		return nil, err
	}
	data := l.f.Data(t)
	rowBytes, err := t.Type.RowBytes(int64(in))
	if err != nil {
		return nil, fmt.Errorf("reference: tensor %q: %w", name, err)
	}
	size, nb := rows*in, rows*int(rowBytes)
	out := make([]*matrix, n)
	for e := range out {
		ename := fmt.Sprintf("%s[expert %d]", name, e)
		if out[e], err = newMatrix(ename, t.Type, rows, in, v[e*size:(e+1)*size], data[e*nb:(e+1)*nb], l.actQuant); err != nil {
			return nil, err
		}
	}
	return out, nil
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
