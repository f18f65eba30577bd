package num

import "math"

// F16ToF32 widens an IEEE binary16 value (as bits) to float32. Exact for every input;
// NaN payloads are kept (shifted into the float32 mantissa).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: value = man * 2^-24, exact in float32
	return math.Float32frombits(sign) + float32(man)*(1.0/(1<<24))*signOne(sign)
}

func signOne(sign uint32) float32 {
	if sign != 0 {
		return -1
	}
	return 1
}

// F32ToF16 rounds a float32 to binary16 bits, to nearest with ties to even, with overflow to
// infinity and gradual underflow (as IEEE 754, F16C's vcvtps2ph with rounding mode 0, PTX
// cvt.rn.f16.f32 and ggml's software conversion all do). NaN becomes the quiet NaN 0x7e00
// with the sign kept.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00
	case abs >= 0x477ff000: // rounds to >= 65536: overflow (0x477ff000 = 65520, the midpoint to inf)
		return sign | 0x7c00
	case abs >= 0x38800000: // normal half range (>= 2^-14)
		// re-bias exponent 127 -> 15 and round the 13 dropped mantissa bits to nearest even
		v := abs - (112 << 23)
		round := uint32(0xfff) + (v>>13)&1
		return sign | uint16((v+round)>>13)
	case abs < 0x33000000: // below half of the smallest subnormal 2^-24 (ties go to even 0)
		return sign
	}
	// subnormal half: value = m * 2^-24 with m = round(|f| * 2^24)
	exp := abs >> 23
	man := abs&0x7fffff | 0x800000 // implicit 1; value = man * 2^(exp-150)
	shift := 126 - exp             // bits to drop so the unit becomes 2^-24: (150-exp) - 24
	half := uint32(1) << (shift - 1)
	q := man >> shift
	rem := man & (1<<shift - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return sign | uint16(q)
}

// BF16ToF32 widens bfloat16 bits to float32 (exact: bf16 is the top half of a float32).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to bfloat16 bits, to nearest with ties to even; subnormals are
// kept (not flushed); NaN is quieted (bit 6 of the result set) with its sign and upper payload
// kept. This is ggml's ggml_compute_fp32_to_bf16 and PTX cvt.rn.bf16.f32 for non-NaN inputs.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}
