package kernels

import (
	"fmt"
	"math"
	"unsafe"

	"verity/device"
	"verity/device/dtype"
	"verity/device/num"
)

// The K/V cache holds each slot's key and value vectors as float32, float16 or bfloat16
// (chosen per cache, CacheTypes). The store rounds float32 to the cache type to nearest even
// (num.F32ToF16, num.F32ToBF16; float32 is copied bit for bit); attention widens every element
// exactly (num.F16ToF32, num.BF16ToF32) before any arithmetic, so all of attention's arithmetic
// is float32 whatever the cache type.

// CacheTypes are the element types a K or V cache may have.
var CacheTypes = []dtype.Type{dtype.F32, dtype.F16, dtype.BF16}

// CacheTypeOK reports whether t is one of CacheTypes.
func CacheTypeOK(t dtype.Type) bool { return t == dtype.F32 || t == dtype.F16 || t == dtype.BF16 }

// cacheElem returns the bytes of one cache element of type t (a kernel argument), or an error.
func cacheElem(t int32) (int, error) {
	switch dtype.Type(t) {
	case dtype.F32:
		return 4, nil
	case dtype.F16, dtype.BF16:
		return 2, nil
	}
	return 0, fmt.Errorf("cache type %d is not f32, f16 or bf16", t)
}

// KVStoreArgs writes each row's key and value vectors into its physical cache slot:
// KCache[Slots[r]] = K[r], VCache[Slots[r]] = V[r], each element rounded to the cache's type
// (KType, VType: dtype values F32, F16 or BF16). The slots of one launch must be distinct:
// rows are written in no particular order.
type KVStoreArgs struct {
	K      device.Ptr // float32 [Rows][KVDim]
	V      device.Ptr // float32 [Rows][KVDim]
	Slots  device.Ptr // int32 [Rows]
	KCache device.Ptr // KType [NSlots][KVDim]
	VCache device.Ptr // VType [NSlots][KVDim]
	Rows   int32
	KVDim  int32
	NSlots int32
	KType  int32
	VType  int32
}

var KVStore = device.Register(&device.Kernel[KVStoreArgs]{
	EntryName: "kv_store_f32", ModuleName: "attention",
	Shape: func(a KVStoreArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.KVDim <= 0 || a.NSlots <= 0 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d kv_dim=%d slots=%d", a.Rows, a.KVDim, a.NSlots)
		}
		if err := checkCacheTypes(a.KType, a.VType); err != nil {
			return device.Geometry{}, err
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: 1, Z: 1}, Block: device.Dim3{X: 128, Y: 1, Z: 1}}, nil
	},
	Twin: func(x *device.Exec, a KVStoreArgs) error { return storeKV(x, a, nil) },
})

func checkCacheTypes(k, v int32) error {
	if _, err := cacheElem(k); err != nil {
		return fmt.Errorf("K %w", err)
	}
	if _, err := cacheElem(v); err != nil {
		return fmt.Errorf("V %w", err)
	}
	return nil
}

// cacheView is a K or V cache in the twin: float32 or 16-bit elements.
type cacheView struct {
	t   dtype.Type
	f32 []float32
	u16 []uint16
}

func viewCache(x *device.Exec, p device.Ptr, t int32, n int) (cacheView, error) {
	es, err := cacheElem(t)
	if err != nil {
		return cacheView{}, err
	}
	c := cacheView{t: dtype.Type(t)}
	if es == 4 {
		c.f32, err = x.F32(p, n)
		return c, err
	}
	b, err := x.U8(p, int64(n)*2)
	if err != nil || n == 0 {
		return c, err
	}
	if uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		return c, fmt.Errorf("16-bit cache at %#x is not 2-byte aligned", uint64(p))
	}
	c.u16 = unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), n)
	return c, nil
}

