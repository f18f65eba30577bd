package kernels

import (
	"fmt"

	"verity/device"
	"verity/device/num"
)

// BinaryArgs: an element-wise operation over N float32 values, Y[i] = op(A[i], B[i]).
type BinaryArgs struct {
	A device.Ptr
	B device.Ptr
	Y device.Ptr // may equal A or B
	N int32
}

func elementwise(entry string, op func(a, b float32) float32) *device.Kernel[BinaryArgs] {
	return device.Register(&device.Kernel[BinaryArgs]{
		EntryName: entry, ModuleName: "elementwise",
		Shape: func(a BinaryArgs) (device.Geometry, error) {
			if a.N <= 0 {
				return device.Geometry{}, fmt.Errorf("bad length %d", a.N)
			}
			return device.Geometry{Grid: device.Dim3{X: uint32((a.N + 255) / 256), Y: 1, Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
		},
		Twin: func(x *device.Exec, a BinaryArgs) error {
			n := int(a.N)
			av, err := x.F32(a.A, n)
			if err != nil {
				return err
			}
			bv, err := x.F32(a.B, n)
			if err != nil {
				return err
			}
			y, err := x.F32(a.Y, n)
			if err != nil {
				return err
			}
			x.For(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					y[i] = num.Canon(op(av[i], bv[i])) // the GPU's NaN for Inf−Inf, Inf·0, …
				}
			})
			return nil
		},
	})
}

var (
	// Add: Y = A + B (residual connections).
	Add = elementwise("add_f32", func(a, b float32) float32 { return a + b })
	// SwiGLU: Y = SiLU32(A) · B, with A the gate projection and B the up projection.
	SwiGLU = elementwise("swiglu_f32", func(a, b float32) float32 { return num.SiLU32(a) * b })
	// SigmoidMul: Y = A · Sigmoid32(B), the output gate of gated attention (B the gate half of
	// the query projection).
	SigmoidMul = elementwise("sigmoid_mul_f32", func(a, b float32) float32 { return a * num.Sigmoid32(b) })
)
