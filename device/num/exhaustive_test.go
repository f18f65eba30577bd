//go:build exhaustive

package num

import (
	"math"
	"runtime"
	"sync"
	"testing"
)

// forAllFloat32 calls fn for every float32 bit pattern, split over GOMAXPROCS workers; worker w
// gets a contiguous share of the 2^32 patterns.
func forAllFloat32(fn func(worker int, lo, hi uint64)) int {
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	const total = uint64(1) << 32
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w, total*uint64(w)/uint64(workers), total*uint64(w+1)/uint64(workers))
		}()
	}
	wg.Wait()
	return workers
}

// TestUnaryExhaustive measures every software routine on all 2^32 inputs against its float64
// reference (build tag exhaustive: go test -tags exhaustive -run Exhaustive -timeout 2h).
func TestUnaryExhaustive(t *testing.T) {
	for i := range unaryCases {
		c := &unaryCases[i]
		t.Run(c.name, func(t *testing.T) {
			stats := make([]errStats, runtime.GOMAXPROCS(0))
			msgs := make([]string, len(stats))
			forAllFloat32(func(w int, lo, hi uint64) {
				for u := lo; u < hi; u++ {
					if m := stats[w].add(c, math.Float32frombits(uint32(u))); m != "" && msgs[w] == "" {
						msgs[w] = m
					}
				}
			})
			var s errStats
			for w := range stats {
				if msgs[w] != "" {
					t.Error(msgs[w])
				}
				s.merge(&stats[w])
			}
			s.check(t, c)
		})
	}
}

// TestSqrt32Exhaustive checks Sqrt32 on every input: correctly rounded, or the canonical NaN.
func TestSqrt32Exhaustive(t *testing.T) {
	bad := make([]string, runtime.GOMAXPROCS(0))
	forAllFloat32(func(w int, lo, hi uint64) {
		for u := lo; u < hi && bad[w] == ""; u++ {
			bad[w] = sqrtCheck(math.Float32frombits(uint32(u)))
		}
	})
	for _, m := range bad {
		if m != "" {
			t.Error(m)
		}
	}
}
