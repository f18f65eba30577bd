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

// TestVectorExp32Exhaustive: the vector Exp32 against num.Exp32 on all 2^32 inputs
// (go test -tags exhaustive -run Exhaustive -timeout 1h ./device/kernels).
func TestVectorExp32Exhaustive(t *testing.T) {
	if n := kernels.ExpShift(make([]float32, 8), 0); n == 0 {
		t.Skip("no vector forms on this CPU")
	}
	workers := runtime.GOMAXPROCS(0)
	const total = uint64(1) << 32
	var wg sync.WaitGroup
	bad := make([]string, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xs, e := make([]float32, 4096), make([]float32, 4096)
			for u := total * uint64(w) / uint64(workers); u < total*uint64(w+1)/uint64(workers) && bad[w] == ""; u += 4096 {
				for i := range xs {
					xs[i] = math.Float32frombits(uint32(u + uint64(i)))
				}
				copy(e, xs)
				kernels.ExpShift(e, 0)
				for i, x := range xs {
					if want := num.Exp32(x); math.Float32bits(e[i]) != math.Float32bits(want) {
						bad[w] = fmt.Sprintf("Exp32(%v) = %#08x, want %#08x", x, math.Float32bits(e[i]), math.Float32bits(want))
						break
					}
				}
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

// TestVectorSwiGLUExhaustive: SwiGLU's vector form against the portable Go on every float32
// gate value, with up-projection 1.
func TestVectorSwiGLUExhaustive(t *testing.T) {
	workers := runtime.GOMAXPROCS(0)
	const total = uint64(1) << 32
	var wg sync.WaitGroup
	bad := make([]string, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := make([]float32, 4096), make([]float32, 4096)
			got, want := make([]float32, 4096), make([]float32, 4096)
			for i := range b {
				b[i] = 1
			}
			for u := total * uint64(w) / uint64(workers); u < total*uint64(w+1)/uint64(workers) && bad[w] == ""; u += 4096 {
				for i := range a {
					a[i] = math.Float32frombits(uint32(u + uint64(i)))
				}
				kernels.SwiGLURow(got, a, b, true)
				kernels.SwiGLURow(want, a, b, false)
				for i := range a {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						bad[w] = fmt.Sprintf("SiLU(%v) = %#08x, want %#08x", a[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
						break
					}
				}
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
