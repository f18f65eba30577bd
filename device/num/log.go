package num

import "math"

// Constants of Log32 and Log1p32, as float32 bit patterns.
const (
	logTwoThirdsBits = 0x3f2aaaab // 2/3 rounded to float32: the low end of the reduced range
	logLn2HiBits     = 0x3f317200 // ln 2 rounded to 16 significant bits (0x1.62e400p-1): i·hi is exact
	logLn2LoBits     = 0x35bfbe8e // ln 2 - hi rounded to float32 (0x1.7f7d1cp-20)
	log2p23Bits      = 0x4b000000 // 2^23, to lift subnormal inputs into the normal range
	logThirdBits     = 0x3eaaaaab // 1/3 rounded to float32 (0x1.555556p-2)
)

// log1p(f) ≈ f + f²·(q0 + q1·f + … + q9·f⁹) on -1/3 ≤ f ≤ 1/3, q0 = -1/2 (relative error of the
// polynomial with these float32 coefficients about 2^-30).
var logQBits = [10]uint32{
	0xbf000000, // -0x1p-1: not read; logCore applies this term exactly as -f²/2
	0x3eaaaaab, // 0x1.555556p-2
	0xbe7fff8b, // -0x1.ffff16p-3
	0x3e4ccbfa, // 0x1.9997f4p-3
	0xbe2acbef, // -0x1.5597dep-3
	0x3e127542, // 0x1.24ea84p-3
	0xbdf9d3f4, // -0x1.f3a7e8p-4
	0x3ddc9ad1, // 0x1.b935a2p-4
	0xbe0369e0, // -0x1.06d3c0p-3
	0x3df4bba7, // 0x1.e9774ep-4
}

// logReduce splits a positive normal float32 u into u = 2^e·m with m in [2/3, 4/3), using
// integer operations on the bits: t = bits(u) - bits(2/3); e = t >> 23 (arithmetic);
// m = float(bits(u) - (e << 23)).
func logReduce(u float32) (e int32, m float32) {
	b := math.Float32bits(u)
	e = int32(b-logTwoThirdsBits) >> 23
	m = math.Float32frombits(b - uint32(e)<<23)
	return e, m
}

// logCore returns log(2^i·(1+f) + tiny) for an integer-valued i, f = m - 1 (exact, |f| ≤ 1/3) and a
// small correction c (already divided by m) that log1p needs and log passes as 0. It sums
// i·ln2 + f - f²/2 + f³·R(f) keeping the large terms exact until the last addition:
//
//	sh = f * f;  sl = fma(f, f, -sh)                 // f² = sh + sl exactly
//	h  = 0.5 * sh                                    // exact
//	r  = fma(…fma(fma(Q9, f, Q8), f, Q7)…, f, Q1)    // Horner, 8 fmas
//	hi = i * LN2HI                                   // exact: |i| < 2^8, LN2HI has 16 bits
//	S  = hi + f;  E  = f - (S - hi)                  // Fast2Sum: S + E == hi + f
//	S2 = S - h;   E2 = (S - S2) - h                  // Fast2Sum: S2 + E2 == S - h
//	lo = fma(i, LN2LO, E + c)
//	lo = fma(-0.5, sl, lo + E2)
//	lo = fma(f * sh, r, lo)
//	y  = S2 + lo
//
// Both Fast2Sums are exact because their first operand is the larger: |hi| ≥ 0.69 > 1/3 ≥ |f|
// unless hi = 0; and S - h has |S| ≥ 0.69 - 1/3 > 1/18 ≥ h when i ≠ 0, S = f with |f| ≥ f²/2 when
// i = 0.
func logCore(i, f, c float32) float32 {
	sh := f * f
	sl := FMA32(f, f, -sh)
	h := 0.5 * sh
	r := f32(logQBits[9])
	for k := 8; k >= 1; k-- {
		r = FMA32(r, f, f32(logQBits[k]))
	}
	hi := i * f32(logLn2HiBits)
	sum := hi + f
	e := f - (sum - hi)
	sum2 := sum - h
	e2 := (sum - sum2) - h
	lo := FMA32(i, f32(logLn2LoBits), e+c)
	lo = FMA32(-0.5, sl, lo+e2)
	lo = FMA32(f*sh, r, lo)
	return sum2 + lo
}

