package num

import "math"

// Constants of Exp32, as float32 bit patterns so that the CUDA copy uses the same bits.
const (
	expLog2eBits = 0x3fb8aa3b // log2(e) rounded to float32 (0x1.715476p+0)
	expShiftBits = 0x4b400000 // 0x1.8p23: adding it rounds a float32 in (-2^22, 2^22) to an integer
	expLn2HiBits = 0x3f317218 // ln 2 rounded to float32 (0x1.62e430p-1)
	expLn2LoBits = 0xb102e308 // ln 2 - hi rounded to float32 (-0x1.05c610p-29)

	// exp(f) ≈ 1 + f + f²·(C2 + C3·f + … + C7·f⁵) on |f| ≤ 0.3466 (relative error of the
	// polynomial with these float32 coefficients about 2^-33)
	expC2Bits = 0x3f000000 // 0x1p-1
	expC3Bits = 0x3e2aaaaa // 0x1.555554p-3
	expC4Bits = 0x3d2aaa74 // 0x1.5554e8p-5
	expC5Bits = 0x3c088987 // 0x1.11130ep-7
	expC6Bits = 0x3ab6a65e // 0x1.6d4cbcp-10
	expC7Bits = 0x394efdd4 // 0x1.9dfba8p-13
)

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

// expCore splits exp(x) = (hi + lo)·2^j for |x| ≤ 128, with hi in about [0.70, 1.42] and
// |lo| ≤ ulp(hi)/2: hi is e^f for the reduced argument f, rounded once (what Exp32 scales), and
// hi + lo is within about 2^-28 of e^f relative, which Sigmoid32, SiLU32 and Softplus32 use.
// Steps, each a single IEEE float32 operation:
//
//	t   = fma(x, LOG2E, SHIFT)      // SHIFT = 0x1.8p23
//	jf  = t - SHIFT                 // jf = round(x·log2e), an integer-valued float
//	j   = int32(jf)
//	rh  = fma(-jf, LN2HI, x)        // exact (both terms are multiples of x's or LN2HI's ulp)
//	fh  = fma(-jf, LN2LO, rh)       // reduced argument f = x - j·ln2, rounded
//	fl  = fma(-jf, LN2LO, rh - fh)  // its rounding error (rh - fh is exact)
//	s   = fh * fh;  sl = fma(fh, fh, -s)    // fh² = s + sl exactly
//	p   = fma(fma(fma(fma(fma(C7, fh, C6), fh, C5), fh, C4), fh, C3), fh, C2)
//	tl  = fma(s, p, fma(sl, 0.5, fma(fl, fh, fl)))  // f²·P(f) + fl·(1 + f): exp(f) - 1 - fh
//	u   = 1 + fh                    // Fast2Sum of 1 and fh: u + e == 1 + fh exactly
//	e   = fh - (u - 1)
//	v   = e + tl
//	hi  = u + v                     // Fast2Sum again (|u| > 0.65 > |v|): hi + lo == u + v
//	lo  = (u - hi) + v
func expCore(x float32) (hi, lo float32, j int32) {
	t := FMA32(x, f32(expLog2eBits), f32(expShiftBits))
	jf := t - f32(expShiftBits)
	j = int32(jf)
	rh := FMA32(-jf, f32(expLn2HiBits), x)
	fh := FMA32(-jf, f32(expLn2LoBits), rh)
	fl := FMA32(-jf, f32(expLn2LoBits), rh-fh)
	s := fh * fh
	sl := FMA32(fh, fh, -s)
	p := FMA32(f32(expC7Bits), fh, f32(expC6Bits))
	p = FMA32(p, fh, f32(expC5Bits))
	p = FMA32(p, fh, f32(expC4Bits))
	p = FMA32(p, fh, f32(expC3Bits))
	p = FMA32(p, fh, f32(expC2Bits))
	tl := FMA32(s, p, FMA32(sl, 0.5, FMA32(fl, fh, fl)))
	u := 1 + fh
	e := fh - (u - 1)
	v := e + tl
	hi = u + v
	lo = (u - hi) + v
	return hi, lo, j
}

// pow2 returns 2^k for -126 ≤ k ≤ 127, built from exponent bits.
func pow2(k int32) float32 { return math.Float32frombits(uint32(k+127) << 23) }

