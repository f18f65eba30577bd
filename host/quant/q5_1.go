package quant

import (
	"encoding/binary"

	"verity/device/dtype"
)

// Q5_1: blocks of 32 values, 24 bytes, value = q·d + m with q ∈ 0…31.
//
//	offset 0:  d      fp16, little-endian
//	offset 2:  m      fp16, little-endian (the block minimum)
//	offset 4:  qh     uint32, little-endian: bit j is bit 4 of q_j
//	offset 8:  qs[16] byte j holds the low 4 bits of q_j (low nibble) and of q_{j+16} (high)
//
// The reference quantiser (quantize_row_q5_1_ref) sets m = min, d = (max − min)/31 and
// q = trunc((x − min)·(1/d) + 0.5), with no clamp. Dequantisation rounds q·d to float32 before
// adding m, as ggml does.
const (
	qk51          = 32
	q51BlockBytes = 8 + qk51/2
)

type q51Format struct{}

func init() {
	checkLegacyLayout(dtype.Q5_1, qk51, q51BlockBytes)
	Register(q51Format{})
}

func (q51Format) Type() dtype.Type { return dtype.Q5_1 }

func (q51Format) Dequantize(values []float32, blocks []byte) {
	mustShape(dtype.Q5_1, len(values), len(blocks))
	for i := 0; i < len(values)/qk51; i++ {
		b := blocks[i*q51BlockBytes : (i+1)*q51BlockBytes]
		y := values[i*qk51 : (i+1)*qk51]
		d, m := loadHalf(b), loadHalf(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for j, q := range b[8:q51BlockBytes] {
			q0 := uint32(q&0xf) | (qh>>j&1)<<4
			q1 := uint32(q>>4) | (qh>>(j+16)&1)<<4
			y[j] = float32(float32(q0)*d) + m
			y[j+qk51/2] = float32(float32(q1)*d) + m
		}
	}
}

func (q51Format) Quantize(blocks []byte, values []float32) {
	mustShape(dtype.Q5_1, len(values), len(blocks))
	for i := 0; i < len(values)/qk51; i++ {
		x := values[i*qk51 : (i+1)*qk51]
		b := blocks[i*q51BlockBytes : (i+1)*q51BlockBytes]
		lo, hi := blockMinMax(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		storeHalf(b, d)
		storeHalf(b[2:], lo)
		var qh uint32
		for j := 0; j < qk51/2; j++ {
			q0 := cvtUint8(float32((x[j]-lo)*id) + 0.5)
			q1 := cvtUint8(float32((x[j+qk51/2]-lo)*id) + 0.5)
			b[8+j] = q0&0xf | q1<<4
			qh |= uint32(q0>>4&1)<<j | uint32(q1>>4&1)<<(j+16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
}

func (q51Format) DotRef(blocks []byte, x []float64) float64 {
	mustShape(dtype.Q5_1, len(x), len(blocks))
	var sum float64
	for i := 0; i < len(x)/qk51; i++ {
		b := blocks[i*q51BlockBytes : (i+1)*q51BlockBytes]
		xb := x[i*qk51 : (i+1)*qk51]
		d, m := float64(loadHalf(b)), float64(loadHalf(b[2:]))
		qh := binary.LittleEndian.Uint32(b[4:])
		for j := 0; j < qk51; j++ {
			q := uint32(nibble(b[8:], j)) | (qh>>j&1)<<4
			v := float64(float64(q)*d) + m // exact: fp16 values span < 2⁴⁵ ulps
			sum += float64(v * xb[j])
		}
	}
	return sum
}
