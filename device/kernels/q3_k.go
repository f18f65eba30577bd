package kernels

import (
	"encoding/binary"

	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q3_K weights, q8_K activations. A 256-value super-block is 110 bytes, 16 groups of 16
// values, x = d·(sc_g − 32)·q with 3-bit signed q ∈ −4…3 and 6-bit sc_g:
//
//	[0:32]    hmask: for value 32s + l (s = 0…7, l = 0…31), bit s of byte l; q = r when it
//	          is set, r − 4 when it is clear
//	[32:96]   qs: r = bits 2(s mod 4)…+1 of byte 32 + 32⌊s/4⌋ + l (r ∈ 0…3)
//	[96:108]  scales of group g (values 16g … 16g+15), 6 bits: bits 0-3 are the low nibble
//	          of byte 96+g (g < 8) or the high nibble of byte 96+g−8 (g ≥ 8); bits 4-5 are
//	          bits 2⌊g/4⌋…+1 of byte 104 + g mod 4
//	[108:110] d, fp16
//
// Unit: 32 values 32s … 32s+31 (groups 2s and 2s+1): 32 qs bytes, the 32 hmask bytes (each
// lane its own bit), and the scale bytes of groups 2s and 2s+1. Blocks are only 2-byte
// aligned in a row (110 bytes): 2-byte loads, or aligned 4-byte loads and byte permutes. With D = float32(d·d_x) (see
// kquant.go) and the unit's q8_K quants a_l:
//
//	S = (sc_2s−32)·Σ_{l<16} q_l·a_l + (sc_2s+1−32)·Σ_{l≥16} q_l·a_l   (exact int32)
//	acc = fma(D, float32(S), acc)
//
// the meaning of ggml_vec_dot_q3_K_q8_K.
func init() {
	registerFormat(&Format{Type: dtype.Q3_K, Act: ActQ8_K, Unit: 32, Decode: decodeQ3K, Dot: dotQ3K, PackedDot: packedDotQ3K})
}

const q3KBytes = 110

// q3KScale is the signed scale sc_g − 32 of group g from the 12 scale bytes.
func q3KScale(sc []byte, g int) int32 {
	lo := sc[g%8] >> (4 * (g / 8)) & 0xf
	hi := sc[8+g%4] >> (2 * (g / 4)) & 3
	return int32(lo|hi<<4) - 32
}

func decodeQ3K(dst []float32, row []byte) {
	for i := 0; i < len(dst)/256; i++ {
		b := row[i*q3KBytes : (i+1)*q3KBytes]
		d := f16At(b[108:])
		hm := b[0:32]
		for s := 0; s < 8; s++ {
			qs := b[32+32*(s/4) : 32+32*(s/4)+32]
			shift := uint(2 * (s % 4))
			y := dst[256*i+32*s : 256*i+32*s+32]
			for l := range y {
				dl := float32(d * float32(q3KScale(b[96:108], 2*s+l/16)))
				q := int32(qs[l]>>shift&3) - 4 + 4*int32(hm[l]>>s&1)
				y[l] = float32(dl * float32(q))
			}
		}
	}
	canonNaN(dst)
}

func dotQ3K(row, x []byte, cols int) float32 {
	var acc [32]float32
	for i := 0; i < cols/256; i++ {
		b := row[i*q3KBytes : (i+1)*q3KBytes]
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		d := float32(f16At(b[108:]) * q8KD(y))
		hm := b[0:32]
		for s := 0; s < 8; s++ {
			qs := b[32+32*(s/4) : 64+32*(s/4)]
			shift := uint(2 * (s % 4))
			a := y[q8KQs+32*s : q8KQs+32*s+32]
			// with u = r | hbit<<2 ∈ 0…7, q = u − 4: Σ q·a over a group is Σ u·a − 4·bsums[g]
			var s0, s1 int32
			for l := 0; l < 16; l += 8 {
				s0 += dot8(le64(qs[l:])>>shift&low2Bits|(le64(hm[l:])>>s&lowBits)<<2, le64(a[l:]))
				s1 += dot8(le64(qs[16+l:])>>shift&low2Bits|(le64(hm[16+l:])>>s&lowBits)<<2, le64(a[16+l:]))
			}
			s0 -= 4 * q8KSum(y, 2*s)
			s1 -= 4 * q8KSum(y, 2*s+1)
			sum := q3KScale(b[96:108], 2*s)*s0 + q3KScale(b[96:108], 2*s+1)*s1
			l := (8*i + s) & 31
			acc[l] = num.FMA32(d, float32(sum), acc[l])
		}
	}
	return laneSum(&acc)
}

// packedDotQ3K is dotQ3K over the device layout: the low plane's 8 bytes hold values j, j+8,
// j+16, j+24 (bits 0, 2, 4, 6 of byte j), the hmask plane's 4 bytes value l at bit ⌊l/4⌋ of
// byte l mod 4; the 16 scales are unpacked to bytes 0…63.
func packedDotQ3K(l *repack.Layout, row, x []byte) float32 {
	var acc [32]float32
	pl, ph, sc := l.Planes[0], l.Planes[1], row[l.ScaleOff:]
	var d float32
	for u := 0; u < int(l.Units); u++ {
		i, s := u>>3, u&7
		lo := le64At(unitBytes(row, pl, u), 0)
		h := uint64(binary.LittleEndian.Uint32(unitBytes(row, ph, u)))
		q := func(g int) uint64 { // u = r | hbit<<2 of values 8g … 8g+7, one per byte
			return lo>>(2*g)&low2Bits | (h>>(2*g)&0x01010101|(h>>(2*g+1)&0x01010101)<<32)<<2
		}
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		a := y[q8KQs+32*s : q8KQs+32*s+32]
		s0 := dot8(q(0), le64(a)) + dot8(q(1), le64(a[8:])) - 4*q8KSum(y, 2*s)
		s1 := dot8(q(2), le64(a[16:])) + dot8(q(3), le64(a[24:])) - 4*q8KSum(y, 2*s+1)
		sum := (int32(sc[16*i+2*s])-32)*s0 + (int32(sc[16*i+2*s+1])-32)*s1
		if s == 0 { // the super-block's combined scale, once for its 8 units
			d = float32(f16Field(l, row, 0, i) * q8KD(y))
		}
		acc[u&31] = num.FMA32(d, float32(sum), acc[u&31])
	}
	return laneSum(&acc)
}
