package split

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// layerCost is a cost function from per-layer bytes, a first-stage extra (embedding) and a
// last-stage extra (head).
func layerCost(layers []int64, first, last int64) func(k, lo, hi int) int64 {
	return func(k, lo, hi int) int64 {
		var c int64
		for _, b := range layers[lo:hi] {
			c += b
		}
		if lo == 0 {
			c += first
		}
		if hi == len(layers) {
			c += last
		}
		return c
	}
}

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		name   string
		layers []int64
		first  int64
		last   int64
		memory []int64
		want   []int
		err    error
	}{
		{"one device", []int64{5, 5, 5}, 1, 1, []int64{100}, []int{}, nil},
		{"even split", []int64{10, 10, 10, 10}, 0, 0, []int64{100, 100}, []int{2}, nil},
		{"head on the last device", []int64{10, 10, 10, 10}, 0, 20, []int64{100, 100}, []int{3}, nil},
		{"embedding on the first", []int64{10, 10, 10, 10}, 20, 0, []int64{100, 100}, []int{1}, nil},
		{"proportional to memory", []int64{10, 10, 10, 10, 10, 10}, 0, 0, []int64{200, 100}, []int{4}, nil},
		{"three devices", []int64{1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, 0, []int64{10, 10, 10}, []int{3, 6}, nil},
		{"ties start early", []int64{10, 10, 10}, 0, 0, []int64{100, 100}, []int{1}, nil},
		{"does not fit", []int64{60, 60, 60}, 0, 0, []int64{100, 100}, nil, ErrNoFit},
		{"fits only one way", []int64{90, 10, 10, 90}, 0, 0, []int64{100, 120}, []int{1}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Plan(len(c.layers), c.memory, layerCost(c.layers, c.first, c.last))
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if c.err == nil && !slices.Equal(got, c.want) {
				t.Errorf("cuts = %v, want %v", got, c.want)
			}
		})
	}
	for _, c := range []struct {
		n      int
		memory []int64
	}{{2, []int64{10, 10, 10}}, {3, nil}, {3, []int64{10, 0}}} {
		if _, err := Plan(c.n, c.memory, layerCost(make([]int64, c.n), 0, 0)); err == nil {
			t.Errorf("Plan(%d, %v): no error", c.n, c.memory)
		}
	}
}

// Plan's answer is as good as the best of every placement, on random instances.
func TestPlanIsOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		n, d := 1+r.IntN(9), 1+r.IntN(4)
		if n < d {
			continue
		}
		layers := make([]int64, n)
		for i := range layers {
			layers[i] = 1 + r.Int64N(50)
		}
		memory := make([]int64, d)
		for k := range memory {
			memory[k] = 30 + r.Int64N(200)
		}
		cost := layerCost(layers, r.Int64N(30), r.Int64N(30))
		score := func(cuts []int) float64 {
			b := append(append([]int{0}, cuts...), n)
			worst := 0.0
			for k := 0; k < d; k++ {
				c := cost(k, b[k], b[k+1])
				if c > memory[k] {
					return 1e18
				}
				worst = max(worst, float64(c)/float64(memory[k]))
			}
			return worst
		}
		bestScore := 1e18
		var each func(cuts []int, next int)
		each = func(cuts []int, next int) {
			if len(cuts) == d-1 {
				bestScore = min(bestScore, score(cuts))
				return
			}
			for c := next; c <= n-(d-1-len(cuts)); c++ {
				each(append(cuts, c), c+1)
			}
		}
		each(nil, 1)
		got, err := Plan(n, memory, cost)
		if bestScore == 1e18 {
			if !errors.Is(err, ErrNoFit) {
				t.Fatalf("trial %d: no placement fits, Plan gave %v, %v", trial, got, err)
			}
			continue
		}
		if err != nil || score(got) != bestScore {
			t.Fatalf("trial %d: Plan = %v (score %v, err %v), best score %v", trial, got, score(got), err, bestScore)
		}
	}
}
