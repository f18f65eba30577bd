package num

import "math"

// Constants of Tanh32 and GELU32, as float32 bit patterns so that the CUDA copy uses the same
// bits.
const (
	// tanh(x) = x + x³·(T3 + T5·s + T7·s² + T9·s³ + T11·s⁴ + T13·s⁵) with s = x²: the Taylor
	// series to x¹³, each coefficient rounded to float32. On |x| < 1/4 the series' remainder is
	// below 2^-37 of tanh(x).
	tanhT3Bits  = 0xbeaaaaab // -1/3
	tanhT5Bits  = 0x3e088889 // 2/15
	tanhT7Bits  = 0xbd5d0dd1 // -17/315
	tanhT9Bits  = 0x3cb327a4 // 62/2835
	tanhT11Bits = 0xbc11371b // -1382/155925
	tanhT13Bits = 0x3b6b69e8 // 21844/6081075

	// GELU's argument z = k·x + c·x³ with k = 2·sqrt(2/π) and c = 0.044715·k, each as a pair
	// hi + lo of float32 values (hi rounded to nearest, lo the rest rounded): about 2^-48 of
	// each constant.
	geluKHiBits = 0x3fcc422a // 1.5957692
	geluKLoBits = 0xb342bc9b // -4.534068e-08
	geluCHiBits = 0x3d922279 // 0.071354814
	geluCLoBits = 0x3124d8b5 // 2.3988325e-09
)

// Tanh32 returns tanh(x). Maximum error 0.565 ulp over all float32 inputs (measured against
// math.Tanh by TestUnaryExhaustive). With a = |x| and the sign of x given to the result:
//
//	NaN:            the canonical NaN
//	a < 2^-12:      x                       // tanh(x) = x·(1 − x²/3 + …) rounds to x
//	a < 1/4:        s = x*x
//	                p = fma(fma(fma(fma(fma(T13, s, T11), s, T9), s, T7), s, T5), s, T3)
//	                y = fma(x*s, p, x)      // x + x³·P(s), the Taylor series
//	a ≥ 10:         ±1
//	otherwise, with E = e^(−2a) = (hi + lo)·2^j from expCore(−2a) (−2a is exact):
//	                eh = scale(hi, j);  el = scale(lo, j)
//	                nh = 1 − eh;  nl = (−eh − (nh − 1)) − el      // Fast2Sum: 1 − E ≈ nh + nl
//	                dh = 1 + eh;  dl = (eh − (dh − 1)) + el       // 1 + E ≈ dh + dl
//	                q  = nh / dh
//	                y  = q + fma(−q, dl, fma(−q, dh, nh) + nl) / dh   // (nh + nl)/(dh + dl)
//
// fma(−q, dh, nh) is the division's exact remainder. Soft-capping (c·tanh(x/c)) uses it.
func Tanh32(x float32) float32 {
	if x != x {
		return NaN32()
	}
	a := abs32(x)
	switch {
	case a < 0x1p-12:
		return x
	case a < 0.25:
		s := x * x
		p := FMA32(f32(tanhT13Bits), s, f32(tanhT11Bits))
		p = FMA32(p, s, f32(tanhT9Bits))
		p = FMA32(p, s, f32(tanhT7Bits))
		p = FMA32(p, s, f32(tanhT5Bits))
		p = FMA32(p, s, f32(tanhT3Bits))
		return FMA32(x*s, p, x)
	case a >= 10:
		return float32(math.Copysign(1, float64(x)))
	}
	hi, lo, j := expCore(-2 * a)
	eh, el := float32(scale(hi, j)), float32(scale(lo, j)) // products (scale), rounded before the additions read them
	nh := 1 - eh
	nl := (-eh - (nh - 1)) - el
	dh := 1 + eh
	dl := (eh - (dh - 1)) + el
	q := nh / dh
	y := q + FMA32(-q, dl, FMA32(-q, dh, nh)+nl)/dh
	if x < 0 {
		return -y
	}
	return y
}

