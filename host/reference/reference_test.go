package reference

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/device/num"
	"verity/host/gguf"
	"verity/host/quant"
)

// tinyModel describes a synthetic model; its weights are drawn from seed: matrices N(0, 1/in),
// token_embd N(0, 1), norm weights 1 + N(0, 0.1).
type tinyModel struct {
	arch                                    string
	layers, embd, ff, heads, kvHeads, vocab int
	headDim                                 int        // written as attention.key_length when nonzero
	typ                                     dtype.Type // the matrices' type; 1-D tensors stay F32
	tied                                    bool       // no output.weight
	ropeFreqs                               bool       // a rope_freqs.weight tensor (llama)
	seed                                    uint64
	meta                                    map[string]gguf.Value // extra keys, "%s" = the arch
	// zeroFFN makes a gemma2 or gemma3 model's post_ffw_norm zero: the feed-forward adds
	// nothing, so its GELU (which ggml's CPU backend computes through a float16 table) is out
	// of the comparison.
	zeroFFN bool
}

// tensorData is one tensor of a tinyModel before encoding.
type tensorData struct {
	name string
	dims []int64 // fastest first: [in, out] for a matrix
	typ  dtype.Type
	vals []float32
}

func (s tinyModel) hd() int {
	if s.headDim != 0 {
		return s.headDim
	}
	return s.embd / s.heads
}

// tensors draws the model's weights, in the order a file lists them.
func (s tinyModel) tensors() []tensorData {
	rng := rand.New(rand.NewPCG(s.seed, 0x7e57))
	normal := func(n int, mean, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*rng.NormFloat64())
		}
		return v
	}
	var ts []tensorData
	mat := func(name string, in, out int, std float64) {
		if std == 0 {
			std = 1 / math.Sqrt(float64(in))
		}
		ts = append(ts, tensorData{name, []int64{int64(in), int64(out)}, s.typ, normal(in*out, 0, std)})
	}
	vec := func(name string, n int) {
		ts = append(ts, tensorData{name, []int64{int64(n)}, dtype.F32, normal(n, 1, 0.1)})
	}
	D := s.hd()
	mat("token_embd.weight", s.embd, s.vocab, 1)
	vec("output_norm.weight", s.embd)
	if !s.tied {
		mat("output.weight", s.embd, s.vocab, 0)
	}
	if s.ropeFreqs {
		f := make([]float32, D/2)
		for i := range f {
			f[i] = float32(1 + 7*rng.Float64())
		}
		ts = append(ts, tensorData{"rope_freqs.weight", []int64{int64(D / 2)}, dtype.F32, f})
	}
	for i := 0; i < s.layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		vec(p+"attn_norm.weight", s.embd)
		mat(p+"attn_q.weight", s.embd, s.heads*D, 0)
		mat(p+"attn_k.weight", s.embd, s.kvHeads*D, 0)
		mat(p+"attn_v.weight", s.embd, s.kvHeads*D, 0)
		if s.arch == "qwen3" || s.arch == "gemma3" {
			vec(p+"attn_q_norm.weight", D)
			vec(p+"attn_k_norm.weight", D)
		}
		mat(p+"attn_output.weight", s.heads*D, s.embd, 0)
		sandwich := s.arch == "gemma2" || s.arch == "gemma3"
		if sandwich {
			vec(p+"post_attention_norm.weight", s.embd)
		}
		vec(p+"ffn_norm.weight", s.embd)
		mat(p+"ffn_gate.weight", s.embd, s.ff, 0)
		mat(p+"ffn_up.weight", s.embd, s.ff, 0)
		mat(p+"ffn_down.weight", s.ff, s.embd, 0)
		if sandwich {
			vec(p+"post_ffw_norm.weight", s.embd)
			if s.zeroFFN {
				clear(ts[len(ts)-1].vals)
			}
		}
	}
	return ts
}