// Log32 returns the natural logarithm of x. Maximum error 0.60 ulp over all float32 inputs
// (measured against math.Log; see TestUnaryExhaustive). Sequence: NaN or x < 0 gives the canonical NaN;
// ±0 gives -Inf; +Inf gives +Inf; a subnormal x is multiplied by 2^23 (exact) and 23 is
// subtracted from its exponent; then (e, m) = logReduce(x), f = m - 1 (exact) and the result
// is logCore(float32(e), f, 0).
func Log32(x float32) float32 {
	switch {
	case x != x || x < 0:
		return NaN32()
	case x == 0:
		return float32(math.Inf(-1))
	case x > math.MaxFloat32:
		return x
	}
	var bias int32
	if x < 0x1p-126 {
		x *= f32(log2p23Bits)
		bias = -23
	}
	e, m := logReduce(x)
	return logCore(float32(e+bias), m-1, 0)
}

// Log1p32 returns log(1 + x), accurate also for x near 0. Maximum error 0.60 ulp over all
// float32 inputs (measured against math.Log1p; see TestUnaryExhaustive). Sequence: NaN or x < -1 gives
// the canonical NaN; -1 gives -Inf; +Inf gives +Inf; ±0 returns x; otherwise log1pPair(x, 0).
func Log1p32(x float32) float32 {
	switch {
	case x != x || x < -1:
		return NaN32()
	case x == -1:
		return float32(math.Inf(-1))
	case x > math.MaxFloat32:
		return x
	case x == 0:
		return x
	}
	return log1pPair(x, 0)
}

// log1pPair returns log(1 + xh + xl) for xh > -1 finite and |xl| ≤ ulp(xh) (xl = 0 for Log1p32;
// Softplus32 passes the low part of e^x):
//
//	|xh| ≤ 1/3 (float32 0x3eaaaaab):
//	    y  = logCore(0, xh, xl / (1 + xh))
//	otherwise:
//	    u  = 1 + xh                                   // TwoSum: u + c == 1 + xh exactly
//	    z  = u - 1;  c = (1 - (u - z)) + (xh - z)
//	    c  = c + xl
//	    (e, m) = logReduce(u);  f = m - 1             // u ≥ 2^-24 is normal
//	    d  = scale(c, -e) / m                         // 1 + xh + xl ≈ 2^e·(m + c·2^-e)
//	    y  = logCore(float32(e), f, d)                // log1p(f + δ) ≈ log1p(f) + δ/m
func log1pPair(xh, xl float32) float32 {
	if xh <= f32(logThirdBits) && xh >= -f32(logThirdBits) {
		return logCore(0, xh, xl/(1+xh))
	}
	u := 1 + xh
	z := u - 1
	c := (1 - (u - z)) + (xh - z)
	c = c + xl
	e, m := logReduce(u)
	d := scale(c, -e) / m
	return logCore(float32(e), m-1, d)
}

// softplusCutoff is ggml's threshold: for x > 20, softplus(x) = x (ggml_softplus, op_softplus).
const softplusCutoff = 20

// softplusTiny is the input below which e^x < 2^-24.5 and log1p(e^x) = e^x - e^2x/2 to far better
// than float32 precision.
const softplusTiny = -17

// Softplus32 returns log(1 + e^x), as ggml defines it: x itself for x > 20 (there the exact
// value rounds to x anyway). Maximum error 0.62 ulp over all float32 inputs, 0.76 ulp where the
// result is subnormal (measured; see TestUnaryExhaustive). Sequence: NaN gives the canonical NaN;
// x > 20 gives x; x < -128 gives +0; otherwise, with (hi, lo, j) = expCore(x) (e^x = (hi + lo)·2^j),
//
//	x < -17:  y = scale(hi + (lo - scale(0.5*hi*hi, j)), j)   // e^x - e^2x/2, scaled last
//	else:     y = log1pPair(scale(hi, j), scale(lo, j))
func Softplus32(x float32) float32 {
	switch {
	case x != x:
		return NaN32()
	case x > softplusCutoff:
		return x
	case x < -128:
		return 0
	}
	hi, lo, j := expCore(x)
	if x < softplusTiny {
		// the conversion keeps scale's final product a separate rounding from the subtraction
		t := float32(scale(0.5*hi*hi, j))
		return scale(hi+(lo-t), j)
	}
	return log1pPair(scale(hi, j), scale(lo, j))
}
