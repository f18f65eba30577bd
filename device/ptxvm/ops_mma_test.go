package ptxvm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// mmaLaneWords are the registers lane l feeds mma.m8n8k16 in the test kernel: A, B, C0 and
// C1, each a hash of the lane and a seed (the kernel computes the same with mul and xor).
func mmaLaneWords(l, seed uint32) (a, b, c0, c1 uint32) {
	h := func(k uint32) uint32 { return (l*0x9e3779b1 ^ seed*k) * 0x85ebca6b }
	return h(1), h(3), h(5) >> 8, h(7) >> 8
}

// mmaWant computes D = A·B + C from the matrices the lanes hold, built element by element from
// the PTX ISA's m8n8k16 fragment layout (A[g][4t+i], B[4t+i][g], C[g][2t+i] in lane 4g+t), as
// 8×16, 16×8 and 8×8 matrices multiplied the textbook way.
func mmaWant(seed uint32, aSigned, bSigned, sat bool) (d [32][2]int32) {
	var A [8][16]int64
	var B [16][8]int64
	var C [8][8]int64
	elem := func(w uint32, i int, signed bool) int64 {
		if signed {
			return int64(int8(w >> (8 * i)))
		}
		return int64(uint8(w >> (8 * i)))
	}
	for l := uint32(0); l < 32; l++ {
		a, b, c0, c1 := mmaLaneWords(l, seed)
		g, t := int(l/4), int(l%4)
		for i := 0; i < 4; i++ {
			A[g][4*t+i] = elem(a, i, aSigned)
			B[4*t+i][g] = elem(b, i, bSigned)
		}
		C[g][2*t], C[g][2*t+1] = int64(int32(c0)), int64(int32(c1))
	}
	for l := 0; l < 32; l++ {
		g, t := l/4, l%4
		for i := 0; i < 2; i++ {
			s := C[g][2*t+i]
			for k := 0; k < 16; k++ {
				s += A[g][k] * B[k][2*t+i]
			}
			if sat {
				s = max(min(s, 1<<31-1), -1<<31)
			}
			d[l][i] = int32(s)
		}
	}
	return d
}

func TestMMAInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	for _, c := range []struct {
		at, bt string
		sat    bool
	}{{"s8", "s8", false}, {"u8", "s8", false}, {"s8", "u8", false}, {"u8", "u8", false}, {"s8", "s8", true}} {
		seed := r.Uint32()
		name := fmt.Sprintf("%s.%s/satfinite=%v", c.at, c.bt, c.sat)
		t.Run(name, func(t *testing.T) {
			sat := ""
			if c.sat {
				sat = ".satfinite"
			}
			body := fmt.Sprintf(`
	mul.lo.u32 %%r4, %%r3, -1640531535;
	xor.b32 %%r5, %%r4, %d;
	mul.lo.u32 %%r5, %%r5, -2048144789;
	xor.b32 %%r6, %%r4, %d;
	mul.lo.u32 %%r6, %%r6, -2048144789;
	xor.b32 %%r7, %%r4, %d;
	mul.lo.u32 %%r7, %%r7, -2048144789;
	shr.u32 %%r7, %%r7, 8;
	xor.b32 %%r8, %%r4, %d;
	mul.lo.u32 %%r8, %%r8, -2048144789;
	shr.u32 %%r8, %%r8, 8;
	mma.sync.aligned.m8n8k16.row.col%s.s32.%s.%s.s32 {%%r12, %%r13}, {%%r5}, {%%r6}, {%%r7, %%r8};
	mul.lo.u32 %%r1, %%r1, 2;
`, seed*1, seed*3, seed*5, seed*7, sat, c.at, c.bt) + store32("%r12") + "\tadd.u32 %r1, %r1, 1;\n" + store32("%r13")
			got, err := runOut(t, idxKernel("", body), geo(1, 32), 64, Config{})
			if err != nil {
				t.Fatal(err)
			}
			want := mmaWant(seed, c.at == "s8", c.bt == "s8", c.sat)
			for l := 0; l < 32; l++ {
				for i := 0; i < 2; i++ {
					if g := int32(got[2*l+i]); g != want[l][i] {
						t.Fatalf("lane %d d%d: %d, want %d", l, i, g, want[l][i])
					}
				}
			}
		})
	}
}

// mma with a shape or type it does not have is refused when the module loads; with a lane
// missing it faults.
func TestMMAErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"\tmma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r12, %r13, %r14, %r15}, {%r5, %r6}, {%r6}, {%r7, %r8, %r9, %r10};\n", "only the integer shape"},
		{"\tmma.sync.aligned.m8n8k16.row.col.s32.s16.s8.s32 {%r12, %r13}, {%r5}, {%r6}, {%r7, %r8};\n", "needs the types"},
		{"\tmma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%r12}, {%r5}, {%r6}, {%r7, %r8};\n", "takes {d0, d1}"},
		{"\tmma.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%r12, %r13}, {%r5}, {%r6}, {%r7, %r8};\n", "needs .sync.aligned"},
	} {
		_, err := Load(idxKernel("", c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.body, err, c.want)
		}
	}
	half := "\tsetp.lt.u32 %p1, %r3, 16;\n\t@%p1 ret;\n\tmma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%r12, %r13}, {%r5}, {%r6}, {%r7, %r8};\n"
	if _, err := runOut(t, idxKernel("", half), geo(1, 32), 32, Config{}); err == nil || !strings.Contains(err.Error(), "every lane") {
		t.Errorf("mma in half a warp: error %v, want one saying it needs every lane", err)
	}
}
