package quant

import (
	"math"

	"verity/device/dtype"
)

// Q4_1: blocks of 32 values, 20 bytes, value = q·d + m with q ∈ 0…15.
//
//	offset 0:  d      fp16, little-endian
//	offset 2:  m      fp16, little-endian (the block minimum)
//	offset 4:  qs[16] byte j holds q_j in its low nibble and q_{j+16} in its high nibble
//
// The reference quantiser (quantize_row_q4_1_ref) sets m = min, d = (max − min)/15 and
// q = min(15, trunc((x − min)·(1/d) + 0.5)). Dequantisation rounds q·d to float32 before
// adding m, as ggml does.
const (
	qk41          = 32
	q41BlockBytes = 4 + qk41/2
)

type q41Format struct{}

func init() {
	checkLegacyLayout(dtype.Q4_1, qk41, q41BlockBytes)
	Register(q41Format{})
}

func (q41Format) Type() dtype.Type { return dtype.Q4_1 }

func (q41Format) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q4_1, len(values), len(blocks))
	for i := 0; i < len(values)/qk41; i++ {
		b := blocks[i*q41BlockBytes : (i+1)*q41BlockBytes]
		y := values[i*qk41 : (i+1)*qk41]
		d, m := loadHalf(b), loadHalf(b[2:])
		for j, q := range b[4:q41BlockBytes] {
			y[j] = float32(float32(q&0xf)*d) + m
			y[j+qk41/2] = float32(float32(q>>4)*d) + m
		}
	}
}

func (q41Format) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q4_1, len(values), len(blocks))
	for i := 0; i < len(values)/qk41; i++ {
		x := values[i*qk41 : (i+1)*qk41]
		b := blocks[i*q41BlockBytes : (i+1)*q41BlockBytes]
		lo, hi := blockMinMax(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		storeHalf(b, d)
		storeHalf(b[2:], lo)
		for j := 0; j < qk41/2; j++ {
			q0 := min(15, cvtInt8(float32((x[j]-lo)*id)+0.5))
			q1 := min(15, cvtInt8(float32((x[j+qk41/2]-lo)*id)+0.5))
			b[4+j] = uint8(q0) | uint8(q1)<<4
		}
	}
}

func (q41Format) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q4_1, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qk41; i++ {
		b := blocks[i*q41BlockBytes : (i+1)*q41BlockBytes]
		xb := x[i*qk41 : (i+1)*qk41]
		d, m := float64(loadHalf(b)), float64(loadHalf(b[2:]))
		for j := 0; j < qk41; j++ {
			v := float64(float64(nibble(b[4:], j))*d) + m // exact: fp16 values span < 2⁴⁵ ulps
			sum += float64(v * xb[j])
		}
	}
	return sum
}

// blockMinMax returns the smallest and largest element of x as ggml's q4_1/q5_1 quantisers
// find them: starting from ±FLT_MAX with strict comparisons (so NaNs are skipped, and a block
// of NaNs keeps the starting values).
func blockMinMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}
