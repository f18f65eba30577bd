package lora

import "verity/device/dtype"

// q5_K: as q4_K with a fifth bit: qh (32 bytes at 16; bit 4 of code 32g + l is bit g of byte
// l), then the low 4 bits at 48 as q4_K lays them out; value = d·sc·code − dmin·m.
func init() {
	register(dtype.Q5_K, &grid{lo: 0, hi: 31,
		decode: func(b []byte, q []int32, step []float32) {
			d := half(b)
			for g := range 8 {
				sc, _ := scaleMinK4(g, b[4:16])
				fill(step[32*g:32*g+32], d*float32(sc))
				qs, sh := b[48+32*(g/2):], uint(4*(g%2))
				for l := range 32 {
					q[32*g+l] = int32(qs[l]>>sh&0xf) | int32(b[16+l]>>g&1)<<4
				}
			}
		},
		encode: func(b []byte, q []int32) {
			putNibbles256(b[48:176], q)
			clear(b[16:48])
			for v := range 256 {
				b[16+v%32] |= uint8(q[v]>>4&1) << (v / 32)
			}
		},
	})
}
