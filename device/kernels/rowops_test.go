package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/kernels"
)

// rmsnorm's vector sum of squares gives the portable Go scale's bits: widths around the
// 32-value blocks, values by floatRow's modes (normal; spread magnitudes, overflowing squares
// and subnormals; finite specials; one ±Inf or NaN).
func TestRMSScaleMatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for trial := 0; trial < 4000; trial++ {
		n := 1 + r.IntN(300)
		if trial%5 == 0 {
			n = 32 * (1 + r.IntN(64))
		}
		x := floatValues(r, n, trial%4)
		eps := float32(1e-5)
		got, want := kernels.RMSScale(x, eps, true), kernels.RMSScale(x, eps, false)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("trial %d (%d values, mode %d): %v (%#08x), portable %v (%#08x)", trial, n, trial%4, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// rmsnorm's row with its vector forms gives the portable Go bits, weights and values by
// floatRow's modes.
func TestRMSNormRowMatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(57, 58))
	for trial := 0; trial < 3000; trial++ {
		n := 1 + r.IntN(300)
		x, w := floatValues(r, n, trial%4), floatValues(r, n, (trial/4)%4)
		got, want := make([]float32, n), make([]float32, n)
		kernels.RMSNormRow(got, x, w, 1e-5, true)
		kernels.RMSNormRow(want, x, w, 1e-5, false)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("trial %d (%d values): value %d is %v (%#08x), portable %v (%#08x)", trial, n, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
}

// The q8_K conversion's vector form gives the portable Go bytes: values by floatRow's modes,
// ties for the largest magnitude of either sign, all-zero and all-NaN blocks, an infinite
// largest value.
func TestQ8KBlockMatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	for trial := 0; trial < 6000; trial++ {
		x := floatValues(r, 256, trial%4)
		switch trial % 7 {
		case 1: // ties: the largest magnitude with both signs, the first one wins
			m := float32(r.NormFloat64() * 4)
			x[r.IntN(256)], x[r.IntN(256)] = m*8, -m*8
		case 2:
			clear(x)
			if trial%2 == 0 {
				x[r.IntN(256)] = float32(math.NaN())
			}
		case 3:
			for i := range x {
				x[i] = float32(math.NaN())
			}
		case 4:
			x[r.IntN(256)] = float32(math.Inf(1 - 2*r.IntN(2)))
		case 5: // small integers: many exact halves and ties in the rounding
			for i := range x {
				x[i] = float32(r.IntN(255)-127) / 2
			}
		}
		got, want := make([]byte, 292), make([]byte, 292)
		for i := range got {
			got[i], want[i] = 0xaa, 0x55
		}
		kernels.Q8KBlock(got, x, true)
		kernels.Q8KBlock(want, x, false)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("trial %d (mode %d, case %d): byte %d is %#02x, portable %#02x", trial, trial%4, trial%7, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkRowOps: the q8_K conversion of an 8192-value row and the rmsnorm scale of a
// 2048-value one, vector forms against portable Go.
func BenchmarkRowOps(b *testing.B) {
	r := rand.New(rand.NewPCG(55, 56))
	x := floatValues(r, 8192, 0)
	dst := make([]byte, 32*292)
	for _, vector := range []bool{false, true} {
		b.Run(fmt.Sprintf("q8_K/8192/vector=%v", vector), func(b *testing.B) {
			for b.Loop() {
				for k := 0; k < 32; k++ {
					kernels.Q8KBlock(dst[292*k:292*k+292], x[256*k:256*k+256], vector)
				}
			}
		})
		b.Run(fmt.Sprintf("rmsscale/2048/vector=%v", vector), func(b *testing.B) {
			for b.Loop() {
				kernels.RMSScale(x[:2048], 1e-5, vector)
			}
		})
	}
}
