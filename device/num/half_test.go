package num

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// f16Exact returns the float64 value of binary16 bits, computed from the definition.
func f16Exact(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	man := float64(h & 0x3ff)
	switch exp {
	case 0x1f:
		if man != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * man * math.Pow(2, -24)
	}
	return sign * (1 + man/1024) * math.Pow(2, float64(exp-15))
}

func TestF16ToF32Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := F16ToF32(h)
		want := f16Exact(h)
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("%#04x: got %v, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("%#04x: got %v, want %v", h, got, want)
		}
		if F32ToF16(got) != h {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, got, F32ToF16(got))
		}
	}
}

// f16Round is a slow reference: the binary16 value nearest to f (ties to even), by search
// over the ordered non-negative halves.
func f16Round(f float32) uint16 {
	if math.IsNaN(float64(f)) {
		return 0x7e00 | uint16(math.Float32bits(f)>>16)&0x8000
	}
	x := math.Abs(float64(f))
	sign := uint16(math.Float32bits(f)>>16) & 0x8000
	lo, hi := 0, 0x7c00 // find the largest half <= x
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if f16Exact(uint16(mid)) <= x {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0x7c00 {
		return sign | 0x7c00
	}
	a := f16Exact(uint16(lo))
	var b float64
	if lo+1 == 0x7c00 {
		b = 65536 // the rounding boundary above the largest finite half behaves like 2^16
	} else {
		b = f16Exact(uint16(lo + 1))
	}
	da, db := new(big.Float).Sub(big.NewFloat(x), big.NewFloat(a)), new(big.Float).Sub(big.NewFloat(b), big.NewFloat(x))
	switch da.Cmp(db) {
	case -1:
		return sign | uint16(lo)
	case 1:
		return sign | uint16(lo+1)
	}
	if lo&1 == 0 {
		return sign | uint16(lo)
	}
	return sign | uint16(lo+1)
}

func TestF32ToF16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(f float32) {
		if got, want := F32ToF16(f), f16Round(f); got != want {
			t.Fatalf("F32ToF16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	// every half, and the midpoints and their neighbours between consecutive halves
	for i := 0; i < 0x7c00; i++ {
		a := F16ToF32(uint16(i))
		b := float32(65536)
		if i+1 < 0x7c00 {
			b = F16ToF32(uint16(i + 1))
		}
		m := float32((float64(a) + float64(b)) / 2)
		for _, f := range []float32{a, m, math.Nextafter32(m, 0), math.Nextafter32(m, 1e9)} {
			check(f)
			check(-f)
		}
	}
	for range 200000 {
		check(math.Float32frombits(r.Uint32()))
	}
	for _, f := range []float32{0, float32(math.Inf(1)), float32(math.Inf(-1)), 65504, 65519.99, 65520, 1e-8, 2.98e-8, 2.99e-8} {
		check(f)
	}
}

func TestBF16(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToF32(h)
		if math.IsNaN(float64(f)) {
			continue
		}
		if F32ToBF16(f) != h {
			t.Fatalf("bf16 round trip %#04x", h)
		}
	}
	cases := []struct {
		in  uint32
		out uint16
	}{
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81},
		{0x7f7fffff, 0x7f80}, // max float rounds to inf
		{0x00000001, 0x0000}, // subnormal, not flushed: rounds to zero by value
		{0x00018000, 0x0002},
		{0x7fc00001, 0x7fc0},
		{0xff800001, 0xffc0}, // signalling NaN is quieted
	}
	for _, c := range cases {
		if got := F32ToBF16(math.Float32frombits(c.in)); got != c.out {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", c.in, got, c.out)
		}
	}
}
