package ptxvm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"verity/device"
)

// idxKernel wraps body in a kernel with one output pointer (in %rd1, as a global address)
// and %r1 = the global linear thread index, %r2 = %tid.x, %r3 = %laneid.
func idxKernel(decls, body string) string {
	return header + `.visible .entry t(.param .u64 t_out)
{
	.reg .pred %p<8>;
	.reg .b32 %r<24>;
	.reg .b64 %rd<8>;
	.reg .f32 %f<8>;
` + decls + `
	ld.param.u64 %rd0, [t_out];
	cvta.to.global.u64 %rd1, %rd0;
	mov.u32 %r10, %ctaid.x;
	mov.u32 %r11, %ntid.x;
	mov.u32 %r2, %tid.x;
	mad.lo.s32 %r1, %r10, %r11, %r2;
	mov.u32 %r3, %laneid;
` + body + `
	ret;
}
`
}

// store32 stores %r<reg> to out[%r1].
func store32(reg string) string {
	return fmt.Sprintf("\tmul.wide.u32 %%rd2, %%r1, 4;\n\tadd.s64 %%rd3, %%rd1, %%rd2;\n\tst.global.u32 [%%rd3], %s;\n", reg)
}

// runOut launches src over g with one output buffer of n uint32 and returns it.
func runOut(t *testing.T, src string, g device.Geometry, n int, cfg Config) ([]uint32, error) {
	t.Helper()
	var mem testMem
	out := make([]byte, 4*n)
	p := mem.add(out, true)
	_, err := runPTX(t, src, g, &mem, cfg, ptrParams(p)...)
	return u32s(out), err
}

func geo(grid, block uint32) device.Geometry {
	return device.Geometry{Grid: dim(grid), Block: dim(block)}
}

