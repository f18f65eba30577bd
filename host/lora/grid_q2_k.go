package lora

import "verity/device/dtype"

// q2_K: 16 scale bytes (sc | m<<4 per group of 16), 64 bytes of 2-bit codes, d and dmin
// (fp16) at 80 and 82; value = d·sc·code − dmin·m. Code v = 128h + 32s + l is bits 2s…2s+1
// of byte 16 + 32h + l.
func init() {
	register(dtype.Q2_K, &grid{lo: 0, hi: 3,
		decode: func(b []byte, q []int32, step []float32) {
			d := half(b[80:])
			for g := range 16 {
				fill(step[16*g:16*g+16], d*float32(b[g]&0xf))
			}
			for v := range 256 {
				off, sh := twoBit(v)
				q[v] = int32(b[16+off] >> sh & 3)
			}
		},
		encode: func(b []byte, q []int32) { putTwoBit(b[16:80], q) },
	})
}

// twoBit locates the 2-bit field of value v (0…255) in the 64 bytes of q2_K and q3_K codes:
// byte 32h + l, shift 2s, for v = 128h + 32s + l.
func twoBit(v int) (off int, shift uint) {
	return 32*(v/128) + v%32, uint(2 * (v / 32 % 4))
}

// putTwoBit writes the low 2 bits of 256 codes into the 64 bytes qs.
func putTwoBit(qs []byte, q []int32) {
	clear(qs[:64])
	for v := range 256 {
		off, sh := twoBit(v)
		qs[off] |= uint8(q[v]&3) << sh
	}
}
