package kernels

import (
	"fmt"

	"verity/device"
)

// ArgmaxArgs: Out[r] = the index of the largest of the Cols values of row r of X; ties go to
// the lowest index, and NaN is never chosen over a number (a row of NaNs gives 0).
type ArgmaxArgs struct {
	X    device.Ptr // float32 [Rows][Cols]
	Out  device.Ptr // int32 [Rows]
	Rows int32
	Cols int32
}

var Argmax = device.Register(&device.Kernel[ArgmaxArgs]{
	EntryName: "argmax_f32", ModuleName: "argmax",
	Shape: func(a ArgmaxArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.Cols <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d cols=%d", a.Rows, a.Cols)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: 1, Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a ArgmaxArgs) error {
		rows, cols := int(a.Rows), int(a.Cols)
		v, err := x.F32(a.X, rows*cols)
		if err != nil {
			return err
		}
		out, err := x.I32(a.Out, rows)
		if err != nil {
			return err
		}
		x.For(rows, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				out[r] = int32(ArgmaxRow(v[r*cols : (r+1)*cols]))
			}
		})
		return nil
	},
})

// ArgmaxRow returns the index of the largest value (lowest index on ties, NaN skipped).
func ArgmaxRow(v []float32) int {
	best := -1
	for i, x := range v {
		if x != x {
			continue
		}
		if best < 0 || x > v[best] {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	return best
}
