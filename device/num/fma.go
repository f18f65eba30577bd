package num

import "math"

// NaNBits is the canonical float32 NaN, the only NaN an NVIDIA GPU's float32 arithmetic
// produces (sign clear, all exponent and mantissa bits set). Every routine in this package
// that returns a NaN returns this one, so twin and kernel agree on the bits.
const NaNBits uint32 = 0x7fffffff

// NaN32 returns the canonical NaN (NaNBits).
func NaN32() float32 { return math.Float32frombits(NaNBits) }

// Canon returns f, or the canonical NaN if f is a NaN. Go's float32 operators give the CPU's
// default NaN (0xffc00000 on x86-64) for Inf·0 or Inf−Inf and keep an operand NaN's payload;
// a twin passes a result through Canon where a NaN's bits reach non-NaN output (an integer
// conversion, a sign kept by F32ToF16), so that it gets the GPU's bits.
func Canon(f float32) float32 {
	if f != f {
		return NaN32()
	}
	return f
}

// FMA32 returns a*b + c rounded once, to nearest with ties to even: what PTX fma.rn.f32 and
// CUDA's __fmaf_rn compute, subnormals included (never flushed). Overflow gives ±Inf; a NaN
// result (a NaN input, Inf*0, or Inf-Inf) is the canonical NaN. An exact zero sum of nonzero
// terms is +0; (±0) + (±0) follows IEEE sign rules.
//
// Method: a float32×float32 product has at most 48 significant bits and an exponent within
// float64's normal range, so p = float64(a)*float64(b) is exact. The sum p + c is computed in
// float64 with round-to-odd (TwoSum gives the exact error; a nonzero error with an even last
// bit moves the sum one ulp towards the exact value). Rounding a round-to-odd result with
// 53 bits once more to 24 bits (or fewer, for float32 subnormals) equals rounding the exact
// sum directly, because 53 ≥ 24+2. Plain float32(math.FMA(...)) rounds twice to nearest and
// is wrong when the exact sum lies just off a float32 midpoint that float64 cannot resolve.
func FMA32(a, b, c float32) float32 {
	// exact product; the conversions keep the product and the sum separate operations
	s := float64(float64(float64(a)*float64(b)) + float64(c))
	// Fast path (small enough to inline). Float32 midpoints are float64 numbers, and rounding
	// to the nearest float64 is monotonic, so s lies on the same side of every float32 midpoint
	// as the exact sum, and on one only if the exact sum does. Unless s is itself a midpoint,
	// rounding s to float32 is then rounding the exact sum. For a float32-normal |s| (below
	// overflow) the 29 bits a float32 drops from s's mantissa read 1000…0 exactly when s is a
	// midpoint.
	bits := math.Float64bits(s)
	if (bits>>52&0x7ff)-(1023-126) < 254 && bits&(1<<29-1) != 1<<28 { // exponent in [-126, 127], unsigned
		return float32(s)
	}
	return fma32Slow(a, b, c)
}

// fma32Slow is FMA32 for midpoints, float32 subnormals, overflow, Inf and NaN.
func fma32Slow(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	cc := float64(c)
	s := float64(p + cc)
	if math.IsNaN(s) {
		return NaN32()
	}
	if math.IsInf(s, 0) || p == 0 || cc == 0 {
		// Inf operands, or one exact zero term: s is already exact or infinite.
		return float32(s)
	}
	// TwoSum: err is exactly (p + cc) - s.
	bv := s - p
	av := s - bv
	err := (p - av) + (cc - bv)
	if err != 0 {
		bits := math.Float64bits(s)
		if bits&1 == 0 {
			if (err > 0) == (s > 0) {
				bits++ // away from zero, towards the exact sum
			} else {
				bits--
			}
			s = math.Float64frombits(bits)
		}
	}
	return float32(s)
}

// MulAdd32 returns float32(a*b) + c: the product rounded to float32, then the sum rounded
// again. This is the unfused multiply-add that CUDA writes as __fadd_rn(__fmul_rn(a, b), c).
// Twin code writes float32(a*b) + c (or calls MulAdd32) wherever the kernel does two
// roundings, because Go may contract a bare a*b + c into one fused instruction.
func MulAdd32(a, b, c float32) float32 { return float32(a*b) + c }

// Sqrt32 returns the correctly rounded square root of x (PTX sqrt.rn.f32, __fsqrt_rn):
// float64 square root, then rounding to float32. The double rounding is harmless: for a
// float32 x, the float64 root is correctly rounded to 53 bits, and 53 ≥ 2·24+2 guarantees that
// rounding it again to 24 bits gives the correctly rounded float32 root (no float32 input has
// a square root close enough to a float32 midpoint for the first rounding to land on it).
// Sqrt32(-0) = -0, Sqrt32(+Inf) = +Inf; negative x and NaN give the canonical NaN.
func Sqrt32(x float32) float32 {
	if x != x || x < 0 {
		return NaN32()
	}
	return float32(math.Sqrt(float64(x)))
}

// Rsqrt32 returns 1/√x as two correctly rounded steps, 1 / Sqrt32(x) (in CUDA
// __fdiv_rn(1.0f, __fsqrt_rn(x))); it is not the correctly rounded reciprocal square root
// (error below 1 ulp). Rsqrt32(+0) = +Inf, Rsqrt32(-0) = -Inf, Rsqrt32(+Inf) = +0; negative x
// and NaN give the canonical NaN.
func Rsqrt32(x float32) float32 {
	s := Sqrt32(x)
	if s != s {
		return s
	}
	return 1 / s
}

// Max32 returns the larger of a and b with PTX max.f32 rules: if exactly one input is NaN
// the other is returned; if both are NaN the result is the canonical NaN; +0 is greater
// than -0. (Go's math.Max returns NaN when either input is NaN.)
func Max32(a, b float32) float32 {
	switch {
	case a != a && b != b:
		return NaN32()
	case a != a:
		return b
	case b != b:
		return a
	case a > b:
		return a
	case b > a:
		return b
	case math.Signbit(float64(a)):
		return b // equal: only ±0 can differ in bits, and then b is +0 or both are -0
	}
	return a
}

// Min32 returns the smaller of a and b with PTX min.f32 rules: if exactly one input is NaN
// the other is returned; if both are NaN the result is the canonical NaN; -0 is less than +0.
func Min32(a, b float32) float32 {
	switch {
	case a != a && b != b:
		return NaN32()
	case a != a:
		return b
	case b != b:
		return a
	case a < b:
		return a
	case b < a:
		return b
	case math.Signbit(float64(a)):
		return a
	}
	return b
}
