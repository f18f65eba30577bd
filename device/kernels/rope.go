package kernels

import (
	"fmt"

	"verity/device"
	"verity/device/num"
)

// Rotary position embedding modes.
const (
	RopeAdjacent int32 = 0 // rotate pairs (x[2i], x[2i+1]) — ggml's "normal" mode (llama)
	RopeNeox     int32 = 2 // rotate pairs (x[i], x[i+nRot/2]) — ggml's NEOX mode (qwen)
)

// RopeArgs rotates, in place, the first NRot dims of each of the Heads heads of HeadDim values
// in every row of X. CosSin holds, per row, NRot/2 (cos θ_i, sin θ_i) pairs computed by the
// host in float64 and rounded once, θ_i = pos·base^(−2i/NRot) (with any scaling applied).
// Pair i (a, b) becomes (float32(a·c) − float32(b·s), float32(a·s) + float32(b·c)).
type RopeArgs struct {
	X       device.Ptr // float32 [Rows][Heads][HeadDim]
	CosSin  device.Ptr // float32 [Rows][NRot/2][2]
	Rows    int32
	Heads   int32
	HeadDim int32
	NRot    int32
	Mode    int32
}

var Rope = device.Register(&device.Kernel[RopeArgs]{
	EntryName: "rope_f32", ModuleName: "rope",
	Shape: func(a RopeArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.Heads <= 0 || a.HeadDim <= 0 || a.NRot <= 0 || a.NRot > a.HeadDim || a.NRot%2 != 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d heads=%d head_dim=%d n_rot=%d", a.Rows, a.Heads, a.HeadDim, a.NRot)
		}
		if a.Mode != RopeAdjacent && a.Mode != RopeNeox {
			return device.Geometry{}, fmt.Errorf("unknown rope mode %d", a.Mode)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: uint32(a.Heads), Z: 1}, Block: device.Dim3{X: uint32(a.NRot / 2), Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a RopeArgs) error {
		rows, heads, hd, half := int(a.Rows), int(a.Heads), int(a.HeadDim), int(a.NRot/2)
		v, err := x.F32(a.X, rows*heads*hd)
		if err != nil {
			return err
		}
		cs, err := x.F32(a.CosSin, rows*half*2)
		if err != nil {
			return err
		}
		x.For(rows, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				tab := cs[r*half*2 : (r+1)*half*2]
				for h := 0; h < heads; h++ {
					ropeHead(v[(r*heads+h)*hd:(r*heads+h+1)*hd], tab, half, a.Mode)
				}
			}
		})
		return nil
	},
})

func ropeHead(x, tab []float32, half int, mode int32) {
	for i := 0; i < half; i++ {
		c, s := tab[2*i], tab[2*i+1]
		j, k := 2*i, 2*i+1
		if mode == RopeNeox {
			j, k = i, i+half
		}
		a, b := x[j], x[k]
		x[j] = num.Canon(float32(a*c) - float32(b*s))
		x[k] = num.Canon(float32(a*s) + float32(b*c))
	}
}

// RopeKVStoreArgs: the K rows rotated as Rope rotates them (Heads heads of HeadDim, the first
// NRot dims of each, tables in CosSin) and stored with V into each row's cache slot as KVStore
// stores them (rounded to the caches' types) — the rotation fused into the store: K itself is
// left as it was, the cache gets the bits a Rope then a KVStore would give it.
type RopeKVStoreArgs struct {
	K       device.Ptr // float32 [Rows][KVDim], KVDim = Heads·HeadDim
	V       device.Ptr // float32 [Rows][KVDim]
	CosSin  device.Ptr // float32 [Rows][NRot/2][2]
	Slots   device.Ptr // int32 [Rows], distinct
	KCache  device.Ptr // KType [NSlots][KVDim]
	VCache  device.Ptr // VType [NSlots][KVDim]
	Rows    int32
	KVDim   int32
	NSlots  int32
	Heads   int32
	HeadDim int32
	NRot    int32
	Mode    int32
	KType   int32 // the caches' element types, as KVStoreArgs
	VType   int32
}

var RopeKVStore = device.Register(&device.Kernel[RopeKVStoreArgs]{
	EntryName: "rope_kv_store_f32", ModuleName: "rope",
	Shape: func(a RopeKVStoreArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.NSlots <= 0 || a.Heads <= 0 || a.HeadDim <= 0 || a.KVDim != a.Heads*a.HeadDim ||
			a.NRot <= 0 || a.NRot%2 != 0 || a.NRot > a.HeadDim {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d kv_dim=%d heads=%d head_dim=%d n_rot=%d slots=%d", a.Rows, a.KVDim, a.Heads, a.HeadDim, a.NRot, a.NSlots)
		}
		if a.Mode != RopeAdjacent && a.Mode != RopeNeox {
			return device.Geometry{}, fmt.Errorf("unknown rope mode %d", a.Mode)
		}
		if err := checkCacheTypes(a.KType, a.VType); err != nil {
			return device.Geometry{}, err
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: 1, Z: 1}, Block: device.Dim3{X: 128, Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a RopeKVStoreArgs) error {
		hd, half := int(a.HeadDim), int(a.NRot/2)
		cs, err := x.F32(a.CosSin, int(a.Rows)*half*2)
		if err != nil {
			return err
		}
		store := KVStoreArgs{K: a.K, V: a.V, Slots: a.Slots, KCache: a.KCache, VCache: a.VCache, Rows: a.Rows, KVDim: a.KVDim, NSlots: a.NSlots, KType: a.KType, VType: a.VType}
		return storeKV(x, store, func(key []float32, r int) {
			tab := cs[r*half*2 : (r+1)*half*2]
			for h := 0; h < int(a.Heads); h++ {
				ropeHead(key[h*hd:(h+1)*hd], tab, half, a.Mode)
			}
		})
	},
})
