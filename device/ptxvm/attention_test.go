package ptxvm_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"regexp"
	"testing"

	"verity/device"
	"verity/device/devicetest"
	"verity/device/kernels"
	"verity/device/ptxvm"
	"verity/ptx"
)

// A promise of shared chunks that the key lists break (kernels.AttentionArgs.Shared): no block
// computes the row that breaks it, so the kernel counts its chunk as bad and leaves its output
// unwritten, computes the other rows as it does under a true promise, and leaves Count zero;
// with the merge deferred to an AttentionMerge launch, the two launches do the same.
func TestAttentionBrokenPromise(t *testing.T) {
	const nh, nkv, hd, ns = 4, 2, 16, 200
	r := rand.New(rand.NewPCG(31, 7))
	history := func(n int, tail ...int32) []int32 {
		l := make([]int32, n, n+len(tail))
		for j := range l {
			l[j] = int32(j)
		}
		return append(l, tail...)
	}
	// rows 0 and 1 share chunks 0 and 1; row 2 shares chunk 0 only
	lists := [][]int32{history(130), history(130, 190), history(130, 191)}
	lists[2][70] = 170
	if got := kernels.AttnShared(lists, 0); got != 1 {
		t.Fatalf("the lists share %d chunks, want 1", got)
	}
	var flat, off []int32
	off = append(off, 0)
	for _, l := range lists {
		flat = append(flat, l...)
		off = append(off, int32(len(flat)))
	}
	rows, chunks, pw := len(lists), 3, kernels.AttnPartWords(hd)
	f32 := func(n int) []byte {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return device.F32Bytes(v)
	}
	b := ptxvm.New(ptxvm.Options{})
	defer b.Close()
	put := func(data []byte) device.Ptr {
		p, err := b.Alloc(int64(len(data)))
		if err == nil {
			err = b.Write(p, data)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	unwritten := bytes.Repeat([]byte{0xa5}, 4*rows*nh*hd)
	args := kernels.AttentionArgs{Q: put(f32(rows * nh * hd)), KCache: put(f32(ns * nkv * hd)), VCache: put(f32(ns * nkv * hd)),
		Keys: put(device.I32Bytes(flat)), KeyOff: put(device.I32Bytes(off)), Part: put(make([]byte, 4*rows*nh*chunks*pw)),
		Count: put(make([]byte, 4*rows*nkv)), Rows: int32(rows), NHead: nh, NKV: nkv, HeadDim: hd, NSlots: ns, Chunks: int32(chunks),
		KType: int32(kernels.CacheTypes[0]), VType: int32(kernels.CacheTypes[0]), Scale: float32(1 / math.Sqrt(hd))}
	run := func(shared int32, deferMerge bool) []byte {
		args.Shared = shared
		args.Out = put(unwritten)
		args.DeferMerge = 0
		if deferMerge {
			args.DeferMerge = 1
		}
		if err := b.Launch(kernels.Attention, args); err != nil {
			t.Fatalf("shared=%d: %v", shared, err)
		}
		if deferMerge {
			if err := b.Launch(kernels.AttentionMerge, args); err != nil {
				t.Fatalf("shared=%d: merge: %v", shared, err)
			}
		}
		out := make([]byte, len(unwritten))
		count := make([]byte, 4*rows*nkv)
		if err := b.Read(out, args.Out); err != nil {
			t.Fatal(err)
		}
		if err := b.Read(count, args.Count); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(count, make([]byte, len(count))) {
			t.Errorf("shared=%d: Count is not zero after the launch: % x", shared, count)
		}
		return out
	}
	kept, broken := run(1, false), run(2, false)
	row := 4 * nh * hd
	// the merge deferred to its own launch (AttentionMerge): the same bytes, Count zero again
	if got := run(1, true); !bytes.Equal(got, kept) {
		t.Error("the kept promise's output differs with the merge deferred")
	}
	if got := run(2, true); !bytes.Equal(got, broken) {
		t.Error("the broken promise's output differs with the merge deferred")
	}
	if !bytes.Equal(broken[:2*row], kept[:2*row]) {
		t.Error("rows 0 and 1 under the broken promise differ from the kept promise's")
	}
	if !bytes.Equal(broken[2*row:], unwritten[2*row:]) {
		t.Error("row 2, which broke the promise, has its output written")
	}
	if bytes.Equal(kept[2*row:], unwritten[2*row:]) {
		t.Error("row 2 is not written under the kept promise")
	}
}

// The chunk counter's acquire-release atomic orders each block's partial results before its
// count and the merging block's reads after it: made relaxed, the weak mode catches it — a
// stale read reported, or a result that differs from the twin's — on the attention cases.
func TestAttentionWeakCatchesRelaxedCounter(t *testing.T) {
	src := plant(t, "attention", "attention_f32", regexp.MustCompile(`atom\.acq_rel\.gpu\.global\.add\.u32`), "atom.relaxed.gpu.global.add.u32")
	for _, seed := range []uint64{1, 2} {
		b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: 4, NoRaceCheck: true, Weak: &ptxvm.Weak{Seed: seed}},
			Source: func(s string) (string, error) {
				if s == "attention" {
					return src, nil
				}
				return ptx.Module(s)
			}})
		var err error
		for _, c := range devicetest.Cases("attention_f32") {
			if err = devicetest.Check(b, kernels.Attention, c); err != nil {
				break
			}
		}
		b.Close()
		if err == nil {
			t.Errorf("seed %d: the relaxed counter passes every attention case in the weak mode", seed)
			continue
		}
		t.Logf("seed %d: %v", seed, err)
	}
}