// abs32 is |x| by clearing the sign bit (exact; NaNs keep their payload).
func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// GELU32 returns the tanh form of GELU, 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))), as the
// equal x·sigmoid(z) with z = 2·sqrt(2/π)·(x + 0.044715·x³), which has no cancellation where x
// is negative. Maximum error 0.59 ulp over all float32 inputs, 0.78 ulp where the result is
// subnormal (measured; see TestUnaryExhaustive): z is carried as a pair zh + zl (GELU is
// ill-conditioned in x where it is negative — near x = −4 an ulp of x moves it by 20 ulps — so z
// must be closer than one rounding). Sequence: NaN gives the canonical NaN; x ≥ 10 gives x and
// x ≤ −12 gives −0; otherwise
//
//	x2 = x*x;  x3 = x2*x;  e3 = fma(x2, x, −x3) + fma(x, x, −x2)*x     // x³ ≈ x3 + e3
//	h1 = KHI*x;   l1 = fma(KHI, x, −h1)                                 // KHI·x = h1 + l1
//	h3 = CHI*x3;  l3 = fma(CHI, x3, −h3)
//	zh = h1 + h3;  b = zh − h1;  t = (h1 − (zh − b)) + (h3 − b)          // TwoSum: h1 + h3 = zh + t
//	zl = t + ((l1 + l3) + fma(KLO, x, fma(CHI, e3, CLO*x3)))
//
// then, as SiLU32 from e^(∓z) = (hi + lo)·2^j, with e^(∓zl) ≈ 1 ∓ zl folded into lo:
//
//	x ≥ 0:  (hi, lo, j) = expCore(−zh);  lo = fma(−hi, zl, lo)
//	x < 0:  −0 if zh < −128, else (hi, lo, j) = expCore(zh);  lo = fma(hi, zl, lo)
//	eh = scale(hi, j);  el = scale(lo, j)
//	D = 1 + eh;  E = (eh − (D − 1)) + el;  q = 1 / D;  c = q * fma(−q, E, fma(−q, D, 1))
//	x ≥ 0:  y = fma(x, q, x*c)
//	x < 0:  wh = hi * q;  wl = fma(hi, q, −wh) + fma(hi, c, lo*q);  y = scale(fma(x, wh, x*wl), j)
func GELU32(x float32) float32 {
	switch {
	case x != x:
		return NaN32()
	case x >= 10:
		return x
	case x <= -12:
		return float32(math.Copysign(0, -1))
	}
	// Products that an addition reads are converted explicitly: the Go spec lets the compiler
	// fuse them into it otherwise (it does with GOAMD64=v3).
	x2 := float32(x * x)
	x3 := float32(x2 * x)
	e3 := FMA32(x2, x, -x3) + float32(FMA32(x, x, -x2)*x) // two roundings, not fused
	h1 := float32(f32(geluKHiBits) * x)
	l1 := FMA32(f32(geluKHiBits), x, -h1)
	h3 := float32(f32(geluCHiBits) * x3)
	l3 := FMA32(f32(geluCHiBits), x3, -h3)
	zh := h1 + h3
	b := zh - h1
	t := (h1 - (zh - b)) + (h3 - b)
	zl := t + ((l1 + l3) + FMA32(f32(geluKLoBits), x, FMA32(f32(geluCHiBits), e3, f32(geluCLoBits)*x3)))
	var hi, lo float32
	var j int32
	if x >= 0 {
		hi, lo, j = expCore(-zh)
		lo = FMA32(-hi, zl, lo)
	} else {
		if zh < -128 {
			return float32(math.Copysign(0, -1))
		}
		hi, lo, j = expCore(zh)
		lo = FMA32(hi, zl, lo)
	}
	eh, el := float32(scale(hi, j)), float32(scale(lo, j))
	d := 1 + eh
	e := (eh - (d - 1)) + el
	q := 1 / d
	c := q * FMA32(-q, e, FMA32(-q, d, 1))
	if x >= 0 {
		return FMA32(x, q, x*c)
	}
	wh := hi * q
	wl := FMA32(hi, q, -wh) + FMA32(hi, c, lo*q)
	return scale(FMA32(x, wh, x*wl), j)
}
