package lora

import "verity/device/dtype"

// q4_1: d, m (fp16) then 16 bytes of 4-bit codes (nibbles32); value = code·d + m.
func init() {
	register(dtype.Q4_1, &grid{lo: 0, hi: 15,
		decode: func(b []byte, q []int32, step []float32) {
			fill(step[:32], half(b))
			nibbles32(b[4:20], q)
		},
		encode: func(b []byte, q []int32) { putNibbles32(b[4:20], q) },
	})
}
