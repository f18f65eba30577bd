package ptx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"verity/device"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/num"
	"verity/host/quant"
	"verity/repack"
)

// The kernels of src/ run here on the host, as CUDA source: testdata/host.cpp compiles them with
// the intrinsics of testdata/hostshim.h and runs a launch one thread block at a time, each CUDA
// thread a coroutine, warp shuffles and __syncthreads included (testdata/simt.h), with the
// launch geometry of the Go spec's Shape. Every buffer after the launch must equal what the
// kernel's Go twin leaves (floats compared with every NaN taken as one value). This checks the
// kernels' indexing, reductions and transcription; the PTX itself is checked on a GPU or by a PTX
// interpreter. The tests need g++ (C++20) and are skipped without it.

// arena is device memory for one launch: separate buffers at made-up, 256-byte aligned addresses.
type arena struct {
	bufs []*abuf
	next uint64
}

type abuf struct {
	base  uint64
	data  []byte
	float bool // compare as float32 words (NaN as one value) rather than bytes
}

func newArena() *arena { return &arena{next: 1 << 20} }

func (a *arena) add(data []byte, float bool) device.Ptr {
	b := &abuf{base: a.next, data: data, float: float}
	a.bufs = append(a.bufs, b)
	a.next += (uint64(len(data))+255)/256*256 + 256
	return device.Ptr(b.base)
}

func (a *arena) f32(v []float32) device.Ptr {
	return a.add(append([]byte(nil), device.F32Bytes(v)...), true)
}
func (a *arena) i32(v []int32) device.Ptr {
	return a.add(append([]byte(nil), device.I32Bytes(v)...), false)
}

