package kernels

import (
	"encoding/binary"
	"math"

	"verity/device/num"
	"verity/repack"
)

// Shared pieces of the legacy weight formats (q4_0, q4_1, q5_0, q5_1, q8_0). Each stores
// blocks of 32 values with fp16 scales, and each uses one block as its reduction unit: unit u
// of a row is values 32u … 32u+31, i.e. weight block u and activation block u, folded by lane
// u mod 32. The activation blocks are
//
//	block_q8_0 (ActQ8_0, 34 bytes):  [0:2] d fp16, [2:34] qs 32 × int8; x_j = d·qs_j
//	block_q8_1 (ActQ8_1, 36 bytes):  [0:2] d fp16, [2:4] s fp16 = fp16(d·Σqs), [4:36] qs 32 × int8
//
// Within a unit the weight quants times the activation quants are summed exactly in int32
// (|Σ| ≤ 32·128·128 = 2¹⁹, so its float32 conversion is exact too), and the product of two
// fp16 scales is exact in float32 (22 significant bits, exponent within float32's normal
// range). So the unit step acc = fma(float32(Σ), d_w·d_x, acc) of the symmetric types rounds
// once per unit; the types with a block minimum (q4_1, q5_1) add the exact product m_w·s_x,
// as ggml's ggml_vec_dot_q4_1_q8_1 does, which costs one more rounding.
//
// A warp's lanes read 32 consecutive blocks per step, so its loads coalesce. In GGUF's layout
// the weight blocks are 18, 20, 22, 24 or 34 bytes long, so a block is only 2-byte (q4_0,
// q5_0, q8_0), 4-byte (q4_1) or 8-byte (q5_1) aligned and a lane reads it with loads of that
// width (the qh word of q5_0 as two 16-bit halves); q8_0 activation blocks are 2-byte and
// q8_1 blocks 4-byte aligned. A repacked layout with the scales apart from the quants lets a
// lane fetch its 16 (q4), 20 (q5) or 32 (q8) quant bytes with one or two 16-byte loads and
// sum them four at a time (dp4a); the integer sums, and so the bits, are the same.
//
// NaN results are the canonical NaN (num.NaNBits), as on the GPU, in Dot and in Decode: a
// block whose fp16 scale or minimum is NaN or ±Inf decodes to the canonical NaN wherever the
// value is NaN, where ggml's x86 code would keep the scale's payload (or give its default
// NaN, for Inf·0). Otherwise Decode is ggml's dequantize_row_* bit for bit.

// f16le reads a little-endian fp16 at b[0:2] as float32 (exact).
func f16le(b []byte) float32 { return num.F16ToF32(binary.LittleEndian.Uint16(b)) }

// finite reports whether f is neither ±Inf nor NaN.
func finite(f float32) bool { return math.Float32bits(f)&0x7f800000 != 0x7f800000 }

// canonNaN maps every NaN to the canonical NaN and leaves other values alone.
func canonNaN(v []float32) {
	for i, f := range v {
		if f != f {
			v[i] = num.NaN32()
		}
	}
}

// addUnit returns acc + t rounded once, with the canonical NaN for a NaN sum.
func addUnit(acc, t float32) float32 {
	s := acc + t
	if s != s {
		return num.NaN32()
	}
	return s
}

// dotNib16 is Σ_j lo_j·a_j + hi_j·a_{j+16} over the 16 bytes of qs, lo_j and hi_j being the
// low and high nibble of qs[j] and a the 32 int8 activation quants.
func dotNib16(qs, a []byte) int32 {
	qs, a = qs[:16], a[:32]
	return nib8(binary.LittleEndian.Uint64(qs), binary.LittleEndian.Uint64(a), binary.LittleEndian.Uint64(a[16:])) +
		nib8(binary.LittleEndian.Uint64(qs[8:]), binary.LittleEndian.Uint64(a[8:]), binary.LittleEndian.Uint64(a[24:]))
}

// dotNib16m8 is dotNib16 with every nibble q read as q − 8 (q4_0's offset): q − 8 is the
// nibble q ^ 8 read as a signed 4-bit number.
func dotNib16m8(qs, a []byte) int32 {
	qs, a = qs[:16], a[:32]
	const flip = 0x8888888888888888
	return nib8s(binary.LittleEndian.Uint64(qs)^flip, binary.LittleEndian.Uint64(a), binary.LittleEndian.Uint64(a[16:])) +
		nib8s(binary.LittleEndian.Uint64(qs[8:])^flip, binary.LittleEndian.Uint64(a[8:]), binary.LittleEndian.Uint64(a[24:]))
}

