package quant

import (
	"verity/device/dtype"
)

// Q8_0: blocks of 32 values, 34 bytes, value = q·d with q ∈ −128…127.
//
//	offset 0:  d      fp16, little-endian
//	offset 2:  qs[32] int8
//
// The reference quantiser (quantize_row_q8_0_ref) sets d = amax/127 and q = roundf(x·(1/d)),
// rounding half away from zero, so q ∈ −127…127 for finite blocks.
const (
	qk80          = 32
	q80BlockBytes = 2 + qk80
)

type q80Format struct{}

func init() {
	checkLegacyLayout(dtype.Q8_0, qk80, q80BlockBytes)
	Register(q80Format{})
}

func (q80Format) Type() dtype.Type { return dtype.Q8_0 }

func (q80Format) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q8_0, len(values), len(blocks))
	for i := 0; i < len(values)/qk80; i++ {
		b := blocks[i*q80BlockBytes : (i+1)*q80BlockBytes]
		y := values[i*qk80 : (i+1)*qk80]
		d := loadHalf(b)
		for j, q := range b[2:q80BlockBytes] {
			y[j] = float32(int8(q)) * d
		}
	}
}

func (q80Format) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q8_0, len(values), len(blocks))
	for i := 0; i < len(values)/qk80; i++ {
		x := values[i*qk80 : (i+1)*qk80]
		b := blocks[i*q80BlockBytes : (i+1)*q80BlockBytes]
		var amax float32
		for _, v := range x {
			// ggml's MAX(amax, |v|) = amax > |v| ? amax : |v|, which also lets a NaN in.
			if a := fabs32(v); !(amax > a) {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		storeHalf(b, d)
		for j, v := range x {
			b[2+j] = uint8(cvtInt8(roundAway(v * id)))
		}
	}
}

func (q80Format) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q8_0, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qk80; i++ {
		b := blocks[i*q80BlockBytes : (i+1)*q80BlockBytes]
		xb := x[i*qk80 : (i+1)*qk80]
		d := float64(loadHalf(b))
		for j, q := range b[2:q80BlockBytes] {
			sum += float64(float64(int8(q)) * d * xb[j])
		}
	}
	return sum
}
