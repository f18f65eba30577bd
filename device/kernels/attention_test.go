package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/kernels"
	"verity/device/num"
)

// The vector widening of 16-bit cache elements gives the portable Go's bits on every 16-bit
// pattern (NaNs as the canonical NaN), at every offset of a vector's tail.
func TestWiden16Exhaustive(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for _, bf := range []bool{false, true} {
		for _, n := range []int{1 << 16, 1<<16 - 3} {
			got, want := make([]float32, n), make([]float32, n)
			kernels.Widen16(got, src[:n], bf, true)
			kernels.Widen16(want, src[:n], bf, false)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("bf16=%v: %#04x widens to %#08x, want %#08x", bf, src[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
				w := num.F16ToF32(src[i])
				if bf {
					w = num.BF16ToF32(src[i])
				}
				if w == w && math.Float32bits(want[i]) != math.Float32bits(w) || w != w && math.Float32bits(want[i]) != num.NaNBits {
					t.Fatalf("bf16=%v: %#04x widens to %#08x, not the exact value %#08x", bf, src[i], math.Float32bits(want[i]), math.Float32bits(w))
				}
			}
		}
	}
}

// A key list of one chunk: the merge of a single partial (m, l, o) is o/l — its weight is
// Exp32(0) = 1 and L = fma(l, 1, +0) = l — and chunks merged with equal maxima add up.
func TestMergeChunks(t *testing.T) {
	if num.Exp32(0) != 1 {
		t.Fatalf("Exp32(0) = %v", num.Exp32(0))
	}
	r := rand.New(rand.NewPCG(7, 8))
	hd := 5
	one := []float32{0.75, 3}
	for d := 0; d < hd; d++ {
		one = append(one, float32(r.NormFloat64()))
	}
	out := make([]float32, hd)
	kernels.MergeChunks(out, one, false)
	for d := range out {
		if want := one[2+d] / one[1]; out[d] != want {
			t.Errorf("one chunk: out[%d] = %v, want %v", d, out[d], want)
		}
	}
	two := append(append([]float32(nil), one...), one...)
	kernels.MergeChunks(out, two, false)
	for d := range out {
		if want := (2 * one[2+d]) / (2 * one[1]); out[d] != want {
			t.Errorf("two equal chunks: out[%d] = %v, want %v", d, out[d], want)
		}
	}
	// a chunk whose maximum is far below the other's weighs nothing
	low := append([]float32{-200, 1}, one[2:]...)
	kernels.MergeChunks(out, append(append([]float32(nil), one...), low...), false)
	for d := range out {
		if want := one[2+d] / one[1]; out[d] != want {
			t.Errorf("a negligible chunk: out[%d] = %v, want %v", d, out[d], want)
		}
	}
}

// The vector merge gives the portable Go's bits: random partials of 1 to 80 chunks, head sizes
// the vector forms take (multiples of 32) and not.
func TestMergeChunksVector(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, hd := range []int{8, 32, 64, 96} {
		for trial := 0; trial < 40; trial++ {
			nc := 1 + r.IntN(80)
			parts := make([]float32, nc*(hd+2))
			for c := 0; c < nc; c++ {
				p := parts[c*(hd+2):]
				p[0], p[1] = float32(r.NormFloat64()*5), float32(1+r.Float64()*60)
				for d := 0; d < hd; d++ {
					p[2+d] = float32(r.NormFloat64() * 10)
				}
			}
			got, want := make([]float32, hd), make([]float32, hd)
			kernels.MergeChunks(got, parts, true)
			kernels.MergeChunks(want, parts, false)
			for d := range got {
				if math.Float32bits(got[d]) != math.Float32bits(want[d]) {
					t.Fatalf("hd %d, %d chunks: out[%d] vector %v, portable %v", hd, nc, d, got[d], want[d])
				}
			}
		}
	}
}

// AttnShared counts the leading whole chunks every group's rows hold with their first row's
// slots, and stops at the first difference (lists built from a history of h slots, then a
// row's own).
func TestAttnShared(t *testing.T) {
	c := kernels.AttnChunk
	hist := func(n int, tail ...int32) []int32 {
		l := make([]int32, n, n+len(tail))
		for j := range l {
			l[j] = int32(j)
		}
		return append(l, tail...)
	}
	differ := func(l []int32, j int) []int32 { l = append([]int32(nil), l...); l[j] = 9999; return l }
	many := make([][]int32, 10) // two groups: the second's rows share less
	for r := range many {
		many[r] = hist(3*c, int32(5000+r))
	}
	many[9] = differ(many[9], c+1)
	for _, tc := range []struct {
		name   string
		lists  [][]int32
		window int
		want   int
	}{
		{"one row", [][]int32{hist(2*c + 5)}, 0, 2},
		{"one row, one short chunk", [][]int32{hist(c - 1)}, 0, 0},
		{"a tree over a history of 2 chunks and 5", [][]int32{hist(2*c+5, 900), hist(2*c+5, 900, 901), hist(2*c+5, 900, 902)}, 0, 2},
		{"a history of exactly 2 chunks", [][]int32{hist(2*c, 900), hist(2*c, 900, 901)}, 0, 2},
		{"a row shorter than the others", [][]int32{hist(3 * c), hist(c + 3)}, 0, 1},
		{"a difference in chunk 1", [][]int32{hist(3 * c), differ(hist(3*c), c+7)}, 0, 1},
		{"a difference in chunk 0", [][]int32{hist(3 * c), differ(hist(3*c), 0)}, 0, 0},
		{"the second group shares less", many, 0, 1},
		{"prefill: rows of growing prefixes", [][]int32{hist(1), hist(2), hist(3)}, 0, 0},
		{"windows that start at different slots", [][]int32{hist(3*c, 900), hist(3*c, 900, 901)}, 2 * c, 0},
		{"windows longer than the lists", [][]int32{hist(2*c, 900), hist(2*c, 900, 901)}, 4 * c, 2},
		{"no rows", nil, 0, 0},
	} {
		if got := kernels.AttnShared(tc.lists, tc.window); got != tc.want {
			t.Errorf("%s: %d shared chunks, want %d", tc.name, got, tc.want)
		}
	}
}