// nib8 is Σ_i lo_i·a_i + hi_i·b_i over the 8 bytes of w (nibbles lo_i, hi_i of byte i) and
// the 8 int8 values each of a and b.
func nib8(w, a, b uint64) int32 {
	return int32(w&15)*int32(int8(a)) + int32(w>>4&15)*int32(int8(b)) +
		int32(w>>8&15)*int32(int8(a>>8)) + int32(w>>12&15)*int32(int8(b>>8)) +
		int32(w>>16&15)*int32(int8(a>>16)) + int32(w>>20&15)*int32(int8(b>>16)) +
		int32(w>>24&15)*int32(int8(a>>24)) + int32(w>>28&15)*int32(int8(b>>24)) +
		int32(w>>32&15)*int32(int8(a>>32)) + int32(w>>36&15)*int32(int8(b>>32)) +
		int32(w>>40&15)*int32(int8(a>>40)) + int32(w>>44&15)*int32(int8(b>>40)) +
		int32(w>>48&15)*int32(int8(a>>48)) + int32(w>>52&15)*int32(int8(b>>48)) +
		int32(w>>56&15)*int32(int8(a>>56)) + int32(w>>60)*int32(int8(b>>56))
}

// nib8s is nib8 with the nibbles read as signed 4-bit numbers (−8 … 7).
func nib8s(w, a, b uint64) int32 {
	v := int64(w)
	return int32(v<<60>>60)*int32(int8(a)) + int32(v<<56>>60)*int32(int8(b)) +
		int32(v<<52>>60)*int32(int8(a>>8)) + int32(v<<48>>60)*int32(int8(b>>8)) +
		int32(v<<44>>60)*int32(int8(a>>16)) + int32(v<<40>>60)*int32(int8(b>>16)) +
		int32(v<<36>>60)*int32(int8(a>>24)) + int32(v<<32>>60)*int32(int8(b>>24)) +
		int32(v<<28>>60)*int32(int8(a>>32)) + int32(v<<24>>60)*int32(int8(b>>32)) +
		int32(v<<20>>60)*int32(int8(a>>40)) + int32(v<<16>>60)*int32(int8(b>>40)) +
		int32(v<<12>>60)*int32(int8(a>>48)) + int32(v<<8>>60)*int32(int8(b>>48)) +
		int32(v<<4>>60)*int32(int8(a>>56)) + int32(v>>60)*int32(int8(b>>56))
}

// sum8 is the sum of the 8 int8 values in the bytes of v.
func sum8(v uint64) int32 {
	u := v ^ 0x8080808080808080 // each byte + 128, now unsigned
	p := u&0x00ff00ff00ff00ff + u>>8&0x00ff00ff00ff00ff
	return int32(p*0x0001000100010001>>48) - 8*128
}

// sumMasked8 is the sum of the int8 values in the bytes i of v whose bit i of m is set.
func sumMasked8(v uint64, m uint8) int32 {
	t := uint64(m) * 0x0101010101010101 & 0x8040201008040201 // byte i keeps bit i of m
	t = (t + 0x7f7f7f7f7f7f7f7f) & 0x8080808080808080 >> 7   // 1 where set
	return sum8(v & (t * 0xff))
}

// dotHigh16 is Σ_j bit_j·a_j over the 32 bits of qh and the 32 int8 activation quants: the
// contribution of the fifth quant bit of q5_0 and q5_1, divided by 16.
func dotHigh16(qh uint32, a []byte) int32 {
	a = a[:32]
	return sumMasked8(binary.LittleEndian.Uint64(a), uint8(qh)) +
		sumMasked8(binary.LittleEndian.Uint64(a[8:]), uint8(qh>>8)) +
		sumMasked8(binary.LittleEndian.Uint64(a[16:]), uint8(qh>>16)) +
		sumMasked8(binary.LittleEndian.Uint64(a[24:]), uint8(qh>>24))
}

// unitsFunc folds units from … to−1 of a row in the device layout, with activation row x, into
// the 32 lane accumulators (lane u mod 32 takes unit u): a format's dot product in pieces.
type unitsFunc func(acc *[32]float32, l *repack.Layout, row, x []byte, from, to int)

// packedFromUnits is the PackedDot of a format given as units: every unit, then the lane fold.
func packedFromUnits(units unitsFunc) func(l *repack.Layout, row, x []byte) float32 {
	return func(l *repack.Layout, row, x []byte) float32 {
		var acc [32]float32
		units(&acc, l, row, x, 0, int(l.Units))
		return laneSum(&acc)
	}
}
