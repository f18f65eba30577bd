package kernels

import (
	"encoding/binary"

	"verity/device/dtype"
	"verity/device/num"
)

// F16 weights, f16 activations (as ggml's CPU backend converts them). Unit: 8 consecutive
// values (16 bytes). A product of two halves is exact in float32, so the unit step
// acc = fma(w[i], x[i], acc) rounds once per value.
func init() {
	registerFormat(&Format{
		Type: dtype.F16, Act: ActF16, Unit: 8,
		Decode: func(dst []float32, row []byte) {
			for i := range dst {
				dst[i] = num.F16ToF32(binary.LittleEndian.Uint16(row[2*i:]))
			}
		},
		Dot: func(row, x []byte, cols int) float32 { return dot16(row, x, cols, num.F16ToF32) },
	})
}

// dot16 is the lane-strided product of two rows of 16-bit floats decoded by dec.
func dot16(row, x []byte, cols int, dec func(uint16) float32) float32 {
	var acc [32]float32
	dot16Units(&acc, row, x, 0, cols/8, dec)
	return laneSum(&acc)
}

// dot16Units folds units from … to−1 into the lane accumulators.
func dot16Units(acc *[32]float32, row, x []byte, from, to int, dec func(uint16) float32) {
	for u := from; u < to; u++ {
		l := u & 31
		a := acc[l]
		w, v := row[16*u:16*u+16], x[16*u:16*u+16]
		for j := 0; j < 16; j += 2 {
			a = num.FMA32(dec(binary.LittleEndian.Uint16(w[j:])), dec(binary.LittleEndian.Uint16(v[j:])), a)
		}
		acc[l] = a
	}
}