// put stores row (float32) at element offset off, rounded to the cache type.
func (c cacheView) put(off int, row []float32) {
	switch c.t {
	case dtype.F32:
		copy(c.f32[off:off+len(row)], row)
	case dtype.F16:
		for i, v := range row {
			c.u16[off+i] = num.F32ToF16(v)
		}
	default:
		for i, v := range row {
			c.u16[off+i] = num.F32ToBF16(v)
		}
	}
}

// widen sets dst to the cache's elements at off, widened exactly to float32 (NaNs as the
// canonical NaN: the arithmetic they reach gives it anyway).
func (c cacheView) widen(dst []float32, off int64) {
	switch c.t {
	case dtype.F32:
		copy(dst, c.f32[off:off+int64(len(dst))])
	case dtype.F16:
		widenF16(dst, c.u16[off:off+int64(len(dst))])
	default:
		widenBF16(dst, c.u16[off:off+int64(len(dst))])
	}
}

// widenF16Go and widenBF16Go are widenF16's and widenBF16's portable forms.
func widenF16Go(dst []float32, src []uint16) {
	for i, h := range src {
		dst[i] = num.Canon(num.F16ToF32(h))
	}
}

func widenBF16Go(dst []float32, src []uint16) {
	for i, h := range src {
		dst[i] = num.Canon(num.BF16ToF32(h))
	}
}

// storeKV is the K/V store's twin: row r's K and V into cache slot Slots[r]; then, if set,
// turn(key, r) changes the key (float32) before it is rounded and stored (RopeKVStore rotates
// it).
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
	kc, err := viewCache(x, a.KCache, a.KType, ns*d)
	if err != nil {
		return fmt.Errorf("K cache: %w", err)
	}
	vc, err := viewCache(x, a.VCache, a.VType, ns*d)
	if err != nil {
		return fmt.Errorf("V cache: %w", err)
	}
	for r, s := range slots {
		if s < 0 || int(s) >= ns {
			return fmt.Errorf("row %d: slot %d outside cache of %d", r, s, ns)
		}
	}
	x.For(rows, func(lo, hi int) {
		key := make([]float32, d)
		for r := lo; r < hi; r++ {
			s := int(slots[r])
			copy(key, k[r*d:(r+1)*d])
			if turn != nil {
				turn(key, r)
			}
			kc.put(s*d, key)
			vc.put(s*d, v[r*d:(r+1)*d])
		}
	})
	return nil
}

// AttnChunk is the number of logical key positions in one chunk of a row's key list, a
// constant of the attention contract: chunk c of a row is its keys c·AttnChunk …
// (c+1)·AttnChunk−1, whatever the step holds besides the row.
const AttnChunk = 64

// AttnPartWords is the float32 words of one chunk's partial result in AttentionArgs.Part for
// head size hd: the chunk's maximum score, its sum of exponentials and its hd weighted value
// sums.
func AttnPartWords(hd int) int { return hd + 2 }

// AttnChunks is the number of chunks of a key list of n keys.
func AttnChunks(n int) int { return (n + AttnChunk - 1) / AttnChunk }

// AttnGroup is the number of rows whose chunks the attention kernel compares for sharing:
// rows AttnGroup·g … AttnGroup·g+AttnGroup−1 form group g (AttentionArgs.Shared).
const AttnGroup = 8

// AttnShared is the largest valid AttentionArgs.Shared for rows with key lists lists under
// window (0: none): the number of leading chunks that every row of each group holds whole and
// with the same slots as its group's first row (the history of a tree's nodes, its whole
// chunks). A row's candidate chunks are compared with its group's first row's in one memory
// comparison (the common case: they are the same), chunk by chunk only when they differ.
func AttnShared(lists [][]int32, window int) int {
	s := math.MaxInt
	for g := 0; g < len(lists) && s > 0; g += AttnGroup {
		group := lists[g:min(g+AttnGroup, len(lists))]
		first := windowedList(group[0], window)
		n := min(s, len(first)/AttnChunk)
		for _, l := range group[1:] {
			l = windowedList(l, window)
			n = min(n, len(l)/AttnChunk)
			if sameSlots(l[:n*AttnChunk], first[:n*AttnChunk]) {
				continue
			}
			for c := 0; c < n; c++ {
				if !sameSlots(l[c*AttnChunk:(c+1)*AttnChunk], first[c*AttnChunk:(c+1)*AttnChunk]) {
					n = c
				}
			}
		}
		s = min(s, n)
	}
	if s == math.MaxInt {
		return 0
	}
	return s
}

