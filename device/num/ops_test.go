package num

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sqrtCheck returns a message if Sqrt32(x) is wrong: NaN (canonical) for NaN and negative x,
// ±0 and +Inf unchanged, and otherwise the float32 s with (s⁻+s)/2 < √x < (s+s⁺)/2, where s⁻ and
// s⁺ are s's neighbours; the squares of these 25-bit midpoints are exact in float64.
func sqrtCheck(x float32) string {
	s := Sqrt32(x)
	switch {
	case x != x || x < 0:
		if math.Float32bits(s) != NaNBits {
			return "Sqrt32(" + bitsOf(x) + ") = " + bitsOf(s) + ", want the canonical NaN"
		}
		return ""
	case x == 0 || math.IsInf(float64(x), 1):
		if math.Float32bits(s) != math.Float32bits(x) {
			return "Sqrt32(" + bitsOf(x) + ") = " + bitsOf(s)
		}
		return ""
	}
	lo := (float64(s) + float64(math.Nextafter32(s, 0))) / 2
	hi := (float64(s) + float64(math.Nextafter32(s, float32(math.Inf(1))))) / 2
	if !(lo*lo < float64(x) && float64(x) < hi*hi) {
		return "Sqrt32(" + bitsOf(x) + ") = " + bitsOf(s) + " is not correctly rounded"
	}
	return ""
}

func TestSqrt32(t *testing.T) {
	edges := []float32{0, float32(math.Copysign(0, -1)), 0x1p-149, 0x1p-148, 0x1.fffffcp-127, 0x1p-126, 1,
		2, 4, 0.25, 3, math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), -1, -0x1p-149,
		NaN32(), math.Float32frombits(0x7fc00005)}
	for _, x := range edges {
		if m := sqrtCheck(x); m != "" {
			t.Error(m)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1_000_000 {
		if m := sqrtCheck(math.Float32frombits(r.Uint32())); m != "" {
			t.Fatal(m)
		}
	}
}

func TestRsqrt32(t *testing.T) {
	tests := []struct {
		x    float32
		want uint32
	}{
		{0, 0x7f800000},
		{float32(math.Copysign(0, -1)), 0xff800000},
		{float32(math.Inf(1)), 0},
		{4, 0x3f000000},
		{0x1p-148, 0x64800000},        // 2^74
		{2, 0x3f3504f3},               // 1/1.4142135 rounded: 0.70710677
		{-1, NaNBits},                 // negative
		{NaN32(), NaNBits},            // NaN
		{math.MaxFloat32, 0x1f800001}, // 1/RN(√MaxFloat32) = 2^-64·(1 + 2^-24 + …), rounds up
	}
	for _, tt := range tests {
		if got := Rsqrt32(tt.x); math.Float32bits(got) != tt.want {
			t.Errorf("Rsqrt32(%s) = %s, want %#08x", bitsOf(tt.x), bitsOf(got), tt.want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 100_000 {
		x := math.Float32frombits(r.Uint32() &^ (1 << 31))
		if x != x {
			continue
		}
		if got, want := Rsqrt32(x), 1/Sqrt32(x); !sameBits(got, want) {
			t.Fatalf("Rsqrt32(%s) = %s, want 1/Sqrt32 = %s", bitsOf(x), bitsOf(got), bitsOf(want))
		}
	}
}

// maxSpec is PTX max.f32's semantics as the ISA writes them: NaN rules first, then (x > y) ? x : y
// with +0 > -0.
func maxSpec(x, y float32) float32 {
	switch {
	case x != x && y != y:
		return NaN32()
	case x != x:
		return y
	case y != y:
		return x
	case x == 0 && y == 0:
		if math.Signbit(float64(x)) {
			return y
		}
		return x
	case x > y:
		return x
	}
	return y
}

func minSpec(x, y float32) float32 {
	switch {
	case x != x && y != y:
		return NaN32()
	case x != x:
		return y
	case y != y:
		return x
	case x == 0 && y == 0:
		if math.Signbit(float64(x)) {
			return x
		}
		return y
	case x < y:
		return x
	}
	return y
}

func TestMaxMin32(t *testing.T) {
	negz := float32(math.Copysign(0, -1))
	nan1, nan2 := math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc00002)
	inf := float32(math.Inf(1))
	tests := []struct {
		a, b     float32
		max, min uint32
	}{
		{1, 2, 0x40000000, 0x3f800000},
		{2, 1, 0x40000000, 0x3f800000},
		{0, negz, 0x00000000, 0x80000000},
		{negz, 0, 0x00000000, 0x80000000},
		{negz, negz, 0x80000000, 0x80000000},
		{nan1, 3, 0x40400000, 0x40400000},
		{3, nan2, 0x40400000, 0x40400000},
		{nan1, nan2, NaNBits, NaNBits},
		{nan1, inf, 0x7f800000, 0x7f800000},
		{-inf, nan1, 0xff800000, 0xff800000},
		{-inf, inf, 0x7f800000, 0xff800000},
		{0x1p-149, negz, 0x00000001, 0x80000000},
	}
	for _, tt := range tests {
		if got := Max32(tt.a, tt.b); math.Float32bits(got) != tt.max {
			t.Errorf("Max32(%s, %s) = %s, want %#08x", bitsOf(tt.a), bitsOf(tt.b), bitsOf(got), tt.max)
		}
		if got := Min32(tt.a, tt.b); math.Float32bits(got) != tt.min {
			t.Errorf("Min32(%s, %s) = %s, want %#08x", bitsOf(tt.a), bitsOf(tt.b), bitsOf(got), tt.min)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	pick := func() float32 {
		switch r.IntN(8) {
		case 0:
			return 0
		case 1:
			return negz
		case 2:
			return nan1
		}
		return math.Float32frombits(r.Uint32())
	}
	for range 200_000 {
		a, b := pick(), pick()
		if got, want := Max32(a, b), maxSpec(a, b); !sameBits(got, want) {
			t.Fatalf("Max32(%s, %s) = %s, want %s", bitsOf(a), bitsOf(b), bitsOf(got), bitsOf(want))
		}
		if got, want := Min32(a, b), minSpec(a, b); !sameBits(got, want) {
			t.Fatalf("Min32(%s, %s) = %s, want %s", bitsOf(a), bitsOf(b), bitsOf(got), bitsOf(want))
		}
		if !sameBits(Max32(a, b), Max32(b, a)) || !sameBits(Min32(a, b), Min32(b, a)) {
			t.Fatalf("Max32/Min32 not symmetric in bits for %s, %s", bitsOf(a), bitsOf(b))
		}
	}
}