// Lanes looping different numbers of times reconverge before a shuffle that needs them all.
func TestDivergenceReconverges(t *testing.T) {
	src := idxKernel("", `
	mov.u32 %r4, 0;
	mov.u32 %r5, 0;
$loop:
	setp.ge.u32 %p1, %r5, %r3;
	@%p1 bra $after;
	add.s32 %r4, %r4, %r5;
	and.b32 %r6, %r5, 1;
	setp.eq.s32 %p2, %r6, 0;
	@%p2 bra $even;
	add.s32 %r4, %r4, 100;
	bra.uni $next;
$even:
	add.s32 %r4, %r4, 1000;
$next:
	add.s32 %r5, %r5, 1;
	bra.uni $loop;
$after:
	shfl.sync.bfly.b32 %r7, %r4, 1, 31, -1;
	add.s32 %r8, %r4, %r7;
`+store32("%r8"))
	got, err := runOut(t, src, geo(2, 64), 128, Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := func(l int) int {
		s := 0
		for i := 0; i < l; i++ {
			s += i
			if i%2 == 0 {
				s += 1000
			} else {
				s += 100
			}
		}
		return s
	}
	for i, v := range got {
		l := i % 32
		if want := f(l) + f(l^1); int(v) != want {
			t.Fatalf("thread %d: %d, want %d", i, v, want)
		}
	}
}

// shfl with every mode and segment width, against CUDA's definitions of __shfl_*_sync.
func TestShuffle(t *testing.T) {
	for _, w := range []int{32, 16, 8, 4} {
		seg := (32 - w) << 8
		for _, c := range []struct {
			mode string
			b, c int
			want func(l int) int
		}{
			{"up", 3, seg, func(l int) int {
				if l%w >= 3 {
					return l - 3
				}
				return l
			}},
			{"down", 2, seg | 31, func(l int) int {
				if l%w+2 < w {
					return l + 2
				}
				return l
			}},
			{"bfly", 5 % w, seg | 31, func(l int) int { return l ^ (5 % w) }},
			{"idx", 7, seg | 31, func(l int) int { return l/w*w + 7%w }},
		} {
			t.Run(fmt.Sprintf("mode=%s/width=%d", c.mode, w), func(t *testing.T) {
				src := idxKernel("", fmt.Sprintf(`
	mul.lo.s32 %%r4, %%r3, 10;
	shfl.sync.%s.b32 %%r5|%%p1, %%r4, %d, %d, -1;
	selp.u32 %%r6, 1, 0, %%p1;
	mad.lo.s32 %%r7, %%r5, 2, %%r6;
`, c.mode, c.b, c.c)+store32("%r7"))
				got, err := runOut(t, src, geo(1, 32), 32, Config{})
				if err != nil {
					t.Fatal(err)
				}
				for l, v := range got {
					src := c.want(l)
					valid := 0
					if src != l || c.mode == "bfly" || c.mode == "idx" && src == l {
						valid = 1
					}
					if c.mode == "up" && l%w < 3 || c.mode == "down" && l%w+2 >= w {
						valid = 0
					}
					if want := src*10*2 + valid; int(v) != want {
						t.Fatalf("lane %d: %d (source %d, valid %d), want source %d valid %d", l, v, v/20, v%2, src, valid)
					}
				}
			})
		}
	}
}

func TestVoteAndActivemask(t *testing.T) {
	src := idxKernel("", `
	setp.lt.u32 %p1, %r3, 20;
	vote.sync.ballot.b32 %r4, %p1, -1;
	vote.sync.all.pred %p2, %p1, -1;
	vote.sync.any.pred %p3, %p1, -1;
	vote.sync.uni.pred %p4, !%p1, -1;
	selp.u32 %r5, 1, 0, %p2;
	selp.u32 %r6, 2, 0, %p3;
	selp.u32 %r7, 4, 0, %p4;
	add.s32 %r8, %r5, %r6;
	add.s32 %r8, %r8, %r7;
	setp.lt.u32 %p5, %r3, 8;
	@!%p5 bra $skip;
	activemask.b32 %r9;
	redux.sync.add.u32 %r12, %r3, %r9;
	xor.b32 %r4, %r4, %r9;
	add.s32 %r4, %r4, %r12;
$skip:
	add.s32 %r4, %r4, %r8;
`+store32("%r4"))
	got, err := runOut(t, src, geo(1, 32), 32, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ballot := uint32(1<<20 - 1)
	for l, v := range got {
		want := ballot + 2
		if l < 8 {
			want = ballot ^ 0xff + 28 + 2
		}
		if v != want {
			t.Fatalf("lane %d: %#x, want %#x", l, v, want)
		}
	}
}

// A block-wide shared-memory reduction with barriers: 4 warps, a tree over shared memory.
const reduceDecls = "\t.shared .align 4 .b8 red[512];\n"

func reduceBody(withBarrier bool) string {
	bar := "\tbar.sync 0;\n"
	if !withBarrier {
		bar = ""
	}
	return `
	mov.u32 %r4, red;
	shl.b32 %r5, %r2, 2;
	add.s32 %r6, %r4, %r5;
	st.shared.u32 [%r6], %r2;
` + bar + `
	mov.u32 %r7, 64;
$loop:
	setp.ge.u32 %p1, %r2, %r7;
	@%p1 bra $skip;
	shl.b32 %r8, %r7, 2;
	add.s32 %r9, %r6, %r8;
	ld.shared.u32 %r12, [%r9];
	ld.shared.u32 %r13, [%r6];
	add.s32 %r13, %r13, %r12;
	st.shared.u32 [%r6], %r13;
$skip:
	bar.sync 0;
	shr.u32 %r7, %r7, 1;
	setp.ne.s32 %p2, %r7, 0;
	@%p2 bra $loop;
	ld.shared.u32 %r14, [%r4];
` + store32("%r14")
}

func TestBarrierReduction(t *testing.T) {
	got, err := runOut(t, idxKernel(reduceDecls, reduceBody(true)), geo(3, 128), 3*128, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 127*128/2 {
			t.Fatalf("thread %d: %d, want %d", i, v, 127*128/2)
		}
	}
}

func TestRaceDetected(t *testing.T) {
	_, err := runOut(t, idxKernel(reduceDecls, reduceBody(false)), geo(1, 128), 128, Config{})
	var e *ExecError
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "race") {
		t.Fatalf("got %v, want a shared memory race", err)
	}
	t.Log(err)
	// without the check the same kernel runs (and is wrong)
	if _, err := runOut(t, idxKernel(reduceDecls, reduceBody(false)), geo(1, 128), 128, Config{NoRaceCheck: true}); err != nil {
		t.Fatal(err)
	}
}

func TestDeadlockAndBudget(t *testing.T) {
	deadlock := idxKernel("", `
	setp.lt.u32 %p1, %r2, 64;
	@%p1 bra $a;
	bar.sync 1;
	bra.uni $end;
$a:
	bar.sync 0;
$end:
`)
	_, err := runOut(t, deadlock, geo(1, 128), 128, Config{})
	var s *StallError
	if !errors.As(err, &s) || !strings.Contains(err.Error(), "deadlock") || !strings.Contains(err.Error(), "waiting at line") {
		t.Fatalf("got %v, want a barrier deadlock with the warps' positions", err)
	}
	t.Log(err)
	spin := idxKernel("", "$l:\n\tadd.s32 %r4, %r4, 1;\n\tbra.uni $l;\n")
	_, err = runOut(t, spin, geo(1, 64), 64, Config{MaxSteps: 10000})
	if !errors.As(err, &s) || !strings.Contains(err.Error(), "budget") || len(s.Warps) != 2 {
		t.Fatalf("got %v, want a step budget error listing 2 warps", err)
	}
	// threads that exit early count as arrived: a barrier after a partial return completes
	early := idxKernel("", "\tsetp.ge.u32 %p1, %r2, 40;\n\t@%p1 ret;\n\tbar.sync 0;\n"+store32("%r2"))
	if _, err := runOut(t, early, geo(1, 128), 128, Config{}); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryFaults(t *testing.T) {
	// thread 64 reads one element past a 64-element input
	src := header + `.visible .entry t(.param .u64 t_in, .param .u64 t_out)
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [t_in];
	ld.param.u64 %rd2, [t_out];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd1, %rd3;
	ld.global.u32 %r2, [%rd4];
	add.s64 %rd5, %rd2, %rd3;
	st.global.u32 [%rd5], %r2;
	ret;
}
`
	var mem testMem
	in := mem.add(make([]byte, 4*64), false)
	out := mem.add(make([]byte, 4*65), true)
	_, err := runPTX(t, src, geo(1, 65), &mem, Config{}, ptrParams(in, out)...)
	var e *ExecError
	if !errors.As(err, &e) || e.Thread != [3]uint32{64, 0, 0} || e.Line != 14 || !strings.Contains(e.Msg, "outside every allocation") ||
		!strings.Contains(e.Msg, "0 bytes past the end of the 256-byte allocation") {
		t.Fatalf("got %v, want an out-of-bounds load by thread 64 at line 14", err)
	}
	t.Log(err)
	// storing into read-only (uploaded) memory
	_, err = runPTX(t, src, geo(1, 64), &mem, Config{}, ptrParams(in, in)...)
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "read-only") {
		t.Fatalf("got %v, want a store into read-only memory", err)
	}
	// misaligned access
	_, err = runPTX(t, src, geo(1, 4), &mem, Config{}, ptrParams(in+2, out)...)
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "misaligned") {
		t.Fatalf("got %v, want a misaligned load", err)
	}
	// shared memory out of bounds
	sh := idxKernel("\t.shared .align 4 .b8 buf[64];\n", "\tmov.u32 %r4, buf;\n\tshl.b32 %r5, %r2, 2;\n\tadd.s32 %r6, %r4, %r5;\n\tst.shared.u32 [%r6], %r2;\n")
	_, err = runOut(t, sh, geo(1, 32), 32, Config{})
	if !errors.As(err, &e) || e.Thread[0] != 16 || !strings.Contains(e.Msg, "64 bytes of shared memory") {
		t.Fatalf("got %v, want thread 16 past the 64 bytes of shared memory", err)
	}
}

