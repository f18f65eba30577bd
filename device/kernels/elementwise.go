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

// binaryOp is an element-wise operation: its scalar form, and where there is one a vector form
// with its bits (simd.go) that sets the leading y[i] = Canon(scalar(a[i], b[i])) and returns how
// many it set.
type binaryOp struct {
	scalar func(a, b float32) float32
	vector func(y, a, b []float32) int
}

// apply sets y[i] = Canon(op(a[i], b[i])) — the GPU's NaN for Inf−Inf, Inf·0, … — with the
// vector form for as many values as it takes.
func (op binaryOp) apply(y, a, b []float32) {
	done := 0
	if op.vector != nil {
		done = op.vector(y, a, b)
	}
	for i := done; i < len(y); i++ {
		y[i] = num.Canon(op.scalar(a[i], b[i]))
	}
}

func elementwise(entry string, op binaryOp) *device.Kernel[BinaryArgs] {
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
			x.For(n, func(lo, hi int) { op.apply(y[lo:hi], av[lo:hi], bv[lo:hi]) })
			return nil
		},
	})
}

var (
	addOp        = binaryOp{scalar: func(a, b float32) float32 { return a + b }}
	swigluOp     = binaryOp{scalar: func(a, b float32) float32 { return num.SiLU32(a) * b }, vector: vectorSwiGLU}
	sigmoidMulOp = binaryOp{scalar: func(a, b float32) float32 { return a * num.Sigmoid32(b) }, vector: vectorSigmoidMul}
	gegluOp      = binaryOp{scalar: func(a, b float32) float32 { return num.GELU32(a) * b }}
)

var (
	// Add: Y = A + B (residual connections).
	Add = elementwise("add_f32", addOp)
	// SwiGLU: Y = SiLU32(A) · B, with A the gate projection and B the up projection.
	SwiGLU = elementwise("swiglu_f32", swigluOp)
	// SigmoidMul: Y = A · Sigmoid32(B), the output gate of gated attention (B the gate half of
	// the query projection).
	SigmoidMul = elementwise("sigmoid_mul_f32", sigmoidMulOp)
	// GeGLU: Y = GELU32(A) · B (Gemma's feed-forward), with A the gate projection and B the up
	// projection.
	GeGLU = elementwise("geglu_f32", gegluOp)
)

// UnaryArgs: an element-wise operation with one float32 parameter over N float32 values,
// Y[i] = op(X[i], C).
type UnaryArgs struct {
	X device.Ptr
	Y device.Ptr // may equal X
	N int32
	C float32
}

func unary(entry string, op func(x, c float32) float32) *device.Kernel[UnaryArgs] {
	return device.Register(&device.Kernel[UnaryArgs]{
		EntryName: entry, ModuleName: "elementwise",
		Shape: func(a UnaryArgs) (device.Geometry, error) {
			if a.N <= 0 {
				return device.Geometry{}, fmt.Errorf("bad length %d", a.N)
			}
			return device.Geometry{Grid: device.Dim3{X: uint32((a.N + 255) / 256), Y: 1, Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
		},
		Twin: func(x *device.Exec, a UnaryArgs) error {
			n := int(a.N)
			xv, err := x.F32(a.X, n)
			if err != nil {
				return err
			}
			y, err := x.F32(a.Y, n)
			if err != nil {
				return err
			}
			x.For(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					y[i] = num.Canon(op(xv[i], a.C))
				}
			})
			return nil
		},
	})
}

// SoftCap32 returns c·tanh(x/c) as llama.cpp's soft-capping computes it, scaling by the
// reciprocal: Tanh32(x·(1/c))·c, each step rounded (1/c too).
func SoftCap32(x, c float32) float32 { return num.Tanh32(x*(1/c)) * c }

var (
	// Scale: Y = X · C (Gemma's token embeddings times √n_embd).
	Scale = unary("scale_f32", func(x, c float32) float32 { return x * c })
	// SoftCap: Y = SoftCap32(X, C) (Gemma 2's final logits).
	SoftCap = unary("softcap_f32", SoftCap32)
)