// writer returns a GGUF writer holding the model's metadata and the tensors ts.
func (s tinyModel) writer(t testing.TB, ts []tensorData) *gguf.Writer {
	t.Helper()
	w := gguf.NewWriter()
	A := s.arch
	w.Set("general.architecture", gguf.Str(A))
	w.Set(A+".block_count", gguf.U32(uint32(s.layers)))
	w.Set(A+".context_length", gguf.U32(256))
	w.Set(A+".embedding_length", gguf.U32(uint32(s.embd)))
	w.Set(A+".feed_forward_length", gguf.U32(uint32(s.ff)))
	w.Set(A+".attention.head_count", gguf.U32(uint32(s.heads)))
	w.Set(A+".attention.head_count_kv", gguf.U32(uint32(s.kvHeads)))
	if s.headDim != 0 {
		w.Set(A+".attention.key_length", gguf.U32(uint32(s.headDim)))
		w.Set(A+".attention.value_length", gguf.U32(uint32(s.headDim)))
	}
	base, eps := float32(10000), float32(1e-5)
	if A == "qwen3" {
		base, eps = 1e6, 1e-6
	}
	w.Set(A+".rope.freq_base", gguf.F32(base))
	w.Set(A+".attention.layer_norm_rms_epsilon", gguf.F32(eps))
	for k, v := range s.meta {
		if strings.Contains(k, "%s") {
			k = fmt.Sprintf(k, A)
		}
		w.Set(k, v)
	}
	addTensors(t, w, ts)
	return w
}

// addTensors encodes ts in their types and adds them to w.
func addTensors(t testing.TB, w *gguf.Writer, ts []tensorData) {
	t.Helper()
	for _, td := range ts {
		n, err := td.typ.RowBytes(int64(len(td.vals)))
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, n)
		f, err := quant.Lookup(td.typ)
		if err != nil {
			t.Fatal(err)
		}
		f.Quantize(data, td.vals)
		if err := w.AddTensor(td.name, td.typ, td.dims, data); err != nil {
			t.Fatal(err)
		}
	}
}

