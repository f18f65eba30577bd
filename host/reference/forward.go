package reference

import (
	"fmt"
	"math"

	"verity/device/dtype"
	"verity/device/num"
)

// Forward returns the logits of every position of one causal pass over tokens: row i is the
// distribution after tokens[0..i]. Token ids must lie in [0, NVocab).
func (m *Model) Forward(tokens []int32) ([][]float64, error) {
	if err := m.checkTokens(tokens, "token"); err != nil {
		return nil, err
	}
	return m.decode(tokens, true), nil
}

// ForwardTree returns the logits of each node of a token tree that follows prefix. Node i holds
// tokens[i]; its parent is node parents[i] (which must be less than i), or the end of prefix when
// parents[i] is −1. Row i is the logits after prefix and the tokens on the path from the root to
// node i, computed by an independent causal pass over exactly that sequence: it is what decoding
// the path one token at a time gives, and nothing else in the tree can affect it.
func (m *Model) ForwardTree(prefix []int32, tokens []int32, parents []int) ([][]float64, error) {
	if len(parents) != len(tokens) {
		return nil, fmt.Errorf("reference: %d tree tokens but %d parents", len(tokens), len(parents))
	}
	if err := m.checkTokens(prefix, "prefix token"); err != nil {
		return nil, err
	}
	if err := m.checkTokens(tokens, "tree token"); err != nil {
		return nil, err
	}
	for i, p := range parents {
		if p < -1 || p >= i {
			return nil, fmt.Errorf("reference: node %d has parent %d; want -1 or a node before it", i, p)
		}
	}
	out := make([][]float64, len(tokens))
	for i := range tokens {
		var path []int32
		for n := i; n >= 0; n = parents[n] {
			path = append(path, tokens[n])
		}
		seq := make([]int32, 0, len(prefix)+len(path))
		seq = append(seq, prefix...)
		for j := len(path) - 1; j >= 0; j-- {
			seq = append(seq, path[j])
		}
		out[i] = m.decode(seq, false)[0]
	}
	return out, nil
}

func (m *Model) checkTokens(tokens []int32, what string) error {
	for i, t := range tokens {
		if t < 0 || int(t) >= m.cfg.NVocab {
			return fmt.Errorf("reference: %s %d at index %d is outside the vocabulary [0, %d)", what, t, i, m.cfg.NVocab)
		}
	}
	return nil
}

// decode runs the model over tokens one position at a time, keeping each layer's state, and
// returns the logits of every position (all) or of the last one only.
func (m *Model) decode(tokens []int32, all bool) [][]float64 {
	st := &state{kv: make([]kvCache, len(m.layers)), gdn: make([]gdnState, len(m.layers))}
	var out [][]float64
	for pos, tok := range tokens {
		x := m.hidden(tok, pos, st)
		if all || pos == len(tokens)-1 {
			out = append(out, m.logits(x))
		}
	}
	return out
}

// state is what a causal pass carries from one position to the next, per layer: the keys and
// values of an attention layer, or the recurrent state of a Gated DeltaNet layer.
type state struct {
	kv  []kvCache
	gdn []gdnState
}

// kvCache holds one layer's rotated keys and values of the positions seen so far, each
// NHeadKV·HeadDim values, head j at [j·HeadDim, (j+1)·HeadDim).
type kvCache struct{ k, v [][]float64 }

// hidden returns the last layer's output for token tok at position pos, advancing st.
func (m *Model) hidden(tok int32, pos int, st *state) []float64 {
	c, aq := m.cfg, m.opt.ActQuant
	x := append([]float64(nil), m.embd.row(int(tok))...)
	if c.Gemma {
		for i := range x {
			x[i] *= c.EmbedScale
		}
	}
	for l := range m.layers {
		ly := &m.layers[l]
		n := rmsNorm(x, ly.attnNorm, c.Eps)
		var o []float64
		if ly.mixer == deltaNetMixer {
			o = m.deltaNet(ly.gdn, n, &st.gdn[l])
		} else {
			o = m.attention(ly, n, pos, &st.kv[l])
		}
		if ly.attnPostNorm != nil {
			o = rmsNorm(o, ly.attnPostNorm, c.Eps)
		}
		add(x, o)
		n = rmsNorm(x, ly.ffnNorm, c.Eps)
		switch {
		case ly.moe != nil:
			o = m.moeFFN(ly.moe, n)
		case c.Gemma:
			o = m.geglu(ly.gate, ly.up, ly.down, n)
		default:
			o = swiglu(ly.gate, ly.up, ly.down, n, aq)
		}
		if ly.ffnPostNorm != nil {
			o = rmsNorm(o, ly.ffnPostNorm, c.Eps)
		}
		add(x, o)
	}
	return x
}

