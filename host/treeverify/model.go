package treeverify

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"verity/device"
	"verity/device/dtype"
	"verity/device/num"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/model"
)

// Config is the seed's cfg: the model's shape. WDType must be "bf16" and Tree 8.
type Config struct {
	Layers  int     `json:"layers"`
	D       int     `json:"d"`
	FFN     int     `json:"ffn"`
	NQ      int     `json:"n_q"`
	NKV     int     `json:"n_kv"`
	HD      int     `json:"hd"`
	Vocab   int     `json:"vocab"`
	Eps     float64 `json:"eps"`
	Theta   float64 `json:"theta"`
	WDType  string  `json:"wdtype"`
	Tree    int     `json:"tree"`
	History int     `json:"history"` // committed positions the cache arrives with (prefill_len)
}

// Seed001 is the seed's own configuration: Llama-3.2-1B's shape, bf16, an 8-node tree after
// 2048 committed positions in a cache of 2560.
var Seed001 = Config{Layers: 16, D: 2048, FFN: 8192, NQ: 32, NKV: 8, HD: 64, Vocab: 128256,
	Eps: 1e-5, Theta: 500000, WDType: "bf16", Tree: Nodes, History: 2048}

// Seed001MaxSeq is the seed's max_seq_len: the cache's capacity.
const Seed001MaxSeq = 2560

// Check reports whether c is a configuration this package runs.
func (c Config) Check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", c.Layers}, {"d", c.D}, {"ffn", c.FFN}, {"n_q", c.NQ}, {"n_kv", c.NKV}, {"hd", c.HD}, {"vocab", c.Vocab}} {
		if f.v <= 0 || f.v > 1<<20 {
			return fmt.Errorf("treeverify: cfg %s = %d", f.name, f.v)
		}
	}
	switch {
	case c.NQ%c.NKV != 0:
		return fmt.Errorf("treeverify: n_q = %d is not a multiple of n_kv = %d", c.NQ, c.NKV)
	case c.HD%2 != 0:
		return fmt.Errorf("treeverify: hd = %d is odd", c.HD)
	case !(c.Eps > 0) || !(c.Theta > 1) || math.IsInf(c.Theta, 0):
		return fmt.Errorf("treeverify: eps %g, theta %g", c.Eps, c.Theta)
	case c.WDType != "bf16":
		return fmt.Errorf("treeverify: wdtype %q (bf16 only)", c.WDType)
	case c.Tree != Nodes:
		return fmt.Errorf("treeverify: tree %d (%d only)", c.Tree, Nodes)
	case c.History < 0:
		return fmt.Errorf("treeverify: history %d", c.History)
	}
	return nil
}

// Layer is one layer's weights, bf16 bits, row-major (out, in), applied as h·Wᵀ.
type Layer struct {
	InNorm, PostNorm []uint16 // (d,)
	Q                []uint16 // (n_q·hd, d)
	K, V             []uint16 // (n_kv·hd, d)
	O                []uint16 // (d, n_q·hd)
	Gate, Up         []uint16 // (ffn, d)
	Down             []uint16 // (d, ffn)
}

// Weights are the seed's weights: the embedding (vocab, d), also the tied LM head; the final
// norm (d,); the layers.
type Weights struct {
	Embed     []uint16
	FinalNorm []uint16
	Layers    []Layer
}

// KVLayer is one layer's cache, bf16 bits, (n_kv, max_seq, hd): K[(h·maxSeq + s)·hd + i].
type KVLayer struct{ K, V []uint16 }

// KVCache is the seed's kv_cache: one KVLayer per layer.
type KVCache []KVLayer

// NewKVCache returns a zero cache for cfg of capacity maxSeq.
func NewKVCache(cfg Config, maxSeq int) KVCache {
	kv := make(KVCache, cfg.Layers)
	for l := range kv {
		kv[l] = KVLayer{make([]uint16, cfg.NKV*maxSeq*cfg.HD), make([]uint16, cfg.NKV*maxSeq*cfg.HD)}
	}
	return kv
}

