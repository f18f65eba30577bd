package perf

import (
	"fmt"
	"strings"

	"verity/device/kernels"
)

// The traffic of each kernel family (see Traffic): one function per argument type, from the
// kernels' sources in ptx/src. float32 values are 4 bytes; i32 indices 4.

const f32 = 4

func init() {
	RegisterTraffic(matvecTraffic)
	RegisterTraffic(moeMatVecTraffic)
	RegisterTraffic(moeGateUpTraffic)
	RegisterTraffic(moeDownTraffic)
	RegisterTraffic(convertTraffic)
	RegisterTraffic(rmsnormTraffic)
	RegisterTraffic(rmsnormActTraffic)
	RegisterTraffic(binaryActTraffic)
	RegisterTraffic(binaryTraffic)
	RegisterTraffic(unaryTraffic)
	RegisterTraffic(biasTraffic)
	RegisterTraffic(gatherTraffic)
	RegisterTraffic(embedTraffic)
	RegisterTraffic(argmaxTraffic)
	RegisterTraffic(ropeTraffic)
	RegisterTraffic(ropeKVStoreTraffic)
	RegisterTraffic(kvStoreTraffic)
	RegisterTraffic(attentionTraffic)
	RegisterTraffic(gatedNormTraffic)
	RegisterTraffic(splitGateTraffic)
	RegisterTraffic(routerTraffic)
	RegisterTraffic(combineTraffic)
	RegisterTraffic(gdnConvTraffic)
	RegisterTraffic(gdnScanTraffic)
}

func n64(v ...int32) int64 {
	p := int64(1)
	for _, x := range v {
		p *= int64(x)
	}
	return p
}

// matvec, matvec8: every weight row once per pass of columns (once in all when the matrix
// stays in the L2), every warp reading all N activation rows, Y written (and read with Acc).
func matvecTraffic(entry string, a kernels.MatVecArgs) (Traffic, error) {
	t, f, err := weightType(entry)
	if err != nil {
		return Traffic{}, err
	}
	row, err := usedRowBytes(t, int64(a.Cols))
	if err != nil {
		return Traffic{}, err
	}
	w := int64(a.Rows) * row
	p := int64((int(a.N) + columns(entry) - 1) / columns(entry))
	x := int64(a.N) * int64(f.Act.RowBytes(int(a.Cols)))
	y := n64(a.N, a.Rows) * f32
	tr := Traffic{Streams: []Stream{
		{Param: "W", Bytes: w * passes(w, int(a.N), columns(entry)), Requested: w * p},
		{Param: "X", Bytes: x, Requested: x * int64(a.Rows)},
		{Param: "Y", Bytes: y, Write: true},
	}}
	if a.Acc != 0 {
		tr.Streams = append(tr.Streams, Stream{Param: "Y", Bytes: y})
	}
	return tr, nil
}

// distinctExperts is how many experts n·k routed slots read, taken to be distinct.
func distinctExperts(n, k, ne int32) int64 { return min(int64(n)*int64(k), int64(ne)) }

const expertNote = "assumes the routed slots pick distinct experts"

func moeMatVecTraffic(entry string, a kernels.MoEMatVecArgs) (Traffic, error) {
	t, f, err := weightType(entry)
	if err != nil {
		return Traffic{}, err
	}
	row, err := usedRowBytes(t, int64(a.Cols))
	if err != nil {
		return Traffic{}, err
	}
	slots := n64(a.N, a.K)
	xRows := int64(a.N)
	if a.XPerSlot != 0 {
		xRows = slots
	}
	xb := int64(f.Act.RowBytes(int(a.Cols)))
	return Traffic{Note: expertNote, Streams: []Stream{
		{Param: "W", Bytes: distinctExperts(a.N, a.K, a.NExpert) * int64(a.Out) * row, Requested: slots * int64(a.Out) * row},
		{Param: "X", Bytes: xRows * xb, Requested: slots * int64(a.Out) * xb},
		{Param: "Ids", Bytes: slots * 4, Requested: slots * int64(a.Out) * 4},
		{Param: "Y", Bytes: slots * int64(a.Out) * f32, Write: true},
	}}, nil
}

