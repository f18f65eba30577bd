package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/repack"
)

// BenchmarkLaunch is the cost of one small op of a step through the CPU backend, its launch
// and parallel-for overhead included: a q4_K matvec of 256×256 (a small model's projection), a
// 256-wide rmsnorm and a prompt step's attention, at 1 and 2 threads. Besides the mean it reports the
// median and the fastest launch (ns/call-p50, ns/call-min), which a shared machine disturbs
// far less.
func BenchmarkLaunch(b *testing.B) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, workers := range []int{1, 2} {
		be := cpu.New(workers)
		const rows, cols = 256, 256
		l, _ := repack.NewLayout(dtype.Q4_K, []int64{cols, rows})
		w := make([]byte, l.Size())
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		for row := 0; row < rows; row++ {
			for i := 0; i < int(l.Blocks*l.F16Fields); i++ {
				binary.LittleEndian.PutUint16(w[int64(row)*l.RowStride+l.F16Off+2*int64(i):], uint16(r.IntN(0x3800)))
			}
		}
		f, _ := kernels.Lookup(dtype.Q4_K)
		x := make([]byte, f.Act.RowBytes(cols))
		kernels.ConvertRow(f.Act, x, randF32(r, cols, 1))
		wp, xp := upload(b, be, w), upload(b, be, x)
		yp, _ := be.Alloc(4 * rows)
		k, _ := kernels.MatVec(dtype.Q4_K)
		mv := kernels.MatVecArgs{W: wp, X: xp, Y: yp, Rows: rows, Cols: cols, N: 1}
		b.Run(fmt.Sprintf("matvec_q4_K_256x256/threads=%d", workers), func(b *testing.B) {
			timeCalls(b, func() error { return device.Launch(be, k, mv) })
		})
		np := upload(b, be, device.F32Bytes(randF32(r, cols, 1)))
		xn := upload(b, be, device.F32Bytes(randF32(r, cols, 1)))
		on, _ := be.Alloc(4 * cols)
		rn := kernels.RMSNormArgs{X: xn, W: np, Y: on, Groups: 1, Width: cols, Eps: 1e-5}
		b.Run(fmt.Sprintf("rmsnorm_256/threads=%d", workers), func(b *testing.B) {
			timeCalls(b, func() error { return device.Launch(be, kernels.RMSNorm, rn) })
		})
		b.Run(fmt.Sprintf("attention_prefill/threads=%d", workers), func(b *testing.B) {
			args := prefillAttention(b, be, r)
			timeCalls(b, func() error { return device.Launch(be, kernels.Attention, args) })
		})
		be.Close()
	}
}

// prefillAttention is the second 64-row step of a 128-token prompt at small-llama's shape
// (8 query heads over 2 KV heads of 32, a float32 cache): row i attends to keys 0 … 64+i.
func prefillAttention(b *testing.B, be device.Backend, r *rand.Rand) kernels.AttentionArgs {
	const rows, nh, nkv, hd, ns = 64, 8, 2, 32, 128
	var keys []int32
	off := []int32{0}
	for i := 0; i < rows; i++ {
		for j := 0; j <= 64+i; j++ {
			keys = append(keys, int32(j))
		}
		off = append(off, int32(len(keys)))
	}
	chunks := kernels.AttnChunks(ns)
	op, _ := be.Alloc(4 * rows * nh * hd)
	pp, _ := be.Alloc(int64(4 * rows * nh * chunks * kernels.AttnPartWords(hd)))
	cp, _ := be.Alloc(4 * rows * nkv)
	return kernels.AttentionArgs{
		Q:      upload(b, be, device.F32Bytes(randF32(r, rows*nh*hd, 1))),
		KCache: upload(b, be, device.F32Bytes(randF32(r, ns*nkv*hd, 1))),
		VCache: upload(b, be, device.F32Bytes(randF32(r, ns*nkv*hd, 1))),
		Keys:   upload(b, be, device.I32Bytes(keys)), KeyOff: upload(b, be, device.I32Bytes(off)),
		Out: op, Part: pp, Count: cp, Rows: rows, NHead: nh, NKV: nkv, HeadDim: hd, NSlots: ns,
		Chunks: int32(chunks), KType: int32(dtype.F32), VType: int32(dtype.F32), Scale: 0.17677669,
	}
}

// timeCalls runs f b.N times and reports the median and fastest call besides the mean.
func timeCalls(b *testing.B, f func() error) {
	var calls []time.Duration
	for b.Loop() {
		t := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		calls = append(calls, time.Since(t))
	}
	slices.Sort(calls)
	b.ReportMetric(float64(calls[len(calls)/2].Nanoseconds()), "ns/call-p50")
	b.ReportMetric(float64(calls[0].Nanoseconds()), "ns/call-min")
}
