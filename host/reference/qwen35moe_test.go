package reference

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
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