func moeGateUpTraffic(entry string, a kernels.MoEGateUpArgs) (Traffic, error) {
	t, f, err := weightType(entry)
	if err != nil {
		return Traffic{}, err
	}
	row, err := usedRowBytes(t, int64(a.Cols))
	if err != nil {
		return Traffic{}, err
	}
	slots := n64(a.N, a.K)
	w := distinctExperts(a.N, a.K, a.NExpert) * int64(a.Out) * row
	xb := int64(f.Act.RowBytes(int(a.Cols)))
	return Traffic{Note: expertNote, Streams: []Stream{
		{Param: "WGate", Bytes: w, Requested: slots * int64(a.Out) * row},
		{Param: "WUp", Bytes: w, Requested: slots * int64(a.Out) * row},
		{Param: "X", Bytes: int64(a.N) * xb, Requested: 2 * slots * int64(a.Out) * xb},
		{Param: "Ids", Bytes: slots * 4, Requested: slots * int64(a.Out) * 4},
		{Param: "Y", Bytes: slots * int64(a.Out) * f32, Write: true},
	}}, nil
}

func moeDownTraffic(entry string, a kernels.MoEDownArgs) (Traffic, error) {
	t, f, err := weightType(entry)
	if err != nil {
		return Traffic{}, err
	}
	row, err := usedRowBytes(t, int64(a.Cols))
	if err != nil {
		return Traffic{}, err
	}
	slots := n64(a.N, a.K)
	xb := int64(f.Act.RowBytes(int(a.Cols)))
	tr := Traffic{Note: expertNote, Streams: []Stream{
		{Param: "W", Bytes: distinctExperts(a.N, a.K, a.NExpert) * int64(a.Rows) * row, Requested: slots * int64(a.Rows) * row},
		{Param: "X", Bytes: slots * xb, Requested: slots * int64(a.Rows) * xb},
		{Param: "Ids", Bytes: slots * 4, Requested: slots * int64(a.Rows) * 4},
		{Param: "Weights", Bytes: slots * f32, Requested: slots * int64(a.Rows) * f32},
		{Param: "Out", Bytes: n64(a.N, a.Rows) * f32, Write: true},
	}}
	if a.Shared != 0 {
		tr.Streams = append(tr.Streams, Stream{Param: "Shared", Bytes: n64(a.N, a.Rows) * f32},
			Stream{Param: "Gate", Bytes: int64(a.N) * f32, Requested: n64(a.N, a.Rows) * f32})
	}
	return tr, nil
}

func actOf(entry string) (kernels.Act, error) {
	i := strings.LastIndex(entry, "_act_")
	name := entry[i+len("_act_"):]
	if i < 0 {
		name = strings.TrimPrefix(entry, "act_")
	}
	for _, a := range []kernels.Act{kernels.ActF16, kernels.ActBF16, kernels.ActQ8_0, kernels.ActQ8_1, kernels.ActQ8_K} {
		if a.String() == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("perf: %s names no activation format", entry)
}

func convertTraffic(entry string, a kernels.ConvertArgs) (Traffic, error) {
	act, err := actOf(entry)
	if err != nil {
		return Traffic{}, err
	}
	return Traffic{Streams: []Stream{
		{Param: "X", Bytes: n64(a.N, a.Cols) * f32},
		{Param: "Out", Bytes: int64(a.N) * int64(act.RowBytes(int(a.Cols))), Write: true},
	}}, nil
}

// rmsnorm: a warp per group reads its row twice (the sum of squares, then the output).
func rmsnormTraffic(_ string, a kernels.RMSNormArgs) (Traffic, error) {
	x := n64(a.Groups, a.Width) * f32
	return Traffic{Streams: []Stream{
		{Param: "X", Bytes: x, Requested: 2 * x},
		{Param: "W", Bytes: int64(a.Width) * f32, Requested: x},
		{Param: "Y", Bytes: x, Write: true},
	}}, nil
}

func rmsnormActTraffic(entry string, a kernels.RMSNormActArgs) (Traffic, error) {
	act, err := actOf(entry)
	if err != nil {
		return Traffic{}, err
	}
	x := n64(a.Rows, a.Width) * f32
	return Traffic{Streams: []Stream{
		{Param: "X", Bytes: x, Requested: 2 * x},
		{Param: "W", Bytes: int64(a.Width) * f32, Requested: x},
		{Param: "Out", Bytes: int64(a.Rows) * int64(act.RowBytes(int(a.Width))), Write: true},
	}}, nil
}

func binaryActTraffic(entry string, a kernels.BinaryActArgs) (Traffic, error) {
	act, err := actOf(entry)
	if err != nil {
		return Traffic{}, err
	}
	x := n64(a.Rows, a.Width) * f32
	return Traffic{Streams: []Stream{
		{Param: "A", Bytes: x}, {Param: "B", Bytes: x},
		{Param: "Out", Bytes: int64(a.Rows) * int64(act.RowBytes(int(a.Width))), Write: true},
	}}, nil
}

func binaryTraffic(_ string, a kernels.BinaryArgs) (Traffic, error) {
	x := int64(a.N) * f32
	return Traffic{Streams: []Stream{{Param: "A", Bytes: x}, {Param: "B", Bytes: x}, {Param: "Y", Bytes: x, Write: true}}}, nil
}

func unaryTraffic(_ string, a kernels.UnaryArgs) (Traffic, error) {
	x := int64(a.N) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: x}, {Param: "Y", Bytes: x, Write: true}}}, nil
}

