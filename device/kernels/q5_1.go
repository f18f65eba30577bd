package kernels

import (
	"encoding/binary"

	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q5_1 weights, Q8_1 activations.
//
// Weight block (24 bytes, 32 values):
//
//	[0:2]   d fp16
//	[2:4]   m fp16 (the block minimum)
//	[4:8]   qh uint32, little-endian: bit j is bit 4 of q_j
//	[8:24]  qs: byte j holds bits 0-3 of q_j in its low nibble and of q_{j+16} in its high nibble
//
// q_j ∈ 0…31; value_j = float32(float32(q_j)·d) + m, the product rounded before the add
// (ggml's dequantize_row_q5_1).
//
// Unit: one block. Step, with a the activation block's 32 int8 quants, d_x its fp16 scale and
// s_x its fp16 s field (ggml's fp16(d_x·Σa)):
//
//	S   = Σ_{j<32} q_j·a_j                        int32, exact
//	t   = fma(float32(S), d·d_x, m·s_x)           both products exact in float32; one rounding
//	acc = acc + t                                 one rounding
//
// As in ggml's ggml_vec_dot_q5_1_q8_1 the minimum's share is m·s_x (see Q4_1).
func init() {
	registerFormat(&Format{Type: dtype.Q5_1, Act: ActQ8_1, Unit: 32, Decode: decodeQ5_1, Dot: dotQ5_1, PackedDot: packedFromUnits(q5_1Units)})
}

func decodeQ5_1(dst []float32, row []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := row[24*i : 24*i+24]
		y := dst[32*i : 32*i+32]
		d, m := f16le(b), f16le(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for j, q := range b[8:24] {
			q0 := uint32(q&15) | (qh>>j&1)<<4
			q1 := uint32(q>>4) | (qh>>(j+16)&1)<<4
			y[j] = float32(float32(q0)*d) + m
			y[j+16] = float32(float32(q1)*d) + m
		}
		if !finite(d) || !finite(m) {
			canonNaN(y)
		}
	}
}

func dotQ5_1(row, x []byte, cols int) float32 {
	var acc [32]float32
	for u := 0; u < cols/32; u++ {
		w, a := row[24*u:24*u+24], x[36*u:36*u+36]
		s := dotNib16(w[8:], a[4:]) + 16*dotHigh16(binary.LittleEndian.Uint32(w[4:]), a[4:])
		t := num.FMA32(float32(s), float32(f16le(w)*f16le(a)), float32(f16le(w[2:])*f16le(a[2:])))
		l := u & 31
		acc[l] = addUnit(acc[l], t)
	}
	return laneSum(&acc)
}

// q5_1Units is dotQ5_1 over the device layout, in units (a unitsFunc): unit u's 16 quant bytes at
// 16u of the first plane, its qh word (verbatim) in the second, its fp16 d and m in the fp16
// section.
func q5_1Units(acc *[32]float32, l *repack.Layout, row, x []byte, from, to int) {
	pl, ph := l.Planes[0], l.Planes[1]
	for u := from; u < to; u++ {
		a := x[36*u : 36*u+36]
		qh := binary.LittleEndian.Uint32(unitBytes(row, ph, u))
		s := dotNib16(unitBytes(row, pl, u), a[4:]) + 16*dotHigh16(qh, a[4:])
		t := num.FMA32(float32(s), float32(f16Field(l, row, 0, u)*f16le(a)), float32(f16Field(l, row, 1, u)*f16le(a[2:])))
		acc[u&31] = addUnit(acc[u&31], t)
	}
}
