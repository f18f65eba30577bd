package kernels

import (
	"verity/device"
	"verity/device/dtype"
	"verity/device/num"
)

// F32 weights, float32 activations. Unit: 4 consecutive values (16 bytes); the unit step is
// acc = fma(w[i], x[i], acc) for its values in order.
func init() {
	registerFormat(&Format{
		Type: dtype.F32, Act: ActF32, Unit: 4,
		Decode: func(dst []float32, row []byte) { copy(dst, device.AsF32(row)) },
		Dot: func(row, x []byte, cols int) float32 {
			var acc [32]float32
			dotF32Units(&acc, device.AsF32(row)[:cols], device.AsF32(x)[:cols], 0, cols/4)
			return laneSum(&acc)
		},
	})
}

// dotF32Units folds units from … to−1 of rows w and v into the lane accumulators.
func dotF32Units(acc *[32]float32, w, v []float32, from, to int) {
	for u := from; u < to; u++ {
		l, i := u&31, 4*u
		a := acc[l]
		a = num.FMA32(w[i], v[i], a)
		a = num.FMA32(w[i+1], v[i+1], a)
		a = num.FMA32(w[i+2], v[i+2], a)
		a = num.FMA32(w[i+3], v[i+3], a)
		acc[l] = a
	}
}
