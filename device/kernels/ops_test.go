package kernels_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/num"
)

func TestRMSNorm(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	r := rand.New(rand.NewPCG(1, 1))
	for _, shape := range [][2]int{{1, 64}, {3, 2048}, {12, 16}, {2, 33}} {
		g, n := shape[0], shape[1]
		x, w := randF32(r, g*n, 3), randF32(r, n, 1)
		xp, wp := upload(t, b, device.F32Bytes(x)), upload(t, b, device.F32Bytes(w))
		yp, _ := b.Alloc(int64(4 * g * n))
		if err := device.Launch(b, kernels.RMSNorm, kernels.RMSNormArgs{X: xp, W: wp, Y: yp, Groups: int32(g), Width: int32(n), Eps: 1e-5}); err != nil {
			t.Fatal(err)
		}
		got := readF32(t, b, yp, g*n)
		want := make([]float64, g*n)
		for i := 0; i < g; i++ {
			var ss float64
			for _, v := range x[i*n : (i+1)*n] {
				ss += float64(v) * float64(v)
			}
			s := 1 / math.Sqrt(ss/float64(n)+1e-5)
			for j := 0; j < n; j++ {
				want[i*n+j] = float64(x[i*n+j]) * s * float64(w[j])
			}
		}
		if e := relErr(got, want); e > 1e-6 {
			t.Errorf("groups=%d width=%d: relative error %.3g", g, n, e)
		}
	}
}

func TestRope(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	r := rand.New(rand.NewPCG(2, 2))
	rows, heads, hd, nrot := 3, 2, 16, 8
	for _, mode := range []int32{kernels.RopeAdjacent, kernels.RopeNeox} {
		x := randF32(r, rows*heads*hd, 1)
		cs := make([]float32, rows*nrot)
		theta := make([]float64, rows*nrot/2)
		for i := range theta {
			theta[i] = float64(i) * 0.37
			cs[2*i], cs[2*i+1] = float32(math.Cos(theta[i])), float32(math.Sin(theta[i]))
		}
		xp, cp := upload(t, b, device.F32Bytes(x)), upload(t, b, device.F32Bytes(cs))
		if err := device.Launch(b, kernels.Rope, kernels.RopeArgs{X: xp, CosSin: cp, Rows: int32(rows), Heads: int32(heads), HeadDim: int32(hd), NRot: int32(nrot), Mode: mode}); err != nil {
			t.Fatal(err)
		}
		got := readF32(t, b, xp, len(x))
		want := make([]float64, len(x))
		for i := range x {
			want[i] = float64(x[i])
		}
		for row := 0; row < rows; row++ {
			for h := 0; h < heads; h++ {
				base := (row*heads + h) * hd
				for i := 0; i < nrot/2; i++ {
					j, k := base+2*i, base+2*i+1
					if mode == kernels.RopeNeox {
						j, k = base+i, base+i+nrot/2
					}
					c, s := float64(cs[row*nrot+2*i]), float64(cs[row*nrot+2*i+1])
					a, bb := float64(x[j]), float64(x[k])
					want[j], want[k] = a*c-bb*s, a*s+bb*c
				}
			}
		}
		if e := relErr(got, want); e > 1e-6 {
			t.Errorf("mode %d: relative error %.3g", mode, e)
		}
		// dims past n_rot are untouched
		for row := 0; row < rows; row++ {
			for h := 0; h < heads; h++ {
				for d := nrot; d < hd; d++ {
					i := (row*heads+h)*hd + d
					if got[i] != x[i] {
						t.Fatalf("mode %d: unrotated dim %d changed", mode, d)
					}
				}
			}
		}
	}
}

