package kernels

import (
	"encoding/binary"
	"math"

	"verity/device/num"
)

// Shared pieces of the K-quant weight formats (q2_K … q6_K). All of them pair with ActQ8_K
// activations and use a 32-value reduction unit: unit u of a row is values 32u … 32u+31,
// i.e. sub-block s = u mod 8 of super-block i = u / 8 (256 values per super-block), and it
// is folded by lane u mod 32. A q8_K activation block (292 bytes per 256 values) is
//
//	[0:4]     d, float32 (x = d·q)
//	[4:260]   qs, 256 × int8 (−127 … 127)
//	[260:292] bsums, 16 × int16: bsums[j] = Σ qs[16j … 16j+15], exact
//
// so the activation of unit s is qs[32s … 32s+31], with group sums bsums[2s] and bsums[2s+1].
// The bsums of every block ConvertRow writes are these exact sums, so a kernel may read them
// or add up the quants itself. q8_K blocks are 4-byte aligned in a row (292 = 4·73).
// Each unit's weight × activation products are summed exactly in int32 (every K-quant's
// unit sum is below 2²⁴ in magnitude, so its float32 conversion is exact too), and only the
// combination with the float scales rounds. The super-block's combined scales
// D = float32(d_w·d_x) and Dmin = float32(dmin_w·d_x) are each one rounded product of the
// weight block's fp16 scale (converted exactly) and the activation's float32 d, as in ggml's
// ggml_vec_dot_qN_K_q8_K. Every lane that folds a unit of super-block i computes the same D.
// As for the legacy formats (legacy.go), NaN results are the canonical NaN: Decode maps every
// NaN it produces (a NaN or infinite fp16 scale) to num.NaNBits, and the Dot's FMA32 steps and
// lane sum give no other NaN.
const (
	q8KBytes = 292
	q8KQs    = 4
	q8KSums  = 260
)

// f16At reads a little-endian fp16 at b[0:2] as float32 (exact).
func f16At(b []byte) float32 { return num.F16ToF32(binary.LittleEndian.Uint16(b)) }

// q8KD is the float32 scale d of a q8_K block.
func q8KD(y []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(y)) }

// q8KSum is bsums[j] of a q8_K block.
func q8KSum(y []byte, j int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(y[q8KSums+2*j:])))
}

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0 … 7) from the 12 packed scale
// bytes of a q4_K or q5_K block (ggml's get_scale_min_k4):
//
//	bytes 0 … 3:  sc_0 … sc_3 in bits 0-5; bits 6-7 hold bits 4-5 of sc_4 … sc_7
//	bytes 4 … 7:  m_0 … m_3 in bits 0-5; bits 6-7 hold bits 4-5 of m_4 … m_7
//	bytes 8 … 11: bits 0-3 of sc_4 … sc_7 in bits 0-3, bits 0-3 of m_4 … m_7 in bits 4-7
func scaleMinK4(j int, q []byte) (sc, m int32) {
	if j < 4 {
		return int32(q[j] & 63), int32(q[j+4] & 63)
	}
	sc = int32(q[j+4]&0xf | q[j-4]>>6<<4)
	m = int32(q[j+4]>>4 | q[j]>>6<<4)
	return sc, m
}

// Masks selecting fields of every byte of a little-endian 8-byte word.
const (
	lowNibbles uint64 = 0x0f0f0f0f0f0f0f0f
	low2Bits   uint64 = 0x0303030303030303
	lowBits    uint64 = 0x0101010101010101
)

// le64 reads 8 bytes little-endian: byte k of b is bits 8k … 8k+7 of the word.
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// dot8 is Σ_k q_k·a_k over the 8 bytes of two words, q_k unsigned and a_k signed (int8).
func dot8(q, a uint64) int32 {
	s := int32(q&0xff)*int32(int8(a)) + int32(q>>8&0xff)*int32(int8(a>>8))
	s += int32(q>>16&0xff)*int32(int8(a>>16)) + int32(q>>24&0xff)*int32(int8(a>>24))
	s += int32(q>>32&0xff)*int32(int8(a>>32)) + int32(q>>40&0xff)*int32(int8(a>>40))
	s += int32(q>>48&0xff)*int32(int8(a>>48)) + int32(q>>56)*int32(int8(a>>56))
	return s
}
