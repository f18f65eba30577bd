package serve

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"verity/device/kernels"
)

// Sampler chooses the target model's token at each position. With Temperature 0 it is greedy
// (the largest logit, the lowest index on ties). Otherwise it samples from the softmax of the
// logits divided by Temperature, restricted to the TopK most likely tokens (0: all) and then to
// the smallest set whose probability reaches TopP (0 or 1: all), using a random number drawn
// from a generator seeded by (Seed, position): the choice at a position depends only on that
// position's logits, never on how the positions were batched or drafted. That is what makes
// target-sample-and-match verification lossless — a verified session emits exactly the tokens
// plain decoding with the same sampler would. NaN logits are never chosen; a +Inf logit is
// chosen over every finite one.
type Sampler struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	Seed        uint64  `json:"seed"`
	// TopLogprobs asks each Token for the log-probabilities of this many of the most likely
	// tokens at its position (0 … MaxTopLogprobs). It reports; it never changes a choice.
	TopLogprobs int `json:"top_logprobs,omitempty"`
	// JSON restricts the tokens to those that continue a JSON object, then to end-of-generation
	// tokens once it is closed (jsonmode.go; the service's tokenizer gives the tokens' text).
	// The log-probabilities are then those of the restricted distribution.
	JSON bool `json:"json,omitempty"`
}

// MaxTopLogprobs bounds Sampler.TopLogprobs.
const MaxTopLogprobs = 20

// Check reports a sampler setting outside its range.
func (s Sampler) Check() error {
	switch {
	case !(s.Temperature >= 0) || math.IsInf(s.Temperature, 0):
		return fmt.Errorf("temperature %v: want a finite value ≥ 0", s.Temperature)
	case s.TopK < 0:
		return fmt.Errorf("top_k %d: want ≥ 0", s.TopK)
	case !(s.TopP >= 0 && s.TopP <= 1):
		return fmt.Errorf("top_p %v: want 0 … 1", s.TopP)
	case s.TopLogprobs < 0 || s.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("top_logprobs %d: want 0 … %d", s.TopLogprobs, MaxTopLogprobs)
	}
	return nil
}

// Choose returns the token at position pos given the logits that predict it.
func (s Sampler) Choose(logits []float32, pos int) int32 {
	d := s.Dist(logits)
	if len(d.Tokens) == 1 {
		return d.Tokens[0]
	}
	return d.sample(s.rng(pos).Float64())
}

// rng is Choose's generator at position pos.
func (s Sampler) rng(pos int) *rand.Rand { return rand.New(rand.NewPCG(s.Seed, uint64(pos))) }

// acceptRNG is speculative sampling's generator at position pos: a stream apart from Choose's.
func (s Sampler) acceptRNG(pos int) *rand.Rand {
	return rand.New(rand.NewPCG(s.Seed^0x9e3779b97f4a7c15, uint64(pos)))
}

// Dist is a sparse distribution over tokens: Probs[i] is the probability of Tokens[i].
type Dist struct {
	Tokens []int32   `json:"tokens"`
	Probs  []float64 `json:"probs"`
}

// Dist returns the distribution Choose samples from: one token with probability 1 when
// greedy (temperature 0, or a +Inf or NaN largest logit), else the tempered softmax over the
// top-k / top-p candidates, in decreasing logit order where an order matters (top-k, top-p),
// else in index order; NaN logits are never candidates.
func (s Sampler) Dist(logits []float32) Dist {
	best := int32(kernels.ArgmaxRow(logits))
	top := float64(logits[best])
	if s.Temperature == 0 || math.IsInf(top, 1) || top != top {
		return Dist{Tokens: []int32{best}, Probs: []float64{1}}
	}
	var idx []int32
	switch {
	case s.TopK > 0 && s.TopK < len(logits):
		idx = topK(logits, s.TopK)
	case s.TopP > 0 && s.TopP < 1:
		idx = make([]int32, 0, len(logits))
		for i, x := range logits {
			if x == x {
				idx = append(idx, int32(i))
			}
		}
		slices.SortFunc(idx, func(a, b int32) int { return order(logits, a, b) })
	default:
		idx = make([]int32, 0, len(logits))
		for i, x := range logits {
			if x == x {
				idx = append(idx, int32(i))
			}
		}
	}
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
	for i := range p {
		p[i] /= sum
	}
	return Dist{Tokens: idx, Probs: p}
}

