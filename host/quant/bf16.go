package quant

import (
	"encoding/binary"
	"math"

	"verity/device/dtype"
	"verity/device/num"
)

// BF16: one value per 2-byte block, bfloat16 (the top half of a binary32) little-endian.
//
// Quantize is ggml's ggml_fp32_to_bf16_row_ref, which llama.cpp's quantiser calls: round to
// nearest even on the dropped 16 bits, subnormals kept (not flushed), NaN made quiet by
// setting bit 6 of the result. Dequantize shifts the bits back (exact, NaNs unchanged).

type bf16Format struct{}

func init() {
	checkLegacyLayout(dtype.BF16, 1, 2)
	Register(bf16Format{})
}

func (bf16Format) Type() dtype.Type { return dtype.BF16 }

func (bf16Format) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.BF16, len(values), len(blocks))
	for i := range values {
		values[i] = num.BF16ToF32(binary.LittleEndian.Uint16(blocks[2*i:]))
	}
}

func (bf16Format) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.BF16, len(values), len(blocks))
	for i, v := range values {
		binary.LittleEndian.PutUint16(blocks[2*i:], num.F32ToBF16(v))
	}
}

func (bf16Format) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.BF16, len(x), len(blocks))
	var sum float64
	for i, xi := range x {
		v := float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(blocks[2*i:])) << 16))
		sum += float64(v * xi)
	}
	return sum
}