func (w *Weights) check(c Config) error {
	if len(w.Layers) != c.Layers {
		return fmt.Errorf("treeverify: %d layers of weights, cfg has %d", len(w.Layers), c.Layers)
	}
	want := func(name string, got []uint16, n int) error {
		if len(got) != n {
			return fmt.Errorf("treeverify: weights %s hold %d values, want %d", name, len(got), n)
		}
		return nil
	}
	errs := []error{want("embed", w.Embed, c.Vocab*c.D), want("final_norm", w.FinalNorm, c.D)}
	for i, l := range w.Layers {
		p := fmt.Sprintf("layers[%d].", i)
		errs = append(errs, want(p+"in_norm", l.InNorm, c.D), want(p+"post_norm", l.PostNorm, c.D),
			want(p+"q", l.Q, c.NQ*c.HD*c.D), want(p+"k", l.K, c.NKV*c.HD*c.D), want(p+"v", l.V, c.NKV*c.HD*c.D),
			want(p+"o", l.O, c.D*c.NQ*c.HD), want(p+"gate", l.Gate, c.FFN*c.D), want(p+"up", l.Up, c.FFN*c.D),
			want(p+"down", l.Down, c.D*c.FFN))
	}
	return errors.Join(errs...)
}

// Options say where a model runs.
type Options struct {
	Backend    device.Backend
	Megakernel bool // one megakernel launch per step instead of one launch per op
	SMs        int  // the megakernel's queues (0: the backend's multiprocessors, or one per CPU)
}

// Model is a model built for tree verification (the seed's handle).
type Model struct {
	cfg    Config
	maxSeq int
	e      *exec.Executor
	mk     *exec.Megakernel
	steps  int   // steps run, so that stale Logits are refused
	Bytes  int64 // bytes a step reads at least: the weights once and the history's K/V in bf16
}

// BuildModel loads weights, with the committed cache kv of capacity maxSeq, for tree
// verification on opt.Backend (the seed's build_model; untimed). The model owns the cache
// from here on: VerifyStep appends to it where it runs; ReadKV reads it.
func BuildModel(w *Weights, kv KVCache, cfg Config, maxSeq int, opt Options) (*Model, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if maxSeq < cfg.History+Nodes || maxSeq > 1<<20 {
		return nil, fmt.Errorf("treeverify: max_seq_len %d: want room for the %d committed positions and a tree", maxSeq, cfg.History)
	}
	if opt.Backend == nil {
		return nil, errors.New("treeverify: no backend")
	}
	if err := w.check(cfg); err != nil {
		return nil, err
	}
	if len(kv) != cfg.Layers {
		return nil, fmt.Errorf("treeverify: kv_cache has %d layers, cfg %d", len(kv), cfg.Layers)
	}
	for l, c := range kv {
		if n := cfg.NKV * maxSeq * cfg.HD; len(c.K) != n || len(c.V) != n {
			return nil, fmt.Errorf("treeverify: kv_cache[%d] holds %d and %d values, want (n_kv, max_seq, hd) = %d", l, len(c.K), len(c.V), n)
		}
	}
	file, err := writeGGUF(w, cfg, maxSeq)
	if err != nil {
		return nil, err
	}
	f, err := gguf.Parse(file)
	if err != nil {
		return nil, fmt.Errorf("treeverify: %w", err)
	}
	p, err := model.Build(f)
	if err != nil {
		return nil, fmt.Errorf("treeverify: %w", err)
	}
	if err := p.SetCacheTypes(dtype.BF16, dtype.BF16); err != nil { // the seed's cache
		return nil, fmt.Errorf("treeverify: %w", err)
	}
	e, err := exec.New(opt.Backend, p, exec.Options{MaxRows: Nodes, NSlots: maxSeq})
	if err != nil {
		return nil, fmt.Errorf("treeverify: %w", err)
	}
	m := &Model{cfg: cfg, maxSeq: maxSeq, e: e}
	for _, t := range p.Tensors {
		m.Bytes += int64(len(t.Data))
	}
	m.Bytes += int64(cfg.Layers) * int64(cfg.History) * 2 * int64(cfg.NKV*cfg.HD) * 2 // the history's bf16 K and V
	if err := m.LoadKV(kv, 0, cfg.History); err != nil {
		e.Close()
		return nil, err
	}
	if opt.Megakernel {
		r, err := exec.NewMegakernelRunner(opt.Backend, opt.SMs)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("treeverify: %w", err)
		}
		m.mk = e.UseMegakernel(r)
	}
	return m, nil
}

// Close frees what the model holds on its backend.
func (m *Model) Close() error {
	var errs []error
	if m.mk != nil {
		errs = append(errs, m.mk.Close())
	}
	return errors.Join(append(errs, m.e.Close())...)
}