// scale returns q·2^j for |j| ≤ 252 as two multiplications by powers of two: q·2^(j>>1) is exact
// whenever it is a normal number (for the callers' main terms it is: |j| ≤ 186 and |q| ≥ 2^-32),
// so multiplying by 2^(j-(j>>1)) is the only rounding, which overflows to ±Inf or underflows
// through the subnormals to ±0 as IEEE multiplication does.
func scale(q float32, j int32) float32 {
	h := j >> 1 // arithmetic shift: floor(j/2)
	return q * pow2(h) * pow2(j-h)
}

// Exp32 returns e^x. Maximum error 0.58 ulp over all float32 inputs, 0.76 ulp where the result
// is subnormal (the final scaling rounds a second time there); measured against math.Exp by
// TestUnaryExhaustive. Sequence: NaN gives the canonical NaN; x > 128 gives +Inf and
// x < -128 gives +0; otherwise (hi, lo, j) = expCore(x) and the result is scale(hi, j), which
// overflows to +Inf above about 88.72 and rounds through the subnormals to +0 below about
// -103.97.
func Exp32(x float32) float32 {
	switch {
	case x != x:
		return NaN32()
	case x > 128:
		return float32(math.Inf(1))
	case x < -128:
		return 0
	}
	hi, _, j := expCore(x)
	return scale(hi, j)
}

// expNeg returns the pieces shared by Sigmoid32 and SiLU32 for a = -|x| clamped to ≥ -128:
// e^a = (hi + lo)·2^j from expCore, and the reciprocal 1/(1 + e^a) ≈ q + c to about 2^-46:
//
//	eh = scale(hi, j);  el = scale(lo, j)         // e^a ≈ eh + el, eh ≤ 1
//	D  = 1 + eh;  E = (eh - (D - 1)) + el        // Fast2Sum: 1 + e^a ≈ D + E
//	q  = 1 / D
//	c  = q * fma(-q, E, fma(-q, D, 1))           // fma(-q, D, 1) is the exact division remainder
func expNeg(a float32) (hi, lo float32, j int32, q, c float32) {
	hi, lo, j = expCore(a)
	eh, el := scale(hi, j), scale(lo, j)
	d := 1 + eh
	e := (eh - (d - 1)) + el
	q = 1 / d
	c = q * FMA32(-q, e, FMA32(-q, d, 1))
	return hi, lo, j, q, c
}

// Sigmoid32 returns 1/(1 + e^-x). Maximum error 0.58 ulp over all float32 inputs, 0.76 ulp where
// the result is subnormal (measured; see TestUnaryExhaustive). Sequence: NaN gives the canonical
// NaN; x > 128 gives 1 and x < -128 gives +0; otherwise, with (hi, lo, j, q, c) = expNeg(-|x|):
//
//	x ≥ 0:  y = q + c
//	x < 0:  y = scale(fma(hi, q, fma(hi, c, lo*q)), j)  // e^x/(1 + e^x) = 2^j·(hi + lo)(q + c)
func Sigmoid32(x float32) float32 {
	switch {
	case x != x:
		return NaN32()
	case x > 128:
		return 1
	case x < -128:
		return 0
	}
	a := -x
	if x < 0 {
		a = x
	}
	hi, lo, j, q, c := expNeg(a)
	if x >= 0 {
		return q + c
	}
	return scale(FMA32(hi, q, FMA32(hi, c, lo*q)), j)
}

// SiLU32 returns x·sigmoid(x) = x/(1 + e^-x). Maximum error 0.60 ulp over all float32 inputs,
// 0.78 ulp where the result is subnormal (measured; see TestUnaryExhaustive). Sequence: NaN gives
// the canonical NaN; x > 128 gives x and x < -128 gives -0; otherwise, with (hi, lo, j, q, c) =
// expNeg(-|x|):
//
//	x ≥ 0:  y = fma(x, q, x*c)                          // x·(q + c)
//	x < 0:  wh = hi * q                                 // sigmoid(x)·2^-j = wh + wl
//	        wl = fma(hi, q, -wh) + fma(hi, c, lo*q)
//	        y  = scale(fma(x, wh, x*wl), j)
func SiLU32(x float32) float32 {
	switch {
	case x != x:
		return NaN32()
	case x > 128:
		return x
	case x < -128:
		return float32(math.Copysign(0, -1))
	}
	a := -x
	if x < 0 {
		a = x
	}
	hi, lo, j, q, c := expNeg(a)
	if x >= 0 {
		return FMA32(x, q, x*c)
	}
	wh := hi * q
	wl := FMA32(hi, q, -wh) + FMA32(hi, c, lo*q)
	return scale(FMA32(x, wh, x*wl), j)
}
