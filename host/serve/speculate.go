package serve

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Speculative sampling: verification against the drafter's own probabilities.
//
// When a draft carries the distributions its tokens were drawn from, a node's children are
// judged by recursive rejection sampling (Leviathan et al. 2023, Chen et al. 2023 for one
// child; for several, the without-replacement form of Jeon et al. 2024): with p the target
// sampler's distribution at the node and q the drafter's, the children — drawn from q without
// replacement, in draft order — are tried in turn. Child x is accepted with probability
// min(1, p(x)/q(x)); if it is refused, p becomes the normalised residual max(0, p − q) and q
// loses x (renormalised), and the next child is tried. If every child is refused, the emitted
// token is drawn from the last residual. The token emitted at each position then follows the
// target sampler's distribution exactly — whatever the drafter — while a good drafter's tokens
// are accepted with probability min(1, p/q) instead of only when the target's own sample
// happens to equal them (sample-and-match). At temperature 0 the rule accepts exactly the
// greedy token. Every uniform draw at a position comes from the sampler's generator for that
// position, so a round is reproducible.

// speculate judges the children of one node: p is the target's distribution, q the drafter's
// (normalised) and children their tokens in draft order (distinct, each with q > 0). It returns
// the index of the accepted child, or −1 and the token to emit instead.
func speculate(p, q Dist, children []int32, r *rand.Rand) (int, int32) {
	accept, res := judge(p, q, children)
	for j, a := range accept {
		if r.Float64() < a {
			return j, children[j]
		}
	}
	return -1, res.sample(r.Float64())
}

// judge is speculate's arithmetic: the probability accept[j] that child j is accepted if it is
// reached (every earlier child refused), and the residual the emitted token is drawn from if
// every child is refused.
func judge(p, q Dist, children []int32) (accept []float64, residual Dist) {
	at := make(map[int32]int, len(p.Tokens))
	for i, t := range p.Tokens {
		at[t] = i
	}
	res := append([]float64(nil), p.Probs...) // the residual, over p's tokens
	qm := make(map[int32]float64, len(q.Tokens))
	for i, t := range q.Tokens {
		qm[t] += q.Probs[i]
	}
	accept = make([]float64, len(children))
	for j, x := range children {
		qx := qm[x]
		var rx float64
		if i, ok := at[x]; ok {
			rx = res[i]
		}
		if qx > 0 {
			accept[j] = min(1, rx/qx)
		}
		// if refused: residual max(0, res − q), renormalised (left as it is if nothing
		// remains, which exact arithmetic allows only where refusal had probability 0)
		next := make([]float64, len(res))
		var sum float64
		for i, t := range p.Tokens {
			next[i] = max(0, res[i]-qm[t])
			sum += next[i]
		}
		if sum > 0 {
			for i := range next {
				next[i] /= sum
			}
			res = next
		}
		// and q without x
		delete(qm, x)
		if rest := 1 - qx; rest > 0 {
			for t := range qm {
				qm[t] /= rest
			}
		}
	}
	return accept, Dist{Tokens: p.Tokens, Probs: res}
}

// normalise checks a drafter distribution and returns it scaled to sum 1: tokens in the
// vocabulary and distinct, probabilities finite and non-negative, summing to more than 0 and
// at most 1 (a truncated distribution is taken as what the drafter sampled from, renormalised).
func (d Dist) normalise(vocab int) (Dist, error) {
	if len(d.Tokens) != len(d.Probs) {
		return Dist{}, fmt.Errorf("%d tokens but %d probabilities", len(d.Tokens), len(d.Probs))
	}
	seen := make(map[int32]bool, len(d.Tokens))
	var sum float64
	for i, t := range d.Tokens {
		if t < 0 || int(t) >= vocab {
			return Dist{}, fmt.Errorf("token %d outside the vocabulary of %d", t, vocab)
		}
		if seen[t] {
			return Dist{}, fmt.Errorf("token %d listed twice", t)
		}
		seen[t] = true
		p := d.Probs[i]
		if !(p >= 0) || math.IsInf(p, 0) {
			return Dist{}, fmt.Errorf("probability %v of token %d", p, t)
		}
		sum += p
	}
	if !(sum > 0) || sum > 1+1e-6 {
		return Dist{}, fmt.Errorf("probabilities sum to %v (want more than 0 and at most 1)", sum)
	}
	out := Dist{Tokens: d.Tokens, Probs: make([]float64, len(d.Probs))}
	for i, p := range d.Probs {
		out.Probs[i] = p / sum
	}
	return out, nil
}

// prob is the probability of token t (0 if it is not listed).
func (d Dist) prob(t int32) float64 {
	for i, u := range d.Tokens {
		if u == t {
			return d.Probs[i]
		}
	}
	return 0
}
