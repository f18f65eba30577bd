package reference

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/host/gguf"
)

// q35Model describes a synthetic qwen35moe model; its weights are drawn from seed: matrices
// N(0, 1/in), token_embd N(0, 1), norm weights 1 + N(0, 0.1), conv taps and dt biases
// N(0, 0.25), ssm_a = −exp(U(−1, 0.5)).
type q35Model struct {
	layers, interval              int    // block_count (trunk), full_attention_interval
	pattern                       []bool // per layer, recurrent: written as attention.recurrent_layers when set
	embd, heads, kvHeads, headDim int
	nrot                          int
	sections                      [4]int32
	experts, used, ffExp, ffShr   int
	conv, state, kHeads, vHeads   int
	vocab                         int
	typ                           dtype.Type // 2-D and 3-D weights but the router; 1-D tensors and ssm_conv1d stay F32
	tied                          bool
	nextn                         int // multi-token-prediction blocks appended after the trunk
	seed                          uint64
	meta                          map[string]gguf.Value // extra keys, "%s" = the arch
}

func (s q35Model) recurrent(i int) bool {
	if s.pattern != nil {
		return s.pattern[i]
	}
	return (i+1)%s.interval != 0
}

// tensors draws the model's weights, in the order a file lists them.
func (s q35Model) tensors() []tensorData {
	rng := rand.New(rand.NewPCG(s.seed, 0x35))
	normal := func(n int, mean, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*rng.NormFloat64())
		}
		return v
	}
	var ts []tensorData
	add := func(name string, typ dtype.Type, vals []float32, dims ...int64) {
		ts = append(ts, tensorData{name, dims, typ, vals})
	}
	mat := func(name string, in, out int) {
		add(name, s.typ, normal(in*out, 0, 1/math.Sqrt(float64(in))), int64(in), int64(out))
	}
	exps := func(name string, in, out int) {
		add(name, s.typ, normal(in*out*s.experts, 0, 1/math.Sqrt(float64(in))), int64(in), int64(out), int64(s.experts))
	}
	vec := func(name string, n int) { add(name, dtype.F32, normal(n, 1, 0.1), int64(n)) }
	E, D, H, HKV := s.embd, s.headDim, s.heads, s.kvHeads
	dk, nk, nv := s.state, s.kHeads, s.vHeads
	C := 2*nk*dk + nv*dk
	add("token_embd.weight", s.typ, normal(E*s.vocab, 0, 1), int64(E), int64(s.vocab))
	vec("output_norm.weight", E)
	if !s.tied {
		mat("output.weight", E, s.vocab)
	}
	for i := 0; i < s.layers+s.nextn; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		vec(p+"attn_norm.weight", E)
		vec(p+"post_attention_norm.weight", E)
		if i >= s.layers || !s.recurrent(i) {
			mat(p+"attn_q.weight", E, 2*H*D)
			mat(p+"attn_k.weight", E, HKV*D)
			mat(p+"attn_v.weight", E, HKV*D)
			mat(p+"attn_output.weight", H*D, E)
			vec(p+"attn_q_norm.weight", D)
			vec(p+"attn_k_norm.weight", D)
		} else {
			mat(p+"attn_qkv.weight", E, C)
			mat(p+"attn_gate.weight", E, nv*dk)
			add(p+"ssm_conv1d.weight", dtype.F32, normal(s.conv*C, 0, 0.25), int64(s.conv), int64(C))
			add(p+"ssm_dt.bias", dtype.F32, normal(nv, 0, 0.25), int64(nv))
			a := make([]float32, nv)
			for h := range a {
				a[h] = float32(-math.Exp(-1 + 1.5*rng.Float64()))
			}
			add(p+"ssm_a", dtype.F32, a, int64(nv))
			mat(p+"ssm_beta.weight", E, nv)
			mat(p+"ssm_alpha.weight", E, nv)
			vec(p+"ssm_norm.weight", dk)
			mat(p+"ssm_out.weight", nv*dk, E)
		}
		add(p+"ffn_gate_inp.weight", dtype.F32, normal(E*s.experts, 0, 1/math.Sqrt(float64(E))), int64(E), int64(s.experts))
		exps(p+"ffn_gate_exps.weight", E, s.ffExp)
		exps(p+"ffn_up_exps.weight", E, s.ffExp)
		exps(p+"ffn_down_exps.weight", s.ffExp, E)
		add(p+"ffn_gate_inp_shexp.weight", dtype.F32, normal(E, 0, 1/math.Sqrt(float64(E))), int64(E))
		mat(p+"ffn_gate_shexp.weight", E, s.ffShr)
		mat(p+"ffn_up_shexp.weight", E, s.ffShr)
		mat(p+"ffn_down_shexp.weight", s.ffShr, E)
		if i >= s.layers {
			vec(p+"nextn.enorm.weight", E)
			vec(p+"nextn.hnorm.weight", E)
			mat(p+"nextn.eh_proj.weight", 2*E, E)
		}
	}
	return ts
}

