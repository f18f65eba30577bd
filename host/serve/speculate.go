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
// greedy token. The uniform draws at a position come from a generator seeded by the
// session's seed and the position — a stream of its own, apart from the one Choose samples
// with — so a round is reproducible. The drafter's own draws must be independent of them: a
// drafter that samples with the target's seed correlates its tokens with the acceptance
// draws, and the emitted tokens are then no longer the target's distribution.

// speculate judges the children of one node: p is the target's distribution, q the drafter's
// (normalised) and children their tokens in draft order (distinct, each with q > 0). It returns
// the index of the accepted child, or −1 and the token to emit instead.
func speculate(p, q Dist, children []int32, r *rand.Rand) (int, int32) {
	j := newJudgement(p, q)
	for i, x := range children {
		if r.Float64() < j.accept(x) {
			return i, x
		}
		j.refuse(x)
	}
	return -1, j.residual().sample(r.Float64())
}

// judgement is the state of speculative sampling at one node: the residual target
// distribution and the drafter's distribution over the children not yet tried, dense over
// token ids (built on the first refusal; until then the residual is p and q the drafter's).
type judgement struct {
	p, q Dist
	res  []float64 // the residual, by token id; nil while it is p
	qd   []float64 // q over the untried tokens, by token id; nil while it is q
}

func newJudgement(p, q Dist) *judgement { return &judgement{p: p, q: q} }

// accept is the probability of accepting child x now: min(1, res(x)/q(x)).
func (j *judgement) accept(x int32) float64 {
	var rx, qx float64
	if j.res == nil {
		rx, qx = j.p.prob(x), j.q.prob(x)
	} else if int(x) < len(j.res) {
		rx, qx = j.res[x], j.qd[x]
	}
	if qx <= 0 {
		return 0
	}
	return min(1, rx/qx)
}

// refuse updates the state after child x is refused: the residual becomes max(0, res − q),
// renormalised, and q loses x, renormalised. A residual with nothing left (which exact
// arithmetic allows only where refusal had probability 0) keeps its other tokens.
func (j *judgement) refuse(x int32) {
	if j.res == nil {
		n := int32(0)
		for _, t := range j.p.Tokens {
			n = max(n, t+1)
		}
		for _, t := range j.q.Tokens {
			n = max(n, t+1)
		}
		j.res, j.qd = make([]float64, n), make([]float64, n)
		for i, t := range j.p.Tokens {
			j.res[t] = j.p.Probs[i]
		}
		for i, t := range j.q.Tokens {
			j.qd[t] += j.q.Probs[i]
		}
	}
	next := make([]float64, len(j.res))
	var sum float64
	for _, t := range j.p.Tokens { // the residual's support is within p's
		next[t] = max(0, j.res[t]-j.qd[t])
		sum += next[t]
	}
	if sum > 0 {
		for _, t := range j.p.Tokens {
			next[t] /= sum
		}
		j.res = next
	} else if int(x) < len(j.res) && j.res[x] < 1 {
		rest := 1 - j.res[x]
		j.res[x] = 0
		for _, t := range j.p.Tokens {
			j.res[t] /= rest
		}
	}
	qx := j.qd[x]
	j.qd[x] = 0
	if rest := 1 - qx; rest > 0 {
		for i := range j.qd {
			j.qd[i] /= rest
		}
	}
}

// residual is the distribution the emitted token is drawn from after every child is
// refused, over p's tokens in p's order.
func (j *judgement) residual() Dist {
	if j.res == nil {
		return j.p
	}
	d := Dist{Tokens: j.p.Tokens, Probs: make([]float64, len(j.p.Tokens))}
	for i, t := range j.p.Tokens {
		d.Probs[i] = j.res[t]
	}
	return d
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
