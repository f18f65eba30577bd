package lora

import "verity/device/dtype"

// q4_0: d (fp16) then 16 bytes of 4-bit codes (nibbles32); value = (code − 8)·d.
func init() {
	register(dtype.Q4_0, &grid{lo: 0, hi: 15,
		decode: func(b []byte, q []int32, step []float32) {
			fill(step[:32], half(b))
			nibbles32(b[2:18], q)
		},
		encode: func(b []byte, q []int32) { putNibbles32(b[2:18], q) },
	})
}
