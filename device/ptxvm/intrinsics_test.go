package ptxvm

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"os"
	"testing"

	"verity/device"
	"verity/device/num"
)

// testdata/intrinsics.ptx is nvcc's output for testdata/intrinsics.cu, so that the
// interpreter is tested on the PTX nvcc really writes for CUDA's intrinsics (inline-asm
// conversions in braces, directed rounding, local arrays, constant and global tables,
// dynamic shared memory, warp intrinsics, atomics). Regenerate it with (tools/cudaenv.sh
// installs nvcc):
//
//	. .cache/cuda/env.sh && cd device/ptxvm/testdata && nvcc -ptx -arch=compute_80 -fmad=false \
//	    -prec-div=true -prec-sqrt=true -ftz=false -o intrinsics.ptx intrinsics.cu

const nOut = 64

func TestIntrinsics(t *testing.T) {
	src, err := os.ReadFile("testdata/intrinsics.ptx")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(string(src))
	if err != nil {
		t.Fatal(err)
	}
	const blocks, threads = 2, 256
	n := blocks * threads
	r := rand.New(rand.NewPCG(9, 10))
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	k := make([]int32, n)
	for i := 0; i < n; i++ {
		gen := func() float32 {
			switch r.IntN(6) {
			case 0:
				return math.Float32frombits(r.Uint32()&0x807fffff | 1) // subnormal
			case 1:
				return float32(r.IntN(21) - 10)
			}
			return float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10)))
		}
		a[i], b[i], c[i] = gen(), gen(), gen()
		if b[i] == 0 {
			b[i] = 3
		}
		if a[i] == -b[i] {
			a[i]++
		}
		k[i] = int32(r.Uint32())
		if r.IntN(3) == 0 {
			k[i] = int32(r.IntN(200) - 100)
		}
	}
	var mem testMem
	f32b := func(v []float32) []byte {
		out := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		}
		return out
	}
	kb := make([]uint32, n)
	for i, v := range k {
		kb[i] = uint32(v)
	}
	out := make([]byte, 4*nOut*n)
	counters := make([]byte, 16)
	ps := ptrParams(mem.add(f32b(a), false), mem.add(f32b(b), false), mem.add(f32b(c), false), mem.add(u32Bytes(kb), false),
		mem.add(out, true), mem.add(counters, true))
	g := device.Geometry{Grid: dim(blocks), Block: dim(threads), Shared: 4 * threads}
	if _, err := m.Kernel("intrinsics").Launch(g, ps, &mem, Config{}); err != nil {
		t.Fatal(err)
	}
	o := u32s(out)
	f := func(x float32) uint32 { return math.Float32bits(x) }
	exact := func(x float64) *big.Float { return new(big.Float).SetPrec(2000).SetFloat64(x) }
	// the warp-level expectations
	lane := func(i int) int { return i % 32 }
	warpBase := func(i int) int { return i - i%32 }
	for i := 0; i < n; i++ {
		x, y, z, ki := a[i], b[i], c[i], k[i]
		X, Y, Z := float64(x), float64(y), float64(z)
		got := o[nOut*i : nOut*(i+1)]
		check := func(j int, want uint32) {
			t.Helper()
			if got[j] != want {
				t.Errorf("thread %d output %d: %#08x, want %#08x (x=%v y=%v z=%v k=%d)", i, j, got[j], want, x, y, z, ki)
			}
		}
		rounded := func(j int, to fbits, m rmode, v *big.Float) {
			t.Helper()
			if v.Sign() == 0 {
				return
			}
			if err := checkRounded(to, uint64(got[j])&(1<<to.width-1), m, rev(v)); err != nil {
				t.Errorf("thread %d output %d: %#08x: %v (x=%v y=%v z=%v k=%d)", i, j, got[j], err, x, y, z, ki)
			}
		}
		sum := new(big.Float).SetPrec(2000).Add(exact(X), exact(Y))
		prod := new(big.Float).SetPrec(2000).Mul(exact(X), exact(Y))
		fmav := new(big.Float).SetPrec(2000).Add(prod, exact(Z))
		for j, m := range []rmode{rz, rm, rp} {
			rounded(0+j, tF32, m, sum)
			rounded(3+j, tF32, m, prod)
			rounded(6+j, tF32, m, fmav)
		}
		if got9 := uint64(got[9]); true {
			bb := exact(Y)
			if err := checkRounded(tF32, got9, rz, func(q *big.Float) int {
				return new(big.Float).SetPrec(2000).Mul(q, bb).Cmp(exact(X)) * bb.Sign()
			}); err != nil && x != 0 {
				t.Errorf("thread %d output 9: %v", i, err)
			}
		}
		check(10, f(x/y))
		if ax := math.Abs(X); ax > 0 {
			if err := checkRounded(tF32, uint64(got[11]), rm, func(q *big.Float) int {
				if q.Sign() < 0 {
					return -1
				}
				return new(big.Float).SetPrec(2000).Mul(q, q).Cmp(exact(ax))
			}); err != nil {
				t.Errorf("thread %d output 11: %v", i, err)
			}
		}
		check(12, f(1/y))
		check(13, f(x-y))
		check(14, f(num.FMA32(x, y, z)))
		sat := func(v float64, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
		check(15, uint32(int32(sat(math.RoundToEven(X), math.MinInt32, math.MaxInt32))))
		check(16, uint32(int32(sat(math.Trunc(X), math.MinInt32, math.MaxInt32))))
		check(17, uint32(int32(sat(math.Floor(X), math.MinInt32, math.MaxInt32))))
		check(18, uint32(int32(sat(math.Ceil(X), math.MinInt32, math.MaxInt32))))
		check(19, uint32(sat(math.Trunc(X), 0, math.MaxUint32)))
		check(20, uint32(int64(sat(math.RoundToEven(X), math.MinInt64, math.MaxInt64))))
		rounded(21, tF32, rz, new(big.Float).SetInt64(int64(ki)))
		rounded(22, tF32, rm, new(big.Float).SetUint64(uint64(uint32(ki))))
		rounded(23, tF32, rp, new(big.Float).SetInt64(int64(ki)*12345677))
		check(24, uint32(num.F32ToF16(x)))
		rounded(25, tF16, rz, exact(X))
		check(26, f(f16ToF32(uint16(ki))))
		check(27, uint32(num.F32ToBF16(x)))
		check(28, uint32(uint16(ki))<<16) // nvcc widens bf16 with a mov (NaN payloads kept)
		rounded(29, tF32, rz, new(big.Float).SetFloat64(X*Y))
		rd, _ := new(big.Float).SetMode(big.ToNegativeInf).SetPrec(53).Set(new(big.Float).SetPrec(2000).Add(exact(X), exact(Z*1e-10))).Float64()
		check(30, f(float32(rd)))
		check(31, f(float32(math.Sqrt(math.Abs(X)))))
		check(32, f(num.Min32(x, y)))
		check(33, f(num.Max32(x, y)))
		check(34, f(float32(math.Copysign(X, Y))))
		check(35, f(float32(math.Trunc(X))+float32(math.RoundToEven(Y))))
		u := uint32(ki)
		check(36, uint32(bits.OnesCount32(u)))
		check(37, uint32(bits.LeadingZeros32(u)))
		check(38, bits.Reverse32(u))
		pair := uint64(^u)<<32 | uint64(u)
		var perm uint32
		for j, s := range []uint{0, 4, 1, 5} {
			perm |= uint32(pair>>(8*s)&0xff) << (8 * j)
		}
		check(39, perm)
		sh := uint(i) & 31
		check(40, uint32((uint64(0x12345678)<<32|uint64(u))<<sh>>32))
		check(41, uint32((uint64(0x12345678)<<32|uint64(u))>>sh))
		dp := int32(5)
		for j := 0; j < 4; j++ {
			dp += int32(int8(u>>(8*j))) * int32(int8(uint32(0x01ff7f80)>>(8*j)))
		}
		check(42, uint32(dp))
		check(43, uint32((int64(ki)*0x7654321)>>32))
		hi, _ := bits.Mul64(uint64(int64(ki))*0x9e3779b97f4a7c15, 0xc2b2ae3d27d4eb4f)
		check(44, uint32(hi))
		den := int64((i - 128) | 1)
		check(45, uint32(int64(ki)*1000003/den))
		check(46, uint32(int64(ki)*1000003%den))
		check(47, uint32(ki/7)^uint32(ki%7))
		ffs := uint32(0)
		if u != 0 {
			ffs = uint32(bits.TrailingZeros32(u) + 1)
		}
		check(48, ffs)
		check(49, uint32(3+max(int64(ki), int64(i))-min(int64(ki), int64(i))))
		gtab := []int32{7, -7, 100, -100}
		check(50, uint32(ki*int32(ki&7)+int32(i)+gtab[i&3]))
		ctab := []float32{0.5, 1.5, -2.5, 3.5}
		check(51, f(ctab[i&3]*x))
		blk := i / threads * threads
		check(52, uint32(k[blk+(i%threads+1)%threads]))
		s := float32(0)
		if i%threads < 32 {
			s = num.StridedSum(a[blk : blk+threads])
		}
		check(53, f(s))
		l, wb := lane(i), warpBase(i)
		up := l
		if l%16 >= 3 {
			up = l - 3
		}
		check(54, uint32(k[wb+up]))
		down := l
		if l%8+5 < 8 {
			down = l + 5
		}
		check(55, uint32(k[wb+down]))
		check(56, uint32(k[wb+l/16*16+9]))
		var ballot uint32
		all, anyGT := uint32(1), uint32(0)
		sumK, maxK := uint32(0), int32(math.MinInt32)
		for j := 0; j < 32; j++ {
			if a[wb+j] > 0 {
				ballot |= 1 << j
			}
			if k[wb+j] == 12345 {
				all = 0
			}
			if a[wb+j] > b[wb+j] {
				anyGT = 1
			}
			sumK += uint32(k[wb+j])
			maxK = max(maxK, k[wb+j])
		}
		check(57, ballot)
		check(58, all|anyGT<<1)
		am := uint32(0)
		if l&1 != 0 {
			am = 0xaaaaaaaa
		}
		check(59, am)
		check(60, sumK^uint32(maxK))
		check(61, 1)
		check(62, 1)
		check(63, f(float32(math.Max(0, math.Min(1, X)))))
	}
	cs := u32s(counters)
	maxK := int32(0)
	for _, v := range k {
		maxK = max(maxK, v)
	}
	if cs[0] != uint32(n) || cs[1] != uint32(maxK) || cs[2] != 77 {
		t.Errorf("counters %v, want [%d %d 77 …]", cs, n, maxK)
	}
}
