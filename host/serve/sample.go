package serve

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"verity/device/kernels"
)

// Sampler chooses the target model's token at each position. With Temperature 0 it is greedy
// (the largest logit, the lowest index on ties). Otherwise it samples from the softmax of the
// logits divided by Temperature, restricted to the TopK most likely tokens (0: all) and then to
// the smallest set whose probability reaches TopP (0 or 1: all), using a random number drawn
// from a generator seeded by (Seed, position): the choice at a position depends only on that
// position's logits, never on how the positions were batched or drafted. That is what makes
// target-sample-and-match verification lossless — a verified session emits exactly the tokens
// plain decoding with the same sampler would.
type Sampler struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	Seed        uint64  `json:"seed"`
}

// check reports a sampler setting outside its range.
func (s Sampler) check() error {
	switch {
	case !(s.Temperature >= 0) || math.IsInf(s.Temperature, 0):
		return fmt.Errorf("temperature %v: want a finite value ≥ 0", s.Temperature)
	case s.TopK < 0:
		return fmt.Errorf("top_k %d: want ≥ 0", s.TopK)
	case !(s.TopP >= 0 && s.TopP <= 1):
		return fmt.Errorf("top_p %v: want 0 … 1", s.TopP)
	}
	return nil
}

// Choose returns the token at position pos given the logits that predict it.
func (s Sampler) Choose(logits []float32, pos int) int32 {
	if s.Temperature == 0 {
		return int32(kernels.ArgmaxRow(logits))
	}
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	// by logit, descending; ties to the lower index (NaN last)
	sort.SliceStable(idx, func(a, b int) bool { return above(logits[idx[a]], logits[idx[b]]) })
	if s.TopK > 0 && s.TopK < len(idx) {
		idx = idx[:s.TopK]
	}
	top := float64(logits[idx[0]])
	p := make([]float64, len(idx))
	var sum float64
	for i, j := range idx {
		p[i] = math.Exp((float64(logits[j]) - top) / s.Temperature)
		sum += p[i]
	}
	if s.TopP > 0 && s.TopP < 1 {
		var acc float64
		for i := range p {
			acc += p[i] / sum
			if acc >= s.TopP {
				p, idx = p[:i+1], idx[:i+1]
				break
			}
		}
		sum = 0
		for _, v := range p {
			sum += v
		}
	}
	u := rand.New(rand.NewPCG(s.Seed, uint64(pos))).Float64() * sum
	for i, v := range p {
		if u < v {
			return int32(idx[i])
		}
		u -= v
	}
	return int32(idx[len(idx)-1])
}

// above orders logits for sampling: larger first, a number before NaN.
func above(a, b float32) bool {
	if a != a {
		return false
	}
	return b != b || a > b
}

// logprob is log softmax(logits)[tok], computed in float64.
func logprob(logits []float32, tok int32) float64 {
	m := math.Inf(-1)
	for _, x := range logits {
		if f := float64(x); f > m {
			m = f
		}
	}
	var sum float64
	for _, x := range logits {
		sum += math.Exp(float64(x) - m)
	}
	return float64(logits[tok]) - m - math.Log(sum)
}