// Config is the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Megakernel is the model's megakernel launcher, nil when it runs op by op.
func (m *Model) Megakernel() *exec.Megakernel { return m.mk }

// writeGGUF lays the weights out as a llama GGUF file: tensors in GGUF's fastest-first
// dims, norms as float32 (exact), Wq and Wk rows permuted for adjacent-pair RoPE.
func writeGGUF(w *Weights, c Config, maxSeq int) ([]byte, error) {
	g := gguf.NewWriter()
	g.Set("general.architecture", gguf.Str("llama"))
	g.Set("general.name", gguf.Str("treeverify"))
	g.Set("general.alignment", gguf.U32(gguf.DefaultAlignment))
	for k, v := range map[string]int{"vocab_size": c.Vocab, "context_length": maxSeq, "embedding_length": c.D,
		"block_count": c.Layers, "feed_forward_length": c.FFN, "attention.head_count": c.NQ, "attention.head_count_kv": c.NKV,
		"attention.key_length": c.HD, "attention.value_length": c.HD, "rope.dimension_count": c.HD} {
		g.Set("llama."+k, gguf.U32(uint32(v)))
	}
	g.Set("llama.rope.freq_base", gguf.F32(float32(c.Theta)))
	g.Set("llama.attention.layer_norm_rms_epsilon", gguf.F32(float32(c.Eps)))
	var errs []error
	add := func(name string, bits []uint16, in, out int) {
		errs = append(errs, g.AddTensor(name, dtype.BF16, []int64{int64(in), int64(out)}, u16Bytes(bits)))
	}
	norm := func(name string, bits []uint16) {
		f := make([]float32, len(bits))
		for i, b := range bits {
			f[i] = num.BF16ToF32(b)
		}
		errs = append(errs, g.AddTensor(name, dtype.F32, []int64{int64(len(f))}, device.F32Bytes(f)))
	}
	add("token_embd.weight", w.Embed, c.D, c.Vocab)
	norm("output_norm.weight", w.FinalNorm)
	for i, l := range w.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		norm(p+"attn_norm.weight", l.InNorm)
		add(p+"attn_q.weight", permuteRows(l.Q, c.NQ, c.HD, c.D), c.D, c.NQ*c.HD)
		add(p+"attn_k.weight", permuteRows(l.K, c.NKV, c.HD, c.D), c.D, c.NKV*c.HD)
		add(p+"attn_v.weight", l.V, c.D, c.NKV*c.HD)
		add(p+"attn_output.weight", l.O, c.NQ*c.HD, c.D)
		norm(p+"ffn_norm.weight", l.PostNorm)
		add(p+"ffn_gate.weight", l.Gate, c.D, c.FFN)
		add(p+"ffn_up.weight", l.Up, c.D, c.FFN)
		add(p+"ffn_down.weight", l.Down, c.FFN, c.D)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("treeverify: %w", err)
	}
	var buf bytes.Buffer
	if _, err := g.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("treeverify: %w", err)
	}
	return buf.Bytes(), nil
}

// adjacent maps dimension i of a head in Hugging Face's rotate-half order — pair p = i mod
// hd/2, half c = i div (hd/2) — to its place 2p + c in the adjacent-pair order llama files
// and Verity's RoPE use (llama.cpp's converter permutes Wq and Wk rows this way).
func adjacent(i, hd int) int { return 2*(i%(hd/2)) + i/(hd/2) }

// permuteRows returns w (heads·hd rows of cols) with each head's rows in adjacent-pair order.
func permuteRows(w []uint16, heads, hd, cols int) []uint16 {
	out := make([]uint16, len(w))
	for h := 0; h < heads; h++ {
		for i := 0; i < hd; i++ {
			copy(out[(h*hd+adjacent(i, hd))*cols:][:cols], w[(h*hd+i)*cols:][:cols])
		}
	}
	return out
}

func u16Bytes(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		b[2*i], b[2*i+1] = byte(x), byte(x>>8)
	}
	return b
}