// cache holds v as a K/V cache of type t (rounded to nearest even for the 16-bit types).
func (a *arena) cache(t dtype.Type, v []float32) device.Ptr {
	if t == dtype.F32 {
		return a.f32(v)
	}
	b := make([]byte, 2*len(v))
	for i, f := range v {
		h := num.F32ToF16(f)
		if t == dtype.BF16 {
			h = num.F32ToBF16(f)
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return a.raw(b)
}

func (a *arena) raw(b []byte) device.Ptr { return a.add(append([]byte(nil), b...), false) }

// Bytes implements device.Memory.
func (a *arena) Bytes(p device.Ptr, n int64) ([]byte, error) {
	for _, b := range a.bufs {
		if uint64(p) >= b.base && uint64(p)+uint64(n) <= b.base+uint64(len(b.data)) {
			off := uint64(p) - b.base
			return b.data[off : off+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("access [%#x, +%d) outside every buffer", uint64(p), n)
}

func (a *arena) clone() *arena {
	c := &arena{next: a.next}
	for _, b := range a.bufs {
		c.bufs = append(c.bufs, &abuf{b.base, append([]byte(nil), b.data...), b.float})
	}
	return c
}

// launchBoth runs the twin and the host build of the kernel on copies of a and compares every
// buffer afterwards.
func launchBoth(t *testing.T, spec device.Spec, args any, a *arena) {
	t.Helper()
	geo, err := spec.Geometry(args)
	if err != nil {
		t.Fatalf("%s: %v", spec.Entry(), err)
	}
	params, err := device.Params(args)
	if err != nil {
		t.Fatal(err)
	}
	twin := a.clone()
	if err := spec.RunTwin(&device.Exec{Mem: twin, Workers: 1, For: device.Serial}, args); err != nil {
		t.Fatalf("twin: %v", err)
	}

	var in bytes.Buffer
	le := binary.LittleEndian
	in.WriteString(spec.Entry())
	in.WriteByte(0)
	for _, v := range []uint32{geo.Grid.X, geo.Grid.Y, geo.Grid.Z, geo.Block.X, geo.Block.Y, geo.Block.Z, uint32(len(a.bufs))} {
		in.Write(le.AppendUint32(nil, v))
	}
	for _, b := range a.bufs {
		in.Write(le.AppendUint64(le.AppendUint64(nil, b.base), uint64(len(b.data))))
		in.Write(b.data)
	}
	in.Write(le.AppendUint32(nil, uint32(len(params))))
	for _, p := range params {
		in.Write(le.AppendUint64(le.AppendUint32(nil, uint32(p.Kind)), p.Bits))
	}
	cmd := exec.Command(hostCheck(t), "launch")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("host launch %s: %v\n%s", spec.Entry(), err, stderr.Bytes())
	}

	for i, b := range twin.bufs {
		n := len(b.data)
		if len(out) < n {
			t.Fatalf("host launch gave %d bytes too few", n-len(out))
		}
		got := out[:n]
		out = out[n:]
		bad := 0
		for off := 0; off < n; off += 4 {
			end := min(off+4, n)
			g, w := got[off:end], b.data[off:end]
			ok := bytes.Equal(g, w)
			if !ok && b.float && end-off == 4 {
				ok = same(le.Uint32(g), le.Uint32(w))
			}
			if !ok {
				if bad < 4 {
					t.Errorf("%s: buffer %d, bytes %d…%d: kernel %x, twin %x", spec.Entry(), i, off, end-1, g, w)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: buffer %d: %d of %d words differ", spec.Entry(), i, bad, (n+3)/4)
		}
	}
}

// values returns n normal values times scale, with a few specials mixed in when specials is set.
func values(rng *rand.Rand, n int, scale float64, specials bool) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
	}
	if specials && n >= 16 {
		for i, s := range []float32{0, float32(math.Copysign(0, -1)), 100, -100, 200, -200, 1e-40, -1e-40, 88.7, -103.9, 20.5, -0.5} {
			v[(i*7919)%n] = s
		}
	}
	return v
}

func TestSIMTElementwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 1))
	for _, k := range []*device.Kernel[kernels.BinaryArgs]{kernels.Add, kernels.SwiGLU, kernels.SigmoidMul, kernels.GeGLU} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/in_place=%v", k.EntryName, inPlace), func(t *testing.T) {
				const n = 1000
				a := newArena()
				args := kernels.BinaryArgs{A: a.f32(values(rng, n, 4, true)), B: a.f32(values(rng, n, 4, true)), N: n}
				args.Y = args.A
				if !inPlace {
					args.Y = a.f32(make([]float32, n))
				}
				launchBoth(t, k, args, a)
			})
		}
	}
	for _, k := range []*device.Kernel[kernels.UnaryArgs]{kernels.Scale, kernels.SoftCap} {
		t.Run(k.EntryName, func(t *testing.T) {
			const n = 1000
			a := newArena()
			x := values(rng, n, 40, true)
			launchBoth(t, k, kernels.UnaryArgs{X: a.f32(x), Y: a.f32(make([]float32, n)), N: n, C: 30}, a)
		})
	}
	a := newArena()
	launchBoth(t, kernels.Gather, kernels.GatherArgs{
		X: a.f32(values(rng, 7*300, 1, false)), Idx: a.i32([]int32{3, 0, 6, 3, 1}),
		Out: a.f32(make([]float32, 5*300)), Rows: 5, Width: 300, SrcRows: 7,
	}, a)
}

func TestSIMTArgmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	const rows, cols = 6, 1000
	x := values(rng, rows*cols, 1, false)
	nan := float32(math.NaN())
	x[1*cols+100], x[1*cols+700] = 9, 9 // a tie: the lower index wins
	for i := 0; i < cols; i += 3 {
		x[2*cols+i] = nan // NaNs are skipped
	}
	x[2*cols+5] = 50
	for i := range cols {
		x[3*cols+i] = nan // all NaN: index 0
		x[4*cols+i] = -float32(i + 1)
	}
	x[4*cols+500], x[4*cols+300] = float32(math.Copysign(0, -1)), 0 // +0 and -0 tie
	x[5*cols+999] = 1e30
	a := newArena()
	launchBoth(t, kernels.Argmax, kernels.ArgmaxArgs{X: a.f32(x), Out: a.i32(make([]int32, rows)), Rows: rows, Cols: cols}, a)
}

