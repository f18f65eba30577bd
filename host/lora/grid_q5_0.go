package lora

import (
	"encoding/binary"

	"verity/device/dtype"
)

// q5_0: d (fp16), qh (uint32: bit 4 of code j is bit j), then the low 4 bits as nibbles32;
// value = (code − 16)·d.
func init() {
	register(dtype.Q5_0, &grid{lo: 0, hi: 31,
		decode: func(b []byte, q []int32, step []float32) {
			fill(step[:32], half(b))
			nibbles32(b[6:22], q)
			fifth32(binary.LittleEndian.Uint32(b[2:]), q)
		},
		encode: func(b []byte, q []int32) {
			binary.LittleEndian.PutUint32(b[2:], splitFifth32(b[6:22], q))
		},
	})
}
