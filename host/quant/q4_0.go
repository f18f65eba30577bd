package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"verity/device/dtype"
	"verity/device/num"
)

// Q4_0: blocks of 32 values, 18 bytes, value = (q − 8)·d with q ∈ 0…15.
//
//	offset 0:  d      fp16, little-endian
//	offset 2:  qs[16] byte j holds q_j in its low nibble and q_{j+16} in its high nibble
//
// The reference quantiser (quantize_row_q4_0_ref) takes the element of largest magnitude, max
// (the first one on ties), sets d = max/−8 so that max maps to level 0, and encodes
// q = min(15, trunc(x·(1/d) + 8.5)) — truncation, not rounding to nearest (see cvtInt8 for
// what the cast does out of range).
const (
	qk40          = 32
	q40BlockBytes = 2 + qk40/2
)

type q40Format struct{}

func init() {
	checkLegacyLayout(dtype.Q4_0, qk40, q40BlockBytes)
	Register(q40Format{})
}

func (q40Format) Type() dtype.Type { return dtype.Q4_0 }

func (q40Format) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q4_0, len(values), len(blocks))
	for i := 0; i < len(values)/qk40; i++ {
		b := blocks[i*q40BlockBytes : (i+1)*q40BlockBytes]
		y := values[i*qk40 : (i+1)*qk40]
		d := loadHalf(b)
		for j, q := range b[2:q40BlockBytes] {
			y[j] = float32(int32(q&0xf)-8) * d
			y[j+qk40/2] = float32(int32(q>>4)-8) * d
		}
	}
}

func (q40Format) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q4_0, len(values), len(blocks))
	for i := 0; i < len(values)/qk40; i++ {
		x := values[i*qk40 : (i+1)*qk40]
		b := blocks[i*q40BlockBytes : (i+1)*q40BlockBytes]
		var amax, maxv float32
		for _, v := range x {
			if a := fabs32(v); amax < a {
				amax, maxv = a, v
			}
		}
		d := maxv / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		storeHalf(b, d)
		for j := 0; j < qk40/2; j++ {
			q0 := min(15, cvtInt8(float32(x[j]*id)+8.5))
			q1 := min(15, cvtInt8(float32(x[j+qk40/2]*id)+8.5))
			b[2+j] = uint8(q0) | uint8(q1)<<4
		}
	}
}

func (q40Format) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q4_0, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qk40; i++ {
		b := blocks[i*q40BlockBytes : (i+1)*q40BlockBytes]
		xb := x[i*qk40 : (i+1)*qk40]
		d := float64(loadHalf(b))
		for j := 0; j < qk40; j++ {
			sum += float64(float64(int32(nibble(b[2:], j))-8) * d * xb[j])
		}
	}
	return sum
}

// The helpers below are shared by the legacy block types (q4_0, q4_1, q5_0, q5_1, q8_0).

// checkLegacyLayout panics at init time when device/dtype disagrees with a block layout
// declared in this package.
func checkLegacyLayout(t dtype.Type, blockSize, blockBytes int) {
	if t.BlockSize() != blockSize || t.BlockBytes() != blockBytes {
		panic(fmt.Sprintf("quant: %s layout is %d values in %d bytes, dtype says %d in %d",
			t, blockSize, blockBytes, t.BlockSize(), t.BlockBytes()))
	}
}

// nibble returns 4-bit value j (0…31) of a 16-byte quant array laid out as ggml's 32-value
// blocks are: low nibbles hold values 0…15, high nibbles values 16…31.
func nibble(qs []byte, j int) uint8 {
	if j < 16 {
		return qs[j] & 0xf
	}
	return qs[j-16] >> 4
}

// loadHalf reads a little-endian IEEE binary16 from b[0:2] (exactly, as float32).
func loadHalf(b []byte) float32 { return num.F16ToF32(binary.LittleEndian.Uint16(b)) }

// storeHalf writes f to b[0:2] as a little-endian binary16, rounded to nearest even as
// ggml's GGML_FP32_TO_FP16 rounds (overflow to ±inf).
func storeHalf(b []byte, f float32) { binary.LittleEndian.PutUint16(b, num.F32ToF16(f)) }

func fabs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// ggml's legacy quantisers cast floats straight to int8_t (q4_0, q4_1, q5_0, q8_0) or uint8_t
// (q5_1). C leaves the result undefined when the value does not fit, which happens only when
// 1/d overflows (blocks of tiny values) or the input holds NaN or ±inf. llama.cpp's x86-64
// build vectorises these loops, and the helpers below give what its instructions give for
// every input: cvttps2dq (truncate; NaN and out-of-range values become INT32_MIN), then packs
// to bytes. In range, all of them are plain truncation toward zero.

// cvtInt32 is cvttps2dq on one value: truncation toward zero, and INT32_MIN (the "integer
// indefinite") for NaN and for values outside the int32 range.
func cvtInt32(f float32) int32 {
	if f >= -(1<<31) && f < 1<<31 {
		return int32(f)
	}
	return math.MinInt32
}

// cvtInt8 is the int8_t cast: cvttps2dq, then the signed saturating packs packssdw and
// packsswb, so out-of-range values clamp to −128…127 (and NaN, ±inf give −128).
func cvtInt8(f float32) int32 {
	return min(127, max(-128, cvtInt32(f)))
}

// cvtUint8 is q5_1's uint8_t cast: cvttps2dq, then packuswb twice, which saturates each 16-bit
// half of the int32 to 0…255 and then the 16-bit word those two bytes form.
func cvtUint8(f float32) uint8 {
	v := cvtInt32(f)
	word := int16(uint16(usat8(int16(v))) | uint16(usat8(int16(v>>16)))<<8)
	return usat8(word)
}

func usat8(w int16) uint8 { return uint8(min(255, max(0, w))) }