func TestSIMTNorms(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 1))
	for _, inPlace := range []bool{false, true} {
		a := newArena()
		args := kernels.RMSNormArgs{X: a.f32(values(rng, 3*200, 2, true)), W: a.f32(values(rng, 200, 1, false)), Groups: 3, Width: 200, Eps: 1e-5}
		args.Y = args.X
		if !inPlace {
			args.Y = a.f32(make([]float32, 3*200))
		}
		launchBoth(t, kernels.RMSNorm, args, a)
	}
	a := newArena()
	launchBoth(t, kernels.GatedNorm, kernels.GatedNormArgs{
		X: a.f32(values(rng, 2*3*96, 1, true)), Z: a.f32(values(rng, 2*3*96, 4, true)), W: a.f32(values(rng, 96, 1, false)),
		Y: a.f32(make([]float32, 2*3*96)), Rows: 2, Heads: 3, D: 96, Eps: 1e-6,
	}, a)
	a = newArena()
	launchBoth(t, kernels.SplitGate, kernels.SplitGateArgs{
		X: a.f32(values(rng, 2*3*80, 1, false)), Q: a.f32(make([]float32, 2*3*40)), G: a.f32(make([]float32, 2*3*40)),
		Rows: 2, Heads: 3, D: 40,
	}, a)
}

func TestSIMTRope(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	const rows, heads, hd = 3, 4, 64
	for _, mode := range []int32{kernels.RopeAdjacent, kernels.RopeNeox} {
		for _, nRot := range []int32{48, 64} {
			cs := make([]float32, rows*int(nRot))
			for i := 0; i < len(cs); i += 2 {
				th := rng.Float64() * 100
				cs[i], cs[i+1] = float32(math.Cos(th)), float32(math.Sin(th))
			}
			a := newArena()
			launchBoth(t, kernels.Rope, kernels.RopeArgs{
				X: a.f32(values(rng, rows*heads*hd, 3, false)), CosSin: a.f32(cs),
				Rows: rows, Heads: heads, HeadDim: hd, NRot: nRot, Mode: mode,
			}, a)
		}
	}
}

func TestSIMTAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	for _, ct := range []dtype.Type{dtype.F32, dtype.F16, dtype.BF16} {
		a := newArena()
		launchBoth(t, kernels.KVStore, kernels.KVStoreArgs{
			K: a.f32(values(rng, 3*100, 1, true)), V: a.f32(values(rng, 3*100, 1e-4, true)), Slots: a.i32([]int32{5, 1, 7}),
			KCache: a.f32(values(rng, 8*100, 1, false)), VCache: a.f32(values(rng, 8*100, 1, false)), Rows: 3, KVDim: 100, NSlots: 8,
			KType: int32(ct), VType: int32(ct),
		}, a)
	}

	for _, c := range []struct {
		nHead, nKV, hd int32
		keys           []int
		kt, vt         dtype.Type
		tree           bool
		window         int32   // sliding window (0: none)
		softCap        float32 // 0: none
	}{
		{4, 2, 64, []int{1, 40, 150}, dtype.F32, dtype.F32, false, 0, 0},
		{2, 1, 300, []int{5, 70}, dtype.F16, dtype.BF16, false, 0, 0}, // slices of 64 dims
		{3, 3, 16, []int{64, 2}, dtype.BF16, dtype.F16, false, 0, 0},
		{8, 2, 16, []int{70, 71, 71, 72}, dtype.F16, dtype.F16, true, 0, 0},       // rows sharing a chunk
		{4, 2, 32, []int{1, 40, 150, 90}, dtype.F32, dtype.F32, false, 70, 0.5},   // windows of one and two chunks, soft-capped
		{8, 2, 16, []int{70, 71, 71, 72, 140}, dtype.F16, dtype.F16, true, 70, 0}, // windows sharing a chunk
	} {
		t.Run(fmt.Sprintf("heads=%d/%d,head_dim=%d,cache=%s,%s,window=%d,cap=%g", c.nHead, c.nKV, c.hd, c.kt, c.vt, c.window, c.softCap), func(t *testing.T) {
			const nSlots = 80
			rows := int32(len(c.keys))
			off := []int32{0}
			var keys []int32
			var lists [][]int32
			chunks := 1
			for r, n := range c.keys {
				for j := range n {
					s := int32(rng.IntN(nSlots))
					if c.tree {
						s = int32((j + r*(j/69)) % nSlots) // the first 69 keys of every row agree
					}
					keys = append(keys, s)
				}
				lists = append(lists, keys[off[r]:])
				off = append(off, int32(len(keys)))
				chunks = max(chunks, kernels.AttnChunks(n))
			}
			a := newArena()
			kc, vc := a.cache(c.kt, values(rng, int(nSlots*c.nKV*c.hd), 1, false)), a.cache(c.vt, values(rng, int(nSlots*c.nKV*c.hd), 1, false))
			launchBoth(t, kernels.Attention, kernels.AttentionArgs{
				Q:      a.f32(values(rng, int(rows*c.nHead*c.hd), 1, false)),
				KCache: kc, VCache: vc,
				Keys: a.i32(keys), KeyOff: a.i32(off), Out: a.f32(make([]float32, rows*c.nHead*c.hd)),
				Part:  a.f32(make([]float32, int(rows*c.nHead)*chunks*kernels.AttnPartWords(int(c.hd)))),
				Count: a.i32(make([]int32, rows*c.nKV)),
				Rows:  rows, NHead: c.nHead, NKV: c.nKV, HeadDim: c.hd, NSlots: nSlots, Chunks: int32(chunks),
				KType: int32(c.kt), VType: int32(c.vt),
				Scale:  float32(1 / math.Sqrt(float64(c.hd))),
				Window: c.window, SoftCap: c.softCap, Shared: int32(kernels.AttnShared(lists, int(c.window))),
			}, a)
		})
	}
}

