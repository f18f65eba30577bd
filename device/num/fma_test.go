package num

import (
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"testing"
)

// fmaRef is the reference fused multiply-add: the exact a·b + c (math/big, 1000 bits, enough for
// any float32 triple), rounded once to float32 by big.Float.Float32 (nearest, ties to even,
// gradual underflow, overflow to ±Inf). Zeros, infinities and NaNs follow IEEE 754 directly.
func fmaRef(a, b, c float32) float32 {
	fa, fb, fc := float64(a), float64(b), float64(c)
	if a != a || b != b || c != c {
		return NaN32()
	}
	if math.IsInf(fa, 0) || math.IsInf(fb, 0) || math.IsInf(fc, 0) || fa == 0 || fb == 0 || fc == 0 {
		// one term is infinite or zero: the float64 sum of the exact product and c is exact
		r := float64(fa*fb) + fc
		if r != r {
			return NaN32()
		}
		return float32(r)
	}
	x := new(big.Float).SetPrec(1000).SetFloat64(fa)
	x.Mul(x, new(big.Float).SetFloat64(fb))
	x.Add(x, new(big.Float).SetFloat64(fc))
	if x.Sign() == 0 {
		return 0 // exact cancellation of nonzero terms gives +0
	}
	f, _ := x.Float32()
	return f
}

func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

func TestFMA32Table(t *testing.T) {
	h := float32(1 + 0x1p-12) // h·h = 1 + 2^-11 + 2^-24, a float32 midpoint
	maxf := float32(math.MaxFloat32)
	inf := float32(math.Inf(1))
	tests := []struct {
		name    string
		a, b, c float32
		want    uint32
	}{
		{"midpoint+tiny", h, h, 0x1p-80, 0x3f801001},
		{"midpoint-tiny", h, h, -0x1p-80, 0x3f801000},
		{"midpoint-even", h, h, 0, 0x3f801000},
		{"neg-midpoint+tiny", -h, h, -0x1p-80, 0xbf801001},
		{"exact-residual", 1 + 0x1p-23, 1 - 0x1p-24, -1, 0x337ffffe}, // 2^-24 - 2^-47
		{"fused-vs-unfused", h, h, -1, 0x3a000400},                   // 2^-11 + 2^-24
		{"cancel-to-plus-zero", 3, 5, -15, 0x00000000},
		{"zero-signs(+0*-1 + +0)", 0, -1, 0, 0x00000000},
		{"zero-signs(-0*1 + -0)", float32(math.Copysign(0, -1)), 1, float32(math.Copysign(0, -1)), 0x80000000},
		{"product-zero", 0, 5, -7, 0xc0e00000},
		{"overflow", maxf, 2, 0, 0x7f800000},
		{"overflow-tie", maxf, 1, 0x1p103, 0x7f800000},
		{"below-overflow-tie", maxf, 1, math.Nextafter32(0x1p103, 0), 0x7f7fffff},
		{"neg-overflow", -maxf, 2, 0, 0xff800000},
		{"subnormal-tie-to-zero", 0x1p-75, 0x1p-75, 0, 0x00000000},
		{"subnormal-above-tie", 0x1p-75, 0x1p-75 * (1 + 0x1p-23), 0, 0x00000001},
		{"subnormal-round-up", 0x1.8p-75, 0x1p-75, 0, 0x00000001},
		{"subnormal-tie-to-even", 0x1p-75, 0x1.8p-74, 0, 0x00000002},
		{"subnormal-exact", 0x1p-100, 0x1p-40, 0x1p-149, 0x00000201},
		{"subnormal-tie-plus-c", 0x1p-75, 0x1p-75, -0x1p-149, 0x80000000}, // -2^-150: tie to even -0
		{"normal-boundary", 0x1p-63, 0x1p-63, -0x1p-149, 0x007fffff},
		{"inf*0", inf, 0, 1, NaNBits},
		{"inf-inf", inf, 1, -inf, NaNBits},
		{"inf*2+1", inf, 2, 1, 0x7f800000},
		{"1*1+inf", 1, 1, inf, 0x7f800000},
		{"nan-payload", math.Float32frombits(0x7fc01234), 1, 1, NaNBits},
		{"nan-c", 1, 1, math.Float32frombits(0xffc00001), NaNBits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FMA32(tt.a, tt.b, tt.c)
			if math.Float32bits(got) != tt.want {
				t.Errorf("FMA32(%g, %g, %g) = %s, want %#08x", tt.a, tt.b, tt.c, bitsOf(got), tt.want)
			}
			if ref := fmaRef(tt.a, tt.b, tt.c); math.Float32bits(ref) != tt.want {
				t.Errorf("reference disagrees with the table: %s, want %#08x", bitsOf(ref), tt.want)
			}
		})
	}
	// The trap FMA32 exists for: rounding through float64 lands exactly on the midpoint.
	naive := float32(math.FMA(float64(h), float64(h), 0x1p-80))
	if math.Float32bits(naive) != 0x3f801000 {
		t.Errorf("float32(math.FMA) = %s; expected the double-rounded 0x3f801000", bitsOf(naive))
	}
}