// parse writes w to memory and parses it back.
func parse(t testing.TB, w *gguf.Writer) *gguf.File {
	t.Helper()
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (s tinyModel) load(t testing.TB, opt Options) *Model {
	t.Helper()
	m, err := Load(parse(t, s.writer(t, s.tensors())), opt)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The models of most tests: GQA llama (F32, Q8_0, tied, llama-3 style RoPE factors and linear
// scaling), qwen3 with a head size that is not embd/heads, and K-quant / Q4_1 variants.
var (
	llamaF32 = tinyModel{arch: "llama", layers: 2, embd: 64, ff: 96, heads: 4, kvHeads: 2, vocab: 50, typ: dtype.F32, seed: 1}
	qwen3F32 = tinyModel{arch: "qwen3", layers: 2, embd: 64, ff: 96, heads: 4, kvHeads: 2, headDim: 32, vocab: 50, typ: dtype.F32, seed: 2}
)

func variant(s tinyModel, edit func(*tinyModel)) tinyModel {
	edit(&s)
	return s
}

var testModels = []struct {
	name  string
	model tinyModel
	opt   Options
}{
	{"llama/f32", llamaF32, Options{}},
	{"llama/f32/actquant", llamaF32, Options{ActQuant: true}},
	{"llama/q8_0/actquant", variant(llamaF32, func(s *tinyModel) { s.typ = dtype.Q8_0 }), Options{ActQuant: true}},
	{"llama/q4_1/actquant", variant(llamaF32, func(s *tinyModel) { s.typ = dtype.Q4_1 }), Options{ActQuant: true}},
	{"llama/tied/mha", variant(llamaF32, func(s *tinyModel) { s.tied, s.kvHeads = true, 4 }), Options{}},
	{"llama/ropefreqs/scaled", variant(llamaF32, func(s *tinyModel) {
		s.ropeFreqs = true
		s.meta = map[string]gguf.Value{"%s.rope.scaling.factor": gguf.F32(4), "%s.rope.scaling.attn_factor": gguf.F32(1.25)}
	}), Options{}},
	{"qwen3/f32", qwen3F32, Options{}},
	{"qwen3/f16/tied/actquant", variant(qwen3F32, func(s *tinyModel) { s.typ, s.tied = dtype.F16, true }), Options{ActQuant: true}},
	{"qwen3/q4_k/actquant", variant(qwen3F32, func(s *tinyModel) {
		s.layers, s.embd, s.ff, s.heads, s.headDim, s.typ = 1, 256, 256, 4, 64, dtype.Q4_K
	}), Options{ActQuant: true}},
}

func randomTokens(rng *rand.Rand, n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(rng.IntN(vocab))
	}
	return t
}

// maxRel returns max |a−b| / max |b| over all rows.
func maxRel(a, b [][]float64) float64 {
	var d, r float64
	for i := range b {
		for j := range b[i] {
			d = max(d, math.Abs(a[i][j]-b[i][j]))
			r = max(r, math.Abs(b[i][j]))
		}
	}
	return d / r
}

// layerMajor is a second forward pass for the tests, organised the other way round: layer by
// layer over all positions, with a full score matrix under an explicit causal mask, softmax
// without the maximum subtracted, and RoPE as a complex multiplication. It shares with Model
// only the decoded weights and the matrix products.
func layerMajor(m *Model, tokens []int32) [][]float64 {
	c, aq := m.cfg, m.opt.ActQuant
	T, D := len(tokens), c.HeadDim
	norm := func(x, w []float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		r := math.Sqrt(ss/float64(len(x)) + c.Eps)
		y := make([]float64, len(x))
		for i := range x {
			y[i] = x[i] / r * w[i]
		}
		return y
	}
	rope := func(head []float64, pos int) {
		for i := 0; i < D/2; i++ {
			f := 1.0
			if m.ropeFactors != nil {
				f = m.ropeFactors[i]
			}
			theta := float64(pos) * math.Exp(-float64(2*i)/float64(D)*math.Log(c.RopeBase)) / (f * c.RopeScale)
			i0, i1 := 2*i, 2*i+1
			if c.RopeNeox {
				i0, i1 = i, i+D/2
			}
			z := complex(head[i0], head[i1]) * cmplx.Rect(c.RopeAttn, theta)
			head[i0], head[i1] = real(z), imag(z)
		}
	}
	xs := make([][]float64, T)
	for i, tok := range tokens {
		xs[i] = append([]float64(nil), m.embd.row(int(tok))...)
	}
	for l := range m.layers {
		ly := &m.layers[l]
		Q, K, V := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for pos := range xs {
			n := norm(xs[pos], ly.attnNorm)
			Q[pos], K[pos], V[pos] = ly.wq.mul(n, aq), ly.wk.mul(n, aq), ly.wv.mul(n, aq)
			for h := 0; h < c.NHead; h++ {
				if ly.qNorm != nil {
					copy(Q[pos][h*D:], norm(Q[pos][h*D:(h+1)*D], ly.qNorm))
				}
				rope(Q[pos][h*D:(h+1)*D], pos)
			}
			for j := 0; j < c.NHeadKV; j++ {
				if ly.kNorm != nil {
					copy(K[pos][j*D:], norm(K[pos][j*D:(j+1)*D], ly.kNorm))
				}
				rope(K[pos][j*D:(j+1)*D], pos)
			}
		}
		for pos := range xs {
			a := make([]float64, c.NHead*D)
			for h := 0; h < c.NHead; h++ {
				kvh := h * c.NHeadKV / c.NHead
				w := make([]float64, T)
				var z float64
				for s := 0; s < T; s++ {
					if s > pos {
						continue // masked: weight 0
					}
					var qk float64
					for d := 0; d < D; d++ {
						qk += Q[pos][h*D+d] * K[s][kvh*D+d]
					}
					w[s] = math.Exp(qk / math.Sqrt(float64(D)))
					z += w[s]
				}
				for s := 0; s <= pos; s++ {
					for d := 0; d < D; d++ {
						a[h*D+d] += w[s] / z * V[s][kvh*D+d]
					}
				}
			}
			o := ly.wo.mul(a, aq)
			for i := range xs[pos] {
				xs[pos][i] += o[i]
			}
			n := norm(xs[pos], ly.ffnNorm)
			g, u := ly.gate.mul(n, aq), ly.up.mul(n, aq)
			for i := range g {
				g[i] = g[i] * (1 / (1 + math.Exp(-g[i]))) * u[i]
			}
			o = ly.down.mul(g, aq)
			for i := range xs[pos] {
				xs[pos][i] += o[i]
			}
		}
	}
	out := make([][]float64, T)
	for i, x := range xs {
		out[i] = m.output.mul(norm(x, m.outNorm), aq)
	}
	return out
}

func TestForwardMatchesLayerMajor(t *testing.T) {
	for _, tc := range testModels {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model.load(t, tc.opt)
			tokens := randomTokens(rand.New(rand.NewPCG(3, 4)), 9, m.cfg.NVocab)
			got, err := m.Forward(tokens)
			if err != nil {
				t.Fatal(err)
			}
			want := layerMajor(m, tokens)
			if len(got) != len(tokens) || len(got[0]) != m.cfg.NVocab {
				t.Fatalf("logits %d×%d, want %d×%d", len(got), len(got[0]), len(tokens), m.cfg.NVocab)
			}
			// With ActQuant a float64 difference can move an activation across a rounding
			// boundary of its 8-bit conversion; that did not happen for these seeds.
			if e := maxRel(got, want); e > 1e-12 || math.IsNaN(e) {
				t.Errorf("Forward vs layer-major pass: max rel diff %.3g", e)
			}
		})
	}
}

