package kernels

import (
	"encoding/binary"

	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q5_K weights, q8_K activations. A 256-value super-block is 176 bytes, 8 sub-blocks of 32
// values, x = d·sc_s·q − dmin·m_s with 5-bit q ∈ 0…31 and 6-bit sc_s, m_s:
//
//	[0:2]    d, fp16 (scale of the 6-bit scales)
//	[2:4]    dmin, fp16 (scale of the 6-bit mins)
//	[4:16]   sc_s and m_s, packed (scaleMinK4)
//	[16:48]  qh: bit 4 of q for value 32s + l (l = 0…31) is bit s of byte 16 + l
//	[48:176] qs: bits 0-3 of q for value 32s + l are nibble s mod 2 (low nibble first) of
//	         byte 48 + 32·⌊s/2⌋ + l
//
// Unit: one sub-block s (32 values): the 32 qs bytes 48 + 32⌊s/2⌋ … and the 32 qh bytes (the
// 8 lanes of a super-block read the same qh bytes, each its own bit); 16-byte loads, blocks
// being 16-byte aligned in a row (176 = 16·11); sc_s, m_s as in q4_K (scaleMinK4). With D = float32(d·d_x),
// Dmin = float32(dmin·d_x) (see kquant.go), the unit's q8_K quants a_l and
// B = bsums[2s] + bsums[2s+1]:
//
//	S = sc_s·Σ_l q_l·a_l,  M = m_s·B                  (exact int32)
//	acc = fma(D, float32(S), acc)
//	acc = fma(−Dmin, float32(M), acc)
//
// the meaning of ggml_vec_dot_q5_K_q8_K.
func init() {
	registerFormat(&Format{Type: dtype.Q5_K, Act: ActQ8_K, Unit: 32, Decode: decodeQ5K, Dot: dotQ5K, PackedDot: packedDotQ5K})
}

const q5KBytes = 176

func decodeQ5K(dst []float32, row []byte) {
	for i := 0; i < len(dst)/256; i++ {
		b := row[i*q5KBytes : (i+1)*q5KBytes]
		d, dmin := f16At(b[0:]), f16At(b[2:])
		qh := b[16:48]
		for s := 0; s < 8; s++ {
			sc, m := scaleMinK4(s, b[4:16])
			dl, ml := float32(d*float32(sc)), float32(dmin*float32(m))
			qs := b[48+32*(s/2) : 48+32*(s/2)+32]
			shift := uint(4 * (s % 2))
			y := dst[256*i+32*s : 256*i+32*s+32]
			for l := range y {
				q := qs[l]>>shift&0xf | (qh[l]>>s&1)<<4
				y[l] = float32(dl*float32(q)) - ml
			}
		}
	}
	canonNaN(dst)
}

func dotQ5K(row, x []byte, cols int) float32 {
	var acc [32]float32
	for i := 0; i < cols/256; i++ {
		b := row[i*q5KBytes : (i+1)*q5KBytes]
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		dy := q8KD(y)
		d, dmin := float32(f16At(b[0:])*dy), float32(f16At(b[2:])*dy)
		qh := b[16:48]
		for c := 0; c < 4; c++ {
			// sub-blocks 2c (low nibbles, qh bit 2c) and 2c+1 (high nibbles, qh bit 2c+1)
			qs := b[48+32*c : 80+32*c]
			a := y[q8KQs+64*c : q8KQs+64*c+64]
			var s0, s1 int32
			for l := 0; l < 32; l += 8 {
				w, h := le64(qs[l:]), le64(qh[l:])>>(2*c)
				s0 += dot8(w&lowNibbles|(h&lowBits)<<4, le64(a[l:]))
				s1 += dot8(w>>4&lowNibbles|(h>>1&lowBits)<<4, le64(a[32+l:]))
			}
			for hb, sum := range [2]int32{s0, s1} {
				s := 2*c + hb
				sc, m := scaleMinK4(s, b[4:16])
				msum := m * (q8KSum(y, 2*s) + q8KSum(y, 2*s+1))
				l := (8*i + s) & 31
				t := num.FMA32(d, float32(sc*sum), acc[l])
				acc[l] = num.FMA32(-dmin, float32(msum), t)
			}
		}
	}
	return laneSum(&acc)
}

// packedDotQ5K is dotQ5K over the device layout: the low plane as in packedDotQ4K; the high
// plane's 4 bytes hold value l's fifth bit in byte l mod 4 at bit ⌊l/4⌋.
func packedDotQ5K(l *repack.Layout, row, x []byte) float32 {
	var acc [32]float32
	pl, ph, sc := l.Planes[0], l.Planes[1], row[l.ScaleOff:]
	var d, dmin float32
	for u := 0; u < int(l.Units); u++ {
		i, s := u>>3, u&7
		q := unitBytes(row, pl, u)
		w0, w1 := le64At(q, 0), le64At(q, 8)
		h := uint64(binary.LittleEndian.Uint32(unitBytes(row, ph, u)))
		high := func(g int) uint64 { // the fifth bits of values 8g … 8g+7, one per byte, at bit 4
			return (h>>(2*g)&0x01010101 | (h>>(2*g+1)&0x01010101)<<32) << 4
		}
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		a := y[q8KQs+32*s : q8KQs+32*s+32]
		sum := dot8(w0&lowNibbles|high(0), le64(a)) + dot8(w1&lowNibbles|high(1), le64(a[8:])) +
			dot8(w0>>4&lowNibbles|high(2), le64(a[16:])) + dot8(w1>>4&lowNibbles|high(3), le64(a[24:]))
		if s == 0 { // the super-block's combined scales, once for its 8 units
			dy := q8KD(y)
			d, dmin = float32(f16Field(l, row, 0, i)*dy), float32(f16Field(l, row, 1, i)*dy)
		}
		scs, m := int32(sc[16*i+s]), int32(sc[16*i+8+s])
		msum := m * (q8KSum(y, 2*s) + q8KSum(y, 2*s+1))
		t := num.FMA32(d, float32(scs*sum), acc[u&31])
		acc[u&31] = num.FMA32(-dmin, float32(msum), t)
	}
	return laneSum(&acc)
}
