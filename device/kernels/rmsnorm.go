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

func rmsnormRow(y, x, w []float32, eps float32) { rmsnormRowFrom(y, x, w, eps, true) }

// rmsnormRowFrom is rmsnormRow with its vector forms (vector, where the CPU has them) or in
// portable Go.
func rmsnormRowFrom(y, x, w []float32, eps float32, vector bool) {
	s := rmsScaleFrom(x, eps, vector)
	i := 0
	if vector {
		i = vectorScaleMul(y, x, w, s)
	}
	for ; i < len(x); i++ {
		y[i] = num.Canon(float32(x[i]*s) * w[i])
	}
}

// rmsScale returns 1/sqrt(mean(x²) + eps) in the contract's order.
func rmsScale(x []float32, eps float32) float32 { return rmsScaleFrom(x, eps, true) }

// rmsScaleFrom is rmsScale with its vector form (vector, where the CPU has it) or in portable
// Go.
func rmsScaleFrom(x []float32, eps float32, vector bool) float32 {
	var acc [32]float32
	i := 0
	if vector {
		i = vectorSumSquares(x, &acc)
	}
	for ; i < len(x); i++ {
		acc[i&31] = num.FMA32(x[i], x[i], acc[i&31])
	}
	mean := laneSum(&acc) / float32(len(x))
	return 1 / num.Sqrt32(mean+eps)
}

// MaxRowActWidth is the widest row the fused producer-and-conversion kernels take (RMSNormAct,
// SwiGLUAct, SigmoidMulAct): the row is staged in shared memory.
const MaxRowActWidth = 8192

// RMSNormActArgs: for each of the Rows rows of Width values in X, the rmsnorm of RMSNorm (one
// group per row, weights W) converted into an activation format, as a Convert of it would:
// Out holds Rows rows of the format. A norm and the conversion for the matvecs that read it,
// fused: the same bytes, one launch, and no float32 row written and read back.
type RMSNormActArgs struct {
	X     device.Ptr // float32 [Rows][Width]
	W     device.Ptr // float32 [Width]
	Out   device.Ptr // [Rows] rows of the format, Act.RowBytes(Width) bytes each
	Rows  int32
	Width int32
	Eps   float32
}

// RowActSegment is the piece of a row one block of a fused producer-and-conversion kernel forms
// and converts: a whole number of every activation format's blocks.
const RowActSegment = 256

// rowActShape is the launch of a fused producer-and-conversion kernel: one 256-thread block per
// piece of RowActSegment values (the last one shorter) of each row of width values, rows along
// the grid's y, a whole number of the format's blocks, at most MaxRowActWidth.
func rowActShape(a Act, rows, width int32) (device.Geometry, error) {
	bv, _ := a.block()
	if rows <= 0 || rows > 65535 || width <= 0 || width > MaxRowActWidth || int(width)%bv != 0 {
		return device.Geometry{}, fmt.Errorf("cannot convert %d rows of %d values to %s (1…65535 rows of 1…%d values, blocks of %d)", rows, width, a, MaxRowActWidth, bv)
	}
	return device.Geometry{Grid: device.Dim3{X: uint32((width + RowActSegment - 1) / RowActSegment), Y: uint32(rows), Z: 1},
		Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
}

// convertRows is the fused kernels' twin after the producer: fill(y, r, off) forms values
// off … off+len(y)−1 of row r, which are converted into row r of out (format a) as Convert
// would. Rows are formed in pieces of seg values where seg divides n (else whole): a piece is
// a whole number of the format's blocks, whose bytes depend on that block's values only.
func convertRows(x *device.Exec, a Act, out device.Ptr, rows, n, seg int, fill func(y []float32, r, off int)) error {
	rb := a.RowBytes(n)
	o, err := x.U8(out, int64(rows*rb))
	if err != nil {
		return err
	}
	if seg <= 0 || n%seg != 0 {
		seg = n
	}
	segs, sb := n/seg, a.RowBytes(seg)
	x.For(rows*segs, func(lo, hi int) {
		y := make([]float32, seg)
		for i := lo; i < hi; i++ {
			r, s := i/segs, i%segs
			fill(y, r, s*seg)
			ConvertRow(a, o[r*rb+s*sb:r*rb+(s+1)*sb], y)
		}
	})
	return nil
}

// actSegment is the piece of a row an elementwise op with a fused conversion converts at a
// time: a whole number of every activation format's blocks, so that pieces of one row (a
// decoded token's) can run in parallel with the bytes of the whole row's conversion.
const actSegment = 1024

var normActKernels = map[Act]*device.Kernel[RMSNormActArgs]{}

// RMSNormAct returns the fused norm and conversion into activation format a.
func RMSNormAct(a Act) (*device.Kernel[RMSNormActArgs], error) {
	if k, ok := normActKernels[a]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kernels: no fused rmsnorm for activation format %s: %w", a, device.ErrUnsupported)
}

func init() {
	for _, a := range []Act{ActF16, ActBF16, ActQ8_0, ActQ8_1, ActQ8_K} {
		a := a
		normActKernels[a] = device.Register(&device.Kernel[RMSNormActArgs]{
			EntryName: "rmsnorm_act_" + a.String(), ModuleName: "act",
			Shape: func(c RMSNormActArgs) (device.Geometry, error) { return rowActShape(a, c.Rows, c.Width) },
			Twin: func(x *device.Exec, c RMSNormActArgs) error {
				rows, n := int(c.Rows), int(c.Width)
				in, err := x.F32(c.X, rows*n)
				if err != nil {
					return err
				}
				w, err := x.F32(c.W, n)
				if err != nil {
					return err
				}
				return convertRows(x, a, c.Out, rows, n, n, func(y []float32, r, _ int) {
					rmsnormRow(y, in[r*n:(r+1)*n], w, c.Eps)
				})
			},
		})
	}
}
