package kernels

import (
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Q4_K weights, q8_K activations. A 256-value super-block is 144 bytes, 8 sub-blocks of 32
// values, x = d·sc_s·q − dmin·m_s with 4-bit q ∈ 0…15 and 6-bit sc_s, m_s:
//
//	[0:2]    d, fp16 (scale of the 6-bit scales)
//	[2:4]    dmin, fp16 (scale of the 6-bit mins)
//	[4:16]   sc_s and m_s, packed (scaleMinK4)
//	[16:144] qs: value 32s + l (l = 0…31) is nibble s mod 2 (low nibble first) of byte
//	         16 + 32·⌊s/2⌋ + l
//
// Unit: one sub-block s (32 values), read as the 32 bytes 16 + 32⌊s/2⌋ … (two 16-byte loads;
// blocks are 16-byte aligned in a row, 144 = 16·9), shared with the neighbouring lane, which
// uses the other nibble; sc_s and m_s come from the 12 scale bytes as scaleMinK4 (kquant.go)
// unpacks them. With D = float32(d·d_x), Dmin = float32(dmin·d_x) (see kquant.go), the
// unit's q8_K quants a_l and B = bsums[2s] + bsums[2s+1]:
//
//	S = sc_s·Σ_l q_l·a_l,  M = m_s·B                  (exact int32)
//	acc = fma(D, float32(S), acc)
//	acc = fma(−Dmin, float32(M), acc)
//
// the meaning of ggml_vec_dot_q4_K_q8_K (Σ d·sc·q·a − Σ dmin·m·a per super-block).
func init() {
	registerFormat(&Format{Type: dtype.Q4_K, Act: ActQ8_K, Unit: 32, Decode: decodeQ4K, Dot: dotQ4K, PackedDot: packedDotQ4K})
}

const q4KBytes = 144

func decodeQ4K(dst []float32, row []byte) {
	for i := 0; i < len(dst)/256; i++ {
		b := row[i*q4KBytes : (i+1)*q4KBytes]
		d, dmin := f16At(b[0:]), f16At(b[2:])
		for s := 0; s < 8; s++ {
			sc, m := scaleMinK4(s, b[4:16])
			dl, ml := float32(d*float32(sc)), float32(dmin*float32(m))
			qs := b[16+32*(s/2) : 16+32*(s/2)+32]
			shift := uint(4 * (s % 2))
			y := dst[256*i+32*s : 256*i+32*s+32]
			for l := range y {
				y[l] = float32(dl*float32(qs[l]>>shift&0xf)) - ml
			}
		}
	}
	canonNaN(dst)
}

func dotQ4K(row, x []byte, cols int) float32 {
	var acc [32]float32
	for i := 0; i < cols/256; i++ {
		b := row[i*q4KBytes : (i+1)*q4KBytes]
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		dy := q8KD(y)
		d, dmin := float32(f16At(b[0:])*dy), float32(f16At(b[2:])*dy)
		for c := 0; c < 4; c++ {
			// sub-blocks 2c (low nibbles) and 2c+1 (high nibbles) share their 32 qs bytes
			qs := b[16+32*c : 48+32*c]
			a := y[q8KQs+64*c : q8KQs+64*c+64]
			var s0, s1 int32
			for l := 0; l < 32; l += 8 {
				w := le64(qs[l:])
				s0 += dot8(w&lowNibbles, le64(a[l:]))
				s1 += dot8(w>>4&lowNibbles, le64(a[32+l:]))
			}
			for h, sum := range [2]int32{s0, s1} {
				s := 2*c + h
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

// packedDotQ4K is dotQ4K over the device layout: unit u's 16 plane bytes hold values j (low
// nibble) and j+16 (high nibble) in byte j; its scale and min are unpacked bytes s and 8+s.
func packedDotQ4K(l *repack.Layout, row, x []byte) float32 {
	var acc [32]float32
	p, sc := l.Planes[0], row[l.ScaleOff:]
	var d, dmin float32
	for u := 0; u < int(l.Units); u++ {
		i, s := u>>3, u&7
		q := unitBytes(row, p, u)
		w0, w1 := le64At(q, 0), le64At(q, 8)
		y := x[i*q8KBytes : (i+1)*q8KBytes]
		a := y[q8KQs+32*s : q8KQs+32*s+32]
		sum := dot8(w0&lowNibbles, le64(a)) + dot8(w1&lowNibbles, le64(a[8:])) +
			dot8(w0>>4&lowNibbles, le64(a[16:])) + dot8(w1>>4&lowNibbles, le64(a[24:]))
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