func TestSIMTAct(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	const cols, n = 768, 2
	for _, act := range []kernels.Act{kernels.ActF16, kernels.ActBF16, kernels.ActQ8_0, kernels.ActQ8_1, kernels.ActQ8_K} {
		t.Run(act.String(), func(t *testing.T) {
			x := values(rng, cols*n, 3, true)
			for i := 256; i < 512; i++ {
				x[i] = 0 // an all-zero block
			}
			x[600], x[700] = -40, 40 // the largest magnitude twice: the first one sets the q8_K scale
			x[1000] = 1e-38
			if act == kernels.ActF16 || act == kernels.ActBF16 {
				x[5], x[6], x[7] = float32(math.Inf(1)), float32(math.NaN()), 70000
			}
			a := newArena()
			args := kernels.ConvertArgs{X: a.f32(x), Out: a.raw(make([]byte, n*act.RowBytes(cols))), Cols: cols, N: n}
			launchBoth(t, kernels.Convert(act), args, a)
		})
	}
}

func TestSIMTMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	const rows, cols, n = 6, 3072, 10 // rows not a multiple of the 4 rows per block; two column passes
	for _, ty := range kernels.WeightTypes() {
		t.Run(ty.String(), func(t *testing.T) {
			k1, err := kernels.MatVec(ty)
			if err != nil {
				t.Fatal(err)
			}
			k8, err := kernels.MatVec8(ty)
			if err != nil {
				t.Fatal(err)
			}
			w, x := quantRows(t, rng, ty, rows, cols), actRows(t, rng, ty, n, cols)
			for _, k := range []device.Spec{k1, k8} {
				a := newArena()
				launchBoth(t, k, kernels.MatVecArgs{W: a.raw(pack(t, ty, w, cols, rows)), X: a.raw(x), Y: a.f32(make([]float32, n*rows)), Rows: rows, Cols: cols, N: n}, a)
			}
		})
	}
}

// TestSIMTEmbed decodes table rows quantised from random values and rows of random bytes (NaN
// and infinite scales included), one token repeated.
func TestSIMTEmbed(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	const vocab, cols = 9, 768
	toks := []int32{8, 0, 3, 3, 5, 7}
	for _, ty := range kernels.WeightTypes() {
		t.Run(ty.String(), func(t *testing.T) {
			q, err := quant.Lookup(ty)
			if err != nil {
				t.Fatal(err)
			}
			k, err := kernels.Embed(ty)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := ty.RowBytes(cols)
			if err != nil {
				t.Fatal(err)
			}
			table := make([]byte, vocab*int(rb))
			for r := range vocab {
				row := table[r*int(rb) : (r+1)*int(rb)]
				if r%3 == 2 {
					for i := range row {
						row[i] = byte(rng.Uint32())
					}
					continue
				}
				q.Quantize(row, values(rng, cols, 0.5, r == 0))
			}
			a := newArena()
			launchBoth(t, k, kernels.EmbedArgs{
				Table: a.raw(table), Tokens: a.i32(toks), Out: a.f32(make([]float32, len(toks)*cols)),
				Rows: int32(len(toks)), Cols: cols, Vocab: vocab,
			}, a)
		})
	}
}