func TestAtomics(t *testing.T) {
	src := idxKernel("\t.shared .align 4 .u32 cnt;\n", `
	atom.global.add.u32 %r4, [%rd1], 1;
	mov.u32 %r5, cnt;
	atom.shared.add.u32 %r6, [%r5], %r2;
	bar.sync 0;
	ld.shared.u32 %r7, [%r5];
	setp.ne.s32 %p1, %r2, 0;
	@%p1 bra $end;
	atom.global.max.s32 %r8, [%rd1+4], %r7;
	red.global.add.u32 [%rd1+8], %r7;
	atom.global.cas.b32 %r9, [%rd1+12], 0, 7;
	atom.global.exch.b32 %r9, [%rd1+16], %r10;
	atom.global.inc.u32 %r9, [%rd1+20], 2;
$end:
`)
	got, err := runOut(t, src, geo(5, 64), 8, Config{})
	if err != nil {
		t.Fatal(err)
	}
	sum := uint32(63 * 64 / 2)
	want := []uint32{320, sum, 5 * sum, 7, 4, 5 % 3, 0, 0}
	for i := range want {
		if i == 4 {
			// exch: the value of whichever block's thread 0 exchanged last; blocks run
			// concurrently (as on a GPU), so any block id is a correct result
			if got[i] >= 5 {
				t.Errorf("word 4: %d, want a block id below 5", got[i])
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("word %d: %d, want %d", i, got[i], want[i])
		}
	}
	fl := idxKernel("", "\tatom.global.add.f32 %f1, [%rd1], 0f3F800000;\n")
	if _, err := runOut(t, fl, geo(1, 32), 1, Config{}); err == nil || !strings.Contains(err.Error(), "float atomic") {
		t.Fatalf("got %v, want float atomics refused", err)
	}
	if got, err := runOut(t, fl, geo(2, 32), 1, Config{AllowFloatAtomics: true}); err != nil || got[0] != 0x42800000 {
		t.Fatalf("got %#x, %v, want 64.0", got, err)
	}
}

func TestStateSpaces(t *testing.T) {
	src := header + `.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.const .align 4 .f32 half = 0f3F000000;
.extern .shared .align 16 .b8 dyn[];

.visible .entry t(.param .u64 t_out)
{
	.local .align 8 .b8 __local_depot0[16];
	.reg .b64 %SP;
	.reg .b64 %SPL;
	.reg .pred %p<4>;
	.reg .b32 %r<16>;
	.reg .b64 %rd<16>;
	.reg .f32 %f<4>;
	mov.u64 %SPL, __local_depot0;
	cvta.local.u64 %SP, %SPL;
	ld.param.u64 %rd1, [t_out];
	mov.u32 %r1, %tid.x;
	// local memory, generic and direct
	st.local.u32 [%SPL+4], %r1;
	ld.u32 %r2, [%SP+4];
	// module globals
	and.b32 %r3, %r1, 3;
	mul.wide.u32 %rd2, %r3, 4;
	mov.u64 %rd3, table;
	add.s64 %rd4, %rd3, %rd2;
	ld.global.u32 %r4, [%rd4];
	ld.const.f32 %f1, [half];
	cvt.rzi.u32.f32 %r5, %f1;
	// dynamic shared memory through a generic address
	mov.u64 %rd5, dyn;
	cvta.shared.u64 %rd6, %rd5;
	mul.wide.u32 %rd7, %r1, 4;
	add.s64 %rd8, %rd6, %rd7;
	st.u32 [%rd8], %r4;
	bar.sync 0;
	xor.b32 %r6, %r1, 1;
	mul.wide.u32 %rd9, %r6, 4;
	add.s64 %rd10, %rd6, %rd9;
	ld.u32 %r7, [%rd10];
	// the special registers
	mov.u32 %r8, %ntid.x;
	mov.u32 %r9, %nctaid.x;
	mov.u32 %r10, %warpid;
	mov.u32 %r11, %dynamic_smem_size;
	add.s32 %r12, %r2, %r7;
	add.s32 %r12, %r12, %r5;
	mad.lo.s32 %r12, %r8, 1000, %r12;
	mad.lo.s32 %r12, %r9, 100000, %r12;
	mad.lo.s32 %r12, %r10, 10000000, %r12;
	mad.lo.s32 %r12, %r11, 1000000, %r12;
	cvta.to.global.u64 %rd11, %rd1;
	add.s64 %rd12, %rd11, %rd7;
	st.global.u32 [%rd12], %r12;
	ret;
}
`
	var mem testMem
	out := make([]byte, 4*40)
	p := mem.add(out, true)
	if _, err := runPTX(t, src, device.Geometry{Grid: dim(1), Block: dim(40), Shared: 160}, &mem, Config{}, ptrParams(p)...); err != nil {
		t.Fatal(err)
	}
	for i, v := range u32s(out) {
		tab := []uint32{10, 20, 30, 40}
		want := uint32(i) + tab[(i^1)&3] + 40*1000 + 1*100000 + uint32(i/32)*10000000 + 160*1000000
		if i^1 >= 40 {
			want = 0 // no such thread: shared memory starts zeroed
		}
		if v != want {
			t.Errorf("thread %d: %d, want %d", i, v, want)
		}
	}
}

func TestMultiDimensionalIndices(t *testing.T) {
	src := header + `.visible .entry t(.param .u64 t_out)
{
	.reg .b32 %r<16>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [t_out];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %tid.y;
	mov.u32 %r3, %tid.z;
	mov.u32 %r4, %ctaid.x;
	mov.u32 %r5, %ctaid.y;
	mov.u32 %r6, %ctaid.z;
	mov.u32 %r7, %ntid.x;
	mov.u32 %r8, %ntid.y;
	mov.u32 %r12, %nctaid.x;
	mov.u32 %r13, %nctaid.y;
	// linear block b = (z·ny + y)·nx + x, thread t = (tz·by + ty)·bx + tx
	mad.lo.s32 %r9, %r6, %r13, %r5;
	mad.lo.s32 %r9, %r9, %r12, %r4;
	mad.lo.s32 %r10, %r3, %r8, %r2;
	mad.lo.s32 %r10, %r10, %r7, %r1;
	mul.lo.s32 %r11, %r7, %r8;
	mov.u32 %r14, %ntid.z;
	mul.lo.s32 %r11, %r11, %r14;
	mad.lo.s32 %r11, %r9, %r11, %r10;
	mul.wide.u32 %rd2, %r11, 4;
	add.s64 %rd3, %rd1, %rd2;
	mad.lo.s32 %r15, %r9, 1000, %r10;
	st.global.u32 [%rd3], %r15;
	ret;
}
`
	g := device.Geometry{Grid: device.Dim3{X: 2, Y: 3, Z: 2}, Block: device.Dim3{X: 5, Y: 3, Z: 2}}
	var mem testMem
	out := make([]byte, 4*12*30)
	p := mem.add(out, true)
	if _, err := runPTX(t, src, g, &mem, Config{Workers: 3}, ptrParams(p)...); err != nil {
		t.Fatal(err)
	}
	for i, v := range u32s(out) {
		if want := uint32(i/30*1000 + i%30); v != want {
			t.Fatalf("slot %d: %d, want %d", i, v, want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	wrap := func(body string) string {
		return header + ".visible .entry t(.param .u64 p)\n{\n\t.reg .b32 %r<4>;\n\t.reg .pred %p<2>;\n" + body + "\n\tret;\n}\n"
	}
	for _, c := range []struct{ src, want string }{
		{wrap("\tfrob.b32 %r1, %r2;"), "line 9: unknown instruction frob"},
		{wrap("\tadd.s32 %r1, %r2, %r9;"), "undeclared register %r9"},
		{wrap("\tbra $nowhere;"), "unknown label $nowhere"},
		{wrap("\tadd.s32.foo %r1, %r2, %r3;"), "unsupported modifier .foo"},
		{wrap("\tex2.approx.f32 %r1, %r2;"), "approximate"},
		{wrap("\tdiv.full.f32 %r1, %r2, %r3;"), "approximate"},
		{wrap("\tadd.s32 %r1, %r2;"), "add takes 3 operands, found 2"},
		{wrap("\tfma.f32 %r1, %r2, %r3, %r1;"), "needs a rounding modifier"},
		{wrap("\tmov.u32 %r1, %clock;"), "not deterministic"},
		{wrap("\tcall.uni foo, (%r1);"), "calls are not supported"},
		{wrap("\t.maxnreg 10;"), "unknown directive .maxnreg"},
		{header + ".visible .entry t()\n{\n\tret;\n", "missing '}'"},
		{header + ".foo 1;\n", "unknown directive .foo"},
		{wrap("\tld.global.f32 %r1, [%r2+];"), "expected a number"},
		{wrap("\tcvt.rn.s32.f32 %r1, %r2;"), "needs .rni"},
		{wrap("\tshfl.sync.bfly.b32 %r1, %r2, 1, 31;"), "shfl takes 5 operands"},
	} {
		_, err := Load(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.src[len(header):], err, c.want)
		}
	}
}

func TestParamBinding(t *testing.T) {
	m, err := Load(header + ".visible .entry t(.param .u64 a, .param .f32 b, .param .u32 c)\n{\n\tret;\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	k := m.Kernel("t")
	var mem testMem
	for _, c := range []struct {
		ps   []device.Param
		want string
	}{
		{[]device.Param{{Kind: device.U64}}, "takes 3 parameters, got 1"},
		{[]device.Param{{Kind: device.U64}, {Kind: device.U64}, {Kind: device.U32}}, "receives u64"},
		{[]device.Param{{Kind: device.U64}, {Kind: device.U32}, {Kind: device.U32}}, "is .f32 but receives u32"},
	} {
		if _, err := k.Launch(geo(1, 1), c.ps, &mem, Config{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if _, err := k.Launch(geo(1, 1), []device.Param{{Kind: device.U64}, {Kind: device.F32}, {Kind: device.U32}}, &mem, Config{}); err != nil {
		t.Error(err)
	}
	if _, err := k.Launch(geo(0, 1), []device.Param{{Kind: device.U64}, {Kind: device.F32}, {Kind: device.U32}}, &mem, Config{}); err == nil {
		t.Error("an empty grid was accepted")
	}
}

// Partial warps: a block of 40 threads has a second warp of 8 lanes; a shuffle that would
// read a missing lane is an error rather than garbage.
func TestPartialWarp(t *testing.T) {
	got, err := runOut(t, idxKernel("", store32("%r3")), geo(2, 40), 80, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != uint32(i%40%32) {
			t.Fatalf("thread %d: lane %d", i, v)
		}
	}
	_, err = runOut(t, idxKernel("", "\tshfl.sync.bfly.b32 %r4, %r3, 16, 31, -1;\n"), geo(1, 40), 40, Config{})
	if err == nil || !strings.Contains(err.Error(), "not executing this shfl") {
		t.Fatalf("got %v, want a shuffle from a missing lane", err)
	}
	// the two halves of a warp at two different full-mask shuffles can never meet
	div := idxKernel("", `
	setp.lt.u32 %p1, %r3, 16;
	@%p1 bra $x;
	shfl.sync.bfly.b32 %r4, %r3, 1, 31, -1;
	bra.uni $y;
$x:
	shfl.sync.bfly.b32 %r4, %r3, 2, 31, -1;
$y:
`)
	_, err = runOut(t, div, geo(1, 32), 32, Config{})
	if err == nil || !strings.Contains(err.Error(), "not converged") {
		t.Fatalf("got %v, want a member-mask convergence error", err)
	}
	t.Log(err)
	// lanes that exited are not waited for: the other half shuffles among itself
	half := idxKernel("", "\tsetp.lt.u32 %p1, %r3, 16;\n\t@%p1 ret;\n\tshfl.sync.bfly.b32 %r4, %r3, 1, 31, -1;\n"+store32("%r4"))
	got, err = runOut(t, half, geo(1, 32), 32, Config{})
	if err != nil || got[17] != 16 || got[0] != 0 {
		t.Fatalf("got %v, %v", got, err)
	}
}

// A warp-synchronous instruction waits for its member lanes even when the code after a loop
// is laid out before the loop (so lanes leaving early run at a lower PC than the loop).
func TestWarpSyncWaitsForMembers(t *testing.T) {
	src := idxKernel("", `
	mov.u32 %r4, 0;
	bra.uni $loop;
$exit:
	shfl.sync.bfly.b32 %r5, %r4, 1, 31, -1;
	add.s32 %r6, %r4, %r5;
`+store32("%r6")+`	ret;
$loop:
	add.s32 %r4, %r4, 1;
	setp.ge.u32 %p1, %r4, %r3;
	@%p1 bra $exit;
	bra.uni $loop;
`)
	got, err := runOut(t, src, geo(1, 64), 64, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		l := i % 32
		if want := uint32(max(l, 1) + max(l^1, 1)); v != want {
			t.Fatalf("thread %d: %d, want %d", i, v, want)
		}
	}
}

// Results do not depend on the number of worker goroutines.
func TestWorkerInvariance(t *testing.T) {
	src := idxKernel(reduceDecls, reduceBody(true))
	a, err := runOut(t, src, geo(7, 128), 7*128, Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := runOut(t, src, geo(7, 128), 7*128, Config{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("thread %d: %d with 1 worker, %d with 4", i, a[i], b[i])
		}
	}
}

// A lane waiting at a barrier while the rest of its warp exits resumes after the barrier
// (and its warp's other lanes do not drag it to their own PC): here lane 0 of each warp.
func TestBarrierAfterWarpMatesExit(t *testing.T) {
	src := header + `.visible .entry t(.param .u64 po)
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<8>;
	ld.param.u64 %rd1, [po];
	mov.u32 %r1, %tid.x;
	and.b32 %r2, %r1, 31;
	setp.ne.u32 %p1, %r2, 0;
	@%p1 bra $done;
	bar.sync 0;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd1, %rd1, %rd2;
	st.global.u32 [%rd1], 9;
$done:
	ret;
}
`
	for _, weak := range []*Weak{nil, {Seed: 1}} {
		var mem testMem
		out := make([]byte, 4*96)
		po := mem.add(out, true)
		if _, err := runPTX(t, src, device.Geometry{Grid: dim(1), Block: dim(96)}, &mem, Config{Weak: weak}, ptrParams(po)...); err != nil {
			t.Fatal(err)
		}
		for i, v := range u32s(out) {
			if want := map[bool]uint32{true: 9}[i%32 == 0]; v != want {
				t.Fatalf("weak %v: thread %d wrote %d, want %d", weak != nil, i, v, want)
			}
		}
	}
}
