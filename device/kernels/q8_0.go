package kernels

import (
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q8_0 weights, Q8_0 activations.
//
// Weight block (34 bytes, 32 values), the same layout as the activation block:
//
//	[0:2]   d fp16
//	[2:34]  qs: 32 × int8
//
// value_j = float32(q_j)·d (ggml's dequantize_row_q8_0).
//
// Unit: one block. Step, with a the activation block's 32 int8 quants and d_x its fp16 scale:
//
//	S   = Σ_{j<32} q_j·a_j                        int32, exact
//	acc = fma(float32(S), d·d_x, acc)             d·d_x exact in float32; one rounding
func init() {
	registerFormat(&Format{Type: dtype.Q8_0, Act: ActQ8_0, Unit: 32, Decode: decodeQ8_0, Dot: dotQ8_0, PackedDot: packedFromUnits(q8_0Units)})
}

func decodeQ8_0(dst []float32, row []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := row[34*i : 34*i+34]
		y := dst[32*i : 32*i+32]
		d := f16le(b)
		for j, q := range b[2:34] {
			y[j] = float32(int8(q)) * d
		}
		if !finite(d) {
			canonNaN(y)
		}
	}
}

func dotQ8_0(row, x []byte, cols int) float32 {
	var acc [32]float32
	for u := 0; u < cols/32; u++ {
		w, a := row[34*u:34*u+34], x[34*u:34*u+34]
		q, v := w[2:34], a[2:34]
		var s0, s1 int32
		for j := 0; j < 32; j += 4 {
			s0 += int32(int8(q[j]))*int32(int8(v[j])) + int32(int8(q[j+1]))*int32(int8(v[j+1]))
			s1 += int32(int8(q[j+2]))*int32(int8(v[j+2])) + int32(int8(q[j+3]))*int32(int8(v[j+3]))
		}
		l := u & 31
		acc[l] = num.FMA32(float32(s0+s1), float32(f16le(w)*f16le(a)), acc[l])
	}
	return laneSum(&acc)
}

// q8_0Units is dotQ8_0 over the device layout, in units (a unitsFunc): unit u's 32 quants in two
// 16-byte pieces, its fp16 d at 2u.
func q8_0Units(acc *[32]float32, l *repack.Layout, row, x []byte, from, to int) {
	p := l.Planes[0]
	for u := from; u < to; u++ {
		lo, hi := unit32(row, p, u)
		a := x[34*u : 34*u+34]
		v := a[2:34]
		var s int32
		for j := 0; j < 16; j++ {
			s += int32(int8(lo[j]))*int32(int8(v[j])) + int32(int8(hi[j]))*int32(int8(v[16+j]))
		}
		acc[u&31] = num.FMA32(float32(s), float32(f16Field(l, row, 0, u)*f16le(a)), acc[u&31])
	}
}
