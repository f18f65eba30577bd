package kernels

import (
	"fmt"

	"verity/device"
	"verity/device/num"
)

// RMSNormArgs: for each of the Groups groups of Width values in X,
// Y = (X · r) · W with r = 1 / sqrt(Σx²/Width + Eps). W has Width values, shared by all groups
// (per-head norms use one group per head).
//
// Order: lane l accumulates x[i]² for i = l, l+32, … by acc = fma(x, x, acc); num.WarpSum; then
// mean = sum / Width, r = 1 / Sqrt32(mean + Eps) (each step rounded), y = float32(x·r)·w.
type RMSNormArgs struct {
	X      device.Ptr // float32 [Groups][Width]
	W      device.Ptr // float32 [Width]
	Y      device.Ptr // float32 [Groups][Width]; may equal X
	Groups int32
	Width  int32
	Eps    float32
}

var RMSNorm = device.Register(&device.Kernel[RMSNormArgs]{
	EntryName: "rmsnorm_f32", ModuleName: "norm",
	Shape: func(a RMSNormArgs) (device.Geometry, error) {
		if a.Groups <= 0 || a.Width <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape groups=%d width=%d", a.Groups, a.Width)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Groups), Y: 1, Z: 1}, Block: device.Dim3{X: 32, Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a RMSNormArgs) error {
		g, n := int(a.Groups), int(a.Width)
		in, err := x.F32(a.X, g*n)
		if err != nil {
			return err
		}
		w, err := x.F32(a.W, n)
		if err != nil {
			return err
		}
		out, err := x.F32(a.Y, g*n)
		if err != nil {
			return err
		}
		x.For(g, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				rmsnormRow(out[r*n:(r+1)*n], in[r*n:(r+1)*n], w, a.Eps)
			}
		})
		return nil
	},
})

func rmsnormRow(y, x, w []float32, eps float32) {
	s := rmsScale(x, eps)
	for i, v := range x {
		y[i] = num.Canon(float32(v*s) * w[i])
	}
}

// rmsScale returns 1/sqrt(mean(x²) + eps) in the contract's order.
func rmsScale(x []float32, eps float32) float32 {
	var acc [32]float32
	for i, v := range x {
		acc[i&31] = num.FMA32(v, v, acc[i&31])
	}
	mean := num.WarpTotal(&acc) / float32(len(x))
	return 1 / num.Sqrt32(mean+eps)
}