func TestForwardTree(t *testing.T) {
	type loader struct {
		name string
		load func(testing.TB) *Model
	}
	var models []loader
	for _, tc := range testModels[:3] {
		models = append(models, loader{tc.name, func(t testing.TB) *Model { return tc.model.load(t, tc.opt) }})
	}
	for _, tc := range q35TestModels[:2] {
		models = append(models, loader{tc.name, func(t testing.TB) *Model { return tc.model.load(t, tc.opt) }})
	}
	for _, tc := range models {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.load(t)
			rng := rand.New(rand.NewPCG(5, 6))
			V := m.cfg.NVocab
			for _, tree := range []struct {
				prefix  int
				parents []int
			}{
				{5, []int{-1, 0, 0, 1, 1, 2, 5, -1}}, // a forest of two roots
				{0, []int{-1, 0, 1, 2}},              // a chain with no prefix
				{3, nil},                             // no nodes
			} {
				prefix := randomTokens(rng, tree.prefix, V)
				tokens := randomTokens(rng, len(tree.parents), V)
				got, err := m.ForwardTree(prefix, tokens, tree.parents)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tokens) {
					t.Fatalf("%d rows for %d nodes", len(got), len(tokens))
				}
				for i := range tokens {
					var path []int32
					for n := i; n >= 0; n = tree.parents[n] {
						path = append([]int32{tokens[n]}, path...)
					}
					seq := append(append([]int32(nil), prefix...), path...)
					all, err := m.Forward(seq)
					if err != nil {
						t.Fatal(err)
					}
					want := all[len(seq)-1]
					for j := range want {
						if got[i][j] != want[j] {
							t.Fatalf("prefix %d, node %d, logit %d: tree %v, path %v", len(prefix), i, j, got[i][j], want[j])
						}
					}
				}
			}
		})
	}
}

// TestForwardIsCausal checks that a position's logits do not depend on the tokens after it.
func TestForwardIsCausal(t *testing.T) {
	for _, m := range []*Model{llamaF32.load(t, Options{}), q35F32.load(t, Options{})} {
		rng := rand.New(rand.NewPCG(7, 8))
		a := randomTokens(rng, 8, m.cfg.NVocab)
		b := append(append([]int32(nil), a[:5]...), randomTokens(rng, 3, m.cfg.NVocab)...)
		la, _ := m.Forward(a)
		lb, _ := m.Forward(b)
		for i := range 5 {
			for j := range la[i] {
				if la[i][j] != lb[i][j] {
					t.Fatalf("%s: position %d changed with later tokens", m.cfg.Arch, i)
				}
			}
		}
		if maxRel(la[5:], lb[5:]) < 1e-3 {
			t.Errorf("%s: positions after the change did not change", m.cfg.Arch)
		}
	}
}

