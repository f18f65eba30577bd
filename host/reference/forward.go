package reference

import (
	"fmt"
	"math"
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

// decode runs the model over tokens one position at a time, keeping each layer's keys and
// values, and returns the logits of every position (all) or of the last one only.
func (m *Model) decode(tokens []int32, all bool) [][]float64 {
	kv := make([]kvCache, len(m.layers))
	var out [][]float64
	for pos, tok := range tokens {
		x := m.hidden(tok, pos, kv)
		if all || pos == len(tokens)-1 {
			out = append(out, m.output.mul(rmsNorm(x, m.outNorm, m.cfg.Eps), m.opt.ActQuant))
		}
	}
	return out
}

// kvCache holds one layer's rotated keys and values of the positions seen so far, each
// NHeadKV·HeadDim values, head j at [j·HeadDim, (j+1)·HeadDim).
type kvCache struct{ k, v [][]float64 }

// hidden returns the last layer's output for token tok at position pos, appending the
// position's keys and values to kv.
func (m *Model) hidden(tok int32, pos int, kv []kvCache) []float64 {
	c, aq := m.cfg, m.opt.ActQuant
	D := c.HeadDim
	x := append([]float64(nil), m.embd.row(int(tok))...)
	for l := range m.layers {
		ly := &m.layers[l]
		n := rmsNorm(x, ly.attnNorm, c.Eps)
		q, k, v := ly.wq.mul(n, aq), ly.wk.mul(n, aq), ly.wv.mul(n, aq)
		for h := 0; h < c.NHead; h++ {
			m.positionHead(q[h*D:(h+1)*D], ly.qNorm, pos)
		}
		for j := 0; j < c.NHeadKV; j++ {
			m.positionHead(k[j*D:(j+1)*D], ly.kNorm, pos)
		}
		kv[l].k = append(kv[l].k, k)
		kv[l].v = append(kv[l].v, v)
		a := make([]float64, c.NHead*D)
		for h := 0; h < c.NHead; h++ {
			j := h / (c.NHead / c.NHeadKV)
			attend(a[h*D:(h+1)*D], q[h*D:(h+1)*D], kv[l], j*D, 1/math.Sqrt(float64(D)))
		}
		add(x, ly.wo.mul(a, aq))
		n = rmsNorm(x, ly.ffnNorm, c.Eps)
		g, u := ly.gate.mul(n, aq), ly.up.mul(n, aq)
		for i := range g {
			g[i] = silu(g[i]) * u[i]
		}
		add(x, ly.down.mul(g, aq))
	}
	return x
}

// positionHead applies, in place, what happens to one head of q or k before attention: the
// per-head RMSNorm when the architecture has one (norm != nil), then RoPE.
func (m *Model) positionHead(head, norm []float64, pos int) {
	if norm != nil {
		copy(head, rmsNorm(head, norm, m.cfg.Eps))
	}
	m.rope(head, pos)
}

// rope rotates the pairs of one head (see the package documentation): pair i is (2i, 2i+1),
// or (i, i+D/2) for NEOX, rotated by θ_i = pos·base^(−2i/D) / f_i / s.
func (m *Model) rope(head []float64, pos int) {
	c := m.cfg
	half := len(head) / 2
	for i := 0; i < half; i++ {
		theta := float64(pos) * math.Pow(c.RopeBase, -float64(2*i)/float64(len(head)))
		if m.ropeFactors != nil {
			theta /= m.ropeFactors[i]
		}
		theta /= c.RopeScale
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

// attend writes to out the attention of query q over every cached position, using the head
// whose keys and values start at offset off: softmax_s(q·k_s·scale) weighted values, the
// softmax taken with its maximum subtracted.
func attend(out, q []float64, kv kvCache, off int, scale float64) {
	D := len(q)
	scores := make([]float64, len(kv.k))
	top := math.Inf(-1)
	for s, k := range kv.k {
		scores[s] = dot(q, k[off:off+D]) * scale
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

// add sets x += y.
func add(x, y []float64) {
	for i := range x {
		x[i] += y[i]
	}
}
