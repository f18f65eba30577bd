package quant

import (
	"encoding/binary"
	"math"

	"verity/device/dtype"
)

// F32: one value per 4-byte block, IEEE binary32 little-endian. Both directions copy bits
// (NaN payloads included), as ggml's memcpy does.

type f32Format struct{}

func init() {
	checkLegacyLayout(dtype.F32, 1, 4)
	Register(f32Format{})
}

func (f32Format) Type() dtype.Type { return dtype.F32 }

func (f32Format) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.F32, len(values), len(blocks))
	for i := range values {
		values[i] = math.Float32frombits(binary.LittleEndian.Uint32(blocks[4*i:]))
	}
}

func (f32Format) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.F32, len(values), len(blocks))
	for i, v := range values {
		binary.LittleEndian.PutUint32(blocks[4*i:], math.Float32bits(v))
	}
}

func (f32Format) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.F32, len(x), len(blocks))
	var sum float64
	for i, xi := range x {
		v := float64(math.Float32frombits(binary.LittleEndian.Uint32(blocks[4*i:])))
		sum += float64(v * xi)
	}
	return sum
}
