package lora

import "verity/device/dtype"

// q6_K: ql (128 bytes of low nibbles), qh (64 bytes of 2-bit high parts), 16 int8 scales,
// d (fp16) at 208; value = d·sc·(code − 32) for the 16 groups of 16. For code v = 128h +
// 32k + l the low 4 bits are nibble k/2 of byte 64h + 32(k%2) + l and the high 2 bits are
// bits 2k… of byte 128 + 32h + l.
func init() {
	register(dtype.Q6_K, &grid{lo: 0, hi: 63,
		decode: func(b []byte, q []int32, step []float32) {
			d := half(b[208:])
			for g := range 16 {
				fill(step[16*g:16*g+16], d*float32(int8(b[192+g])))
			}
			for v := range 256 {
				lo, lsh, hi, hsh := q6KFields(v)
				q[v] = int32(b[lo]>>lsh&0xf) | int32(b[hi]>>hsh&3)<<4
			}
		},
		encode: func(b []byte, q []int32) {
			clear(b[:192])
			for v := range 256 {
				lo, lsh, hi, hsh := q6KFields(v)
				b[lo] |= uint8(q[v]&0xf) << lsh
				b[hi] |= uint8(q[v]>>4&3) << hsh
			}
		},
	})
}

// q6KFields locates code v's low nibble and high bits in a q6_K block.
func q6KFields(v int) (lo int, lsh uint, hi int, hsh uint) {
	h, k, l := v/128, v/32%4, v%32
	return 64*h + 32*(k%2) + l, uint(4 * (k / 2)), 128 + 32*h + l, uint(2 * k)
}