func TestRope(t *testing.T) {
	// θ_i = pos·base^(−2i/D): with D = 4, base = 100 and pos = 2, θ_0 = 2 and θ_1 = 0.2.
	c0, s0, c1, s1 := math.Cos(2), math.Sin(2), math.Cos(0.2), math.Sin(0.2)
	for _, tc := range []struct {
		neox bool
		in   []float64
		want []float64
	}{
		{false, []float64{1, 0, 0, 0}, []float64{c0, s0, 0, 0}},
		{false, []float64{0, 1, 0, 0}, []float64{-s0, c0, 0, 0}},
		{false, []float64{0, 0, 1, 0}, []float64{0, 0, c1, s1}},
		{true, []float64{1, 0, 0, 0}, []float64{c0, 0, s0, 0}},
		{true, []float64{0, 1, 0, 0}, []float64{0, c1, 0, s1}},
		{true, []float64{0, 0, 0, 1}, []float64{0, -s1, 0, c1}},
	} {
		m := &Model{cfg: Config{NRot: 4, RopeBase: 100, RopeScale: 1, RopeAttn: 1, RopeNeox: tc.neox}}
		got := append([]float64(nil), tc.in...)
		m.rope(got, 2)
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-15 {
				t.Errorf("neox=%v rope(%v) = %v, want %v", tc.neox, tc.in, got, tc.want)
				break
			}
		}
	}

	// NEOX pairing is the adjacent pairing on the head with its halves interleaved.
	const D = 16
	rng := rand.New(rand.NewPCG(9, 10))
	adj := &Model{cfg: Config{NRot: D, RopeBase: 10000, RopeScale: 1, RopeAttn: 1}}
	neox := &Model{cfg: Config{NRot: D, RopeBase: 10000, RopeScale: 1, RopeAttn: 1, RopeNeox: true}}
	v, w := make([]float64, D), make([]float64, D)
	for i := range D / 2 {
		v[i], v[i+D/2] = rng.NormFloat64(), rng.NormFloat64()
		w[2*i], w[2*i+1] = v[i], v[i+D/2]
	}
	neox.rope(v, 7)
	adj.rope(w, 7)
	for i := range D / 2 {
		if v[i] != w[2*i] || v[i+D/2] != w[2*i+1] {
			t.Fatalf("pair %d: neox (%v, %v), interleaved adjacent (%v, %v)", i, v[i], v[i+D/2], w[2*i], w[2*i+1])
		}
	}
}

// TestWrongRopePairing checks that the reference tells the two pairings apart on whole models, so
// that a test comparing another implementation with it catches a wrong pairing.
func TestWrongRopePairing(t *testing.T) {
	for _, s := range []tinyModel{llamaF32, qwen3F32} {
		t.Run(s.arch, func(t *testing.T) {
			m := s.load(t, Options{})
			tokens := randomTokens(rand.New(rand.NewPCG(11, 12)), 12, m.cfg.NVocab)
			right, _ := m.Forward(tokens)
			m.cfg.RopeNeox = !m.cfg.RopeNeox
			wrong, _ := m.Forward(tokens)
			if e := maxRel(wrong, right); e < 0.05 {
				t.Errorf("the other pairing changes the logits by only %.3g (max rel)", e)
			} else {
				t.Logf("the other pairing: max rel diff %.3g", e)
			}
		})
	}
}

