package kernels

import (
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q6_K weights, q8_K activations. A 256-value super-block is 210 bytes, 16 groups of 16
// values, x = d·sc_g·(q − 32) with 6-bit q ∈ 0…63 and signed 8-bit sc_g:
//
//	[0:128]   ql: bits 0-3 of q. Value 32s + l (s = 0…7, l = 0…31) is nibble ⌊(s mod 4)/2⌋
//	          (low nibble first) of byte 64⌊s/4⌋ + 32(s mod 2) + l
//	[128:192] qh: bits 4-5 of q for value 32s + l are bits 2(s mod 4)… of byte
//	          128 + 32⌊s/4⌋ + l
//	[192:208] sc_g, int8, for group g (values 16g … 16g+15)
//	[208:210] d, fp16
//
// Unit: 32 values 32s … 32s+31 (groups 2s and 2s+1): 32 ql bytes, 32 qh bytes and the two
// scale bytes 192+2s, 193+2s. Blocks are only 2-byte aligned in a row (210 bytes), so a
// kernel reads them with 2-byte loads or aligned 4-byte loads and byte permutes. With D = float32(d·d_x) (see kquant.go) and the unit's q8_K
// quants a_l:
//
//	S = sc_2s·Σ_{l<16} (q_l−32)·a_l + sc_2s+1·Σ_{l≥16} (q_l−32)·a_l   (exact int32, |S| < 2²⁴)
//	acc = fma(D, float32(S), acc)
//
// the meaning of ggml_vec_dot_q6_K_q8_K.
func init() {
	registerFormat(&Format{Type: dtype.Q6_K, Act: ActQ8_K, Unit: 32, Decode: decodeQ6K, Dot: dotQ6K, PackedDot: packedDotQ6K})
}

const q6KBytes = 210

// q6KSub returns the ql bytes, qh bytes and the two shifts of unit s of a q6_K block.
func q6KSub(b []byte, s int) (ql, qh []byte, sl, sh uint) {
	h, k := s/4, s%4
	ql = b[64*h+32*(k%2) : 64*h+32*(k%2)+32]
	qh = b[128+32*h : 128+32*h+32]
	return ql, qh, uint(4 * (k / 2)), uint(2 * k)
}

func decodeQ6K(dst []float32, row []byte) {
	for i := 0; i < len(dst)/256; i++ {
		b := row[i*q6KBytes : (i+1)*q6KBytes]
		d := f16At(b[208:])
		for s := 0; s < 8; s++ {
			ql, qh, sl, sh := q6KSub(b, s)
			y := dst[256*i+32*s : 256*i+32*s+32]
			for l := range y {
				dl := float32(d * float32(int8(b[192+2*s+l/16])))
				q := int32(ql[l]>>sl&0xf|(qh[l]>>sh&3)<<4) - 32
				y[l] = float32(dl * float32(q))
			}
		}
	}
	canonNaN(dst)
}

func dotQ6K(row, x []byte, cols int) float32 {
	var acc [32]float32
	for i := 0; i < cols/256; i++ {
		b := row[i*q6KBytes : (i+1)*q6KBytes]
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		d := float32(f16At(b[208:]) * q8KD(y))
		for s := 0; s < 8; s++ {
			ql, qh, sl, sh := q6KSub(b, s)
			a := y[q8KQs+32*s : q8KQs+32*s+32]
			// Σ (q−32)·a over a group of 16 is Σ q·a − 32·bsums[g]
			var s0, s1 int32
			for l := 0; l < 16; l += 8 {
				s0 += dot8(le64(ql[l:])>>sl&lowNibbles|(le64(qh[l:])>>sh&low2Bits)<<4, le64(a[l:]))
				s1 += dot8(le64(ql[16+l:])>>sl&lowNibbles|(le64(qh[16+l:])>>sh&low2Bits)<<4, le64(a[16+l:]))
			}
			s0 -= 32 * q8KSum(y, 2*s)
			s1 -= 32 * q8KSum(y, 2*s+1)
			sum := int32(int8(b[192+2*s]))*s0 + int32(int8(b[193+2*s]))*s1
			l := (8*i + s) & 31
			acc[l] = num.FMA32(d, float32(sum), acc[l])
		}
	}
	return laneSum(&acc)
}

// packedDotQ6K is dotQ6K over the device layout: the low plane's 16 bytes hold values j (low
// nibble) and j+16 (high nibble) in byte j, the high plane's 8 bytes values j, j+8, j+16, j+24
// (bits 0, 2, 4, 6 of byte j); the 16 scales are the stored int8 bytes.
func packedDotQ6K(l *repack.Layout, row, x []byte) float32 {
	var acc [32]float32
	pl, ph, sc := l.Planes[0], l.Planes[1], row[l.ScaleOff:]
	var d float32
	for u := 0; u < int(l.Units); u++ {
		i, s := u>>3, u&7
		ql, qh := unitBytes(row, pl, u), unitBytes(row, ph, u)
		l0, l1, h := le64At(ql, 0), le64At(ql, 8), le64At(qh, 0)
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		a := y[q8KQs+32*s : q8KQs+32*s+32]
		s0 := dot8(l0&lowNibbles|(h&low2Bits)<<4, le64(a)) + dot8(l1&lowNibbles|(h>>2&low2Bits)<<4, le64(a[8:]))
		s1 := dot8(l0>>4&lowNibbles|(h>>4&low2Bits)<<4, le64(a[16:])) + dot8(l1>>4&lowNibbles|(h>>6&low2Bits)<<4, le64(a[24:]))
		s0 -= 32 * q8KSum(y, 2*s)
		s1 -= 32 * q8KSum(y, 2*s+1)
		sum := int32(int8(sc[16*i+2*s]))*s0 + int32(int8(sc[16*i+2*s+1]))*s1
		if s == 0 { // the super-block's combined scale, once for its 8 units
			d = float32(f16Field(l, row, 0, i) * q8KD(y))
		}
		acc[u&31] = num.FMA32(d, float32(sum), acc[u&31])
	}
	return laneSum(&acc)
}