func biasTraffic(_ string, a kernels.BiasArgs) (Traffic, error) {
	x := n64(a.Rows, a.Width) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: x}, {Param: "Bias", Bytes: int64(a.Width) * f32, Requested: x},
		{Param: "Y", Bytes: x, Write: true}}}, nil
}

func gatherTraffic(_ string, a kernels.GatherArgs) (Traffic, error) {
	x := n64(a.Rows, a.Width) * f32
	return Traffic{Streams: []Stream{{Param: "Idx", Bytes: int64(a.Rows) * 4, Requested: int64(a.Rows) * 4 * 8},
		{Param: "X", Bytes: x}, {Param: "Out", Bytes: x, Write: true}}}, nil
}

func embedTraffic(entry string, a kernels.EmbedArgs) (Traffic, error) {
	t, _, err := weightType(entry)
	if err != nil {
		return Traffic{}, err
	}
	rb, err := t.RowBytes(int64(a.Cols))
	if err != nil {
		return Traffic{}, err
	}
	return Traffic{Streams: []Stream{{Param: "Tokens", Bytes: int64(a.Rows) * 4},
		{Param: "Table", Bytes: int64(a.Rows) * rb}, {Param: "Out", Bytes: n64(a.Rows, a.Cols) * f32, Write: true}}}, nil
}

func argmaxTraffic(_ string, a kernels.ArgmaxArgs) (Traffic, error) {
	return Traffic{Streams: []Stream{{Param: "X", Bytes: n64(a.Rows, a.Cols) * f32},
		{Param: "Out", Bytes: int64(a.Rows) * 4, Write: true}}}, nil
}

func ropeTraffic(_ string, a kernels.RopeArgs) (Traffic, error) {
	x := n64(a.Rows, a.Heads, a.HeadDim) * f32
	cs := n64(a.Rows, a.NRot) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: x}, {Param: "X", Bytes: x, Write: true},
		{Param: "CosSin", Bytes: cs, Requested: cs * int64(a.Heads)}}}, nil
}

func ropeKVStoreTraffic(_ string, a kernels.RopeKVStoreArgs) (Traffic, error) {
	x := n64(a.Rows, a.KVDim) * f32
	cs := n64(a.Rows, a.NRot) * f32
	return Traffic{Streams: []Stream{{Param: "K", Bytes: x}, {Param: "V", Bytes: x},
		{Param: "CosSin", Bytes: cs, Requested: cs * int64(a.Heads)}, {Param: "Slots", Bytes: int64(a.Rows) * 4},
		{Param: "KCache", Bytes: x, Write: true}, {Param: "VCache", Bytes: x, Write: true}}}, nil
}

func kvStoreTraffic(_ string, a kernels.KVStoreArgs) (Traffic, error) {
	x := n64(a.Rows, a.KVDim) * f32
	return Traffic{Streams: []Stream{{Param: "K", Bytes: x}, {Param: "V", Bytes: x}, {Param: "Slots", Bytes: int64(a.Rows) * 4},
		{Param: "KCache", Bytes: x, Write: true}, {Param: "VCache", Bytes: x, Write: true}}}, nil
}

// attention: the key lists are data; taken as every row attending to all NSlots slots, so that
// each slot's K and V rows of the row's KV head are read once from DRAM and then by every
// (row, query head) warp that shares them.
func attentionTraffic(_ string, a kernels.AttentionArgs) (Traffic, error) {
	kv := n64(a.NSlots, a.NKV, a.HeadDim) * f32
	warps := n64(a.Rows, a.NHead)
	perWarp := n64(a.NSlots, a.HeadDim) * f32
	q := n64(a.Rows, a.NHead, a.HeadDim) * f32
	keys := n64(a.Rows, a.NSlots) * 4
	return Traffic{Note: "assumes every row attends to all NSlots slots", Streams: []Stream{
		{Param: "Q", Bytes: q, Requested: 2 * q * int64(a.NSlots)},
		// K is read twice per warp (the maximum, then the weights), V once
		{Param: "KCache", Bytes: kv, Requested: 2 * warps * perWarp},
		{Param: "VCache", Bytes: kv, Requested: warps * perWarp},
		{Param: "Keys", Bytes: keys, Requested: 4 * warps * int64(a.NSlots) * 4},
		{Param: "KeyOff", Bytes: int64(a.Rows+1) * 4, Requested: warps * 8},
		{Param: "Out", Bytes: q, Write: true},
	}}, nil
}