// TestGQAHeadMapping checks that a GQA model equals the multi-head model whose KV heads are the
// GQA heads repeated as llama.cpp maps them (query head h reads KV head h / (H/Hkv)), and
// differs from the one repeated the other way (h mod Hkv).
func TestGQAHeadMapping(t *testing.T) {
	for _, s := range []tinyModel{llamaF32, variant(qwen3F32, func(s *tinyModel) { s.heads, s.kvHeads = 6, 2 })} {
		t.Run(s.arch, func(t *testing.T) {
			gqa, err := Load(parse(t, s.writer(t, s.tensors())), Options{})
			if err != nil {
				t.Fatal(err)
			}
			tokens := randomTokens(rand.New(rand.NewPCG(13, 14)), 10, s.vocab)
			want, _ := gqa.Forward(tokens)
			expand := func(kvHead func(h int) int) [][]float64 {
				mha := s
				mha.kvHeads = s.heads
				D := s.hd()
				ts := s.tensors()
				for i, td := range ts {
					if !strings.HasSuffix(td.name, "attn_k.weight") && !strings.HasSuffix(td.name, "attn_v.weight") {
						continue
					}
					vals := make([]float32, 0, s.heads*D*s.embd)
					for h := range s.heads {
						j := kvHead(h)
						vals = append(vals, td.vals[j*D*s.embd:(j+1)*D*s.embd]...)
					}
					ts[i] = tensorData{td.name, []int64{int64(s.embd), int64(s.heads * D)}, td.typ, vals}
				}
				m, err := Load(parse(t, mha.writer(t, ts)), Options{})
				if err != nil {
					t.Fatal(err)
				}
				got, _ := m.Forward(tokens)
				return got
			}
			group := s.heads / s.kvHeads
			if e := maxRel(expand(func(h int) int { return h / group }), want); e != 0 {
				t.Errorf("GQA vs MHA with KV head h/%d: max rel diff %.3g, want 0", group, e)
			}
			if e := maxRel(expand(func(h int) int { return h % s.kvHeads }), want); e < 1e-3 {
				t.Errorf("GQA vs MHA with KV head h mod %d: max rel diff only %.3g", s.kvHeads, e)
			}
		})
	}
}

