package kernels

import (
	"encoding/binary"

	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q5_0 weights, Q8_0 activations.
//
// Weight block (22 bytes, 32 values):
//
//	[0:2]   d fp16
//	[2:6]   qh uint32, little-endian: bit j is bit 4 of q_j
//	[6:22]  qs: byte j holds bits 0-3 of q_j in its low nibble and of q_{j+16} in its high nibble
//
// q_j ∈ 0…31; value_j = float32(q_j − 16)·d (ggml's dequantize_row_q5_0).
//
// Unit: one block. Step, with a the activation block's 32 int8 quants and d_x its fp16 scale:
//
//	S   = Σ_{j<32} (q_j − 16)·a_j                 int32, exact
//	acc = fma(float32(S), d·d_x, acc)             d·d_x exact in float32; one rounding
func init() {
	registerFormat(&Format{Type: dtype.Q5_0, Act: ActQ8_0, Unit: 32, Decode: decodeQ5_0, Dot: dotQ5_0, PackedDot: packedFromUnits(q5_0Units)})
}

func decodeQ5_0(dst []float32, row []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := row[22*i : 22*i+22]
		y := dst[32*i : 32*i+32]
		d := f16le(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		for j, q := range b[6:22] {
			q0 := int32(q&15) | int32(qh>>j&1)<<4
			q1 := int32(q>>4) | int32(qh>>(j+16)&1)<<4
			y[j] = float32(q0-16) * d
			y[j+16] = float32(q1-16) * d
		}
		if !finite(d) {
			canonNaN(y)
		}
	}
}

func dotQ5_0(row, x []byte, cols int) float32 {
	var acc [32]float32
	for u := 0; u < cols/32; u++ {
		w, a := row[22*u:22*u+22], x[34*u:34*u+34]
		// q − 16 = lo + 16·(h − 1): the fifth bits subtract 16·a_j wherever they are clear
		s := dotNib16(w[6:], a[2:]) - 16*dotHigh16(^binary.LittleEndian.Uint32(w[2:]), a[2:])
		l := u & 31
		acc[l] = num.FMA32(float32(s), float32(f16le(w)*f16le(a)), acc[l])
	}
	return laneSum(&acc)
}

// q5_0Units is dotQ5_0 over the device layout, in units (a unitsFunc): unit u's 16 quant bytes at
// 16u of the first plane, its qh word (verbatim) in the second.
func q5_0Units(acc *[32]float32, l *repack.Layout, row, x []byte, from, to int) {
	pl, ph := l.Planes[0], l.Planes[1]
	for u := from; u < to; u++ {
		a := x[34*u : 34*u+34]
		qh := binary.LittleEndian.Uint32(unitBytes(row, ph, u))
		s := dotNib16(unitBytes(row, pl, u), a[2:]) - 16*dotHigh16(^qh, a[2:])
		acc[u&31] = num.FMA32(float32(s), float32(f16Field(l, row, 0, u)*f16le(a)), acc[u&31])
	}
}
