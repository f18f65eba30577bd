package ptxvm

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

type aluCase struct {
	body string
	in   [3]uint64
	want uint64
}

// runCases groups cases by body, runs each body once over its inputs and checks the results.
func runCases(t *testing.T, cases []aluCase) {
	t.Helper()
	order := []string{}
	group := map[string][]aluCase{}
	for _, c := range cases {
		if _, ok := group[c.body]; !ok {
			order = append(order, c.body)
		}
		group[c.body] = append(group[c.body], c)
	}
	for _, body := range order {
		cs := group[body]
		in := make([][3]uint64, len(cs))
		for i, c := range cs {
			in[i] = c.in
		}
		got := evalALU(t, body, in)
		for i, c := range cs {
			if got[i] != c.want {
				t.Errorf("%s with %#x, %#x, %#x: got %#x, want %#x", body, c.in[0], c.in[1], c.in[2], got[i], c.want)
			}
		}
	}
}

func TestIntegerOps(t *testing.T) {
	const m32 = 0xffffffff
	runCases(t, []aluCase{
		{"add.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x7fffffff, 1}, 0x80000000},
		{"add.sat.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x7fffffff, 1}, 0x7fffffff},
		{"add.sat.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x80000000, m32}, 0x80000000},
		{"sub.sat.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x80000000, 1}, 0x80000000},
		{"sub.s64 %rd0, %rd1, %rd2;", [3]uint64{0, 1}, ^uint64(0)},
		{"add.s16 %rs0, %rs1, %rs2;" + out16, [3]uint64{0xffff, 2}, 1},
		{"mul.lo.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x10000, 0x10001}, 0x10000},
		{"mul.hi.s32 %r0, %r1, %r2;" + out32, [3]uint64{m32, 2}, m32},
		{"mul.hi.u32 %r0, %r1, %r2;" + out32, [3]uint64{m32, 2}, 1},
		{"mul.hi.s64 %rd0, %rd1, %rd2;", [3]uint64{^uint64(0), 2}, ^uint64(0)},
		{"mul.hi.u64 %rd0, %rd1, %rd2;", [3]uint64{^uint64(0), 2}, 1},
		{"mul.wide.s32 %rd0, %r1, %r2;", [3]uint64{m32, 3}, ^uint64(2)},
		{"mul.wide.u32 %rd0, %r1, %r2;", [3]uint64{m32, 3}, 3 * m32},
		{"mul.wide.s16 %r0, %rs1, %rs2;" + out32, [3]uint64{0xffff, 0xffff}, 1},
		{"mul.wide.u16 %r0, %rs1, %rs2;" + out32, [3]uint64{0xffff, 0xffff}, 0xfffe0001},
		{"mad.lo.s32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{3, 4, 5}, 17},
		{"mad.hi.u32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{m32, m32, 1}, 0xffffffff},
		{"mad.wide.s32 %rd0, %r1, %r2, %rd3;", [3]uint64{m32, 5, 10}, 5},
		{"mad.hi.sat.s32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0x7fffffff, 0x7fffffff, 0x7fffffff}, 0x7fffffff},
		{"div.s32 %r0, %r1, %r2;" + out32, [3]uint64{uint64(uint32(-7 & m32)), 2}, uint64(uint32(-3 & m32))},
		{"rem.s32 %r0, %r1, %r2;" + out32, [3]uint64{uint64(uint32(-7 & m32)), 2}, m32},
		{"div.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x80000000, m32}, 0x80000000},
		{"rem.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x80000000, m32}, 0},
		{"div.u32 %r0, %r1, %r2;" + out32, [3]uint64{m32, 2}, 0x7fffffff},
		{"rem.u64 %rd0, %rd1, %rd2;", [3]uint64{^uint64(0), 10}, 5},
		{"div.s64 %rd0, %rd1, %rd2;", [3]uint64{^uint64(99), 10}, ^uint64(9)},
		{"min.s32 %r0, %r1, %r2;" + out32, [3]uint64{m32, 1}, m32},
		{"min.u32 %r0, %r1, %r2;" + out32, [3]uint64{m32, 1}, 1},
		{"max.s32 %r0, %r1, %r2;" + out32, [3]uint64{m32, 1}, 1},
		{"max.relu.s32 %r0, %r1, %r2;" + out32, [3]uint64{m32, 0xfffffffe}, 0},
		{"max.u64 %rd0, %rd1, %rd2;", [3]uint64{^uint64(0), 1}, ^uint64(0)},
		{"abs.s32 %r0, %r1;" + out32, [3]uint64{m32}, 1},
		{"abs.s32 %r0, %r1;" + out32, [3]uint64{0x80000000}, 0x80000000},
		{"neg.s32 %r0, %r1;" + out32, [3]uint64{1}, m32},
		{"neg.s64 %rd0, %rd1;", [3]uint64{1}, ^uint64(0)},
		// carry chains: a 64-bit add from 32-bit halves, and a borrow
		{"add.cc.u32 %r4, %r1, %r2;\n\taddc.u32 %r5, 0, 0;\n\tmov.b64 %rd0, {%r4, %r5};", [3]uint64{m32, 1}, 1 << 32},
		{"sub.cc.u32 %r4, %r1, %r2;\n\tsubc.u32 %r5, 0, 0;\n\tmov.b64 %rd0, {%r4, %r5};", [3]uint64{0, 1}, ^uint64(0)},
		{"mad.lo.cc.u32 %r4, %r1, %r2, %r3;\n\tmadc.hi.u32 %r5, %r1, %r2, 0;\n\tmov.b64 %rd0, {%r4, %r5};", [3]uint64{m32, m32, 1}, m32*m32 + 1},
	})
}

func TestBitOps(t *testing.T) {
	const m32 = 0xffffffff
	runCases(t, []aluCase{
		{"and.b32 %r0, %r1, %r2;" + out32, [3]uint64{0xf0f0, 0xff00}, 0xf000},
		{"or.b64 %rd0, %rd1, %rd2;", [3]uint64{1 << 40, 1}, 1<<40 | 1},
		{"xor.b16 %rs0, %rs1, %rs2;" + out16, [3]uint64{0xffff, 0x0f0f}, 0xf0f0},
		{"not.b32 %r0, %r1;" + out32, [3]uint64{0}, m32},
		{"cnot.b32 %r0, %r1;" + out32, [3]uint64{0}, 1},
		{"cnot.b32 %r0, %r1;" + out32, [3]uint64{7}, 0},
		{"and.pred %p0, %p1, %p2;" + outP, [3]uint64{1, 1}, 1},
		{"or.pred %p0, %p1, %p2;" + outP, [3]uint64{0, 0}, 0},
		{"xor.pred %p0, %p1, %p2;" + outP, [3]uint64{1, 1}, 0},
		{"not.pred %p0, %p1;" + outP, [3]uint64{1}, 0},
		{"not.pred %p0, %p1;" + outP, [3]uint64{0}, 1},
		{"shl.b32 %r0, %r1, %r2;" + out32, [3]uint64{1, 31}, 0x80000000},
		{"shl.b32 %r0, %r1, %r2;" + out32, [3]uint64{1, 32}, 0},
		{"shr.u32 %r0, %r1, %r2;" + out32, [3]uint64{0x80000000, 40}, 0},
		{"shr.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x80000000, 40}, m32},
		{"shr.s32 %r0, %r1, %r2;" + out32, [3]uint64{0x80000000, 4}, 0xf8000000},
		{"shl.b64 %rd0, %rd1, %r2;", [3]uint64{1, 63}, 1 << 63},
		{"shr.u16 %rs0, %rs1, %r2;" + out16, [3]uint64{0x8000, 15}, 1},
		{"popc.b32 %r0, %r1;" + out32, [3]uint64{0xf0f0}, 8},
		{"popc.b64 %r0, %rd1;" + out32, [3]uint64{^uint64(0)}, 64},
		{"clz.b32 %r0, %r1;" + out32, [3]uint64{1}, 31},
		{"clz.b32 %r0, %r1;" + out32, [3]uint64{0}, 32},
		{"clz.b64 %r0, %rd1;" + out32, [3]uint64{1}, 63},
		{"brev.b32 %r0, %r1;" + out32, [3]uint64{1}, 0x80000000},
		{"bfind.u32 %r0, %r1;" + out32, [3]uint64{0x100}, 8},
		{"bfind.u32 %r0, %r1;" + out32, [3]uint64{0}, m32},
		{"bfind.s32 %r0, %r1;" + out32, [3]uint64{m32}, m32},
		{"bfind.shiftamt.u32 %r0, %r1;" + out32, [3]uint64{0x100}, 23},
		{"bfe.s32 %r0, %r1, 4, 8;" + out32, [3]uint64{0x0f80}, 0xfffffff8},
		{"bfe.u32 %r0, %r1, 4, 8;" + out32, [3]uint64{0x0f80}, 0xf8},
		{"bfe.u32 %r0, %r1, 28, 8;" + out32, [3]uint64{0xf0000000}, 0xf},
		{"bfe.s32 %r0, %r1, 28, 8;" + out32, [3]uint64{0xf0000000}, m32},
		{"bfe.u32 %r0, %r1, 4, 0;" + out32, [3]uint64{m32}, 0},
		{"bfi.b32 %r0, %r1, %r2, 8, 4;" + out32, [3]uint64{0xff, 0}, 0xf00},
		{"bfi.b32 %r0, %r1, %r2, 30, 4;" + out32, [3]uint64{0xf, 0}, 0xc0000000},
		{"prmt.b32 %r0, %r1, %r2, 0x3210;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x44332211},
		{"prmt.b32 %r0, %r1, %r2, 0x7654;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x88776655},
		{"prmt.b32 %r0, %r1, %r2, 0x0123;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x11223344},
		{"prmt.b32 %r0, %r1, %r2, 0x000f;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x111111ff},
		{"prmt.b32.f4e %r0, %r1, %r2, 1;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x55443322},
		{"prmt.b32.b4e %r0, %r1, %r2, 1;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x77881122},
		{"prmt.b32.rc8 %r0, %r1, %r2, 2;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x33333333},
		{"prmt.b32.ecl %r0, %r1, %r2, 1;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x44332222},
		{"prmt.b32.ecr %r0, %r1, %r2, 2;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x33332211},
		{"prmt.b32.rc16 %r0, %r1, %r2, 1;" + out32, [3]uint64{0x44332211, 0x88776655}, 0x44334433},
		{"lop3.b32 %r0, %r1, %r2, %r3, 0x96;" + out32, [3]uint64{0xf0, 0xcc, 0xaa}, 0xf0 ^ 0xcc ^ 0xaa},
		{"lop3.b32 %r0, %r1, %r2, %r3, 0x80;" + out32, [3]uint64{m32, 0xff00ff, 0xf0f0f0}, 0xf000f0},
		{"shf.l.wrap.b32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0x80000000, 1, 33}, 3},
		{"shf.l.clamp.b32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0x80000000, 1, 40}, 0x80000000},
		{"shf.r.wrap.b32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0x2, 1, 1}, 0x80000001},
		{"shf.r.clamp.b32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0x2, 1, 40}, 1},
		{"dp4a.s32.s32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0xff020304, 0x01ff0102, 10}, 18},
		{"dp4a.u32.u32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0xff000000, 0x02000000, 1}, 0xff*2 + 1},
		{"dp4a.s32.u32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0xff000000, 0x02000000, 0}, m32 - 1},
		{"dp2a.lo.s32.u32 %r0, %r1, %r2, %r3;" + out32, [3]uint64{0xffff0002, 0x00000304, 0}, 5},
	})
}

// Random differential check of the common integer ops against Go.
func TestIntegerOpsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	in := make([][3]uint64, 500)
	for i := range in {
		for j := range in[i] {
			switch r.IntN(4) {
			case 0:
				in[i][j] = uint64(r.Uint32())
			case 1:
				in[i][j] = uint64(r.IntN(64))
			case 2:
				in[i][j] = uint64(uint32(-r.IntN(64)))
			default:
				in[i][j] = r.Uint64()
			}
		}
	}
	ops := []struct {
		body string
		f    func(a, b, c uint64) uint64
	}{
		{"add.s32 %r0, %r1, %r2;" + out32, func(a, b, c uint64) uint64 { return uint64(uint32(a) + uint32(b)) }},
		{"mul.lo.u32 %r0, %r1, %r2;" + out32, func(a, b, c uint64) uint64 { return uint64(uint32(a) * uint32(b)) }},
		{"mul.hi.s32 %r0, %r1, %r2;" + out32, func(a, b, c uint64) uint64 {
			return uint64(uint32((int64(int32(a)) * int64(int32(b))) >> 32))
		}},
		{"mul.hi.u64 %rd0, %rd1, %rd2;", func(a, b, c uint64) uint64 { h, _ := bits.Mul64(a, b); return h }},
		{"mul.wide.s32 %rd0, %r1, %r2;", func(a, b, c uint64) uint64 { return uint64(int64(int32(a)) * int64(int32(b))) }},
		{"mad.lo.s64 %rd0, %rd1, %rd2, %rd3;", func(a, b, c uint64) uint64 { return a*b + c }},
		{"min.s32 %r0, %r1, %r2;" + out32, func(a, b, c uint64) uint64 { return uint64(uint32(min(int32(a), int32(b)))) }},
		{"max.u32 %r0, %r1, %r2;" + out32, func(a, b, c uint64) uint64 { return uint64(max(uint32(a), uint32(b))) }},
		{"shl.b32 %r0, %r1, %r2;" + out32, func(a, b, c uint64) uint64 {
			if uint32(b) >= 32 {
				return 0
			}
			return uint64(uint32(a) << uint32(b))
		}},
		{"shr.s32 %r0, %r1, %r2;" + out32, func(a, b, c uint64) uint64 { return uint64(uint32(int32(a) >> min(uint32(b), 31))) }},
		{"bfe.u32 %r0, %r1, %r2, %r3;" + out32, func(a, b, c uint64) uint64 {
			pos, n := uint32(b)&0xff, uint32(c)&0xff
			var r uint32
			for i := uint32(0); i < n && pos+i < 32; i++ {
				r |= (uint32(a) >> (pos + i) & 1) << i
			}
			return uint64(r)
		}},
		{"prmt.b32 %r0, %r1, %r2, %r3;" + out32, func(a, b, c uint64) uint64 {
			bytes := [8]uint32{}
			for i := 0; i < 4; i++ {
				bytes[i] = uint32(a) >> (8 * i) & 0xff
				bytes[4+i] = uint32(b) >> (8 * i) & 0xff
			}
			var r uint32
			for i := 0; i < 4; i++ {
				s := uint32(c) >> (4 * i) & 0xf
				v := bytes[s&7]
				if s&8 != 0 {
					v = uint32(int32(int8(v))>>7) & 0xff
				}
				r |= v << (8 * i)
			}
			return uint64(r)
		}},
		{"dp4a.s32.u32 %r0, %r1, %r2, %r3;" + out32, func(a, b, c uint64) uint64 {
			s := int32(c)
			for i := 0; i < 4; i++ {
				s += int32(int8(a>>(8*i))) * int32(uint8(b>>(8*i)))
			}
			return uint64(uint32(s))
		}},
		{"shf.r.clamp.b32 %r0, %r1, %r2, %r3;" + out32, func(a, b, c uint64) uint64 {
			n := min(uint32(c), 32)
			return uint64(uint32((uint64(uint32(b))<<32 | uint64(uint32(a))) >> n))
		}},
	}
	for _, op := range ops {
		got := evalALU(t, op.body, in)
		for i, x := range in {
			if want := op.f(x[0], x[1], x[2]); got[i] != want {
				t.Errorf("%s with %#x, %#x, %#x: got %#x, want %#x", op.body, x[0], x[1], x[2], got[i], want)
				break
			}
		}
	}
}