// attention returns Wo·[a_0 … a_{H-1}] for the normed input n at position pos, appending the
// position's keys and values to kv. For gatedAttention layers Wq gives, per head, the query
// followed by a gate, and a_h is multiplied by sigmoid(gate_h) element-wise.
func (m *Model) attention(ly *layer, n []float64, pos int, kv *kvCache) []float64 {
	c, aq := m.cfg, m.opt.ActQuant
	D := c.HeadDim
	q, k, v := ly.wq.mul(n, aq), ly.wk.mul(n, aq), ly.wv.mul(n, aq)
	add(q, ly.bq)
	add(k, ly.bk)
	add(v, ly.bv)
	var gate []float64
	if ly.mixer == gatedAttention {
		qg := q
		q, gate = make([]float64, c.NHead*D), make([]float64, c.NHead*D)
		for h := 0; h < c.NHead; h++ {
			copy(q[h*D:(h+1)*D], qg[2*h*D:2*h*D+D])
			copy(gate[h*D:(h+1)*D], qg[2*h*D+D:2*(h+1)*D])
		}
	}
	for h := 0; h < c.NHead; h++ {
		m.positionHead(q[h*D:(h+1)*D], ly.qNorm, pos, ly)
	}
	for j := 0; j < c.NHeadKV; j++ {
		m.positionHead(k[j*D:(j+1)*D], ly.kNorm, pos, ly)
	}
	if m.opt.RoundCache {
		roundCache(k, m.opt.CacheK)
		roundCache(v, m.opt.CacheV)
	}
	kv.k = append(kv.k, k)
	kv.v = append(kv.v, v)
	a := make([]float64, c.NHead*D)
	scale := 1 / math.Sqrt(float64(D))
	if c.AttnScale != 0 {
		scale = c.AttnScale
	}
	seen := *kv
	if ly.window > 0 && len(seen.k) > ly.window { // the last window positions, this one's included
		seen = kvCache{k: seen.k[len(seen.k)-ly.window:], v: seen.v[len(seen.v)-ly.window:]}
	}
	for h := 0; h < c.NHead; h++ {
		j := h / (c.NHead / c.NHeadKV)
		attend(a[h*D:(h+1)*D], q[h*D:(h+1)*D], seen, j*D, scale, c.AttnSoftCap)
	}
	if gate != nil {
		for i := range a {
			a[i] *= sigmoid(gate[i])
		}
	}
	out := ly.wo.mul(a, aq)
	add(out, ly.bo)
	return out
}

// swiglu returns down·(silu(gate·n) ⊙ up·n).
func swiglu(gate, up, down *matrix, n []float64, aq bool) []float64 {
	g, u := gate.mul(n, aq), up.mul(n, aq)
	for i := range g {
		g[i] = silu(g[i]) * u[i]
	}
	return down.mul(g, aq)
}

// positionHead applies, in place, what happens to one head of q or k before attention: the
// per-head RMSNorm when the architecture has one (norm != nil), then RoPE.
func (m *Model) positionHead(head, norm []float64, pos int, ly *layer) {
	if norm != nil {
		copy(head, rmsNorm(head, norm, m.cfg.Eps))
	}
	if ly.ropeBase != 0 { // a Gemma layer's own RoPE base and scaling
		m.ropeWith(head, pos, ly.ropeBase, ly.ropeScale)
		return
	}
	m.rope(head, pos)
}