// sameSlots reports whether slot lists a and b, of the same length, are equal (as bytes: the
// runtime's vector comparison).
func sameSlots(a, b []int32) bool {
	if len(a) == 0 {
		return true
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 4*len(a))) == string(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 4*len(b)))
}

// windowedList is the part of key list l a row attends to with window w (windowed).
func windowedList(l []int32, w int) []int32 {
	lo, n := windowed(0, len(l), w)
	return l[lo : lo+n]
}

// AttentionArgs: scaled dot-product attention of each row's query heads over that row's own
// key list — the cache slots Keys[KeyOff[r] : KeyOff[r+1]], in logical order (a session's
// history, then for a tree node its ancestors root first and itself last). Query head h reads
// KV head h / (NHead/NKV). Masked keys are simply absent from the list, so a row's bits
// depend only on its own keys, never on the other rows of the step.
//
// With Window > 0 (sliding-window attention) a row's key list is the last Window slots of that
// list, or all of it when it is shorter: a list is the row's logical positions in order, its
// own last, so these are the Window positions up to the row's own — what llama.cpp keeps
// (a key at p0 is masked for the query at p1 when p1 − p0 ≥ Window). It is still a function
// of the row's own list only.
//
// The key list j = 0 … n−1 is cut into chunks of AttnChunk positions (chunk c: j from
// c·AttnChunk, the last one shorter). Order, per row and query head:
//   - each chunk alone: s_j = float32(dot·Scale) where dot = fma(q[d], k_j[d], dot) for
//     d = 0 … HeadDim−1 from +0 (keys and values widened exactly from the cache type); with
//     SoftCap > 0 (Gemma 2's logit soft-capping) then s_j = SoftCap32(s_j, SoftCap), that is
//     float32(Tanh32(float32(s_j·float32(1/SoftCap)))·SoftCap);
//     m_c = the Max32 of the chunk's s_j (the order of a maximum does not matter);
//     e_j = Exp32(s_j − m_c); l_c: lane i = j mod 32 adds the chunk's e_j in order from +0
//     (acc = acc + e_j), then num.WarpTotal of the 32 lanes; o_c[d] = fma(e_j, v_j[d], o_c[d])
//     over the chunk's j in order from +0;
//   - the chunks merged in chunk order: M = the Max32 of the m_c; w_c = Exp32(m_c − M);
//     L = fma(l_c, w_c, L) and O[d] = fma(o_c[d], w_c, O[d]) for c = 0, 1, … from +0;
//     out[d] = O[d] / L.
//
// Part receives every chunk's (m_c, l_c, o_c[0…HeadDim−1]) at
// Part[((r·NHead + h)·Chunks + c)·AttnPartWords(HeadDim)]; Chunks must be at least every row's
// chunk count (it is the launch's grid height). Count is scratch for the device kernel (one
// counter per row and KV head, zero before a launch and again after it); the twin does not
// touch it. KType and VType are the caches' element types (dtype F32, F16 or BF16).
//
// Shared is the caller's promise, checked: chunks 0 … Shared−1 of every row are whole and hold
// the same slots as its group's first row's (AttnShared: the largest that holds; 0 promises
// nothing). It changes no result. The device kernel computes each of those chunks once for
// its group and KV head, reading its keys and values once for all the group's rows, and
// launches no block for the group's other rows there: its one-dimensional grid is
// Rows·NKV·(Chunks−Shared) blocks, one per (row, KV head, chunk) of the chunks from Shared
// on, then ⌈Rows/AttnGroup⌉·NKV·Shared, one per (group, KV head, chunk) of the shared ones.
type AttentionArgs struct {
	Q       device.Ptr // float32 [Rows][NHead][HeadDim]
	KCache  device.Ptr // KType [NSlots][NKV][HeadDim]
	VCache  device.Ptr // VType [NSlots][NKV][HeadDim]
	Keys    device.Ptr // int32 slot lists of all rows, concatenated
	KeyOff  device.Ptr // int32 [Rows+1]: row r's keys are Keys[KeyOff[r]:KeyOff[r+1]]
	Out     device.Ptr // OutAct [Rows][NHead][HeadDim]
	Part    device.Ptr // float32 [Rows][NHead][Chunks][HeadDim+2]
	Count   device.Ptr // uint32 [Rows][NKV], zero
	Rows    int32
	NHead   int32
	NKV     int32
	HeadDim int32
	NSlots  int32
	Chunks  int32
	KType   int32
	VType   int32
	Scale   float32
	Window  int32   // keys per row, the last of its list; 0: all of them
	SoftCap float32 // scores soft-capped at ±SoftCap; 0: not
	Shared  int32   // leading chunks every group's rows share (see above); 0: none promised
	OutAct  int32   // Out's element type: an Act of ActF32 (the zero value), ActF16 or ActBF16 — out[d] rounded as ConvertRow rounds it
	// DeferMerge, if 1, leaves the launch's last chunk (Chunks−1, unless every row shares it)
	// and the merge to an AttentionMerge launch of the same arguments after this one: this
	// launch writes the other chunks' Part and not Out, and Count then holds only its marks
	// of rows with a bad chunk (the device kernel's), which the merge reads and clears.
	DeferMerge int32
}

