package reference

import (
	"cmp"
	"math"
	"slices"
)

// gdnState is the recurrent state of one Gated DeltaNet layer after the positions seen so far.
type gdnState struct {
	hist [][]float64 // the last ConvKernel−1 inputs of the convolution, oldest first (zeros before the start)
	s    [][]float64 // per value head h: S_h, dk×dv, S_h[i][j] at [i·dv + j]
}

// deltaNet returns the output of a Gated DeltaNet layer for the normed input n of the next
// position, advancing st (see the package documentation).
func (m *Model) deltaNet(g *deltaNet, n []float64, st *gdnState) []float64 {
	c, aq := m.cfg, m.opt.ActQuant
	nk, nv, dk := c.SSMKHeads, c.SSMVHeads, c.SSMHeadDim
	dv := dk
	K := c.ConvKernel
	mixed := g.qkv.mul(n, aq)
	C := len(mixed)
	if st.s == nil {
		for range K - 1 {
			st.hist = append(st.hist, make([]float64, C))
		}
		st.s = make([][]float64, nv)
		for h := range st.s {
			st.s[h] = make([]float64, dk*dv)
		}
	}

	// Causal depthwise convolution over the last K inputs, then SiLU.
	window := append(slices.Clone(st.hist), mixed)
	conv := make([]float64, C)
	for ch := range conv {
		var sum float64
		for k := range K {
			sum += float64(g.conv[ch*K+k] * window[k][ch])
		}
		conv[ch] = silu(sum)
	}
	st.hist = window[1:]

	scale := 1 / math.Sqrt(float64(dk))
	qs, ks := make([][]float64, nk), make([][]float64, nk)
	for i := range nk {
		qs[i] = l2Norm(conv[i*dk:(i+1)*dk], c.Eps)
		for d := range qs[i] {
			qs[i][d] *= scale
		}
		ks[i] = l2Norm(conv[(nk+i)*dk:(nk+i+1)*dk], c.Eps)
	}
	z, beta, alpha := g.z.mul(n, aq), g.beta.mul(n, aq), g.alpha.mul(n, aq)

	y := make([]float64, nv*dv)
	for h := range nv {
		i := h % nk
		if m.gdnHeadsBlocked {
			i = h / (nv / nk)
		}
		q, k := qs[i], ks[i]
		v := conv[2*nk*dk+h*dv : 2*nk*dk+(h+1)*dv]
		b := sigmoid(beta[h])
		decay := math.Exp(g.a[h] * softplus(alpha[h]+g.dt[h]))
		S := st.s[h]
		for x := range S {
			S[x] *= decay
		}
		// u = Sᵀk; S ← S + k ⊗ β(v − u); o = Sᵀq, read after the write.
		u := make([]float64, dv)
		for a := range dk {
			for j := range dv {
				u[j] += float64(S[a*dv+j] * k[a])
			}
		}
		for a := range dk {
			for j := range dv {
				S[a*dv+j] += float64(k[a] * float64(b*(v[j]-u[j])))
			}
		}
		o := make([]float64, dv)
		for a := range dk {
			for j := range dv {
				o[j] += float64(S[a*dv+j] * q[a])
			}
		}
		o = rmsNorm(o, g.norm, c.Eps)
		for j := range dv {
			y[h*dv+j] = o[j] * silu(z[h*dv+j])
		}
	}
	return g.out.mul(y, aq)
}

// moeFFN returns the mixture-of-experts feed-forward of the normed input n: the routed experts
// weighted by their renormalised router probabilities, plus (qwen35moe) the shared expert
// scaled by the sigmoid of its gate.
func (m *Model) moeFFN(e *moe, n []float64) []float64 {
	aq := m.opt.ActQuant
	p := softmax(e.router.mul(n, aq))
	top := topExperts(p, m.cfg.NExpertUsed)
	var sum float64
	for _, x := range top {
		sum += p[x]
	}
	// ggml clamps the sum to the smallest normal fp16 before dividing; a top-k sum of
	// softmax probabilities is at least k/NExpert, so this only guards the division.
	sum = max(sum, 0x1p-14)
	y := make([]float64, m.cfg.NEmbd)
	for _, x := range top {
		w := p[x] / sum
		for d, v := range swiglu(e.gate[x], e.up[x], e.down[x], n, aq) {
			y[d] += float64(w * v)
		}
	}
	if e.shInp == nil { // no shared expert (Mixtral-style)
		return y
	}
	g := sigmoid(e.shInp.mul(n, aq)[0])
	for d, v := range swiglu(e.shGate, e.shUp, e.shDown, n, aq) {
		y[d] += float64(g * v)
	}
	return y
}

// topExperts returns the indices of the k largest values of p, largest first; of equal
// values the lower index comes first.
func topExperts(p []float64, k int) []int {
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(p[b], p[a]) })
	return idx[:k]
}

// softmax returns e^(x_i − max x) / Σ e^(x_j − max x).
func softmax(x []float64) []float64 {
	top := slices.Max(x)
	out := make([]float64, len(x))
	var z float64
	for i, v := range x {
		out[i] = math.Exp(v - top)
		z += out[i]
	}
	for i := range out {
		out[i] /= z
	}
	return out
}

// l2Norm returns x / max(‖x‖, eps) (ggml_l2_norm).
func l2Norm(x []float64, eps float64) []float64 {
	scale := 1 / max(math.Sqrt(dot(x, x)), eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * scale
	}
	return y
}

// softplus returns log(1 + e^x), or x above 20 as ggml does.
func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}
