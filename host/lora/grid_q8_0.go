package lora

import "verity/device/dtype"

// q8_0: d (fp16) then 32 int8 codes; value = code·d.
func init() {
	register(dtype.Q8_0, &grid{lo: -128, hi: 127,
		decode: func(b []byte, q []int32, step []float32) {
			fill(step[:32], half(b))
			for j := range 32 {
				q[j] = int32(int8(b[2+j]))
			}
		},
		encode: func(b []byte, q []int32) {
			for j := range 32 {
				b[2+j] = uint8(int8(q[j]))
			}
		},
	})
}