func TestSIMTRouter(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 1))
	nan := float32(math.NaN())
	for _, c := range []struct{ ne, k int32 }{{70, 8}, {8, 8}, {128, 1}, {33, 5}} {
		t.Run(fmt.Sprintf("experts=%d/k=%d", c.ne, c.k), func(t *testing.T) {
			const rows = 5
			ne := int(c.ne)
			x := values(rng, rows*ne, 2, false)
			for i := range ne {
				x[ne+i] = float32(rng.IntN(4)) // row 1: many ties
				x[2*ne+i] = 0                  // row 2: all equal
			}
			x[2*ne+ne/2] = float32(math.Copysign(0, -1))
			x[3*ne+ne-1] = nan // row 3: a NaN logit
			x[4*ne+1] = 200    // row 4: one expert takes everything, the others underflow
			a := newArena()
			launchBoth(t, kernels.Router, kernels.RouterArgs{
				Logits: a.f32(x), Ids: a.i32(make([]int32, rows*int(c.k))), Weights: a.f32(make([]float32, rows*int(c.k))),
				Rows: rows, NExpert: c.ne, K: c.k,
			}, a)
		})
	}
}

func TestSIMTMoEMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	const n, k, out, cols, ne = 2, 3, 6, 512, 4
	ids := []int32{3, 0, 2, 1, 1, 3}
	for _, ty := range kernels.WeightTypes() {
		for _, perSlot := range []int32{0, 1} {
			t.Run(fmt.Sprintf("%s/per_slot=%d", ty, perSlot), func(t *testing.T) {
				kern, err := kernels.MoEMatVec(ty)
				if err != nil {
					t.Fatal(err)
				}
				xRows := n
				if perSlot != 0 {
					xRows = n * k
				}
				w, x := quantRows(t, rng, ty, ne*out, cols), actRows(t, rng, ty, xRows, cols)
				a := newArena()
				launchBoth(t, kern, kernels.MoEMatVecArgs{
					W: a.raw(pack(t, ty, w, cols, int64(out), int64(ne))), X: a.raw(x), Ids: a.i32(ids), Y: a.f32(make([]float32, n*k*out)),
					N: n, K: k, Out: out, Cols: cols, NExpert: ne, XPerSlot: perSlot,
				}, a)
			})
		}
	}
}

func TestSIMTMoECombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 1))
	const n, k, width = 3, 4, 300
	for _, mode := range []string{"no_shared", "shared", "shared_in_place"} {
		t.Run(mode, func(t *testing.T) {
			a := newArena()
			args := kernels.MoECombineArgs{
				Y: a.f32(values(rng, n*k*width, 1, true)), Weights: a.f32(values(rng, n*k, 0.5, false)),
				N: n, K: k, Width: width,
			}
			if mode != "no_shared" {
				args.Shared = a.f32(values(rng, n*width, 1, true))
				args.Gate = a.f32([]float32{-3, 0.25, 40})
			}
			if mode == "shared_in_place" {
				args.Out = args.Shared
			} else {
				args.Out = a.f32(make([]float32, n*width))
			}
			launchBoth(t, kernels.MoECombine, args, a)
		})
	}
}

func TestSIMTGDNConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	const rows, c, k, ns = 4, 300, 4, 3
	for _, inPlace := range []bool{false, true} {
		t.Run(fmt.Sprintf("in_place=%v", inPlace), func(t *testing.T) {
			a := newArena()
			args := kernels.GDNConvArgs{
				X: a.f32(values(rng, rows*c, 2, true)), W: a.f32(values(rng, c*k, 0.5, false)),
				State: a.f32(values(rng, ns*(k-1)*c, 1, false)),
				// a prefill chain through slot 1, then a branch read from it into slot 2
				Src: a.i32([]int32{1, 1, 1, 0}), Dst: a.i32([]int32{1, 1, 2, 0}),
				Rows: rows, C: c, K: k, NStates: ns,
			}
			args.Y = args.X
			if !inPlace {
				args.Y = a.f32(make([]float32, rows*c))
			}
			launchBoth(t, kernels.GDNConv, args, a)
		})
	}
}

func TestSIMTGDNScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	for _, c := range []struct{ rows, nk, nv, d int32 }{{3, 1, 2, 40}, {2, 2, 4, 16}} {
		t.Run(fmt.Sprintf("rows=%d/heads=%d/%d/d=%d", c.rows, c.nk, c.nv, c.d), func(t *testing.T) {
			const ns = 3
			width := (2*c.nk + c.nv) * c.d
			a := newArena()
			launchBoth(t, kernels.GDNScan, kernels.GDNScanArgs{
				QKV: a.f32(values(rng, int(c.rows*width), 1, false)), Beta: a.f32(values(rng, int(c.rows*c.nv), 2, false)),
				Alpha: a.f32(values(rng, int(c.rows*c.nv), 2, false)), A: a.f32(values(rng, int(c.nv), 1, false)),
				DtBias: a.f32(values(rng, int(c.nv), 1, false)), State: a.f32(values(rng, int(ns*c.nv*c.d*c.d), 0.3, false)),
				Src: a.i32([]int32{0, 2, 2}[:c.rows]), Dst: a.i32([]int32{2, 2, 1}[:c.rows]),
				Out: a.f32(make([]float32, c.rows*c.nv*c.d)), Rows: c.rows, NK: c.nk, NV: c.nv, D: c.d, NStates: ns, Eps: 1e-6,
			}, a)
		})
	}
}

// pack returns the device layout (repack) of a GGUF tensor of type ty and dims.
func pack(t *testing.T, ty dtype.Type, data []byte, dims ...int64) []byte {
	t.Helper()
	p, err := repack.Pack(ty, dims, data)
	if err != nil {
		t.Fatal(err)
	}
	return p.Data
}

// TestSIMTMoEGrouped runs the grouped gate/up and down kernels, with and without a shared expert.
func TestSIMTMoEGrouped(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	const n, k, ne = 2, 3, 4
	const out, cols = 6, 512   // gate/up: rows, row length
	const rows, inner = 5, 256 // down: rows, row length
	ids := []int32{3, 0, 2, 1, 1, 3}
	for _, ty := range kernels.WeightTypes() {
		t.Run(ty.String(), func(t *testing.T) {
			experts := func(rows, cols int) []byte {
				return pack(t, ty, quantRows(t, rng, ty, ne*rows, cols), int64(cols), int64(rows), ne)
			}
			acts := func(rows, cols int) []byte { return actRows(t, rng, ty, rows, cols) }
			gu, err := kernels.MoEGateUp(ty)
			if err != nil {
				t.Fatal(err)
			}
			a := newArena()
			launchBoth(t, gu, kernels.MoEGateUpArgs{WGate: a.raw(experts(out, cols)), WUp: a.raw(experts(out, cols)),
				X: a.raw(acts(n, cols)), Ids: a.i32(ids), Y: a.f32(make([]float32, n*k*out)),
				N: n, K: k, Out: out, Cols: cols, NExpert: ne}, a)
			down, err := kernels.MoEDown(ty)
			if err != nil {
				t.Fatal(err)
			}
			for _, withShared := range []bool{false, true} {
				a := newArena()
				args := kernels.MoEDownArgs{W: a.raw(experts(rows, inner)), X: a.raw(acts(n*k, inner)), Ids: a.i32(ids),
					Weights: a.f32(values(rng, n*k, 0.5, false)), Out: a.f32(make([]float32, n*rows)),
					N: n, K: k, Rows: rows, Cols: inner, NExpert: ne}
				if withShared {
					args.Shared, args.Gate = a.f32(values(rng, n*rows, 1, true)), a.f32([]float32{-2, 30})
				}
				launchBoth(t, down, args, a)
			}
		})
	}
}

// quantRows returns rows rows of cols random values quantised as ty by host/quant (GGUF bytes).
func quantRows(t *testing.T, rng *rand.Rand, ty dtype.Type, rows, cols int) []byte {
	t.Helper()
	q, err := quant.Lookup(ty)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ty.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	w := make([]byte, rows*int(rb))
	for r := range rows {
		q.Quantize(w[r*int(rb):(r+1)*int(rb)], values(rng, cols, 0.05, false))
	}
	return w
}

// actRows returns rows rows of cols random values converted to ty's activation format.
func actRows(t *testing.T, rng *rand.Rand, ty dtype.Type, rows, cols int) []byte {
	t.Helper()
	f, err := kernels.Lookup(ty)
	if err != nil {
		t.Fatal(err)
	}
	xb := f.Act.RowBytes(cols)
	x := make([]byte, rows*xb)
	for c := range rows {
		kernels.ConvertRow(f.Act, x[c*xb:(c+1)*xb], values(rng, cols, 1, false))
	}
	return x
}
