package kernels

import (
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q2_K weights, q8_K activations. A 256-value super-block is 84 bytes, 16 groups of 16
// values, x = d·sc_g·q − dmin·m_g with 2-bit q ∈ 0…3 and 4-bit sc_g, m_g:
//
//	[0:16]  byte g = sc_g | m_g<<4 for group g (values 16g … 16g+15)
//	[16:80] qs: q of value 32s + l (s = 0…7, l = 0…31) is bits 2(s mod 4)…+1 of byte
//	        16 + 32⌊s/4⌋ + l
//	[80:82] d, fp16 (scale of the 4-bit scales)
//	[82:84] dmin, fp16 (scale of the 4-bit mins)
//
// Unit: 32 values 32s … 32s+31 (groups 2s and 2s+1): 32 qs bytes and scale bytes 2s, 2s+1
// (4-byte loads; blocks are 4-byte aligned in a row, 84 = 4·21).
// With D = float32(d·d_x), Dmin = float32(dmin·d_x) (see kquant.go), the unit's q8_K quants
// a_l and group sums bsums[2s], bsums[2s+1]:
//
//	S = sc_2s·Σ_{l<16} q_l·a_l + sc_2s+1·Σ_{l≥16} q_l·a_l     (exact int32)
//	M = m_2s·bsums[2s] + m_2s+1·bsums[2s+1]                   (exact int32)
//	acc = fma(D, float32(S), acc)
//	acc = fma(−Dmin, float32(M), acc)
//
// the meaning of ggml_vec_dot_q2_K_q8_K (dall·Σ sc·q·a − dmin·Σ m·bsum per super-block).
func init() {
	registerFormat(&Format{Type: dtype.Q2_K, Act: ActQ8_K, Unit: 32, Decode: decodeQ2K, Dot: dotQ2K, PackedDot: packedDotQ2K})
}

const q2KBytes = 84

func decodeQ2K(dst []float32, row []byte) {
	for i := 0; i < len(dst)/256; i++ {
		b := row[i*q2KBytes : (i+1)*q2KBytes]
		d, dmin := f16At(b[80:]), f16At(b[82:])
		for s := 0; s < 8; s++ {
			qs := b[16+32*(s/4) : 16+32*(s/4)+32]
			shift := uint(2 * (s % 4))
			y := dst[256*i+32*s : 256*i+32*s+32]
			for l := range y {
				sc := b[2*s+l/16]
				dl, ml := float32(d*float32(sc&0xf)), float32(dmin*float32(sc>>4))
				y[l] = float32(dl*float32(qs[l]>>shift&3)) - ml
			}
		}
	}
	canonNaN(dst)
}

func dotQ2K(row, x []byte, cols int) float32 {
	var acc [32]float32
	for i := 0; i < cols/256; i++ {
		b := row[i*q2KBytes : (i+1)*q2KBytes]
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		dy := q8KD(y)
		d, dmin := float32(f16At(b[80:])*dy), float32(f16At(b[82:])*dy)
		for s := 0; s < 8; s++ {
			qs := b[16+32*(s/4) : 48+32*(s/4)]
			shift := uint(2 * (s % 4))
			a := y[q8KQs+32*s : q8KQs+32*s+32]
			var s0, s1 int32
			for l := 0; l < 16; l += 8 {
				s0 += dot8(le64(qs[l:])>>shift&low2Bits, le64(a[l:]))
				s1 += dot8(le64(qs[16+l:])>>shift&low2Bits, le64(a[16+l:]))
			}
			sc0, sc1 := b[2*s], b[2*s+1]
			sum := int32(sc0&0xf)*s0 + int32(sc1&0xf)*s1
			msum := int32(sc0>>4)*q8KSum(y, 2*s) + int32(sc1>>4)*q8KSum(y, 2*s+1)
			l := (8*i + s) & 31
			t := num.FMA32(d, float32(sum), acc[l])
			acc[l] = num.FMA32(-dmin, float32(msum), t)
		}
	}
	return laneSum(&acc)
}

// packedDotQ2K is dotQ2K over the device layout: the plane's 8 bytes hold values j, j+8,
// j+16, j+24 (bits 0, 2, 4, 6 of byte j); the block's 16 scales then 16 mins are unpacked
// bytes.
func packedDotQ2K(l *repack.Layout, row, x []byte) float32 {
	var acc [32]float32
	p, sc := l.Planes[0], row[l.ScaleOff:]
	var d, dmin float32
	for u := 0; u < int(l.Units); u++ {
		i, s := u>>3, u&7
		q := le64At(unitBytes(row, p, u), 0)
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		a := y[q8KQs+32*s : q8KQs+32*s+32]
		s0 := dot8(q&low2Bits, le64(a)) + dot8(q>>2&low2Bits, le64(a[8:]))
		s1 := dot8(q>>4&low2Bits, le64(a[16:])) + dot8(q>>6&low2Bits, le64(a[24:]))
		g := sc[32*i+2*s:]
		sum := int32(g[0])*s0 + int32(g[1])*s1
		msum := int32(g[16])*q8KSum(y, 2*s) + int32(g[17])*q8KSum(y, 2*s+1)
		if s == 0 { // the super-block's combined scales, once for its 8 units
			dy := q8KD(y)
			d, dmin = float32(f16Field(l, row, 0, i)*dy), float32(f16Field(l, row, 1, i)*dy)
		}
		t := num.FMA32(d, float32(sum), acc[u&31])
		acc[u&31] = num.FMA32(-dmin, float32(msum), t)
	}
	return laneSum(&acc)
}