// LoadKV writes positions [from, to) of every layer of kv into the model's cache (keys in the
// model's adjacent-pair order), which holds bf16 as the seed's does.
func (m *Model) LoadKV(kv KVCache, from, to int) error {
	c := m.cfg
	if from < 0 || to > m.maxSeq || from > to {
		return fmt.Errorf("treeverify: cache positions [%d, %d) outside %d", from, to, m.maxSeq)
	}
	d := c.NKV * c.HD
	k, v := make([]float32, (to-from)*d), make([]float32, (to-from)*d)
	for l := range kv {
		for s := from; s < to; s++ {
			for h := 0; h < c.NKV; h++ {
				src := (h*m.maxSeq + s) * c.HD
				for i := 0; i < c.HD; i++ {
					k[(s-from)*d+h*c.HD+adjacent(i, c.HD)] = num.BF16ToF32(kv[l].K[src+i])
					v[(s-from)*d+h*c.HD+i] = num.BF16ToF32(kv[l].V[src+i])
				}
			}
		}
		if err := m.e.WriteKV(l, from, k, v); err != nil {
			return fmt.Errorf("treeverify: %w", err)
		}
	}
	return nil
}

// ReadKV reads cache positions [from, to) of layer l, keys and values in the seed's layout
// ([n_kv][to−from][hd], keys in rotate-half order), widened from the cache's bf16.
func (m *Model) ReadKV(l, from, to int) (k, v []float32, err error) {
	c := m.cfg
	if l < 0 || l >= c.Layers || from < 0 || to > m.maxSeq || from > to {
		return nil, nil, fmt.Errorf("treeverify: layer %d, positions [%d, %d) outside %d × %d", l, from, to, c.Layers, m.maxSeq)
	}
	d := c.NKV * c.HD
	ck, cv := make([]float32, (to-from)*d), make([]float32, (to-from)*d)
	if err := m.e.ReadKV(l, from, ck, cv); err != nil {
		return nil, nil, fmt.Errorf("treeverify: %w", err)
	}
	n := to - from
	k, v = make([]float32, len(ck)), make([]float32, len(cv))
	for s := 0; s < n; s++ {
		for h := 0; h < c.NKV; h++ {
			for i := 0; i < c.HD; i++ {
				k[(h*n+s)*c.HD+i] = ck[s*d+h*c.HD+adjacent(i, c.HD)]
				v[(h*n+s)*c.HD+i] = cv[s*d+h*c.HD+i]
			}
		}
	}
	return k, v, nil
}

// Logits are a step's logits, [8][vocab] float32, where the step ran (on a GPU: in device
// memory until read).
type Logits struct {
	m    *Model
	step int
}

// Read copies the logits to the host, row i for node i. Only the last step's can be read.
func (l Logits) Read() ([][]float32, error) {
	if l.step != l.m.steps {
		return nil, errors.New("treeverify: these logits were overwritten by a later step")
	}
	flat := make([]float32, Nodes*l.m.cfg.Vocab)
	if err := l.m.e.ReadLogits(flat); err != nil {
		return nil, err
	}
	rows := make([][]float32, Nodes)
	for i := range rows {
		rows[i] = flat[i*l.m.cfg.Vocab : (i+1)*l.m.cfg.Vocab]
	}
	return rows, nil
}

// VerifyStep verifies one tree (the seed's verify_step): tokens, tree mask and depths of the
// eight nodes, node 0 at absolute position pos. It appends the eight nodes' keys and values
// at cache slots pos … pos+7 and returns when the step has finished, its logits where it ran.
func (m *Model) VerifyStep(tokens []int64, treeMask [][]bool, depth []int64, pos int) (Logits, error) {
	if len(tokens) != Nodes || len(treeMask) != Nodes || len(depth) != Nodes {
		return Logits{}, fmt.Errorf("treeverify: %d tokens, %d mask rows, %d depths (want %d of each)", len(tokens), len(treeMask), len(depth), Nodes)
	}
	var t Tree
	for i := range treeMask {
		if len(treeMask[i]) != Nodes {
			return Logits{}, fmt.Errorf("treeverify: tree_mask row %d has %d columns", i, len(treeMask[i]))
		}
		copy(t.Mask[i][:], treeMask[i])
	}
	copy(t.Depth[:], depth)
	if err := t.Check(); err != nil {
		return Logits{}, err
	}
	return m.Step(tokens, t, pos, Correct)
}

