package kernels

import (
	"fmt"
	"math"

	"verity/device"
)

// AttentionMergeArgs: the second half of an attention launch that deferred its merge
// (AttentionArgs.DeferMerge): each row's query heads' chunk partials in Part, as that launch
// wrote them, merged in chunk order exactly as Attention merges them (AttentionArgs' order) and
// written to Out. Rows, NHead, NKV, HeadDim, Chunks, Window and OutAct are the attention
// launch's, and KeyOff its key offsets.
//
// The device kernel runs a block per (row, KV head), block r·NKV + kvh, merging that KV head's
// query heads. Attention merges on the block that computes a row's last chunk, which over a
// tree's shared history is one block a (group of rows, KV head) — every row of the group at
// once, all its partial results read by one SM; here they are spread over a block per row.
// Count is the attention launch's: a row it marked as having a bad chunk is not written, and
// Count is zero again after this launch. The twin does not touch Count (the attention twin
// reports a bad chunk as an error).
type AttentionMergeArgs struct {
	Part    device.Ptr // float32 [Rows][NHead][Chunks][HeadDim+2]
	KeyOff  device.Ptr // int32 [Rows+1]
	Count   device.Ptr // uint32 [Rows][NKV]
	Out     device.Ptr // OutAct [Rows][NHead][HeadDim]
	Rows    int32
	NHead   int32
	NKV     int32
	HeadDim int32
	Chunks  int32
	Window  int32
	OutAct  int32
}

func attentionMergeTwin(x *device.Exec, a AttentionMergeArgs) error {
	rows, nh, nkv, hd, nc := int(a.Rows), int(a.NHead), int(a.NKV), int(a.HeadDim), int(a.Chunks)
	off, err := x.I32(a.KeyOff, rows+1)
	if err != nil {
		return err
	}
	if off[0] != 0 {
		return fmt.Errorf("key offsets must start at 0, got %d", off[0])
	}
	counts := make([]int, rows)
	for r := range counts {
		n := int(off[r+1]) - int(off[r])
		if n <= 0 {
			return fmt.Errorf("row %d has no keys (offsets %d, %d)", r, off[r], off[r+1])
		}
		_, n = windowed(int(off[r]), n, int(a.Window))
		if counts[r] = AttnChunks(n); counts[r] > nc {
			return fmt.Errorf("row %d has %d keys: more than %d chunks of %d", r, n, nc, AttnChunk)
		}
	}
	part, err := x.F32(a.Part, rows*nh*nc*AttnPartWords(hd))
	if err != nil {
		return err
	}
	out, err := x.U8(a.Out, int64(rows*nh*hd*Act(a.OutAct).RowBytes(1)))
	if err != nil {
		return err
	}
	group := nh / nkv
	x.For(rows*nkv, func(lo, hi int) {
		o := make([]float32, group*hd)
		for i := lo; i < hi; i++ {
			r := i / nkv
			mergeHeads(out, o, part, a.OutAct, r, i%nkv, group, nh, nc, hd, counts[r])
		}
	})
	return nil
}

var AttentionMerge = device.Register(&device.Kernel[AttentionMergeArgs]{
	EntryName: "attention_merge_f32", ModuleName: "attention",
	Shape: func(a AttentionMergeArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.NHead <= 0 || a.NKV <= 0 || a.HeadDim <= 0 || a.NHead%a.NKV != 0 || a.Chunks <= 0 || a.Window < 0 ||
			int64(a.Rows)*int64(a.NKV) > math.MaxInt32 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d heads=%d/%d head_dim=%d chunks=%d window=%d",
				a.Rows, a.NHead, a.NKV, a.HeadDim, a.Chunks, a.Window)
		}
		if err := checkOutAct(a.OutAct); err != nil {
			return device.Geometry{}, err
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows * a.NKV), Y: 1, Z: 1},
			Block: device.Dim3{X: AttnBlockThreads, Y: 1, Z: 1}}, nil
	},
	Twin: attentionMergeTwin,
})