// randFloat returns a float32 with random sign, biased exponent uniform in [lo, hi] (0 makes
// a subnormal) and a random mantissa; with short set, only the top 12 mantissa bits are random.
func randFloat(r *rand.Rand, lo, hi int, short bool) float32 {
	man := r.Uint32() & 0x7fffff
	if short {
		man &= 0x7ff800
	}
	exp := uint32(lo + r.IntN(hi-lo+1))
	return math.Float32frombits(r.Uint32()&0x80000000 | exp<<23 | man)
}

// fmaCase draws one test triple, biased towards the hard cases: exact float32 midpoints plus a
// tiny c, products pushed next to a midpoint by c, cancellation, subnormal and overflowing
// results, and arbitrary bit patterns.
func fmaCase(r *rand.Rand) (a, b, c float32) {
	switch r.IntN(8) {
	case 0: // any bits, specials included
		return math.Float32frombits(r.Uint32()), math.Float32frombits(r.Uint32()), math.Float32frombits(r.Uint32())
	case 1, 2: // short mantissas: the product is often exactly a float32 midpoint; c far below it
		a, b = randFloat(r, 100, 154, true), randFloat(r, 100, 154, true)
		p := float64(a) * float64(b)
		_, e := math.Frexp(p)
		c = float32(math.Ldexp(1+r.Float64(), e-26-r.IntN(100))) // well below float64 resolution too
		if r.IntN(2) == 0 {
			c = -c
		}
		return a, b, c
	case 3, 4: // c moves a random product next to a float32 midpoint
		a, b = randFloat(r, 90, 164, false), randFloat(r, 90, 164, false)
		p := float64(a) * float64(b)
		q := float32(p)
		_, e := math.Frexp(float64(q))
		half := math.Ldexp(1, e-25)
		if r.IntN(2) == 0 {
			half = -half
		}
		c = float32(float64(q) + half - p)
		for k := r.IntN(5) - 2; k != 0; k -= sign(k) {
			c = math.Nextafter32(c, float32(sign(k))*float32(math.Inf(1)))
		}
		return a, b, c
	case 5: // cancellation
		a, b = randFloat(r, 1, 254, false), randFloat(r, 1, 254, false)
		c = -float32(float64(a) * float64(b))
		if r.IntN(2) == 0 {
			c = math.Nextafter32(c, 0)
		}
		return a, b, c
	case 6: // subnormal and tiny results
		a = randFloat(r, 1, 127, r.IntN(2) == 0)
		b = randFloat(r, max(1, 127-int(math.Float32bits(a)>>23&0xff)-24), 127, false)
		b = float32(float64(b) * math.Ldexp(1, -r.IntN(40)))
		c = randFloat(r, 0, 12, false)
		return a, b, c
	}
	// overflow region
	a, b = randFloat(r, 190, 254, false), randFloat(r, 127, 191, false)
	return a, b, randFloat(r, 200, 254, false)
}

func sign(k int) int {
	if k < 0 {
		return -1
	}
	return 1
}

func TestFMA32Random(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	r := rand.New(rand.NewPCG(20260101, 7))
	for i := 0; i < n; i++ {
		a, b, c := fmaCase(r)
		got, want := FMA32(a, b, c), fmaRef(a, b, c)
		if !sameBits(got, want) {
			t.Fatalf("case %d: FMA32(%s, %s, %s) = %s, want %s", i, bitsOf(a), bitsOf(b), bitsOf(c), bitsOf(got), bitsOf(want))
		}
	}
}