// TestAttention compares the twin with float64 attention over the cache's (widened) values,
// for each cache type, on key lists of one to three chunks.
func TestAttention(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	r := rand.New(rand.NewPCG(5, 5))
	nh, nkv, hd, ns := 4, 2, 16, 40
	long := make([]int32, 150)
	for j := range long {
		long[j] = int32(r.IntN(ns))
	}
	keys := [][]int32{{3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34}, {7, 2, 39}, long}
	rows := len(keys)
	var flat []int32
	off := []int32{0}
	chunks := 1
	for _, k := range keys {
		flat = append(flat, k...)
		off = append(off, int32(len(flat)))
		chunks = max(chunks, kernels.AttnChunks(len(k)))
	}
	for _, ct := range kernels.CacheTypes {
		kc, vc := randF32(r, ns*nkv*hd, 1), randF32(r, ns*nkv*hd, 1)
		q := randF32(r, rows*nh*hd, 1)
		qp, kp, vp := upload(t, b, device.F32Bytes(q)), upload(t, b, cacheOf(ct, kc)), upload(t, b, cacheOf(ct, vc))
		keysP, offP := upload(t, b, device.I32Bytes(flat)), upload(t, b, device.I32Bytes(off))
		op, _ := b.Alloc(int64(4 * rows * nh * hd))
		pp, _ := b.Alloc(int64(4 * rows * nh * chunks * kernels.AttnPartWords(hd)))
		cp, _ := b.Alloc(int64(4 * rows * nkv))
		scale := float32(1 / math.Sqrt(float64(hd)))
		args := kernels.AttentionArgs{Q: qp, KCache: kp, VCache: vp, Keys: keysP, KeyOff: offP, Out: op, Part: pp, Count: cp,
			Rows: int32(rows), NHead: int32(nh), NKV: int32(nkv), HeadDim: int32(hd), NSlots: int32(ns), Chunks: int32(chunks),
			KType: int32(ct), VType: int32(ct), Scale: scale}
		if err := device.Launch(b, kernels.Attention, args); err != nil {
			t.Fatal(err)
		}
		got := readF32(t, b, op, rows*nh*hd)
		want := make([]float64, len(got))
		for row, ks := range keys {
			for h := 0; h < nh; h++ {
				kvh := h / (nh / nkv)
				qv := q[(row*nh+h)*hd : (row*nh+h+1)*hd]
				s := make([]float64, len(ks))
				m := math.Inf(-1)
				for j, slot := range ks {
					k := kc[(int(slot)*nkv+kvh)*hd:]
					for d := 0; d < hd; d++ {
						s[j] += float64(qv[d]) * float64(k[d])
					}
					s[j] *= float64(scale)
					m = math.Max(m, s[j])
				}
				var sum float64
				for j := range s {
					s[j] = math.Exp(s[j] - m)
					sum += s[j]
				}
				for j, slot := range ks {
					v := vc[(int(slot)*nkv+kvh)*hd:]
					for d := 0; d < hd; d++ {
						want[(row*nh+h)*hd+d] += s[j] / sum * float64(v[d])
					}
				}
			}
		}
		if e := relErr(got, want); e > 2e-6 {
			t.Errorf("%s cache: relative error %.3g", ct, e)
		}

		// a promise of shared chunks the lists do not keep is an error: rows 0 and 1 differ
		// in chunk 0
		args.Shared = 1
		if err := device.Launch(b, kernels.Attention, args); err == nil {
			t.Error("a false promise of one shared chunk accepted")
		}
		args.Shared = 0

		// a slot outside the cache is an error, not a read of someone else's memory
		bad := append([]int32(nil), flat...)
		bad[0] = int32(ns)
		args.Keys = upload(t, b, device.I32Bytes(bad))
		if err := device.Launch(b, kernels.Attention, args); err == nil {
			t.Error("out-of-range key slot accepted")
		}
		// so is a row with more chunks than the launch has
		args.Keys, args.Chunks = keysP, int32(chunks-1)
		if err := device.Launch(b, kernels.Attention, args); err == nil {
			t.Error("a row of more chunks than Chunks accepted")
		}
	}
}

// cacheOf returns v as a cache of type t, and sets v to the values it holds (widened).
func cacheOf(t dtype.Type, v []float32) []byte {
	if t == dtype.F32 {
		return append([]byte(nil), device.F32Bytes(v)...)
	}
	out := make([]byte, 2*len(v))
	for i, f := range v {
		h := num.F32ToF16(f)
		v[i] = num.F16ToF32(h)
		if t == dtype.BF16 {
			h = num.F32ToBF16(f)
			v[i] = num.BF16ToF32(h)
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return out
}

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		v    []float32
		want int
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{nan, -1, -2}, 1},
		{[]float32{nan, nan}, 0},
		{[]float32{float32(math.Inf(-1)), -5}, 1},
	} {
		if got := kernels.ArgmaxRow(c.v); got != c.want {
			t.Errorf("ArgmaxRow(%v) = %d, want %d", c.v, got, c.want)
		}
	}
}

func TestBadArguments(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	small, _ := b.Alloc(16)
	k, err := kernels.MatVec(kernels.WeightTypes()[0])
	if err != nil {
		t.Fatal(err)
	}
	// buffers far too small: a clear error, never a read past the allocation
	if err := device.Launch(b, k, kernels.MatVecArgs{W: small, X: small, Y: small, Rows: 64, Cols: 64, N: 1}); err == nil {
		t.Error("matvec on undersized buffers accepted")
	}
	if err := device.Launch(b, kernels.RMSNorm, kernels.RMSNormArgs{X: small, W: small, Y: small, Groups: 0, Width: 4}); err == nil {
		t.Error("rmsnorm with zero groups accepted")
	}
	if err := b.Launch(k, kernels.RMSNormArgs{}); err == nil {
		t.Error("wrong argument type accepted")
	}
}