func gatedNormTraffic(_ string, a kernels.GatedNormArgs) (Traffic, error) {
	x := n64(a.Rows, a.Heads, a.D) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: x, Requested: 2 * x}, {Param: "Z", Bytes: x},
		{Param: "W", Bytes: int64(a.D) * f32, Requested: x}, {Param: "Y", Bytes: x, Write: true}}}, nil
}

func splitGateTraffic(_ string, a kernels.SplitGateArgs) (Traffic, error) {
	x := n64(a.Rows, a.Heads, a.D) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: 2 * x}, {Param: "Q", Bytes: x, Write: true},
		{Param: "G", Bytes: x, Write: true}}}, nil
}

func routerTraffic(_ string, a kernels.RouterArgs) (Traffic, error) {
	return Traffic{Streams: []Stream{{Param: "Logits", Bytes: n64(a.Rows, a.NExpert) * f32, Requested: n64(a.Rows, a.NExpert, a.K) * f32},
		{Param: "Ids", Bytes: n64(a.Rows, a.K) * 4, Write: true}, {Param: "Weights", Bytes: n64(a.Rows, a.K) * f32, Write: true}}}, nil
}

func combineTraffic(_ string, a kernels.MoECombineArgs) (Traffic, error) {
	w := n64(a.N, a.Width) * f32
	tr := Traffic{Streams: []Stream{{Param: "Y", Bytes: n64(a.N, a.K, a.Width) * f32},
		{Param: "Weights", Bytes: n64(a.N, a.K) * f32, Requested: n64(a.N, a.K, a.Width) * f32},
		{Param: "Out", Bytes: w, Write: true}}}
	if a.Shared != 0 {
		tr.Streams = append(tr.Streams, Stream{Param: "Shared", Bytes: w}, Stream{Param: "Gate", Bytes: int64(a.N) * f32, Requested: w})
	}
	return tr, nil
}

// gdn_conv: each channel's state is read and written per row (the L2 holds it in between).
func gdnConvTraffic(_ string, a kernels.GDNConvArgs) (Traffic, error) {
	x := n64(a.Rows, a.C) * f32
	st := n64(a.K-1, a.C) * f32
	return Traffic{Note: "a chain of rows through one state slot", Streams: []Stream{
		{Param: "X", Bytes: x}, {Param: "W", Bytes: n64(a.C, a.K) * f32, Requested: int64(a.Rows) * n64(a.C, a.K) * f32},
		{Param: "State", Bytes: 2 * st, Requested: int64(a.Rows) * st}, {Param: "State", Bytes: 2 * st, Requested: int64(a.Rows) * st, Write: true},
		{Param: "Src", Bytes: int64(a.Rows) * 4, Requested: int64(a.Rows) * n64(a.C) * 4},
		{Param: "Dst", Bytes: int64(a.Rows) * 4, Requested: int64(a.Rows) * n64(a.C) * 4},
		{Param: "Y", Bytes: x, Write: true}}}, nil
}

// gdn_scan: per row, each value head's d×d state is read, written, read again and written
// (the L2 holds a head's state between rows).
func gdnScanTraffic(_ string, a kernels.GDNScanArgs) (Traffic, error) {
	st := n64(a.NV, a.D, a.D) * f32
	width := int64(2*a.NK+a.NV) * int64(a.D) * f32
	return Traffic{Note: "a chain of rows through one state slot", Streams: []Stream{
		{Param: "QKV", Bytes: int64(a.Rows) * width, Requested: int64(a.Rows) * int64(a.NV) * 3 * int64(a.D) * f32 * 2},
		{Param: "State", Bytes: 2 * st, Requested: 2 * int64(a.Rows) * st}, {Param: "State", Bytes: 2 * st, Requested: 2 * int64(a.Rows) * st, Write: true},
		{Param: "Beta", Bytes: n64(a.Rows, a.NV) * f32}, {Param: "Alpha", Bytes: n64(a.Rows, a.NV) * f32},
		{Param: "Out", Bytes: n64(a.Rows, a.NV, a.D) * f32, Write: true}}}, nil
}