// sample returns the token at which the cumulative probability passes u ∈ [0, 1); if rounding
// leaves u past the end, the last token with any probability.
func (d Dist) sample(u float64) int32 {
	last := d.Tokens[0]
	for i, v := range d.Probs {
		if v > 0 {
			last = d.Tokens[i]
		}
		if u < v {
			return d.Tokens[i]
		}
		u -= v
	}
	return last
}

// order sorts token indices by logit, larger first, the lower index on ties (NaN last).
func order(logits []float32, a, b int32) int {
	x, y := logits[a], logits[b]
	switch {
	case x == y || (x != x && y != y):
		return int(a) - int(b)
	case y != y || x > y:
		return -1
	}
	return 1
}

// topK returns the k tokens with the largest logits, in order (ties to the lower index), NaN
// excluded: a bounded min-heap over one pass, O(n log k).
func topK(logits []float32, k int) []int32 {
	h := &minHeap{logits: logits}
	for i, x := range logits {
		if x != x {
			continue
		}
		if h.Len() < k {
			heap.Push(h, int32(i))
		} else if order(logits, int32(i), h.idx[0]) < 0 {
			h.idx[0] = int32(i)
			heap.Fix(h, 0)
		}
	}
	out := h.idx
	slices.SortFunc(out, func(a, b int32) int { return order(logits, a, b) })
	return out
}

// minHeap keeps the k best candidates with the worst on top.
type minHeap struct {
	logits []float32
	idx    []int32
}

func (h *minHeap) Len() int           { return len(h.idx) }
func (h *minHeap) Less(i, j int) bool { return order(h.logits, h.idx[i], h.idx[j]) > 0 }
func (h *minHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *minHeap) Push(x any)         { h.idx = append(h.idx, x.(int32)) }
func (h *minHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// logNorm returns the largest logit m and log Σ exp(logit − m) over the logits that are not
// NaN, in float64: a token's log-probability (log softmax of the untempered logits) is
// logit − m − lse, and a NaN logit's is NaN.
func logNorm(logits []float32) (m, lse float64) {
	m = math.Inf(-1)
	for _, x := range logits {
		if f := float64(x); f > m {
			m = f
		}
	}
	var sum float64
	for _, x := range logits {
		if x == x {
			sum += math.Exp(float64(x) - m)
		}
	}
	return m, math.Log(sum)
}

// token is tok chosen after logits, with its log-probability and, if the sampler asks, the
// TopLogprobs most likely tokens' (largest logit first, the lower index on ties; tokens with
// a −Inf logit, which have no probability, are left out).
func (s Sampler) token(logits []float32, tok int32) Token {
	m, lse := logNorm(logits)
	t := Token{ID: tok, Logprob: float64(logits[tok]) - m - lse}
	if s.TopLogprobs > 0 {
		for _, id := range topK(logits, min(s.TopLogprobs, len(logits))) {
			if math.IsInf(float64(logits[id]), -1) {
				break // no probability (a token JSON mode rules out), nor any after it
			}
			t.Top = append(t.Top, TopLogprob{ID: id, Logprob: float64(logits[id]) - m - lse})
		}
	}
	return t
}

// finite is a float64 that JSON writes as null when it is NaN or ±Inf (which JSON cannot
// carry): the log-probability of a token after non-finite logits.
type finite float64

func (f finite) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

func (f *finite) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = finite(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(f))
}

// MarshalJSON writes a non-finite log-probability (from non-finite logits) as null.
func (t Token) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID      int32        `json:"id"`
		Logprob finite       `json:"logprob"`
		Top     []TopLogprob `json:"top_logprobs,omitempty"`
	}{t.ID, finite(t.Logprob), t.Top})
}

// MarshalJSON writes a non-finite log-probability as null.
func (t TopLogprob) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID      int32  `json:"id"`
		Logprob finite `json:"logprob"`
	}{t.ID, finite(t.Logprob)})
}