// TestActQuantProducts checks matrix products with ActQuant against ggml's dot product formulas
// written out from the raw blocks: for Q8_0 Σ_b d_w·d_x·Σ q_w·q_x, for Q4_1 Σ_b d_w·d_x·Σ q_w·q_x
// + m_w·s_x (s being the Q8_1 block sum), for F16/BF16 the plain product with x rounded.
func TestActQuantProducts(t *testing.T) {
	const rows, cols = 5, 96
	rng := rand.New(rand.NewPCG(15, 16))
	half := func(b []byte) float64 { return float64(num.F16ToF32(uint16(b[0]) | uint16(b[1])<<8)) }
	// q8 quantises a 32-block of x as quantize_row_q8_0_ref / q8_1_ref do.
	q8 := func(x []float32) (q [32]int, d16, s float64) {
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		sum := 0
		for j, v := range x {
			q[j] = int(math.Round(float64(v * id)))
			sum += q[j]
		}
		return q, float64(num.F16ToF32(num.F32ToF16(d))), float64(num.F16ToF32(num.F32ToF16(float32(sum) * d)))
	}
	formulas := map[dtype.Type]func(blk []byte, x []float32) float64{
		dtype.Q8_0: func(blk []byte, x []float32) float64 {
			qx, dx, _ := q8(x)
			var sum int
			for j := range 32 {
				sum += int(int8(blk[2+j])) * qx[j]
			}
			return half(blk) * dx * float64(sum)
		},
		dtype.Q4_1: func(blk []byte, x []float32) float64 {
			qx, dx, sx := q8(x)
			var sum int
			for j := range 16 {
				sum += int(blk[4+j]&0xf)*qx[j] + int(blk[4+j]>>4)*qx[j+16]
			}
			return half(blk)*dx*float64(sum) + half(blk[2:])*sx
		},
		dtype.F16: func(blk []byte, x []float32) float64 {
			return half(blk) * float64(num.F16ToF32(num.F32ToF16(x[0])))
		},
		dtype.BF16: func(blk []byte, x []float32) float64 {
			w := math.Float32frombits(uint32(blk[0])<<16 | uint32(blk[1])<<24)
			return float64(w) * float64(num.BF16ToF32(num.F32ToBF16(x[0])))
		},
	}
	for typ, formula := range formulas {
		t.Run(typ.String(), func(t *testing.T) {
			w32 := make([]float32, rows*cols)
			for i := range w32 {
				w32[i] = float32(rng.NormFloat64())
			}
			data := make([]byte, rows*cols/typ.BlockSize()*typ.BlockBytes())
			mustFormat(typ).Quantize(data, w32)
			mustFormat(typ).Dequantize(w32, data)
			w := make([]float64, len(w32))
			for i, v := range w32 {
				w[i] = float64(v)
			}
			m, err := newMatrix("w", typ, rows, cols, w, data, true)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float64, cols)
			for i := range x {
				x[i] = rng.NormFloat64() * 3
			}
			got := m.mul(x, true)
			bs, bb := typ.BlockSize(), typ.BlockBytes()
			nb := cols / bs
			for r := range rows {
				var want float64
				for b := range nb {
					xb := make([]float32, bs)
					for j := range xb {
						xb[j] = float32(x[b*bs+j])
					}
					want += formula(data[(r*nb+b)*bb:(r*nb+b+1)*bb], xb)
				}
				if math.Abs(got[r]-want) > 1e-12*math.Abs(want) {
					t.Errorf("row %d: %v, ggml's formula gives %v", r, got[r], want)
				}
			}
			if plain := m.mul(x, false); math.Abs(plain[0]-got[0]) == 0 {
				t.Errorf("the activation conversion changed nothing")
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	base := llamaF32
	base.layers = 1
	withMeta := func(kv map[string]gguf.Value) tinyModel {
		s := base
		s.meta = kv
		return s
	}
	for _, tc := range []struct {
		name        string
		model       tinyModel
		edit        func([]tensorData) []tensorData
		opt         Options
		want        string
		unsupported bool
	}{
		{"arch", variant(base, func(s *tinyModel) { s.arch = "gpt2" }), nil, Options{}, `architecture "gpt2"`, true},
		{"missing tensor", base, func(ts []tensorData) []tensorData { return ts[:len(ts)-1] }, Options{}, `"blk.0.ffn_down.weight" is missing`, false},
		{"extra tensor", base, func(ts []tensorData) []tensorData {
			return append(ts, tensorData{"blk.0.ffn_up.bias", []int64{64}, dtype.F32, make([]float32, 64)})
		}, Options{}, `"blk.0.ffn_up.bias" is not part`, true},
		{"dims", base, func(ts []tensorData) []tensorData {
			ts[len(ts)-1].dims = []int64{64, 96}
			return ts
		}, Options{}, `"blk.0.ffn_down.weight" has dims [64 96], want [96 64]`, false},
		{"rope freqs in qwen3", variant(qwen3F32, func(s *tinyModel) { s.ropeFreqs = true }), nil, Options{}, `"rope_freqs.weight" is not part`, true},
		{"gqa", variant(base, func(s *tinyModel) { s.kvHeads = 3 }), nil, Options{}, "4 query heads cannot share 3 KV heads", false},
		{"n_rot", withMeta(map[string]gguf.Value{"%s.rope.dimension_count": gguf.U32(8)}), nil, Options{}, "rope.dimension_count 8 differs", false},
		{"value length", withMeta(map[string]gguf.Value{"%s.attention.value_length": gguf.U32(8)}), nil, Options{}, "value head size 8", false},
		{"yarn", withMeta(map[string]gguf.Value{"%s.rope.scaling.type": gguf.Str("yarn")}), nil, Options{}, `rope scaling "yarn"`, true},
		{"scaling type", withMeta(map[string]gguf.Value{"%s.rope.scaling.type": gguf.Str("cubic")}), nil, Options{}, `"cubic" is not a rope scaling type`, false},
		{"eps type", withMeta(map[string]gguf.Value{"%s.attention.layer_norm_rms_epsilon": gguf.Str("small")}), nil, Options{}, `layer_norm_rms_epsilon": want number`, false},
		{"head count", withMeta(map[string]gguf.Value{"%s.attention.head_count": gguf.U32(0)}), nil, Options{}, `head_count" = 0 is out of range`, false},
		{"no activation type", variant(base, func(s *tinyModel) { s.typ = dtype.Q8_K; s.embd, s.ff, s.heads, s.kvHeads = 256, 256, 4, 4 }), nil, Options{ActQuant: true}, "activation conversion for q8_K weights", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.model.tensors()
			if tc.edit != nil {
				ts = tc.edit(ts)
			}
			_, err := Load(parse(t, tc.model.writer(t, ts)), tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(%v, ErrUnsupported) = %v", err, !tc.unsupported)
			}
		})
	}

	w := base.writer(t, base.tensors())
	w.Delete("llama.attention.layer_norm_rms_epsilon")
	if _, err := Load(parse(t, w), Options{}); err == nil || !strings.Contains(err.Error(), "layer_norm_rms_epsilon\" is missing") {
		t.Errorf("missing eps: %v", err)
	}
}

func TestForwardErrors(t *testing.T) {
	m := llamaF32.load(t, Options{})
	V := int32(m.cfg.NVocab)
	for _, tc := range []struct {
		name    string
		prefix  []int32
		tokens  []int32
		parents []int
		want    string
	}{
		{"token", nil, []int32{1, V}, []int{-1, 0}, "tree token 50 at index 1 is outside the vocabulary [0, 50)"},
		{"negative", []int32{-1}, []int32{1}, []int{-1}, "prefix token -1 at index 0"},
		{"parents length", nil, []int32{1, 2}, []int{-1}, "2 tree tokens but 1 parents"},
		{"parent after", nil, []int32{1, 2}, []int{-1, 1}, "node 1 has parent 1"},
		{"parent below -1", nil, []int32{1}, []int{-2}, "node 0 has parent -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.ForwardTree(tc.prefix, tc.tokens, tc.parents); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ForwardTree: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := m.Forward([]int32{0, V + 3}); err == nil || !strings.Contains(err.Error(), "token 53 at index 1") {
		t.Errorf("Forward: %v", err)
	}
	if l, err := m.Forward(nil); err != nil || len(l) != 0 {
		t.Errorf("Forward(nil) = %d rows, %v", len(l), err)
	}
}

// TestConfig checks the hyper-parameters read for the RoPE variants.
func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meta      map[string]gguf.Value
		scale     float64
		ropeAttn  float64
		arch      string
		wantNeox  bool
		wantNorms bool
	}{
		{"default", nil, 1, 1, "llama", false, false},
		{"factor without type is linear", map[string]gguf.Value{"%s.rope.scaling.factor": gguf.F32(8)}, 8, 1, "llama", false, false},
		{"old key", map[string]gguf.Value{"%s.rope.scale_linear": gguf.F32(2)}, 2, 1, "llama", false, false},
		{"type none", map[string]gguf.Value{"%s.rope.scaling.type": gguf.Str("none"), "%s.rope.scaling.factor": gguf.F32(8)}, 1, 1, "llama", false, false},
		{"factor 0", map[string]gguf.Value{"%s.rope.scaling.type": gguf.Str("linear"), "%s.rope.scaling.factor": gguf.F32(0)}, 1, 1, "llama", false, false},
		{"attn factor", map[string]gguf.Value{"%s.rope.scaling.attn_factor": gguf.F32(0.5)}, 1, 0.5, "llama", false, false},
		{"qwen3", nil, 1, 1, "qwen3", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := llamaF32
			if tc.arch == "qwen3" {
				s = qwen3F32
			}
			s.meta = tc.meta
			c := s.load(t, Options{}).Config()
			if c.RopeScale != tc.scale || c.RopeAttn != tc.ropeAttn || c.RopeNeox != tc.wantNeox || c.QKNorm != tc.wantNorms {
				t.Errorf("config %+v", c)
			}
			if c.NVocab != s.vocab || c.HeadDim != s.hd() || c.NHeadKV != s.kvHeads || c.Tied != s.tied {
				t.Errorf("config %+v", c)
			}
		})
	}
}
