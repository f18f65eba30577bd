package kernels

import (
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q4_0 weights, Q8_0 activations.
//
// Weight block (18 bytes, 32 values):
//
//	[0:2]   d fp16
//	[2:18]  qs: byte j holds q_j in its low nibble and q_{j+16} in its high nibble (q ∈ 0…15)
//
// value_j = float32(q_j − 8)·d (ggml's dequantize_row_q4_0).
//
// Unit: one block. Step, with a the activation block's 32 int8 quants and d_x its fp16 scale:
//
//	S   = Σ_{j<32} (q_j − 8)·a_j                  int32, exact
//	acc = fma(float32(S), d·d_x, acc)             d·d_x exact in float32; one rounding
func init() {
	registerFormat(&Format{Type: dtype.Q4_0, Act: ActQ8_0, Unit: 32, Decode: decodeQ4_0, Dot: dotQ4_0, PackedDot: packedFromUnits(q4_0Units)})
}

func decodeQ4_0(dst []float32, row []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := row[18*i : 18*i+18]
		y := dst[32*i : 32*i+32]
		d := f16le(b)
		for j, q := range b[2:18] {
			y[j] = float32(int32(q&15)-8) * d
			y[j+16] = float32(int32(q>>4)-8) * d
		}
		if !finite(d) {
			canonNaN(y)
		}
	}
}

func dotQ4_0(row, x []byte, cols int) float32 {
	var acc [32]float32
	for u := 0; u < cols/32; u++ {
		w, a := row[18*u:18*u+18], x[34*u:34*u+34]
		s := dotNib16m8(w[2:], a[2:])
		l := u & 31
		acc[l] = num.FMA32(float32(s), float32(f16le(w)*f16le(a)), acc[l])
	}
	return laneSum(&acc)
}

// q4_0Units is dotQ4_0 over the device layout, in units (a unitsFunc): unit u's 16 quant bytes
// verbatim, its fp16 d at 2u.
func q4_0Units(acc *[32]float32, l *repack.Layout, row, x []byte, from, to int) {
	p := l.Planes[0]
	for u := from; u < to; u++ {
		a := x[34*u : 34*u+34]
		s := dotNib16m8(unitBytes(row, p, u), a[2:])
		acc[u&31] = num.FMA32(float32(s), float32(f16Field(l, row, 0, u)*f16le(a)), acc[u&31])
	}
}