// checkOutAct refuses an attention output type (AttentionArgs.OutAct) other than f32, f16 and
// bf16: the element-wise formats, whose rows are Act.RowBytes(1) bytes an element.
func checkOutAct(a int32) error {
	switch Act(a) {
	case ActF32, ActF16, ActBF16:
		return nil
	}
	return fmt.Errorf("attention output type %d is not f32, f16 or bf16", a)
}

// attnBlocks is the attention launch's grid size: the blocks of the unshared chunks, then the
// shared chunks' (AttentionArgs.Shared).
func attnBlocks(a AttentionArgs) int64 {
	rows, nkv := int64(a.Rows), int64(a.NKV)
	groups := (rows + AttnGroup - 1) / AttnGroup
	unshared := int64(a.Chunks - a.Shared)
	if a.DeferMerge != 0 && unshared > 0 { // the last chunk's are the merge launch's
		unshared--
		// one block, which returns, where the merge's launch computes every chunk: a launch
		// (and a megakernel instruction, which its dependents wait for) is never empty
		return max(1, rows*nkv*unshared+groups*nkv*int64(a.Shared))
	}
	return rows*nkv*unshared + groups*nkv*int64(a.Shared)
}

// windowed returns the part of a key list of n keys starting at off that a row attends to with
// window w (0: all): its last w keys.
func windowed(off, n, w int) (int, int) {
	if w > 0 && n > w {
		return off + n - w, w
	}
	return off, n
}

// AttnBlockThreads is the attention kernel's block size: one block per (row or group of rows,
// KV head, chunk).
const AttnBlockThreads = 256

