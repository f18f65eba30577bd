package quant

import "math"

// nearestInt rounds to the nearest integer with ties to even, the way ggml's nearest_int does
// it: adding 1.5·2²³ pushes the fraction out of the float32 mantissa under the current
// (round-to-nearest-even) rounding, and the integer is read back from the low mantissa bits.
// Valid for |f| ≤ 2²²−1, which every caller guarantees.
//
// The conversion float32(f) is not redundant: once this function is inlined, a caller's
// nearestInt(a*b) would otherwise be fused into one FMA (it is, with GOAMD64=v3), skipping the
// rounding of the product that ggml's C performs.
func nearestInt(f float32) int32 {
	v := float32(f) + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// roundAway rounds half away from zero, as C's roundf does.
func roundAway(f float32) float32 {
	return float32(math.Round(float64(f)))
}
