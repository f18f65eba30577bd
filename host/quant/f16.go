package quant

import (
	"encoding/binary"
	"math"

	"verity/device/dtype"
	"verity/device/num"
)

// F16: one value per 2-byte block, IEEE binary16 little-endian.
//
// Quantize is ggml's ggml_fp32_to_fp16_row: round to nearest even, overflow to ±inf, gradual
// underflow, NaN to the quiet NaN 0x7e00 with the sign kept. Dequantize is
// ggml_fp16_to_fp32_row: exact, except that a signalling NaN comes back quiet (ggml widens
// with a float multiplication, which sets the quiet bit), the payload otherwise kept.

type f16Format struct{}

func init() {
	checkLegacyLayout(dtype.F16, 1, 2)
	Register(f16Format{})
}

func (f16Format) Type() dtype.Type { return dtype.F16 }

func (f16Format) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.F16, len(values), len(blocks))
	for i := range values {
		h := binary.LittleEndian.Uint16(blocks[2*i:])
		if e := h & 0x7c00; e != 0 && e != 0x7c00 { // normal: the fast path of f16Widen, inlined
			values[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23))
			continue
		}
		values[i] = f16WidenSpecial(h)
	}
}

func (f16Format) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.F16, len(values), len(blocks))
	for i, v := range values {
		binary.LittleEndian.PutUint16(blocks[2*i:], num.F32ToF16(v))
	}
}

func (f16Format) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.F16, len(x), len(blocks))
	var sum float64
	for i, xi := range x {
		v := float64(f16Widen(binary.LittleEndian.Uint16(blocks[2*i:])))
		sum += float64(v * xi)
	}
	return sum
}

// f16Widen is ggml's fp16-to-fp32 conversion: num.F16ToF32 with NaNs made quiet. Normal
// halves, the common case, only need the exponent re-biased (15 → 127) and the mantissa
// shifted up by 13 bits.
func f16Widen(h uint16) float32 {
	if e := h & 0x7c00; e != 0 && e != 0x7c00 {
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23))
	}
	return f16WidenSpecial(h)
}

// f16WidenSpecial widens zeros, subnormals, infinities and NaNs.
func f16WidenSpecial(h uint16) float32 {
	f := num.F16ToF32(h)
	if h&0x7c00 == 0x7c00 && h&0x03ff != 0 {
		f = math.Float32frombits(math.Float32bits(f) | 1<<22)
	}
	return f
}
