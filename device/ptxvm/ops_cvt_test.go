package ptxvm

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"verity/device/num"
)

func TestCvtInteger(t *testing.T) {
	const m32 = 0xffffffff
	runCases(t, []aluCase{
		{"cvt.s64.s32 %rd0, %r1;", [3]uint64{m32}, ^uint64(0)},
		{"cvt.u64.u32 %rd0, %r1;", [3]uint64{m32}, m32},
		{"cvt.u32.u64 %r0, %rd1;" + out32, [3]uint64{1<<40 | 5}, 5},
		{"cvt.s32.s8 %r0, %r1;" + out32, [3]uint64{0x80}, 0xffffff80},
		{"cvt.u32.u8 %r0, %r1;" + out32, [3]uint64{0x180}, 0x80},
		{"cvt.u16.u32 %rs0, %r1;" + out16, [3]uint64{0x12345}, 0x2345},
		{"cvt.s32.s16 %r0, %rs1;" + out32, [3]uint64{0x8000}, 0xffff8000},
		{"cvt.sat.s8.s32 %r0, %r1;" + out32, [3]uint64{300}, 127},
		{"cvt.sat.s8.s32 %r0, %r1;" + out32, [3]uint64{uint64(uint32(-300 & m32))}, 0xffffff80},
		{"cvt.sat.u8.s32 %r0, %r1;" + out32, [3]uint64{m32}, 0},
		{"cvt.sat.u16.u32 %rs0, %r1;" + out16, [3]uint64{70000}, 0xffff},
		{"cvt.sat.s32.u32 %r0, %r1;" + out32, [3]uint64{m32}, 0x7fffffff},
		{"cvt.sat.u32.s64 %r0, %rd1;" + out32, [3]uint64{1 << 40}, m32},
		{"cvt.sat.s64.u64 %rd0, %rd1;", [3]uint64{^uint64(0)}, 1<<63 - 1},
		{"cvt.sat.u64.s64 %rd0, %rd1;", [3]uint64{^uint64(0)}, 0},
	})
}