var Attention = device.Register(&device.Kernel[AttentionArgs]{
	EntryName: "attention_f32", ModuleName: "attention",
	Shape: func(a AttentionArgs) (device.Geometry, error) {
		if a.Rows <= 0 || a.NHead <= 0 || a.NKV <= 0 || a.HeadDim <= 0 || a.NSlots <= 0 || a.NHead%a.NKV != 0 ||
			a.Chunks <= 0 || a.Chunks > 65535 || a.Shared < 0 || a.Shared > a.Chunks || a.Window < 0 ||
			int64(a.Rows)*int64(a.NKV)*int64(a.Chunks) > math.MaxInt32 {
			return device.Geometry{}, fmt.Errorf("bad shape rows=%d heads=%d/%d head_dim=%d slots=%d chunks=%d shared=%d window=%d",
				a.Rows, a.NHead, a.NKV, a.HeadDim, a.NSlots, a.Chunks, a.Shared, a.Window)
		}
		if !(a.SoftCap >= 0) || math.IsInf(float64(a.SoftCap), 0) {
			return device.Geometry{}, fmt.Errorf("bad soft cap %v", a.SoftCap)
		}
		if err := checkCacheTypes(a.KType, a.VType); err != nil {
			return device.Geometry{}, err
		}
		if err := checkOutAct(a.OutAct); err != nil {
			return device.Geometry{}, err
		}
		if a.DeferMerge != 0 && a.DeferMerge != 1 {
			return device.Geometry{}, fmt.Errorf("bad merge deferral %d (0 or 1)", a.DeferMerge)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(attnBlocks(a)), Y: 1, Z: 1},
			Block: device.Dim3{X: AttnBlockThreads, Y: 1, Z: 1}}, nil
	},
	Twin: attentionTwin,
})

func attentionTwin(x *device.Exec, a AttentionArgs) error {
	if a.DeferMerge != 0 {
		return attentionRun(x, a, attnChunksOnly)
	}
	return attentionRun(x, a, attnWhole)
}

// What an attention twin computes of a launch: all of it; the chunks of a deferred merge's
// launch (all but the launch's last, Chunks−1, where it is not a shared one), without the
// merge; or what the merge's launch does (that last chunk, then the merge).
const (
	attnWhole = iota
	attnChunksOnly
	attnLastAndMerge
)

// attnDeferred reports whether the merge launch of a deferred merge computes chunk c of a row
// of nc chunks (the launch's last chunk, when the rows do not all share it).
func attnDeferred(a AttentionArgs, c, nc int) bool {
	return c == int(a.Chunks)-1 && c == nc-1 && a.Shared < a.Chunks
}