// writer returns a GGUF writer holding the model's metadata and the tensors ts.
func (s q35Model) writer(t testing.TB, ts []tensorData) *gguf.Writer {
	t.Helper()
	w := gguf.NewWriter()
	const A = "qwen35moe"
	u := func(k string, v int) { w.Set(A+"."+k, gguf.U32(uint32(v))) }
	w.Set("general.architecture", gguf.Str(A))
	u("block_count", s.layers+s.nextn)
	if s.nextn > 0 {
		u("nextn_predict_layers", s.nextn)
	}
	u("context_length", 256)
	u("embedding_length", s.embd)
	u("feed_forward_length", s.ffExp)
	u("attention.head_count", s.heads)
	u("attention.head_count_kv", s.kvHeads)
	u("attention.key_length", s.headDim)
	u("attention.value_length", s.headDim)
	w.Set(A+".attention.layer_norm_rms_epsilon", gguf.F32(1e-6))
	w.Set(A+".rope.freq_base", gguf.F32(1e7))
	u("rope.dimension_count", s.nrot)
	w.Set(A+".rope.dimension_sections", gguf.ArrInt32s(s.sections[:]))
	u("expert_count", s.experts)
	u("expert_used_count", s.used)
	u("expert_feed_forward_length", s.ffExp)
	u("expert_shared_feed_forward_length", s.ffShr)
	u("ssm.conv_kernel", s.conv)
	u("ssm.state_size", s.state)
	u("ssm.group_count", s.kHeads)
	u("ssm.time_step_rank", s.vHeads)
	u("ssm.inner_size", s.vHeads*s.state)
	u("full_attention_interval", s.interval)
	if s.pattern != nil {
		rec := make([]bool, s.layers+s.nextn)
		copy(rec, s.pattern)
		w.Set(A+".attention.recurrent_layers", gguf.ArrOf(rec))
	}
	for k, v := range s.meta {
		if strings.Contains(k, "%s") {
			k = fmt.Sprintf(k, A)
		}
		w.Set(k, v)
	}
	addTensors(t, w, ts)
	return w
}

