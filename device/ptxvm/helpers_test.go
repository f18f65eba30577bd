package ptxvm

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"verity/device"
)

const header = ".version 7.8\n.target sm_80\n.address_size 64\n\n"

// testMem is global memory for tests: buffers at distinct addresses with gaps between.
type testMem struct {
	Regions
	next uint64
}

func (m *testMem) add(data []byte, writable bool) uint64 {
	if m.next == 0 {
		m.next = 1 << 32
	}
	p := m.next
	m.next = (p + uint64(len(data)) + 4096 + 255) &^ 255
	if err := m.Add(p, data, writable); err != nil {
		panic(err)
	}
	return p
}

func u64s(b []byte) []uint64 {
	out := make([]uint64, len(b)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out
}

func u64Bytes(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

func u32s(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

func u32Bytes(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func ptrParams(ps ...uint64) []device.Param {
	out := make([]device.Param, len(ps))
	for i, p := range ps {
		out[i] = device.Param{Name: "p", Kind: device.U64, Bits: p}
	}
	return out
}

func dim(x uint32) device.Dim3 { return device.Dim3{X: x, Y: 1, Z: 1} }

// runPTX loads src and launches entry "t".
func runPTX(t testing.TB, src string, g device.Geometry, mem Memory, cfg Config, ps ...device.Param) (Stats, error) {
	t.Helper()
	m, err := Load(src)
	if err != nil {
		t.Fatalf("load: %v\n%s", err, numbered(src))
	}
	k := m.Kernel("t")
	if k == nil {
		t.Fatalf("no entry t")
	}
	return k.Launch(g, ps, mem, cfg)
}

func numbered(src string) string {
	var sb strings.Builder
	for i, l := range strings.Split(src, "\n") {
		fmt.Fprintf(&sb, "%4d  %s\n", i+1, l)
	}
	return sb.String()
}

// aluKernel wraps body in a kernel where thread i reads three 64-bit inputs in[3i..3i+2]
// into %rd1..%rd3 (also as %r1..%r3, %f1..%f3, %fd1..%fd3, %rs1..%rs3 and %p1..%p3 = bit 0)
// and stores %rd0 to out[i]. Results are moved into %rd0 with the out* snippets.
func aluKernel(body string) string {
	return header + `.visible .entry t(.param .u64 t_in, .param .u64 t_out, .param .u32 t_n)
{
	.reg .pred %p<8>;
	.reg .b16 %rs<8>;
	.reg .b32 %r<16>;
	.reg .b64 %rd<16>;
	.reg .f32 %f<8>;
	.reg .f64 %fd<8>;
	ld.param.u64 %rd10, [t_in];
	ld.param.u64 %rd11, [t_out];
	mov.u32 %r10, %ctaid.x;
	mov.u32 %r11, %ntid.x;
	mov.u32 %r12, %tid.x;
	mad.lo.s32 %r13, %r10, %r11, %r12;
	ld.param.u32 %r14, [t_n];
	setp.ge.u32 %p7, %r13, %r14;
	@%p7 bra $done;
	mul.wide.u32 %rd12, %r13, 24;
	add.s64 %rd12, %rd10, %rd12;
	ld.global.u64 %rd1, [%rd12];
	ld.global.u64 %rd2, [%rd12+8];
	ld.global.u64 %rd3, [%rd12+16];
	cvt.u32.u64 %r1, %rd1;
	cvt.u32.u64 %r2, %rd2;
	cvt.u32.u64 %r3, %rd3;
	mov.b32 %f1, %r1;
	mov.b32 %f2, %r2;
	mov.b32 %f3, %r3;
	mov.b64 %fd1, %rd1;
	mov.b64 %fd2, %rd2;
	mov.b64 %fd3, %rd3;
	cvt.u16.u64 %rs1, %rd1;
	cvt.u16.u64 %rs2, %rd2;
	cvt.u16.u64 %rs3, %rd3;
	and.b32 %r14, %r1, 1;
	setp.ne.s32 %p1, %r14, 0;
	and.b32 %r14, %r2, 1;
	setp.ne.s32 %p2, %r14, 0;
	and.b32 %r14, %r3, 1;
	setp.ne.s32 %p3, %r14, 0;
	mov.u64 %rd0, 0;
	` + body + `
	mul.wide.u32 %rd12, %r13, 8;
	add.s64 %rd12, %rd11, %rd12;
	st.global.u64 [%rd12], %rd0;
$done:
	ret;
}
`
}

// Result snippets for aluKernel bodies.
const (
	out32  = "\n\tcvt.u64.u32 %rd0, %r0;"
	outF32 = "\n\tmov.b32 %r0, %f0;\n\tcvt.u64.u32 %rd0, %r0;"
	outF64 = "\n\tmov.b64 %rd0, %fd0;"
	out16  = "\n\tcvt.u64.u16 %rd0, %rs0;"
	outP   = "\n\tselp.u64 %rd0, 1, 0, %p0;"
)

// evalALU runs body over the input triples (one thread each) and returns each %rd0.
func evalALU(t testing.TB, body string, in [][3]uint64) []uint64 {
	t.Helper()
	var flat []uint64
	for _, x := range in {
		flat = append(flat, x[0], x[1], x[2])
	}
	n := len(in)
	var mem testMem
	pin := mem.add(u64Bytes(flat), false)
	out := make([]byte, 8*n)
	pout := mem.add(out, true)
	blocks := uint32((n + 127) / 128)
	ps := append(ptrParams(pin, pout), device.Param{Name: "n", Kind: device.U32, Bits: uint64(n)})
	if _, err := runPTX(t, aluKernel(body), device.Geometry{Grid: dim(blocks), Block: dim(128)}, &mem, Config{Workers: 1}, ps...); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return u64s(out)[:n]
}
