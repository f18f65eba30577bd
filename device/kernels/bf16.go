package kernels

import (
	"encoding/binary"

	"verity/device/dtype"
	"verity/device/num"
)

// BF16 weights, bf16 activations (as ggml's CPU backend converts them). Unit: 8 consecutive
// values; products of two bf16 values are exact in float32; step acc = fma(w[i], x[i], acc).
func init() {
	registerFormat(&Format{
		Type: dtype.BF16, Act: ActBF16, Unit: 8,
		Decode: func(dst []float32, row []byte) {
			for i := range dst {
				dst[i] = num.BF16ToF32(binary.LittleEndian.Uint16(row[2*i:]))
			}
		},
		Dot: func(row, x []byte, cols int) float32 { return dot16(row, x, cols, num.BF16ToF32) },
	})
}
