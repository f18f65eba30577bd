package lora

import "verity/device/dtype"

// q4_K: d, dmin (fp16), 12 bytes of 6-bit scales and mins (scaleMinK4), 128 bytes of 4-bit
// codes; value = d·sc·code − dmin·m for the 8 groups of 32. Code 64c + l is the low nibble
// of byte 16 + 32c + l, code 64c + 32 + l its high nibble.
func init() {
	register(dtype.Q4_K, &grid{lo: 0, hi: 15,
		decode: func(b []byte, q []int32, step []float32) {
			d := half(b)
			for g := range 8 {
				sc, _ := scaleMinK4(g, b[4:16])
				fill(step[32*g:32*g+32], d*float32(sc))
				qs, sh := b[16+32*(g/2):], uint(4*(g%2))
				for l := range 32 {
					q[32*g+l] = int32(qs[l] >> sh & 0xf)
				}
			}
		},
		encode: func(b []byte, q []int32) { putNibbles256(b[16:144], q) },
	})
}

// scaleMinK4 unpacks the 6-bit scale and min of group j of a q4_K or q5_K block from its 12
// scale bytes: for j < 4 the low 6 bits of bytes j and j+4; for j ≥ 4 the nibbles of byte
// j+4 with bits 6-7 of bytes j−4 and j above them.
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// putNibbles256 writes the low 4 bits of 256 codes as q4_K and q5_K store them.
func putNibbles256(qs []byte, q []int32) {
	for c := range 4 {
		for l := range 32 {
			qs[32*c+l] = uint8(q[64*c+l]&0xf) | uint8(q[64*c+32+l]&0xf)<<4
		}
	}
}
