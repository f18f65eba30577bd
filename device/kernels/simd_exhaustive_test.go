//go:build exhaustive

package kernels_test

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

	"verity/device/kernels"
	"verity/device/num"
)

// forAllFloat32Batches calls check with every float32 bit pattern, 4096 at a time in order,
// split over GOMAXPROCS workers; check returns ""
// or what went wrong, and a worker stops at its first failure.
func forAllFloat32Batches(t *testing.T, check func(xs []float32) string) {
	workers := runtime.GOMAXPROCS(0)
	const total, batch = uint64(1) << 32, 4096
	var wg sync.WaitGroup
	bad := make([]string, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs := make([]float32, batch)
			for u := total * uint64(w) / uint64(workers); u < total*uint64(w+1)/uint64(workers) && bad[w] == ""; u += batch {
				for i := range xs {
					xs[i] = math.Float32frombits(uint32(u + uint64(i)))
				}
				bad[w] = check(xs)
			}
		}()
	}
	wg.Wait()
	for _, b := range bad {
		if b != "" {
			t.Error(b)
		}
	}
}

// TestVectorExp32Exhaustive: the vector Exp32 against num.Exp32 on all 2^32 inputs
// (go test -tags exhaustive -run Exhaustive -timeout 1h ./device/kernels).
func TestVectorExp32Exhaustive(t *testing.T) {
	if n := kernels.ExpShift(make([]float32, 8), 0); n == 0 {
		t.Skip("no vector forms on this CPU")
	}
	forAllFloat32Batches(t, func(xs []float32) string {
		e := append([]float32(nil), xs...)
		kernels.ExpShift(e, 0)
		for i, x := range xs {
			if want := num.Exp32(x); math.Float32bits(e[i]) != math.Float32bits(want) {
				return fmt.Sprintf("Exp32(%v) = %#08x, want %#08x", x, math.Float32bits(e[i]), math.Float32bits(want))
			}
		}
		return ""
	})
}

// TestVectorSwiGLUExhaustive: SwiGLU's vector form against the portable Go on every float32
// gate value, with up-projection 1.
func TestVectorSwiGLUExhaustive(t *testing.T) {
	ones := make([]float32, 4096)
	for i := range ones {
		ones[i] = 1
	}
	forAllFloat32Batches(t, func(a []float32) string {
		got, want := make([]float32, len(a)), make([]float32, len(a))
		kernels.SwiGLURow(got, a, ones, true)
		kernels.SwiGLURow(want, a, ones, false)
		for i := range a {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				return fmt.Sprintf("SiLU(%v) = %#08x, want %#08x", a[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
		return ""
	})
}
