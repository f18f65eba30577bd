package lora

import "verity/device/dtype"

// q3_K: hmask (32 bytes: bit 2 of code v is bit v/32 of byte v%32), 64 bytes of 2-bit fields
// (as q2_K's), 12 bytes of 6-bit scales, d (fp16) at 108; value = d·(sc − 32)·(code − 4).
func init() {
	register(dtype.Q3_K, &grid{lo: 0, hi: 7,
		decode: func(b []byte, q []int32, step []float32) {
			d := half(b[108:])
			for g := range 16 {
				fill(step[16*g:16*g+16], d*float32(q3KScale(b[96:108], g)))
			}
			for v := range 256 {
				off, sh := twoBit(v)
				q[v] = int32(b[32+off]>>sh&3) | int32(b[v%32]>>(v/32)&1)<<2
			}
		},
		encode: func(b []byte, q []int32) {
			putTwoBit(b[32:96], q)
			clear(b[:32])
			for v := range 256 {
				b[v%32] |= uint8(q[v]>>2&1) << (v / 32)
			}
		},
	})
}

// q3KScale is the signed scale of group j: 6 bits, the low 4 in byte j (j < 8, bits 0-3) or
// j−8 (bits 4-7), the high 2 in bits 2(j/4)… of byte 8 + j%4, minus 32.
func q3KScale(sc []byte, j int) int32 {
	lo := sc[j%8] >> (4 * (j / 8)) & 0xf
	hi := sc[8+j%4] >> (2 * (j / 4)) & 3
	return int32(lo|hi<<4) - 32
}
