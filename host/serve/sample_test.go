package serve

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// topK gives the first k of a full sort (larger first, lower index on ties, NaN excluded).
func TestTopKMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(300)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.IntN(20)) // many ties
			if r.IntN(30) == 0 {
				logits[i] = float32(math.NaN())
			}
		}
		var all []int32
		for i, x := range logits {
			if x == x {
				all = append(all, int32(i))
			}
		}
		slices.SortFunc(all, func(a, b int32) int { return order(logits, a, b) })
		k := 1 + r.IntN(n)
		want := all[:min(k, len(all))]
		if got := topK(logits, k); !slices.Equal(got, want) {
			t.Fatalf("n=%d k=%d: topK %v, sorted %v", n, k, got, want)
		}
	}
}

// Samples never pick a NaN logit, follow the softmax, and depend only on (seed, position).
func TestChoose(t *testing.T) {
	logits := []float32{1, float32(math.NaN()), 2, 0, float32(math.NaN())}
	counts := make([]int, len(logits))
	s := Sampler{Temperature: 1, Seed: 3}
	const draws = 20000
	for pos := 0; pos < draws; pos++ {
		counts[s.Choose(logits, pos)]++
	}
	if counts[1] != 0 || counts[4] != 0 {
		t.Fatalf("NaN tokens chosen: %v", counts)
	}
	z := math.Exp(1) + math.Exp(2) + 1
	for _, i := range []int{0, 2, 3} {
		want := math.Exp(float64(logits[i])) / z
		if got := float64(counts[i]) / draws; math.Abs(got-want) > 0.015 {
			t.Errorf("token %d chosen %.3f of the time, softmax %.3f", i, got, want)
		}
	}
	for pos := 0; pos < 50; pos++ {
		if a, b := s.Choose(logits, pos), s.Choose(logits, pos); a != b {
			t.Fatal("the same (seed, position) chose differently")
		}
	}
	if got := (Sampler{Temperature: 1, TopK: 1}).Choose(logits, 7); got != 2 {
		t.Errorf("top-1 chose %d", got)
	}
	if got := (Sampler{Temperature: 1}).Choose([]float32{0, float32(math.Inf(1)), 5}, 7); got != 1 {
		t.Errorf("with a +Inf logit chose %d", got)
	}
	if got := (Sampler{Temperature: 1, TopP: 0.5}).Choose([]float32{0, 3, 1}, 7); got != 1 {
		t.Errorf("top-p 0.5 over a dominant token chose %d", got)
	}
}

// A token's top log-probabilities are the log-softmax of the untempered logits (float64, from
// a full sort) of the most likely tokens, whatever the sampler's temperature and truncation.
func TestTopLogprobs(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for trial := 0; trial < 100; trial++ {
		n := 1 + r.IntN(200)
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 4)
			if r.IntN(40) == 0 {
				logits[i] = float32(math.NaN())
			}
		}
		s := Sampler{Temperature: r.Float64() * 2, TopK: r.IntN(5), TopP: r.Float64(), TopLogprobs: r.IntN(MaxTopLogprobs + 1)}
		var z float64
		var all []int32
		for i, x := range logits {
			if x == x {
				z += math.Exp(float64(x))
				all = append(all, int32(i))
			}
		}
		slices.SortFunc(all, func(a, b int32) int { return order(logits, a, b) })
		tok := int32(r.IntN(n))
		got := s.token(logits, tok)
		if want := float64(logits[tok]) - math.Log(z); got.ID != tok || !(math.Abs(got.Logprob-want) < 1e-9 || math.IsNaN(want) && math.IsNaN(got.Logprob)) {
			t.Fatalf("trial %d: token %+v, want logprob %v", trial, got, want)
		}
		if len(got.Top) != min(s.TopLogprobs, len(all)) {
			t.Fatalf("trial %d: %d top logprobs, want %d", trial, len(got.Top), min(s.TopLogprobs, len(all)))
		}
		for i, tl := range got.Top {
			if want := float64(logits[all[i]]) - math.Log(z); tl.ID != all[i] || math.Abs(tl.Logprob-want) > 1e-9 {
				t.Fatalf("trial %d: top %d is %+v, want %d with %v", trial, i, tl, all[i], want)
			}
		}
	}
	if err := (Sampler{TopLogprobs: MaxTopLogprobs + 1}).Check(); err == nil {
		t.Error("top_logprobs above the limit accepted")
	}
}