func FuzzFMA32(f *testing.F) {
	seeds := [][3]uint32{
		{0x3f800800, 0x3f800800, 0x17800000}, // (1+2^-12)², + 2^-80: the double-rounding trap
		{0x3f800800, 0x3f800800, 0x97800000}, // - 2^-80
		{0x3f800800, 0x3f800800, 0x00000000}, // exact midpoint, ties to even
		{0x3f800800, 0x3f800800, 0x00000001}, // + smallest subnormal
		{0x3f800001, 0x3f7fffff, 0xbf800000}, // cancellation with exact residual
		{0x1a000000, 0x1a000000, 0x00000000}, // 2^-150: subnormal tie to zero
		{0x1a000000, 0x1a800000, 0x80000001}, // subnormal result with c
		{0x1a400000, 0x1a000000, 0x00000000}, // 0.75 of the smallest subnormal
		{0x1f800000, 0x1f800000, 0x80000001}, // largest subnormal
		{0x7f7fffff, 0x3f800000, 0x73000000}, // MaxFloat32 + half ulp: overflow tie
		{0x7f7fffff, 0x3f800000, 0x72ffffff}, // just below the overflow tie
		{0x7f7fffff, 0x40000000, 0xff7fffff}, // overflowing product, finite sum
		{0x7f800000, 0x00000000, 0x3f800000}, // Inf·0
		{0x7f800000, 0x3f800000, 0xff800000}, // Inf - Inf
		{0x80000000, 0x3f800000, 0x80000000}, // -0 + -0
		{0x00000000, 0xbf800000, 0x00000000}, // -0 + +0
		{0x7fc01234, 0x3f800000, 0x3f800000}, // NaN payload
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, ab, bb, cb uint32) {
		a, b, c := math.Float32frombits(ab), math.Float32frombits(bb), math.Float32frombits(cb)
		got, want := FMA32(a, b, c), fmaRef(a, b, c)
		if !sameBits(got, want) {
			t.Fatalf("FMA32(%s, %s, %s) = %s, want %s", bitsOf(a), bitsOf(b), bitsOf(c), bitsOf(got), bitsOf(want))
		}
	})
}

// fmaInputs is read at run time so that the compiler cannot fold the products below.
var fmaInputs = []float32{1 + 0x1p-12, 1 + 0x1p-12, -1}

// bareMulAdd is what twin code must not write: Go may fuse it (and does with GOAMD64=v3).
func bareMulAdd(a, b, c float32) float32 { return a*b + c }

func TestMulAdd32NotFused(t *testing.T) {
	a, b, c := fmaInputs[0], fmaInputs[1], fmaInputs[2]
	unfused := float32(0x1p-11)         // (1+2^-12)² rounds to 1 + 2^-11 (tie to even), minus 1
	fused := float32(0x1p-11 + 0x1p-24) // exact
	if got := MulAdd32(a, b, c); got != unfused {
		t.Errorf("MulAdd32 = %s, want %s (two roundings)", bitsOf(got), bitsOf(unfused))
	}
	if got := FMA32(a, b, c); got != fused {
		t.Errorf("FMA32 = %s, want %s (one rounding)", bitsOf(got), bitsOf(fused))
	}
	switch bareMulAdd(a, b, c) {
	case fused:
		t.Logf("GOAMD64=%q: the bare a*b + c was fused by the compiler", os.Getenv("GOAMD64"))
	case unfused:
		t.Logf("GOAMD64=%q: the bare a*b + c was not fused", os.Getenv("GOAMD64"))
	}
}

func TestCanon(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		in   float32
		want uint32
	}{
		{inf * 0, NaNBits}, {inf - inf, NaNBits}, {math.Float32frombits(0xffc00001), NaNBits}, {NaN32(), NaNBits},
		{-inf, 0xff800000}, {float32(math.Copysign(0, -1)), 0x80000000}, {1.5, 0x3fc00000},
	} {
		if got := math.Float32bits(Canon(c.in)); got != c.want {
			t.Errorf("Canon(%#x) = %#x, want %#x", math.Float32bits(c.in), got, c.want)
		}
	}
}