func TestCvtFloatToInt(t *testing.T) {
	f := func(x float32) uint64 { return uint64(math.Float32bits(x)) }
	const m32 = 0xffffffff
	nan := uint64(nan32)
	inf := f(float32(math.Inf(1)))
	runCases(t, []aluCase{
		{"cvt.rni.s32.f32 %r0, %f1;" + out32, [3]uint64{f(2.5)}, 2},
		{"cvt.rni.s32.f32 %r0, %f1;" + out32, [3]uint64{f(3.5)}, 4},
		{"cvt.rni.s32.f32 %r0, %f1;" + out32, [3]uint64{f(-2.5)}, m32 - 1},
		{"cvt.rzi.s32.f32 %r0, %f1;" + out32, [3]uint64{f(-2.9)}, m32 - 1},
		{"cvt.rmi.s32.f32 %r0, %f1;" + out32, [3]uint64{f(-2.1)}, m32 - 2},
		{"cvt.rpi.s32.f32 %r0, %f1;" + out32, [3]uint64{f(2.1)}, 3},
		{"cvt.rzi.s32.f32 %r0, %f1;" + out32, [3]uint64{nan}, 0},
		{"cvt.rzi.s32.f32 %r0, %f1;" + out32, [3]uint64{inf}, 0x7fffffff},
		{"cvt.rzi.s32.f32 %r0, %f1;" + out32, [3]uint64{f(-3e9)}, 0x80000000},
		{"cvt.rzi.u32.f32 %r0, %f1;" + out32, [3]uint64{f(-1)}, 0},
		{"cvt.rzi.u32.f32 %r0, %f1;" + out32, [3]uint64{f(5e9)}, m32},
		{"cvt.rzi.s64.f32 %rd0, %f1;", [3]uint64{f(-1e19)}, 1 << 63},
		{"cvt.rzi.u64.f32 %rd0, %f1;", [3]uint64{f(3e19)}, ^uint64(0)},
		{"cvt.rni.s16.f32 %rs0, %f1;" + out16, [3]uint64{f(40000)}, 0x7fff},
		{"cvt.rzi.s32.f64 %r0, %fd1;" + out32, [3]uint64{math.Float64bits(-7.9)}, m32 - 6},
		{"cvt.rni.f32.f32 %f0, %f1;" + outF32, [3]uint64{f(2.5)}, f(2)},
		{"cvt.rni.f32.f32 %f0, %f1;" + outF32, [3]uint64{f(-0.4)}, 0x80000000},
		{"cvt.rzi.f32.f32 %f0, %f1;" + outF32, [3]uint64{f(-2.7)}, f(-2)},
		{"cvt.rmi.f32.f32 %f0, %f1;" + outF32, [3]uint64{f(-2.2)}, f(-3)},
		{"cvt.rpi.f32.f32 %f0, %f1;" + outF32, [3]uint64{f(2.2)}, f(3)},
		{"cvt.rpi.f32.f32 %f0, %f1;" + outF32, [3]uint64{0x7fa00000}, nan},
		{"cvt.sat.f32.f32 %f0, %f1;" + outF32, [3]uint64{f(1.5)}, f(1)},
		{"cvt.sat.f32.f32 %f0, %f1;" + outF32, [3]uint64{nan}, 0},
		{"cvt.ftz.f32.f32 %f0, %f1;" + outF32, [3]uint64{0x80000001}, 0x80000000},
		// widening is exact; NaN becomes the canonical NaN
		{"cvt.f32.f16 %f0, %rs1;" + outF32, [3]uint64{0x3c01}, f(1 + 0x1p-10)},
		{"cvt.f32.f16 %f0, %rs1;" + outF32, [3]uint64{0x0001}, f(0x1p-24)},
		{"cvt.f32.f16 %f0, %rs1;" + outF32, [3]uint64{0xfe01}, nan},
		{"cvt.f32.bf16 %f0, %rs1;" + outF32, [3]uint64{0xbf80}, f(-1)},
		{"cvt.f64.f32 %fd0, %f1;" + outF64, [3]uint64{0x00000001}, math.Float64bits(0x1p-149)},
		{"cvt.f64.f32 %fd0, %f1;" + outF64, [3]uint64{nan}, nan64},
		{"cvt.rn.f16.f32 %rs0, %f1;" + out16, [3]uint64{0xffc00000}, 0x7fff},
		{"cvt.rn.bf16.f32 %rs0, %f1;" + out16, [3]uint64{0x7f800001}, 0x7fff},
		{"cvt.rn.relu.f16.f32 %rs0, %f1;" + out16, [3]uint64{f(-3)}, 0},
		{"cvt.rn.f16x2.f32 %r0, %f1, %f2;" + out32, [3]uint64{f(1), f(-2)}, 0x3c00c000},
		{"cvt.rn.bf16x2.f32 %r0, %f1, %f2;" + out32, [3]uint64{f(1), f(-2)}, 0x3f80c000},
	})
}