// Step runs tree t at pos as variant v computes it (Correct is VerifyStep).
func (m *Model) Step(tokens []int64, t Tree, pos int, v Variant) (Logits, error) {
	if pos < 1 || pos+Nodes > m.maxSeq {
		return Logits{}, fmt.Errorf("treeverify: pos %d: the tree must follow at least one committed position and fit the cache of %d", pos, m.maxSeq)
	}
	var s exec.Step
	attend, offset := v.apply(t)
	for i := 0; i < Nodes; i++ {
		if tokens[i] < 0 || tokens[i] >= int64(m.cfg.Vocab) {
			return Logits{}, fmt.Errorf("treeverify: token %d of node %d outside the vocabulary of %d", tokens[i], i, m.cfg.Vocab)
		}
		keys := make([]int32, pos, pos+len(attend[i]))
		for k := range keys {
			keys[k] = int32(k)
		}
		for _, j := range attend[i] {
			keys = append(keys, int32(pos+j))
		}
		s.Tokens = append(s.Tokens, int32(tokens[i]))
		s.Pos = append(s.Pos, int32(int64(pos)+offset[i]))
		s.Slots = append(s.Slots, int32(pos+i))
		s.Keys = append(s.Keys, keys)
		s.OutRows = append(s.OutRows, int32(i))
	}
	if err := m.e.Launch(s); err != nil {
		return Logits{}, fmt.Errorf("treeverify: %w", err)
	}
	if err := m.e.Backend().Sync(); err != nil {
		return Logits{}, fmt.Errorf("treeverify: %w", err)
	}
	m.steps++
	return Logits{m: m, step: m.steps}, nil
}

// DecodePath decodes node i's path of tree t at pos one token per step — each token at its
// own depth's position, attending to the history and the path so far, its keys and values
// written to the slot the tree gave it — and returns the last step's logits: what the
// tree's row i must equal bit for bit.
func (m *Model) DecodePath(tokens []int64, t Tree, pos, i int) ([]float32, error) {
	path := t.Path(i)
	out := make([]float32, m.cfg.Vocab)
	for n, j := range path {
		keys := make([]int32, pos, pos+n+1)
		for k := range keys {
			keys[k] = int32(k)
		}
		for _, a := range path[:n+1] {
			keys = append(keys, int32(pos+a))
		}
		s := exec.Step{Tokens: []int32{int32(tokens[j])}, Pos: []int32{int32(int64(pos) + t.Depth[j])},
			Slots: []int32{int32(pos + j)}, Keys: [][]int32{keys}, OutRows: []int32{0}}
		if n < len(path)-1 {
			s.OutRows = nil
		}
		if err := m.e.Launch(s); err != nil {
			return nil, fmt.Errorf("treeverify: %w", err)
		}
	}
	m.steps++
	if err := m.e.ReadLogits(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Prefill commits tokens at positions 0 … len(tokens)−1 as a chain, eight per step, and
// returns the cache they leave, rounded to bf16 (the seed's cache type) and written back, so
// that the model's cache holds exactly what the returned one says.
func (m *Model) Prefill(tokens []int64) (KVCache, error) {
	n := len(tokens)
	if n < 1 || n+Nodes > m.maxSeq {
		return nil, fmt.Errorf("treeverify: prefill of %d tokens in a cache of %d", n, m.maxSeq)
	}
	for p0 := 0; p0 < n; p0 += Nodes {
		var s exec.Step
		for p := p0; p < min(n, p0+Nodes); p++ {
			if tokens[p] < 0 || tokens[p] >= int64(m.cfg.Vocab) {
				return nil, fmt.Errorf("treeverify: prefill token %d outside the vocabulary", tokens[p])
			}
			keys := make([]int32, p+1)
			for k := range keys {
				keys[k] = int32(k)
			}
			s.Tokens, s.Pos, s.Slots = append(s.Tokens, int32(tokens[p])), append(s.Pos, int32(p)), append(s.Slots, int32(p))
			s.Keys = append(s.Keys, keys)
		}
		if err := m.e.Launch(s); err != nil {
			return nil, fmt.Errorf("treeverify: prefill: %w", err)
		}
	}
	m.steps++
	c := m.cfg
	kv := NewKVCache(c, m.maxSeq)
	for l := range kv {
		k, v, err := m.ReadKV(l, 0, n)
		if err != nil {
			return nil, err
		}
		for h := 0; h < c.NKV; h++ {
			for s := 0; s < n; s++ {
				for i := 0; i < c.HD; i++ {
					kv[l].K[(h*m.maxSeq+s)*c.HD+i] = num.F32ToBF16(k[(h*n+s)*c.HD+i])
					kv[l].V[(h*m.maxSeq+s)*c.HD+i] = num.F32ToBF16(v[(h*n+s)*c.HD+i])
				}
			}
		}
	}
	return kv, m.LoadKV(kv, 0, n)
}
