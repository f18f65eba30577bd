package kernels

import (
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q4_1 weights, Q8_1 activations.
//
// Weight block (20 bytes, 32 values):
//
//	[0:2]   d fp16
//	[2:4]   m fp16 (the block minimum)
//	[4:20]  qs: byte j holds q_j in its low nibble and q_{j+16} in its high nibble (q ∈ 0…15)
//
// value_j = float32(float32(q_j)·d) + m, the product rounded before the add (ggml's
// dequantize_row_q4_1).
//
// Unit: one block. Step, with a the activation block's 32 int8 quants, d_x its fp16 scale and
// s_x its fp16 s field (ggml's fp16(d_x·Σa)):
//
//	S   = Σ_{j<32} q_j·a_j                        int32, exact
//	t   = fma(float32(S), d·d_x, m·s_x)           both products exact in float32; one rounding
//	acc = acc + t                                 one rounding
//
// As in ggml's ggml_vec_dot_q4_1_q8_1 the minimum's share is m·s_x, so the result differs
// from the exact Σ value_j·(d_x·a_j) by m·(s_x − d_x·Σa) per block, up to 2⁻¹² of m·d_x·Σa.
func init() {
	registerFormat(&Format{Type: dtype.Q4_1, Act: ActQ8_1, Unit: 32, Decode: decodeQ4_1, Dot: dotQ4_1, PackedDot: packedFromUnits(q4_1Units)})
}

func decodeQ4_1(dst []float32, row []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := row[20*i : 20*i+20]
		y := dst[32*i : 32*i+32]
		d, m := f16le(b), f16le(b[2:])
		for j, q := range b[4:20] {
			y[j] = float32(float32(q&15)*d) + m
			y[j+16] = float32(float32(q>>4)*d) + m
		}
		if !finite(d) || !finite(m) {
			canonNaN(y)
		}
	}
}

func dotQ4_1(row, x []byte, cols int) float32 {
	var acc [32]float32
	for u := 0; u < cols/32; u++ {
		w, a := row[20*u:20*u+20], x[36*u:36*u+36]
		s := dotNib16(w[4:], a[4:])
		t := num.FMA32(float32(s), float32(f16le(w)*f16le(a)), float32(f16le(w[2:])*f16le(a[2:])))
		l := u & 31
		acc[l] = addUnit(acc[l], t)
	}
	return laneSum(&acc)
}

// q4_1Units is dotQ4_1 over the device layout, in units (a unitsFunc): unit u's 16 quant bytes at
// 16u of the plane, its fp16 d and m in the fp16 section's two fields.
func q4_1Units(acc *[32]float32, l *repack.Layout, row, x []byte, from, to int) {
	p := l.Planes[0]
	for u := from; u < to; u++ {
		a := x[36*u : 36*u+36]
		s := dotNib16(unitBytes(row, p, u), a[4:])
		t := num.FMA32(float32(s), float32(f16Field(l, row, 0, u)*f16le(a)), float32(f16Field(l, row, 1, u)*f16le(a[2:])))
		acc[u&31] = addUnit(acc[u&31], t)
	}
}
