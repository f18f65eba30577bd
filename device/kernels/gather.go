package kernels

import (
	"fmt"

	"verity/device"
)

// GatherArgs: Out[r] = X[Idx[r]] for r < Rows, rows of Width float32 values.
type GatherArgs struct {
	X       device.Ptr // float32 [SrcRows][Width]
	Idx     device.Ptr // int32 [Rows]
	Out     device.Ptr // float32 [Rows][Width]
	Rows    int32
	Width   int32
	SrcRows int32
}

var Gather = device.Register(&device.Kernel[GatherArgs]{
	EntryName: "gather_f32", ModuleName: "elementwise",
	Shape: func(a GatherArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.Width <= 0 || a.SrcRows <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d width=%d src_rows=%d", a.Rows, a.Width, a.SrcRows)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: 1, Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a GatherArgs) error {
		w := int(a.Width)
		src, err := x.F32(a.X, int(a.SrcRows)*w)
		if err != nil {
			return err
		}
		idx, err := x.I32(a.Idx, int(a.Rows))
		if err != nil {
			return err
		}
		out, err := x.F32(a.Out, int(a.Rows)*w)
		if err != nil {
			return err
		}
		for r, i := range idx {
			if i < 0 || i >= a.SrcRows {
				return fmt.Errorf("row %d: index %d outside %d rows", r, i, a.SrcRows)
			}
		}
		x.For(len(idx), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				i := int(idx[r])
				copy(out[r*w:(r+1)*w], src[i*w:(i+1)*w])
			}
		})
		return nil
	},
})
