package lora

import (
	"encoding/binary"

	"verity/device/dtype"
)

// q5_1: d, m (fp16), qh (uint32: bit 4 of code j is bit j), then the low 4 bits as
// nibbles32; value = code·d + m.
func init() {
	register(dtype.Q5_1, &grid{lo: 0, hi: 31,
		decode: func(b []byte, q []int32, step []float32) {
			fill(step[:32], half(b))
			nibbles32(b[8:24], q)
			fifth32(binary.LittleEndian.Uint32(b[4:]), q)
		},
		encode: func(b []byte, q []int32) {
			binary.LittleEndian.PutUint32(b[4:], splitFifth32(b[8:24], q))
		},
	})
}