func (s q35Model) load(t testing.TB, opt Options) *Model {
	t.Helper()
	m, err := Load(parse(t, s.writer(t, s.tensors())), opt)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// q35F32 is the qwen35moe model of most tests: layers 1 and 3 full attention, the others Gated
// DeltaNet with 2 key heads shared by 4 value heads, partial RoPE over 8 of 16 dims whose
// sections (1, 1, 1, 1) put the last pair in the fourth section, 8 experts of which 2 are used.
var q35F32 = q35Model{
	layers: 4, interval: 2, embd: 64, heads: 4, kvHeads: 2, headDim: 16, nrot: 8, sections: [4]int32{1, 1, 1, 1},
	experts: 8, used: 2, ffExp: 32, ffShr: 64, conv: 4, state: 16, kHeads: 2, vHeads: 4,
	vocab: 260, typ: dtype.F32, seed: 35,
}

func q35Variant(s q35Model, edit func(*q35Model)) q35Model {
	edit(&s)
	return s
}

var q35TestModels = []struct {
	name  string
	model q35Model
	opt   Options
}{
	{"qwen35moe/f32", q35F32, Options{}},
	{"qwen35moe/q8_0/actquant", q35Variant(q35F32, func(s *q35Model) { s.typ = dtype.Q8_0 }), Options{ActQuant: true}},
	{"qwen35moe/f16/tied/mha/actquant", q35Variant(q35F32, func(s *q35Model) {
		s.typ, s.tied, s.kvHeads, s.nrot, s.sections = dtype.F16, true, 4, 16, [4]int32{3, 2, 0, 0}
		s.kHeads, s.vHeads, s.conv, s.used = 1, 2, 3, 8
	}), Options{ActQuant: true}},
}

// q35LayerMajor is a second qwen35moe forward pass for the tests, organised the other way
// round: layer by layer over all positions; the convolution over an explicitly zero-padded
// sequence; the delta rule as the matrix update S ← (I − β k kᵀ)·e^g·S + β k vᵀ; every expert
// evaluated and weighted by a mask found by ranking; RoPE as a complex multiplication with a
// table of section positions. It shares with Model only the decoded weights and the matrix
// products.
func q35LayerMajor(m *Model, tokens []int32) [][]float64 {
	c, aq := m.cfg, m.opt.ActQuant
	T, E := len(tokens), c.NEmbd
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
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	// Section of each pair: the pairs go round the sections t, h, w, e in turn (mod their
	// sum), and sector s belongs to section s mod 3 if it is among that section's first ones.
	textPos := make([]bool, c.NRot/2)
	sum := int(c.RopeSections[0] + c.RopeSections[1] + c.RopeSections[2] + c.RopeSections[3])
	for i := range textPos {
		s := i % sum
		textPos[i] = s/3 < c.RopeSections[s%3]
	}
	rope := func(head []float64, pos int) {
		h := c.NRot / 2
		for i := 0; i < h; i++ {
			p := 0.0
			if textPos[i] {
				p = float64(pos)
			}
			theta := p * math.Exp(-float64(2*i)/float64(c.NRot)*math.Log(c.RopeBase))
			z := complex(head[i], head[i+h]) * cmplx.Rect(1, theta)
			head[i], head[i+h] = real(z), imag(z)
		}
	}
	xs := make([][]float64, T)
	for i, tok := range tokens {
		xs[i] = append([]float64(nil), m.embd.row(int(tok))...)
	}
	for l := range m.layers {
		ly := &m.layers[l]
		ns := make([][]float64, T)
		for t := range xs {
			ns[t] = norm(xs[t], ly.attnNorm)
		}
		var mix [][]float64
		if ly.mixer == gatedAttention {
			mix = q35Attention(m, ly, ns, norm, rope, sig)
		} else {
			mix = q35DeltaNet(m, ly.gdn, ns, norm, sig)
		}
		for t := range xs {
			for i := range xs[t] {
				xs[t][i] += mix[t][i]
			}
		}
		e := ly.moe
		for t := range xs {
			n := norm(xs[t], ly.ffnNorm)
			logits := e.router.mul(n, aq)
			p := make([]float64, len(logits))
			var z float64
			for i, v := range logits {
				p[i] = math.Exp(v)
				z += p[i]
			}
			for i := range p {
				p[i] /= z
			}
			// Expert x is used iff fewer than k experts rank above it.
			weight := make([]float64, len(p))
			var wsum float64
			for x := range p {
				above := 0
				for y := range p {
					if p[y] > p[x] || (p[y] == p[x] && y < x) {
						above++
					}
				}
				if above < c.NExpertUsed {
					weight[x] = p[x]
					wsum += p[x]
				}
			}
			ffn := func(g, u, d *matrix) []float64 {
				gv, uv := g.mul(n, aq), u.mul(n, aq)
				for i := range gv {
					gv[i] = gv[i] * sig(gv[i]) * uv[i]
				}
				return d.mul(gv, aq)
			}
			for x := range p {
				if weight[x] == 0 {
					continue
				}
				y := ffn(e.gate[x], e.up[x], e.down[x])
				for i := range E {
					xs[t][i] += weight[x] / wsum * y[i]
				}
			}
			y, g := ffn(e.shGate, e.shUp, e.shDown), sig(e.shInp.mul(n, aq)[0])
			for i := range E {
				xs[t][i] += g * y[i]
			}
		}
	}
	out := make([][]float64, T)
	for i, x := range xs {
		out[i] = m.output.mul(norm(x, m.outNorm), aq)
	}
	return out
}

func q35Attention(m *Model, ly *layer, ns [][]float64, norm func(x, w []float64) []float64, rope func([]float64, int), sig func(float64) float64) [][]float64 {
	c, aq := m.cfg, m.opt.ActQuant
	T, D := len(ns), c.HeadDim
	Q, G, K, V := make([][]float64, T), make([][]float64, T), make([][]float64, T), make([][]float64, T)
	for t, n := range ns {
		qg := ly.wq.mul(n, aq)
		K[t], V[t] = ly.wk.mul(n, aq), ly.wv.mul(n, aq)
		for h := 0; h < c.NHead; h++ {
			q := norm(qg[2*h*D:2*h*D+D], ly.qNorm)
			rope(q, t)
			Q[t] = append(Q[t], q...)
			G[t] = append(G[t], qg[2*h*D+D:2*(h+1)*D]...)
		}
		for j := 0; j < c.NHeadKV; j++ {
			copy(K[t][j*D:], norm(K[t][j*D:(j+1)*D], ly.kNorm))
			rope(K[t][j*D:(j+1)*D], t)
		}
	}
	out := make([][]float64, T)
	for t := range ns {
		a := make([]float64, c.NHead*D)
		for h := 0; h < c.NHead; h++ {
			j := h * c.NHeadKV / c.NHead
			w := make([]float64, t+1)
			var z float64
			for s := range w {
				var qk float64
				for d := range D {
					qk += Q[t][h*D+d] * K[s][j*D+d]
				}
				w[s] = math.Exp(qk / math.Sqrt(float64(D)))
				z += w[s]
			}
			for s := range w {
				for d := range D {
					a[h*D+d] += w[s] / z * V[s][j*D+d]
				}
			}
		}
		for i := range a {
			a[i] *= sig(G[t][i])
		}
		out[t] = ly.wo.mul(a, aq)
	}
	return out
}

func q35DeltaNet(m *Model, g *deltaNet, ns [][]float64, norm func(x, w []float64) []float64, sig func(float64) float64) [][]float64 {
	c, aq := m.cfg, m.opt.ActQuant
	T, K := len(ns), c.ConvKernel
	nk, nv, dk := c.SSMKHeads, c.SSMVHeads, c.SSMHeadDim
	// The projected inputs, preceded by K−1 zero rows.
	padded := make([][]float64, K-1, K-1+T)
	C := g.qkv.rows
	for i := range padded {
		padded[i] = make([]float64, C)
	}
	for _, n := range ns {
		padded = append(padded, g.qkv.mul(n, aq))
	}
	unit := func(x []float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		r := max(math.Sqrt(ss), c.Eps)
		y := make([]float64, len(x))
		for i := range x {
			y[i] = x[i] / r
		}
		return y
	}
	S := make([][][]float64, nv) // S[h][a][j]
	for h := range S {
		S[h] = make([][]float64, dk)
		for a := range S[h] {
			S[h][a] = make([]float64, dk)
		}
	}
	out := make([][]float64, T)
	for t, n := range ns {
		cv := make([]float64, C)
		for ch := range C {
			for k := range K {
				cv[ch] += g.conv[ch*K+k] * padded[t+k][ch]
			}
			cv[ch] *= sig(cv[ch])
		}
		z, beta, alpha := g.z.mul(n, aq), g.beta.mul(n, aq), g.alpha.mul(n, aq)
		y := make([]float64, nv*dk)
		for h := range nv {
			i := h % nk
			q, k := unit(cv[i*dk:(i+1)*dk]), unit(cv[(nk+i)*dk:(nk+i+1)*dk])
			v := cv[2*nk*dk+h*dk : 2*nk*dk+(h+1)*dk]
			b := sig(beta[h])
			x := alpha[h] + g.dt[h]
			gamma := math.Exp(g.a[h] * math.Log(1+math.Exp(x)))
			// P = (I − β k kᵀ)·γ·S, then S = P + β k vᵀ.
			next := make([][]float64, dk)
			for a := range dk {
				next[a] = make([]float64, dk)
				for j := range dk {
					var pj float64
					for r := range dk {
						id := 0.0
						if r == a {
							id = 1
						}
						pj += (id - b*k[a]*k[r]) * gamma * S[h][r][j]
					}
					next[a][j] = pj + b*k[a]*v[j]
				}
			}
			S[h] = next
			o := make([]float64, dk)
			for j := range dk {
				for a := range dk {
					o[j] += S[h][a][j] * q[a]
				}
				o[j] /= math.Sqrt(float64(dk))
			}
			o = norm(o, g.norm)
			for j := range dk {
				zj := z[h*dk+j]
				y[h*dk+j] = o[j] * zj * sig(zj)
			}
		}
		out[t] = g.out.mul(y, aq)
	}
	return out
}

func TestQwen35ForwardMatchesLayerMajor(t *testing.T) {
	for _, tc := range q35TestModels {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model.load(t, tc.opt)
			tokens := randomTokens(rand.New(rand.NewPCG(35, 1)), 12, m.cfg.NVocab)
			got, err := m.Forward(tokens)
			if err != nil {
				t.Fatal(err)
			}
			want := q35LayerMajor(m, tokens)
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

// TestQwen35WrongConventions checks that the reference tells apart the conventions that are easy
// to get wrong, so that a test comparing another implementation with it catches them: the GDN
// value head → key head mapping (h mod nk in GGUF files, not HF's h / (nv/nk)), the RoPE pairing,
// and the fourth IMROPE section (position 0).
func TestQwen35WrongConventions(t *testing.T) {
	// Here the fourth section holds the pair of the highest frequency, θ = pos.
	fourth := q35Variant(q35F32, func(s *q35Model) { s.sections = [4]int32{0, 1, 1, 1} })
	for _, tc := range []struct {
		name  string
		model q35Model
		edit  func(*Model)
	}{
		{"value head h reads key head h/(nv/nk)", q35F32, func(m *Model) { m.gdnHeadsBlocked = true }},
		{"adjacent RoPE pairs", q35F32, func(m *Model) { m.cfg.RopeNeox = false }},
		{"the fourth section at the text position", fourth, func(m *Model) { m.cfg.RopeSections = [4]int{} }},
	} {
		m := tc.model.load(t, Options{})
		tokens := randomTokens(rand.New(rand.NewPCG(35, 2)), 16, m.cfg.NVocab)
		right, err := m.Forward(tokens)
		if err != nil {
			t.Fatal(err)
		}
		tc.edit(m)
		wrong, err := m.Forward(tokens)
		if err != nil {
			t.Fatal(err)
		}
		if e := maxRel(wrong, right); e < 0.01 {
			t.Errorf("%s changes the logits by only %.3g (max rel)", tc.name, e)
		} else {
			t.Logf("%s: max rel diff %.3g", tc.name, e)
		}
	}
}

// TestRopePartial checks that RoPE with NRot < HeadDim rotates pairs among the first NRot
// elements only, each by a rotation (norm kept), and leaves the rest as they are.
func TestRopePartial(t *testing.T) {
	const D, nrot = 16, 8
	rng := rand.New(rand.NewPCG(35, 4))
	for _, tc := range []struct {
		neox     bool
		sections [4]int
	}{{true, [4]int{}}, {false, [4]int{}}, {true, [4]int{1, 1, 1, 1}}, {true, [4]int{11, 11, 10, 0}}} {
		m := &Model{cfg: Config{NRot: nrot, RopeBase: 100, RopeScale: 1, RopeAttn: 1, RopeNeox: tc.neox, RopeSections: tc.sections}}
		v := make([]float64, D)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		w := append([]float64(nil), v...)
		m.rope(w, 5)
		for i := nrot; i < D; i++ {
			if w[i] != v[i] {
				t.Errorf("neox=%v sections %v: element %d ≥ n_rot changed from %v to %v", tc.neox, tc.sections, i, v[i], w[i])
			}
		}
		for i := range nrot / 2 {
			i0, i1 := 2*i, 2*i+1
			if tc.neox {
				i0, i1 = i, i+nrot/2
			}
			before, after := math.Hypot(v[i0], v[i1]), math.Hypot(w[i0], w[i1])
			if math.Abs(before-after) > 1e-14 {
				t.Errorf("neox=%v sections %v: pair %d: norm %v became %v", tc.neox, tc.sections, i, before, after)
			}
			rotated := w[i0] != v[i0] || w[i1] != v[i1]
			if want := m.ropePosition(i, 5) != 0; rotated != want {
				t.Errorf("neox=%v sections %v: pair %d rotated = %v, want %v", tc.neox, tc.sections, i, rotated, want)
			}
		}
	}
}

// TestRopePosition checks the IMROPE assignment of pairs to sections for text positions.
func TestRopePosition(t *testing.T) {
	const p = 7
	for _, tc := range []struct {
		sections [4]int
		want     []int // per pair
	}{
		{[4]int{}, []int{p, p, p, p}},
		{[4]int{2, 1, 1, 0}, []int{p, p, p, p}},              // the oracle's synthetic qwen35moe
		{[4]int{1, 1, 1, 1}, []int{p, p, p, 0, p, p, p, 0}},  // sector = pair mod 4
		{[4]int{2, 1, 0, 0}, []int{p, p, 0, p, p, 0, p, p}},  // no width section
		{[4]int{3, 2, 0, 0}, []int{p, p, 0, p, p, p, p, 0}},  // sector 3 is t, 4 is h
		{[4]int{11, 11, 10, 0}, slices.Repeat([]int{p}, 32)}, // Qwen3.5
	} {
		m := &Model{cfg: Config{RopeSections: tc.sections}}
		for i, want := range tc.want {
			if got := m.ropePosition(i, p); got != want {
				t.Errorf("sections %v, pair %d: position %d, want %d", tc.sections, i, got, want)
			}
		}
	}
}

func TestTopExperts(t *testing.T) {
	p := []float64{0.1, 0.3, 0.3, 0.2, 0.1}
	for k, want := range [][]int{{}, {1}, {1, 2}, {1, 2, 3}, {1, 2, 3, 0}, {1, 2, 3, 0, 4}} {
		if got := topExperts(p, k); !slices.Equal(got, want) {
			t.Errorf("top %d of %v: %v, want %v", k, p, got, want)
		}
	}
}

// q35Meta returns a metadata-only file of s with the keys in set replaced (a nil value deletes
// the key).
func q35Meta(t *testing.T, s q35Model, set map[string]*gguf.Value) *gguf.File {
	w := s.writer(t, nil)
	for k, v := range set {
		k = "qwen35moe." + k
		if v == nil {
			w.Delete(k)
		} else {
			w.Set(k, *v)
		}
	}
	return parse(t, w)
}

func val(v gguf.Value) *gguf.Value { return &v }

func TestQwen35Config(t *testing.T) {
	base := Config{
		Arch: "qwen35moe", NLayer: 4, NEmbd: 64, NFF: 32, NHead: 4, NHeadKV: 2, HeadDim: 16, Eps: float64(float32(1e-6)),
		NRot: 8, RopeBase: 1e7, RopeScale: 1, RopeAttn: 1, RopeNeox: true, QKNorm: true,
		RopeSections: [4]int{1, 1, 1, 1}, Recurrent: []bool{true, false, true, false},
		NExpert: 8, NExpertUsed: 2, NFFExp: 32, NFFShared: 64, ConvKernel: 4, SSMHeadDim: 16, SSMKHeads: 2, SSMVHeads: 4,
	}
	for _, tc := range []struct {
		name  string
		model q35Model
		set   map[string]*gguf.Value
		edit  func(*Config)
	}{
		{"base", q35F32, nil, func(*Config) {}},
		{"default interval", q35F32, map[string]*gguf.Value{"full_attention_interval": nil}, func(c *Config) {
			c.Recurrent = []bool{true, true, true, false}
		}},
		{"recurrent_layers bools", q35Variant(q35F32, func(s *q35Model) { s.pattern = []bool{false, true, true, true} }), nil, func(c *Config) {
			c.Recurrent = []bool{false, true, true, true}
		}},
		{"recurrent_layers ints", q35F32, map[string]*gguf.Value{"attention.recurrent_layers": val(gguf.ArrInt32s([]int32{0, 0, 1, 1}))}, func(c *Config) {
			c.Recurrent = []bool{false, false, true, true}
		}},
		{"one section value", q35F32, map[string]*gguf.Value{"rope.dimension_sections": val(gguf.U32(2))}, func(c *Config) {
			c.RopeSections = [4]int{2, 2, 2, 2}
		}},
		{"expert lengths from feed_forward_length", q35F32, map[string]*gguf.Value{
			"expert_feed_forward_length": nil, "expert_shared_feed_forward_length": nil, "feed_forward_length": val(gguf.U32(96)),
		}, func(c *Config) { c.NFF, c.NFFExp, c.NFFShared = 96, 48, 96 }},
		{"no feed_forward_length", q35F32, map[string]*gguf.Value{"feed_forward_length": nil}, func(c *Config) { c.NFF = 0 }},
		{"nextn", q35Variant(q35F32, func(s *q35Model) { s.nextn = 1 }), nil, func(c *Config) { c.NextN = 1 }},
		{"full rotation", q35F32, map[string]*gguf.Value{"rope.dimension_count": nil}, func(c *Config) { c.NRot = 16 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readConfig(q35Meta(t, tc.model, tc.set))
			if err != nil {
				t.Fatal(err)
			}
			want := base
			want.Recurrent = slices.Clone(base.Recurrent)
			tc.edit(&want)
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Errorf("config\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestQwen35ConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		set  map[string]*gguf.Value
		want string
	}{
		{map[string]*gguf.Value{"rope.dimension_sections": nil}, `key "qwen35moe.rope.dimension_sections" is missing`},
		{map[string]*gguf.Value{"rope.dimension_sections": val(gguf.ArrInt32s([]int32{1, 1, 1}))}, "has 3 values, want 4"},
		{map[string]*gguf.Value{"rope.dimension_sections": val(gguf.ArrInt32s([]int32{0, 0, 0, 0}))}, "the sections are all 0"},
		{map[string]*gguf.Value{"rope.dimension_sections": val(gguf.ArrInt32s([]int32{1, -1, 0, 0}))}, "section 1 = -1 is out of range"},
		{map[string]*gguf.Value{"rope.dimension_sections": val(gguf.ArrStrings([]string{"a"}))}, "want array of integers"},
		{map[string]*gguf.Value{"ssm.inner_size": val(gguf.U32(48))}, `"qwen35moe.ssm.inner_size" = 48 is not "qwen35moe.ssm.time_step_rank" · "qwen35moe.ssm.state_size" = 4 · 16`},
		{map[string]*gguf.Value{"ssm.state_size": nil}, `key "qwen35moe.ssm.state_size" is missing`},
		{map[string]*gguf.Value{"ssm.conv_kernel": nil}, `key "qwen35moe.ssm.conv_kernel" is missing`},
		{map[string]*gguf.Value{"ssm.group_count": val(gguf.U32(3))}, "4 value heads cannot share"},
		{map[string]*gguf.Value{"expert_count": nil}, `key "qwen35moe.expert_count" is missing`},
		{map[string]*gguf.Value{"expert_used_count": val(gguf.U32(9))}, `"qwen35moe.expert_used_count" = 9 exceeds "qwen35moe.expert_count" = 8`},
		{map[string]*gguf.Value{"expert_feed_forward_length": nil, "feed_forward_length": nil}, `"qwen35moe.expert_feed_forward_length" is missing`},
		{map[string]*gguf.Value{"expert_shared_feed_forward_length": nil, "feed_forward_length": nil}, `"qwen35moe.expert_shared_feed_forward_length" is missing`},
		{map[string]*gguf.Value{"rope.dimension_count": val(gguf.U32(18))}, "rope.dimension_count 18 must be even and at most the head size 16"},
		{map[string]*gguf.Value{"rope.dimension_count": val(gguf.U32(7))}, "rope.dimension_count 7 must be even"},
		{map[string]*gguf.Value{"nextn_predict_layers": val(gguf.U32(4))}, `"qwen35moe.nextn_predict_layers" = 4 leaves no layer`},
		{map[string]*gguf.Value{"attention.recurrent_layers": val(gguf.ArrInt32s([]int32{1, 0}))}, "has 2 values for 4 blocks"},
		{map[string]*gguf.Value{"full_attention_interval": val(gguf.U32(0))}, `"qwen35moe.full_attention_interval" = 0 is out of range`},
		{map[string]*gguf.Value{"attention.value_length": val(gguf.U32(8))}, "value head size 8 differs"},
	} {
		_, err := readConfig(q35Meta(t, q35F32, tc.set))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.set, err, tc.want)
		}
	}
}

func TestQwen35LoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		model       q35Model
		edit        func([]tensorData) []tensorData
		want        string
		unsupported bool
	}{
		{"missing ssm_a", q35F32, func(ts []tensorData) []tensorData {
			return slices.DeleteFunc(ts, func(td tensorData) bool { return td.name == "blk.0.ssm_a" })
		}, `"blk.0.ssm_a" is missing`, false},
		{"expert dims", q35F32, func(ts []tensorData) []tensorData {
			for i := range ts {
				if ts[i].name == "blk.2.ffn_down_exps.weight" {
					ts[i].dims = []int64{64, 32, 8}
				}
			}
			return ts
		}, `"blk.2.ffn_down_exps.weight" has dims [64 32 8], want [32 64 8]`, false},
		{"fused qkv in an attention layer", q35F32, func(ts []tensorData) []tensorData {
			return append(ts, tensorData{"blk.1.attn_qkv.weight", []int64{64, 192}, dtype.F32, make([]float32, 64*192)})
		}, `"blk.1.attn_qkv.weight" is not part`, true},
		{"layer kinds", q35Variant(q35F32, func(s *q35Model) { s.meta = map[string]gguf.Value{"%s.full_attention_interval": gguf.U32(4)} }),
			nil, `"blk.1.attn_qkv.weight" is missing`, false},
		{"block past the trunk", q35F32, func(ts []tensorData) []tensorData {
			return append(ts, tensorData{"blk.4.attn_norm.weight", []int64{64}, dtype.F32, make([]float32, 64)})
		}, `"blk.4.attn_norm.weight" is not part`, true},
		{"block past the MTP blocks", q35Variant(q35F32, func(s *q35Model) { s.nextn = 1 }), func(ts []tensorData) []tensorData {
			return append(ts, tensorData{"blk.5.attn_norm.weight", []int64{64}, dtype.F32, make([]float32, 64)})
		}, `"blk.5.attn_norm.weight" is not part`, true},
		{"rope freqs", q35F32, func(ts []tensorData) []tensorData {
			return append(ts, tensorData{"rope_freqs.weight", []int64{4}, dtype.F32, make([]float32, 4)})
		}, `"rope_freqs.weight" is not part`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := tc.model.tensors()
			if tc.edit != nil {
				ts = tc.edit(ts)
			}
			_, err := Load(parse(t, tc.model.writer(t, ts)), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(%v, ErrUnsupported) = %v", err, !tc.unsupported)
			}
		})
	}
}

// TestQwen35MTPIgnored checks that the multi-token-prediction blocks after the trunk are
// accepted and change nothing.
func TestQwen35MTPIgnored(t *testing.T) {
	tokens := randomTokens(rand.New(rand.NewPCG(35, 5)), 6, q35F32.vocab)
	want, _ := q35F32.load(t, Options{}).Forward(tokens)
	m := q35Variant(q35F32, func(s *q35Model) { s.nextn = 1 }).load(t, Options{})
	if m.cfg.NLayer != 4 || len(m.layers) != 4 {
		t.Fatalf("%d layers, want the 4 of the trunk", len(m.layers))
	}
	got, _ := m.Forward(tokens)
	if e := maxRel(got, want); e != 0 {
		t.Errorf("with an MTP block: max rel diff %.3g, want 0", e)
	}
}

var writeVectors = flag.Bool("write-vectors", false, "regenerate testdata/"+q35VectorFile+" with llama.cpp (needs VERITY_ORACLE)")

// q35VectorFile holds llama.cpp's logits for q35Vectors: for each model in turn, for each of the
// q35VectorTokens positions, the logits of the first q35VectorCols vocabulary entries as float32
// little-endian. They come from the oracle's llama.cpp (commit 22dc605, CPU, F32 KV cache, flash
// attention off) run on the models as the tests write them, with withVocab's vocabulary.
const (
	q35VectorFile   = "qwen35moe_llamacpp.f32"
	q35VectorTokens = 20
	q35VectorCols   = 64
)

var q35Vectors = []struct {
	name  string
	model q35Model
	opt   Options
}{
	{"f32", q35F32, Options{}},
	{"q8_0/actquant", q35Variant(q35F32, func(s *q35Model) { s.typ = dtype.Q8_0 }), Options{ActQuant: true}},
}

func q35VectorTokenIDs() []int32 {
	return randomTokens(rand.New(rand.NewPCG(35, 6)), q35VectorTokens, q35F32.vocab)
}

// TestQwen35Vectors compares Forward with llama.cpp's logits committed in testdata, so that the
// qwen35moe semantics are checked without the oracle. -write-vectors regenerates the file.
func TestQwen35Vectors(t *testing.T) {
	path := filepath.Join("testdata", q35VectorFile)
	tokens := q35VectorTokenIDs()
	if *writeVectors {
		writeQ35Vectors(t, path, tokens)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	per := q35VectorTokens * q35VectorCols
	if len(b) != 4*per*len(q35Vectors) {
		t.Fatalf("%s: %d bytes, want %d", path, len(b), 4*per*len(q35Vectors))
	}
	for k, v := range q35Vectors {
		m := v.model.load(t, v.opt)
		logits, err := m.Forward(tokens)
		if err != nil {
			t.Fatal(err)
		}
		got, want := make([][]float64, len(tokens)), make([][]float64, len(tokens))
		for i := range tokens {
			got[i] = logits[i][:q35VectorCols]
			for j := range q35VectorCols {
				want[i] = append(want[i], float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*(k*per+i*q35VectorCols+j):]))))
			}
		}
		// llama.cpp computes in float32: ~5e-7 here. Neither an activation flip nor a routing
		// change happens for these tokens.
		if e := maxRel(got, want); !(e <= 2e-6) {
			t.Errorf("%s: reference vs llama.cpp: max rel diff %.3g", v.name, e)
		} else {
			t.Logf("%s: reference vs llama.cpp: max rel diff %.3g", v.name, e)
		}
	}
}

func writeQ35Vectors(t *testing.T, path string, tokens []int32) {
	oracle := os.Getenv("VERITY_ORACLE")
	if oracle == "" {
		t.Fatal("-write-vectors needs VERITY_ORACLE")
	}
	var list []string
	for _, tok := range tokens {
		list = append(list, fmt.Sprint(tok))
	}
	tmp := t.TempDir()
	var out []byte
	for _, v := range q35Vectors {
		w := v.model.writer(t, v.model.tensors())
		withVocab(w, v.model.vocab)
		model := filepath.Join(tmp, "model.gguf")
		if err := w.WriteFile(model); err != nil {
			t.Fatal(err)
		}
		logits := filepath.Join(tmp, "logits.f32")
		runOracle(t, oracle, "./llama_logits", "--tokens", strings.Join(list, ","), "--out", logits, model)
		for _, row := range readLogits(t, logits, len(tokens)) {
			for _, x := range row[:q35VectorCols] {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(x)))
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