// Narrowing float conversions and integer-to-float conversions in every rounding mode,
// checked against their definition.
func TestCvtRounding(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type conv struct {
		body  string
		to    fbits
		src   func(r *rand.Rand) uint64
		exact func(x uint64) (v *big.Float, special bool) // special: NaN or infinite input
	}
	f32src := func(r *rand.Rand) uint64 {
		v := randF32(r)
		if r.IntN(2) == 0 {
			v = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-26))
		}
		return uint64(math.Float32bits(v))
	}
	f32exact := func(x uint64) (*big.Float, bool) { return exactF(float64(math.Float32frombits(uint32(x)))) }
	convs := []conv{
		{"cvt{M}.f16.f32 %rs0, %f1;" + out16, tF16, f32src, f32exact},
		{"cvt{M}.bf16.f32 %rs0, %f1;" + out16, tBF16, f32src, f32exact},
		{"cvt{M}.f32.f64 %f0, %fd1;" + outF32, tF32, func(r *rand.Rand) uint64 {
			v := randF64(r)
			if r.IntN(2) == 0 {
				v = r.NormFloat64() * math.Ldexp(1, r.IntN(320)-160)
			}
			return math.Float64bits(v)
		}, func(x uint64) (*big.Float, bool) { return exactF(math.Float64frombits(x)) }},
		{"cvt{M}.f32.s32 %f0, %r1;" + outF32, tF32, func(r *rand.Rand) uint64 { return uint64(r.Uint32()) }, func(x uint64) (*big.Float, bool) {
			return new(big.Float).SetInt64(int64(int32(x))), false
		}},
		{"cvt{M}.f32.u64 %f0, %rd1;" + outF32, tF32, func(r *rand.Rand) uint64 { return r.Uint64() >> r.IntN(64) }, func(x uint64) (*big.Float, bool) {
			return new(big.Float).SetUint64(x), false
		}},
		{"cvt{M}.f64.s64 %fd0, %rd1;" + outF64, tF64, func(r *rand.Rand) uint64 { return r.Uint64() >> r.IntN(64) }, func(x uint64) (*big.Float, bool) {
			return new(big.Float).SetInt64(int64(x)), false
		}},
		{"cvt{M}.f16.f64 %rs0, %fd1;" + out16, tF16, func(r *rand.Rand) uint64 {
			return math.Float64bits(r.NormFloat64() * math.Ldexp(1, r.IntN(50)-30))
		}, func(x uint64) (*big.Float, bool) { return exactF(math.Float64frombits(x)) }},
	}
	for _, c := range convs {
		in := make([][3]uint64, 800)
		for i := range in {
			in[i][0] = c.src(r)
		}
		for _, mode := range []rmode{rn, rz, rm, rp} {
			name := [...]string{".rn", ".rz", ".rm", ".rp"}[mode]
			body := strings.Replace(c.body, "{M}", name, 1)
			t.Run(body, func(t *testing.T) {
				got := evalALU(t, body, in)
				bad := 0
				for i, x := range in {
					v, special := c.exact(x[0])
					g := got[i] & (1<<c.to.width - 1)
					var err error
					switch {
					case special:
						want := c.to.f.nanBits()
						if v != nil {
							want = c.to.f.infBits(v.Signbit())
						}
						if g != want {
							err = fmt.Errorf("want %#x", want)
						}
					case v.Sign() == 0:
						if g&^(1<<(c.to.width-1)) != 0 {
							err = fmt.Errorf("want a zero")
						}
					default:
						err = checkRounded(c.to, g, mode, rev(v))
					}
					if err != nil && bad < 5 {
						bad++
						t.Errorf("%#x → %#x: %v", x[0], g, err)
					}
				}
			})
		}
	}
}

// exactF returns x as a big.Float and whether it is NaN or infinite (then the value is nil
// for NaN and an infinity otherwise).
func exactF(x float64) (*big.Float, bool) {
	switch {
	case x != x:
		return nil, true
	case math.IsInf(x, 0):
		return new(big.Float).SetInf(x < 0), true
	}
	return bigF(x), false
}

// The round-to-nearest conversions to f16 and bf16 agree with device/num's (which the twins
// use) on every non-NaN float32 of a large sample.
func TestCvtMatchesNum(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	in := make([][3]uint64, 3000)
	for i := range in {
		in[i][0] = uint64(r.Uint32())
	}
	for _, c := range []struct {
		body string
		f    func(float32) uint16
	}{{"cvt.rn.f16.f32 %rs0, %f1;" + out16, num.F32ToF16}, {"cvt.rn.bf16.f32 %rs0, %f1;" + out16, num.F32ToBF16}} {
		got := evalALU(t, c.body, in)
		for i, x := range in {
			v := math.Float32frombits(uint32(x[0]))
			if v != v {
				continue
			}
			if want := uint64(c.f(v)); got[i] != want {
				t.Errorf("%s of %#08x: %#04x, want %#04x", c.body, x[0], got[i], want)
				break
			}
		}
	}
}