// BiasArgs: Y[r][i] = X[r][i] + Bias[i] for Rows rows of Width float32 values (a projection's
// bias, added to each row's product as its own rounded addition, as llama.cpp adds it).
type BiasArgs struct {
	X     device.Ptr // float32 [Rows][Width]
	Bias  device.Ptr // float32 [Width]
	Y     device.Ptr // float32 [Rows][Width]; may equal X
	Rows  int32
	Width int32
}

// AddBias adds a bias vector to every row.
var AddBias = device.Register(&device.Kernel[BiasArgs]{
	EntryName: "add_bias_f32", ModuleName: "elementwise",
	Shape: func(a BiasArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.Width <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d width=%d", a.Rows, a.Width)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32((a.Width + 255) / 256), Y: uint32(a.Rows), Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a BiasArgs) error {
		rows, w := int(a.Rows), int(a.Width)
		xv, err := x.F32(a.X, rows*w)
		if err != nil {
			return err
		}
		bias, err := x.F32(a.Bias, w)
		if err != nil {
			return err
		}
		y, err := x.F32(a.Y, rows*w)
		if err != nil {
			return err
		}
		x.For(rows, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				addOp.apply(y[r*w:(r+1)*w], xv[r*w:(r+1)*w], bias)
			}
		})
		return nil
	},
})

// BinaryActArgs: for each of the Rows rows of Width values, an elementwise kernel's result
// (SwiGLU, SigmoidMul or GeGLU of the rows of A and B) converted into an activation format, as a
// Convert of it would: Out holds Rows rows of the format. The elementwise op and the conversion
// for the matvec that reads it, fused: the same bytes, one launch, no float32 row written and
// read back.
type BinaryActArgs struct {
	A, B  device.Ptr // float32 [Rows][Width]
	Out   device.Ptr // [Rows] rows of the format
	Rows  int32
	Width int32
}

var binaryActKernels = map[string]map[Act]*device.Kernel[BinaryActArgs]{}

// SwiGLUAct returns SwiGLU fused with the conversion into activation format a.
func SwiGLUAct(a Act) (*device.Kernel[BinaryActArgs], error) { return binaryAct("swiglu", a) }

// SigmoidMulAct returns SigmoidMul fused with the conversion into activation format a.
func SigmoidMulAct(a Act) (*device.Kernel[BinaryActArgs], error) { return binaryAct("sigmoid_mul", a) }

// GeGLUAct returns GeGLU fused with the conversion into activation format a.
func GeGLUAct(a Act) (*device.Kernel[BinaryActArgs], error) { return binaryAct("geglu", a) }

func binaryAct(name string, a Act) (*device.Kernel[BinaryActArgs], error) {
	if k, ok := binaryActKernels[name][a]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kernels: no fused %s for activation format %s: %w", name, a, device.ErrUnsupported)
}

func init() {
	for name, op := range map[string]binaryOp{"swiglu": swigluOp, "sigmoid_mul": sigmoidMulOp, "geglu": gegluOp} {
		binaryActKernels[name] = map[Act]*device.Kernel[BinaryActArgs]{}
		for _, a := range []Act{ActF16, ActBF16, ActQ8_0, ActQ8_1, ActQ8_K} {
			a, op := a, op
			binaryActKernels[name][a] = device.Register(&device.Kernel[BinaryActArgs]{
				EntryName: name + "_act_" + a.String(), ModuleName: "act",
				Shape: func(c BinaryActArgs) (device.Geometry, error) { return rowActShape(a, c.Rows, c.Width) },
				Twin: func(x *device.Exec, c BinaryActArgs) error {
					rows, n := int(c.Rows), int(c.Width)
					av, err := x.F32(c.A, rows*n)
					if err != nil {
						return err
					}
					bv, err := x.F32(c.B, rows*n)
					if err != nil {
						return err
					}
					return convertRows(x, a, c.Out, rows, n, actSegment, func(y []float32, r, off int) {
						at := r*n + off
						op.apply(y, av[at:at+len(y)], bv[at:at+len(y)])
					})
				},
			})
		}
	}
}