// rope rotates the pairs of the first NRot elements of one head (see the package
// documentation): pair i is (2i, 2i+1), or (i, i+NRot/2) for NEOX, rotated by
// θ_i = p_i·base^(−2i/NRot) / f_i / s. The position p_i is pos, except for IMROPE (qwen35moe),
// where a pair in the fourth section uses position 0. Elements from NRot on are left as they are.
func (m *Model) rope(head []float64, pos int) { m.ropeWith(head, pos, m.cfg.RopeBase, m.cfg.RopeScale) }

// ropeWith is rope with the base and linear scaling factor given.
func (m *Model) ropeWith(head []float64, pos int, base, scale float64) {
	c := m.cfg
	half := c.NRot / 2
	for i := 0; i < half; i++ {
		theta := float64(m.ropePosition(i, pos)) * math.Pow(base, -float64(2*i)/float64(c.NRot))
		if m.ropeFactors != nil {
			theta /= m.ropeFactors[i]
		}
		theta /= scale
		sin, cos := math.Sincos(theta)
		sin, cos = sin*c.RopeAttn, cos*c.RopeAttn
		i0, i1 := 2*i, 2*i+1
		if c.RopeNeox {
			i0, i1 = i, i+half
		}
		a, b := head[i0], head[i1]
		head[i0] = float64(a*cos) - float64(b*sin)
		head[i1] = float64(a*sin) + float64(b*cos)
	}
}

// ropePosition returns the position that rotates pair i of a token at position pos. Without
// sections it is pos. With IMROPE sections (t, h, w, e), pair i has sector
// s = i mod (t+h+w+e) and takes the temporal position if s ≡ 0 (mod 3) and s < 3t, the height
// position if s ≡ 1 and s < 3h, the width position if s ≡ 2 and s < 3w, and the fourth
// position otherwise. For text llama.cpp sets the first three to pos and the fourth to 0.
func (m *Model) ropePosition(i, pos int) int {
	sec := m.cfg.RopeSections
	sum := sec[0] + sec[1] + sec[2] + sec[3]
	if sum == 0 {
		return pos
	}
	s := i % sum
	if (s%3 == 0 && s < 3*sec[0]) || (s%3 == 1 && s < 3*sec[1]) || (s%3 == 2 && s < 3*sec[2]) {
		return pos
	}
	return 0
}

// attend writes to out the attention of query q over every cached position, using the head
// whose keys and values start at offset off: softmax_s(q·k_s·scale) weighted values, the
// softmax taken with its maximum subtracted. With softCap > 0 each score s is first
// soft-capped to softCap·tanh(s/softCap) (Gemma 2).
func attend(out, q []float64, kv kvCache, off int, scale, softCap float64) {
	D := len(q)
	scores := make([]float64, len(kv.k))
	top := math.Inf(-1)
	for s, k := range kv.k {
		scores[s] = dot(q, k[off:off+D]) * scale
		if softCap > 0 {
			scores[s] = softCap * math.Tanh(scores[s]/softCap)
		}
		top = max(top, scores[s])
	}
	var z float64
	for s := range scores {
		scores[s] = math.Exp(scores[s] - top)
		z += scores[s]
	}
	clear(out)
	for s, v := range kv.v {
		p := scores[s] / z
		for d := range out {
			out[d] += float64(p * v[off+d])
		}
	}
}

// rmsNorm returns x / sqrt(mean(x²) + eps) · w.
func rmsNorm(x, w []float64, eps float64) []float64 {
	scale := 1 / math.Sqrt(dot(x, x)/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * scale * w[i]
	}
	return y
}

func silu(g float64) float64 { return g / (1 + math.Exp(-g)) }

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// add sets x += y (nothing for a nil y: an absent bias).
func add(x, y []float64) {
	if y == nil {
		return
	}
	for i := range x {
		x[i] += y[i]
	}
}

// roundCache rounds x to the values a K/V cache of type t holds: float32, then float16 or
// bfloat16 to nearest even.
func roundCache(x []float64, t dtype.Type) {
	for i, f := range x {
		v := float32(f)
		switch t {
		case dtype.F16:
			v = num.F16ToF32(num.F32ToF16(v))
		case dtype.BF16:
			v = num.BF16ToF32(num.F32ToBF16(v))
		}
		x[i] = float64(v)
	}
}