func TestMovAndSelect(t *testing.T) {
	f := func(x float32) uint64 { return uint64(math.Float32bits(x)) }
	const m32 = 0xffffffff
	runCases(t, []aluCase{
		{"mov.b64 %rd0, {%r1, %r2};", [3]uint64{1, 2}, 2<<32 | 1},
		{"mov.b64 {%r4, %r5}, %rd1;\n\tmov.u32 %r0, %r5;" + out32, [3]uint64{7<<32 | 9}, 7},
		{"mov.b32 %r0, {%rs1, %rs2};" + out32, [3]uint64{0x1111, 0x2222}, 0x22221111},
		{"mov.b32 {%rs4, %rs5}, %r1;\n\tmov.u16 %rs0, %rs4;" + out16, [3]uint64{0x22221111}, 0x1111},
		{"mov.b32 %f0, {0, %rs1};" + outF32, [3]uint64{0x3f80}, f(1)},
		{"mov.u32 %r0, 0xdeadbeef;" + out32, [3]uint64{}, 0xdeadbeef},
		{"mov.u32 %r0, -1;" + out32, [3]uint64{}, m32},
		{"mov.f32 %f0, 0fBF800000;" + outF32, [3]uint64{}, f(-1)},
		{"mov.f64 %fd0, 0d3FF0000000000000;" + outF64, [3]uint64{}, math.Float64bits(1)},
		{"add.f32 %f0, %f1, 0f3F800000;" + outF32, [3]uint64{f(2)}, f(3)},
		{"mul.rn.f64 %fd0, %fd1, 0d4000000000000000;" + outF64, [3]uint64{math.Float64bits(3)}, math.Float64bits(6)},
		{"mov.pred %p0, 1;" + outP, [3]uint64{}, 1},
		{"mov.pred %p0, %p1;" + outP, [3]uint64{1}, 1},
		{"selp.b32 %r0, %r1, %r2, %p3;" + out32, [3]uint64{10, 20, 1}, 10},
		{"selp.b32 %r0, %r1, %r2, %p3;" + out32, [3]uint64{10, 20, 0}, 20},
		{"selp.f32 %f0, 0f3F800000, 0f00000000, %p3;" + outF32, [3]uint64{0, 0, 1}, f(1)},
		{"slct.u32.s32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{10, 20, m32}, 20},
		{"slct.u32.f32 %r0, %r1, %r2, %f3;" + out32, [3]uint64{10, 20, 0x80000000}, 10},
		{"setp.lt.s32 %p0, %r1, %r2;" + outP, [3]uint64{m32, 1}, 1},
		{"setp.lo.u32 %p0, %r1, %r2;" + outP, [3]uint64{m32, 1}, 0},
		{"setp.hs.u64 %p0, %rd1, %rd2;" + outP, [3]uint64{5, 5}, 1},
		{"setp.ge.s16 %p0, %rs1, %rs2;" + outP, [3]uint64{0x8000, 1}, 0},
		{"setp.eq.b32 %p0, %r1, %r2;" + outP, [3]uint64{3, 3}, 1},
		{"setp.lt.f32 %p0, %f1, %f2;" + outP, [3]uint64{uint64(nan32), f(1)}, 0},
		{"setp.ltu.f32 %p0, %f1, %f2;" + outP, [3]uint64{uint64(nan32), f(1)}, 1},
		{"setp.neu.f32 %p0, %f1, %f2;" + outP, [3]uint64{f(1), f(1)}, 0},
		{"setp.eq.f32 %p0, %f1, %f2;" + outP, [3]uint64{0, 0x80000000}, 1},
		{"setp.num.f32 %p0, %f1, %f2;" + outP, [3]uint64{f(1), uint64(nan32)}, 0},
		{"setp.nan.f32 %p0, %f1, %f2;" + outP, [3]uint64{f(1), uint64(nan32)}, 1},
		{"setp.gt.ftz.f32 %p0, %f1, %f2;" + outP, [3]uint64{1, 0}, 0},
		{"setp.gt.f64 %p0, %fd1, %fd2;" + outP, [3]uint64{math.Float64bits(2), math.Float64bits(1)}, 1},
		{"setp.lt.and.s32 %p0, %r1, %r2, %p3;" + outP, [3]uint64{1, 2, 0}, 0},
		{"setp.lt.or.s32 %p0, %r1, %r2, !%p3;" + outP, [3]uint64{3, 2, 0}, 1},
		{"setp.lt.xor.s32 %p0, %r1, %r2, %p3;" + outP, [3]uint64{1, 2, 1}, 0},
		{"setp.lt.s32 %p4|%p0, %r1, %r2;" + outP, [3]uint64{1, 2}, 0},
		{"set.lt.u32.s32 %r0, %r1, %r2;" + out32, [3]uint64{1, 2}, m32},
		{"set.gt.f32.f32 %r0, %f1, %f2;" + out32, [3]uint64{f(3), f(2)}, f(1)},
		{"set.gt.f32.f32 %r0, %f1, %f2;" + out32, [3]uint64{f(1), f(2)}, 0},
	})
}
