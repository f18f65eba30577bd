package kernels

import (
	"fmt"
	"math"

	"verity/device"
	"verity/device/num"
)

// KVStoreArgs writes each row's key and value vectors into its physical cache slot:
// KCache[Slots[r]] = K[r], VCache[Slots[r]] = V[r]. The slots of one launch must be distinct:
// rows are written in no particular order.
type KVStoreArgs struct {
	K      device.Ptr // float32 [Rows][KVDim]
	V      device.Ptr // float32 [Rows][KVDim]
	Slots  device.Ptr // int32 [Rows]
	KCache device.Ptr // float32 [NSlots][KVDim]
	VCache device.Ptr // float32 [NSlots][KVDim]
	Rows   int32
	KVDim  int32
	NSlots int32
}

var KVStore = device.Register(&device.Kernel[KVStoreArgs]{
	EntryName: "kv_store_f32", ModuleName: "attention",
	Shape: func(a KVStoreArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.KVDim <= 0 || a.NSlots <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d kv_dim=%d slots=%d", a.Rows, a.KVDim, a.NSlots)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: 1, Z: 1}, Block: device.Dim3{X: 128, Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a KVStoreArgs) error { return storeKV(x, a, nil) },
})

// storeKV is the K/V store's twin: row r's K and V into cache slot Slots[r]; then, if set,
// turn(key, r) changes the stored key in place (RopeKVStore rotates it).
func storeKV(x *device.Exec, a KVStoreArgs, turn func(key []float32, r int)) error {
	rows, d, ns := int(a.Rows), int(a.KVDim), int(a.NSlots)
	k, err := x.F32(a.K, rows*d)
	if err != nil {
		return err
	}
	v, err := x.F32(a.V, rows*d)
	if err != nil {
		return err
	}
	slots, err := x.I32(a.Slots, rows)
	if err != nil {
		return err
	}
	kc, err := x.F32(a.KCache, ns*d)
	if err != nil {
		return err
	}
	vc, err := x.F32(a.VCache, ns*d)
	if err != nil {
		return err
	}
	for r, s := range slots {
		if s < 0 || int(s) >= ns {
			return fmt.Errorf("row %d: slot %d outside cache of %d", r, s, ns)
		}
	}
	x.For(rows, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			s := int(slots[r])
			copy(kc[s*d:(s+1)*d], k[r*d:(r+1)*d])
			copy(vc[s*d:(s+1)*d], v[r*d:(r+1)*d])
			if turn != nil {
				turn(kc[s*d:(s+1)*d], r)
			}
		}
	})
	return nil
}

// AttentionArgs: scaled dot-product attention of each row's query heads over that row's own
// key list — the cache slots Keys[KeyOff[r] : KeyOff[r+1]], in logical order (a session's
// history, then for a tree node its ancestors root first and itself last). Query head h reads
// KV head h / (NHead/NKV). Masked keys are simply absent from the list, so a row's bits
// depend only on its own keys, never on the other rows of the step.
//
// Order, per row and head, with j running over the key list in order:
//   - s_j = float32(dot·Scale) where dot = fma(q[d], k_j[d], dot) for d = 0 … HeadDim−1 from +0;
//   - m = max_j s_j; e_j = Exp32(s_j − m);
//   - sum: lane l adds e_j for j = l, l+32, … in order (acc = acc + e_j), then num.WarpSum;
//   - out[d] = o_d / sum with o_d = fma(e_j, v_j[d], o_d) over j in order from +0.
type AttentionArgs struct {
	Q       device.Ptr // float32 [Rows][NHead][HeadDim]
	KCache  device.Ptr // float32 [NSlots][NKV][HeadDim]
	VCache  device.Ptr // float32 [NSlots][NKV][HeadDim]
	Keys    device.Ptr // int32 slot lists of all rows, concatenated
	KeyOff  device.Ptr // int32 [Rows+1]: row r's keys are Keys[KeyOff[r]:KeyOff[r+1]]
	Out     device.Ptr // float32 [Rows][NHead][HeadDim]
	Rows    int32
	NHead   int32
	NKV     int32
	HeadDim int32
	NSlots  int32
	Scale   float32
}