func attentionRun(x *device.Exec, a AttentionArgs, what int) error {
	rows, nh, nkv, hd, ns, nc := int(a.Rows), int(a.NHead), int(a.NKV), int(a.HeadDim), int(a.NSlots), int(a.Chunks)
	q, err := x.F32(a.Q, rows*nh*hd)
	if err != nil {
		return err
	}
	kc, err := viewCache(x, a.KCache, a.KType, ns*nkv*hd)
	if err != nil {
		return fmt.Errorf("K cache: %w", err)
	}
	vc, err := viewCache(x, a.VCache, a.VType, ns*nkv*hd)
	if err != nil {
		return fmt.Errorf("V cache: %w", err)
	}
	off, err := x.I32(a.KeyOff, rows+1)
	if err != nil {
		return err
	}
	if off[0] != 0 {
		return fmt.Errorf("key offsets must start at 0, got %d", off[0])
	}
	for r := 0; r < rows; r++ {
		n := int(off[r+1]) - int(off[r])
		if n <= 0 {
			return fmt.Errorf("row %d has no keys (offsets %d, %d)", r, off[r], off[r+1])
		}
		_, n = windowed(int(off[r]), n, int(a.Window))
		if AttnChunks(n) > nc {
			return fmt.Errorf("row %d has %d keys: more than %d chunks of %d", r, n, nc, AttnChunk)
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
	if a.Shared > 0 {
		lists := make([][]int32, rows)
		for r := range lists {
			lists[r] = keys[off[r]:off[r+1]]
		}
		if n := AttnShared(lists, int(a.Window)); int(a.Shared) > n {
			return fmt.Errorf("%d shared chunks promised: the rows' key lists share %d", a.Shared, n)
		}
	}
	ob := Act(a.OutAct).RowBytes(1) // the shape checked the type
	outBytes, err := x.U8(a.Out, int64(rows*nh*hd*ob))
	if err != nil {
		return err
	}
	pw := AttnPartWords(hd)
	part, err := x.F32(a.Part, rows*nh*nc*pw)
	if err != nil {
		return err
	}
	group := nh / nkv
	x.For(rows*nkv, func(lo, hi int) {
		var s attnScratch
		o := make([]float32, group*hd) // a KV head's query heads' results, before Out's rounding
		for i := lo; i < hi; i++ {
			r, kvh := i/nkv, i%nkv
			lo, n := windowed(int(off[r]), int(off[r+1]-off[r]), int(a.Window))
			ks := keys[lo : lo+n]
			for c := 0; c*AttnChunk < len(ks); c++ {
				if last := attnDeferred(a, c, AttnChunks(len(ks))); what == attnChunksOnly && last || what == attnLastAndMerge && !last {
					continue // the other launch's chunk
				}
				kf, vf, offs := s.chunk(kc, vc, ks[c*AttnChunk:min(len(ks), (c+1)*AttnChunk)], nkv, hd, kvh)
				h := kvh * group
				for ; h+4 <= (kvh+1)*group; h += 4 { // four heads' scores at a time, where the vector form takes them
					if vectorScores4(&s.e4, q[(r*nh+h)*hd:][:4*hd], kf, offs, a.Scale) == 0 {
						break
					}
					attendChunk4(part[((r*nh+h)*nc+c)*pw:], nc*pw, hd, vf, offs, &s.e4, a.SoftCap)
				}
				for ; h < (kvh+1)*group; h++ {
					p := part[((r*nh+h)*nc+c)*pw:][:pw]
					p[0], p[1] = attendChunk(p[2:], q[(r*nh+h)*hd:][:hd], kf, vf, offs, s.e[:len(offs)], a.Scale, a.SoftCap, true)
				}
			}
			if what != attnChunksOnly {
				mergeHeads(outBytes, o, part, a.OutAct, r, kvh, group, nh, nc, hd, AttnChunks(len(ks)))
			}
		}
	})
	return nil
}

// mergeHeads merges the chunks (nc of Part's chunks of room) of row r's query heads of KV head
// kvh, in o, and writes them to out rounded to outAct.
func mergeHeads(out []byte, o, part []float32, outAct int32, r, kvh, group, nh, nc, hd, chunks int) {
	pw := AttnPartWords(hd)
	for j, h := 0, kvh*group; h < (kvh+1)*group; j, h = j+1, h+1 {
		mergeChunks(o[j*hd:][:hd], part[(r*nh+h)*nc*pw:][:chunks*pw], true)
	}
	ob := Act(outAct).RowBytes(1)
	at := (r*nh + kvh*group) * hd * ob
	ConvertRow(Act(outAct), out[at:at+group*hd*ob], o)
}

// attnScratch holds one worker's chunk of widened keys and values and its offsets.
type attnScratch struct {
	k, v []float32
	offs []int64
	e    [AttnChunk]float32
	e4   [4 * AttnChunk]float32 // four heads' scores, AttnChunk apart
}

// chunk returns the float32 keys and values of the cache slots ks (KV head kvh) and their
// offsets: the caches themselves for float32 caches, widened copies otherwise.
func (s *attnScratch) chunk(kc, vc cacheView, ks []int32, nkv, hd, kvh int) (kf, vf []float32, offs []int64) {
	if cap(s.offs) < AttnChunk {
		s.offs = make([]int64, AttnChunk)
	}
	offs = s.offs[:len(ks)]
	if kc.t == dtype.F32 && vc.t == dtype.F32 {
		for j, slot := range ks {
			offs[j] = int64(slot)*int64(nkv*hd) + int64(kvh*hd)
		}
		return kc.f32, vc.f32, offs
	}
	if len(s.k) < AttnChunk*hd {
		s.k, s.v = make([]float32, AttnChunk*hd), make([]float32, AttnChunk*hd)
	}
	for j, slot := range ks {
		o := int64(slot)*int64(nkv*hd) + int64(kvh*hd)
		kc.widen(s.k[j*hd:(j+1)*hd], o)
		vc.widen(s.v[j*hd:(j+1)*hd], o)
		offs[j] = int64(j * hd)
	}
	return s.k, s.v, offs
}

// attendChunk computes one chunk's partial result for one head (AttentionArgs' order): it
// sets o to the chunk's weighted value sums and returns its maximum score m and its sum of
// exponentials l. offs holds the float32 offsets of the chunk's key (and value) vectors in kc
// and vc, in key order; e is scratch of len(offs); softCap > 0 soft-caps the scores. With vec,
// the vector forms (simd.go), where the CPU has them, compute the scores, their exponentials
// and the weighted value sums with the same chains of operations.
func attendChunk(o, q, kc, vc []float32, offs []int64, e []float32, scale, softCap float32, vec bool) (m, l float32) {
	hd := len(q)
	for j := vectorScores(e, q, kc, offs, scale, vec); j < len(offs); j++ {
		k := kc[offs[j] : offs[j]+int64(hd)]
		var dot float32
		for d := 0; d < hd; d++ {
			dot = num.FMA32(q[d], k[d], dot)
		}
		e[j] = float32(dot * scale)
	}
	return chunkFromScores(o, vc, offs, e, softCap, vec)
}

// attendChunk4 is attendChunk for four heads whose scores are computed (e, AttnChunk apart):
// head i's partial goes to p[i·ps:] (m, l, then the weighted sums).
func attendChunk4(p []float32, ps, hd int, vc []float32, offs []int64, e *[4 * AttnChunk]float32, softCap float32) {
	n := len(offs)
	for i := range 4 {
		p[i*ps], p[i*ps+1] = chunkWeights(e[i*AttnChunk:][:n], softCap, true)
	}
	for i := 0; i < 4; i += 2 {
		if !vectorPV2(p[i*ps+2:], ps, hd, e[i*AttnChunk:], AttnChunk, vc, offs) {
			chunkPV(p[i*ps+2:][:hd], e[i*AttnChunk:][:n], vc, offs, true)
			chunkPV(p[(i+1)*ps+2:][:hd], e[(i+1)*AttnChunk:][:n], vc, offs, true)
		}
	}
}

// chunkFromScores is the rest of attendChunk once the chunk's scores e are computed.
func chunkFromScores(o, vc []float32, offs []int64, e []float32, softCap float32, vec bool) (m, l float32) {
	m, l = chunkWeights(e, softCap, vec)
	chunkPV(o, e, vc, offs, vec)
	return m, l
}

// chunkWeights turns a chunk's scores e into their weights e_j = Exp32(s_j − m) (soft-capped
// first with softCap > 0) and returns their maximum m and the sum l of the weights.
func chunkWeights(e []float32, softCap float32, vec bool) (m, l float32) {
	if softCap > 0 {
		for j, v := range e {
			e[j] = SoftCap32(v, softCap)
		}
	}
	ok := false
	if vec {
		m, ok = vectorMaxOf(e)
	}
	if !ok {
		m = maxOf(e)
	}
	done := vectorExpShift(e, m, vec)
	if done == len(e) {
		if l, ok := vectorLaneSum(e); ok {
			return m, l
		}
	}
	var acc [32]float32
	for j := range e {
		if j >= done {
			e[j] = num.Exp32(e[j] - m)
		}
		acc[j&31] += e[j]
	}
	return m, num.WarpTotal(&acc)
}

// chunkPV sets o to the chunk's weighted value sums o[d] = Σ_j e[j]·v_j[d], in key order.
func chunkPV(o, e, vc []float32, offs []int64, vec bool) {
	if vectorPV(o, e, vc, offs, vec) {
		return
	}
	hd := len(o)
	for d := range o {
		o[d] = 0
	}
	for j, off := range offs {
		v := vc[off : off+int64(hd)]
		p := e[j]
		for d := 0; d < hd; d++ {
			o[d] = num.FMA32(p, v[d], o[d])
		}
	}
}

// maxOf returns the Max32 of −Inf and the values: the largest, NaNs passed over, +0 above −0.
// Go's max gives the same but for NaNs, which it returns, so a NaN result is redone with Max32.
func maxOf(e []float32) float32 {
	inf := float32(math.Inf(-1))
	m0, m1, m2, m3 := inf, inf, inf, inf // four chains: the order of a maximum does not matter
	i := 0
	for ; i+4 <= len(e); i += 4 {
		m0, m1, m2, m3 = max(m0, e[i]), max(m1, e[i+1]), max(m2, e[i+2]), max(m3, e[i+3])
	}
	for ; i < len(e); i++ {
		m0 = max(m0, e[i])
	}
	m := max(m0, m1, m2, m3)
	if m != m {
		m = float32(math.Inf(-1))
		for _, v := range e {
			m = num.Max32(m, v)
		}
	}
	return m
}

// mergeChunks merges one head's chunk partials parts (AttnPartWords(len(out)) words each, in
// chunk order) into its output, in AttentionArgs' order; with vec, the vector forms (where the
// CPU has them) compute the weights and the weighted sums with the same operations.
func mergeChunks(out, parts []float32, vec bool) {
	pw := len(out) + 2
	nc := len(parts) / pw
	big := float32(math.Inf(-1))
	for c := 0; c < nc; c++ {
		big = max(big, parts[c*pw])
	}
	if big != big { // a NaN among them, which Max32 passes over
		big = float32(math.Inf(-1))
		for c := 0; c < nc; c++ {
			big = num.Max32(big, parts[c*pw])
		}
	}
	var wbuf [64]float32
	var obuf [64]int64
	w, offs := wbuf[:0], obuf[:0]
	if nc > len(wbuf) {
		w, offs = make([]float32, 0, nc), make([]int64, 0, nc)
	}
	for c := 0; c < nc; c++ {
		w, offs = append(w, parts[c*pw]), append(offs, int64(c*pw+2))
	}
	for c := vectorExpShift(w, big, vec); c < nc; c++ { // w_c = Exp32(m_c − M)
		w[c] = num.Exp32(w[c] - big)
	}
	var sum float32
	for c := 0; c < nc; c++ {
		sum = num.FMA32(parts[c*pw+1], w[c], sum)
	}
	if !vectorPV(out, w, parts, offs, vec) { // O[d] = fma(o_c[d], w_c, O[d]) from +0
		for d := range out {
			out[d] = 0
		}
		for c, o := range offs {
			for d := range out {
				out[d] = num.FMA32(parts[o+int64(d)], w[c], out[d])
			}
		}
	}
	for d := range out {
		out[d] = num.Canon(out[d] / sum)
	}
}

// attendHead computes one head of one row over its whole key list (chunks, then their merge):
// offs holds the float32 offsets of its keys' (and values') head vectors in kc and vc, in key
// order; e is scratch of at least AttnChunk values.
func attendHead(out, q, kc, vc []float32, offs []int64, e []float32, scale, softCap float32, vec bool) {
	hd := len(q)
	pw := AttnPartWords(hd)
	parts := make([]float32, AttnChunks(len(offs))*pw)
	for c := 0; c*AttnChunk < len(offs); c++ {
		co := offs[c*AttnChunk : min(len(offs), (c+1)*AttnChunk)]
		p := parts[c*pw:][:pw]
		p[0], p[1] = attendChunk(p[2:], q, kc, vc, co, e[:len(co)], scale, softCap, vec)
	}
	mergeChunks(out, parts, vec)
}
