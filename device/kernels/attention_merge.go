package kernels

import (
	"errors"

	"verity/device"
)

// AttentionMerge is the second launch of an attention whose first deferred its merge
// (AttentionArgs.DeferMerge, the same arguments): for each row the launch's last chunk
// (Chunks−1) if the row has one and the rows do not all share it, then the merge of the row's
// chunks, in AttentionArgs' order, written to Out.
//
// The device kernel runs a block per (row, KV head), block r·NKV + kvh, for that KV head's
// query heads. Attention merges on the block that computes a row's last chunk, which over a
// tree's shared history is one block a (group of rows, KV head) — every row of the group at
// once, all its partial results read by one SM; here a row's are spread over blocks of their
// own, and the rows' own chunks (a tree node's ancestors), which would otherwise take blocks of
// the first launch beside the shared history's, come with them. A row the first launch marked
// in Count as having a bad chunk, or whose last chunk names a bad slot, is not written, and
// Count is zero again after this launch. The twin does not touch Count (it reports a bad
// chunk as an error).
var AttentionMerge = device.Register(&device.Kernel[AttentionArgs]{
	EntryName: "attention_merge_f32", ModuleName: "attention",
	Shape: func(a AttentionArgs) (device.Geometry, error) {
		if a.DeferMerge != 1 {
			return device.Geometry{}, errors.New("the merge of an attention launch that did not defer it (DeferMerge 0)")
		}
		if _, err := Attention.Shape(a); err != nil {
			return device.Geometry{}, err
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows * a.NKV), Y: 1, Z: 1},
			Block: device.Dim3{X: AttnBlockThreads, Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a AttentionArgs) error { return attentionRun(x, a, attnLastAndMerge) },
})