var Attention = device.Register(&device.Kernel[AttentionArgs]{
	EntryName: "attention_f32", ModuleName: "attention",
	Shape: func(a AttentionArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.NHead <= 0 || a.NKV <= 0 || a.HeadDim <= 0 || a.NSlots <= 0 || a.NHead%a.NKV != 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d heads=%d/%d head_dim=%d slots=%d", a.Rows, a.NHead, a.NKV, a.HeadDim, a.NSlots)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: uint32(a.NHead), Z: 1}, Block: device.Dim3{X: 32, Y: 1, Z: 1}}, nil
	},
	Twin: attentionTwin,
})

func attentionTwin(x *device.Exec, a AttentionArgs) error {
	rows, nh, nkv, hd, ns := int(a.Rows), int(a.NHead), int(a.NKV), int(a.HeadDim), int(a.NSlots)
	q, err := x.F32(a.Q, rows*nh*hd)
	if err != nil {
		return err
	}
	kc, err := x.F32(a.KCache, ns*nkv*hd)
	if err != nil {
		return err
	}
	vc, err := x.F32(a.VCache, ns*nkv*hd)
	if err != nil {
		return err
	}
	off, err := x.I32(a.KeyOff, rows+1)
	if err != nil {
		return err
	}
	if off[0] != 0 {
		return fmt.Errorf("key offsets must start at 0, got %d", off[0])
	}
	for r := 0; r < rows; r++ {
		if off[r+1] <= off[r] {
			return fmt.Errorf("row %d has no keys (offsets %d, %d)", r, off[r], off[r+1])
		}
	}
	keys, err := x.I32(a.Keys, int(off[rows]))
	if err != nil {
		return err
	}
	for i, s := range keys {
		if s < 0 || int(s) >= ns {
			return fmt.Errorf("key %d: slot %d outside cache of %d", i, s, ns)
		}
	}
	out, err := x.F32(a.Out, rows*nh*hd)
	if err != nil {
		return err
	}
	group := nh / nkv
	x.For(rows*nh, func(lo, hi int) {
		var e []float32
		var offs []int64
		for i := lo; i < hi; i++ {
			r, h := i/nh, i%nh
			ks := keys[off[r]:off[r+1]]
			if cap(e) < len(ks) {
				e, offs = make([]float32, len(ks)), make([]int64, len(ks))
			}
			e, offs = e[:len(ks)], offs[:len(ks)]
			kvh := h / group
			for j, s := range ks {
				offs[j] = int64(s)*int64(nkv*hd) + int64(kvh*hd)
			}
			attendHead(out[i*hd:(i+1)*hd], q[i*hd:(i+1)*hd], kc, vc, offs, e, a.Scale, true)
		}
	})
	return nil
}

// attendHead computes one head of one row: offs holds the float32 offsets of its keys' (and
// values') head vectors in kc and vc, in key order; e is scratch of len(offs). With vec, the
// vector forms (simd.go), where the CPU has them, compute the scores, their exponentials and
// the weighted value sum with the same chains of operations.
func attendHead(out, q, kc, vc []float32, offs []int64, e []float32, scale float32, vec bool) {
	hd := len(q)
	for j := vectorScores(e, q, kc, offs, scale, vec); j < len(offs); j++ {
		k := kc[offs[j] : offs[j]+int64(hd)]
		var dot float32
		for d := 0; d < hd; d++ {
			dot = num.FMA32(q[d], k[d], dot)
		}
		e[j] = float32(dot * scale)
	}
	m := float32(math.Inf(-1))
	for _, v := range e {
		m = num.Max32(m, v)
	}
	var acc [32]float32
	done := vectorExpShift(e, m, vec)
	for j := range e {
		if j >= done {
			e[j] = num.Exp32(e[j] - m)
		}
		acc[j&31] += e[j]
	}
	sum := num.WarpTotal(&acc)
	if !vectorPV(out, e, vc, offs, vec) {
		for d := range out {
			out[d] = 0
		}
		for j, o := range offs {
			v := vc[o : o+int64(hd)]
			p := e[j]
			for d := 0; d < hd; d++ {
				out[d] = num.FMA32(p, v[d], out[d])
			}
		}
	}
	for d := range out {
		out[d] /= sum
	}
}
