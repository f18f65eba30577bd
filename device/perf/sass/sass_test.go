package sass

import (
	"fmt"
	"strings"
	"testing"
)

// A kernel in nvdisasm's format: a loop in which each lane loads 16 bytes at 16·lane of a
// pointer parameter, and 2 bytes at 34·lane + 2 of another, then a 4-byte store by every lane
// after the loop.
const sample = `
//--------------------- .text.k   --------------------------
        .section        .text.k,"ax",@progbits
k:
.text.k:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/                   LOP3.LUT R2, R0, 0x1f, RZ, 0xc0, !PT ;
        /*0030*/                   LDC.64 R4, c[0x0][0x210] ;
        /*0040*/                   IMAD.WIDE.U32 R6, R2, 0x10, R4 ;
        /*0050*/                   IMAD R8, R2, 0x22, RZ ;
        /*0060*/                   LDC.64 R10, c[0x0][0x218] ;
        /*0070*/                   IADD3 R12, P0, R8, R10, RZ ;
        /*0080*/                   IMAD.X R13, RZ, RZ, R11, P0 ;
        /*0090*/                   MOV R3, RZ ;
.L_x_0:
        /*00a0*/                   LDG.E.128.CONSTANT R16, [R6.64] ;
        /*00b0*/                   LDG.E.U16.CONSTANT R20, [R12.64+0x2] ;
        /*00c0*/                   IADD3 R6, P1, R6, 0x200, RZ ;
        /*00d0*/                   IMAD.X R7, RZ, RZ, R7, P1 ;
        /*00e0*/                   IADD3 R3, R3, R16, R20 ;
        /*00f0*/                   ISETP.NE.AND P2, PT, R3, RZ, PT ;
        /*0100*/               @P2 BRA ` + "`" + `(.L_x_0) ;
        /*0110*/                   STG.E [R6.64], R3 ;
        /*0120*/                   EXIT ;
.L_x_1:
        /*0130*/                   BRA ` + "`" + `(.L_x_1);
`

func TestParseAndAnalyse(t *testing.T) {
	fns, err := ParseSASS(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 1 || fns[0].Name != "k" || len(fns[0].Insts) != 20 {
		t.Fatalf("parsed %+v", fns)
	}
	if in := fns[0].Insts[16]; in.Op != "BRA" || in.Pred != "P2" || in.Args[0].Kind != OpImm || in.Args[0].Imm != 0xa0 {
		t.Fatalf("branch: %+v", in)
	}
	f, err := Analyse(&fns[0], ParamSlots(ParamBase(90), []string{"u64", "u64"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Regions) != 2 || f.Regions[1].Start != 0xa0 || f.Regions[1].End != 0x100 || !f.Regions[1].Loop {
		t.Fatalf("regions %+v", f.Regions)
	}
	acc := f.Regions[1].Access
	want := []Access{
		// 32 lanes × 16 contiguous bytes: 16 sectors in 4 lines; 4 phases of 8 lanes, no conflict
		{Addr: 0xa0, Op: Load, Space: Global, Param: 0, Width: 16, Pattern: true, Bytes: 512, Sectors: 16, Cycles: 4},
		// 2 bytes every 34: 64 bytes over 1088, 32 sectors in 9 lines: 3 tag cycles
		{Addr: 0xb0, Op: Load, Space: Global, Param: 1, Width: 2, Pattern: true, Bytes: 64, Sectors: 32, Cycles: 3},
	}
	if len(acc) != len(want) {
		t.Fatalf("loop accesses %+v", acc)
	}
	for i := range want {
		if acc[i] != want[i] {
			t.Errorf("access %d: %+v, want %+v", i, acc[i], want[i])
		}
	}
	// the loop waits for its two loads together, once an iteration
	n := 0
	for _, w := range f.Regions[1].Path.Global {
		n += w.N
	}
	if n != 1 {
		t.Errorf("loop path %+v: want one global wait an iteration", f.Regions[1].Path)
	}
	// the store after the loop: 4 bytes every 16, 16 sectors, 4 lanes a bank
	if s := f.Regions[0].Access; len(s) != 1 || s[0].Op != Store || s[0].Param != 0 || s[0].Sectors != 16 || s[0].Cycles != 4 {
		t.Errorf("straight accesses %+v", s)
	}
}

func TestBankCycles(t *testing.T) {
	for _, c := range []struct {
		stride, width int64
		want          int
	}{
		{4, 4, 1},    // consecutive words
		{8, 4, 2},    // every other word: two lanes a bank
		{128, 4, 32}, // one bank
		{0, 4, 1},    // a broadcast
		{16, 16, 4},  // 4 phases of 8 lanes
		{32, 16, 8},  // 2-way conflict in each phase
	} {
		v := &val{align: exact}
		for l := range v.off {
			v.off[l] = int64(l) * c.stride
		}
		if got := bankCycles(v, int(c.width)); got != c.want {
			t.Errorf("stride %d width %d: %d cycles, want %d", c.stride, c.width, got, c.want)
		}
	}
}

func TestLanesArithmetic(t *testing.T) {
	tid := laneVal(5)                                            // 32·w + lane
	u := add(and(tid, 31), mulConst(uniformVal(0, noParam), 32)) // lane + 32k
	blk := shr(u, 3, false)                                      // u / 8: 4k + lane/8
	sub := and(u, 7)                                             // u mod 8
	if blk == nil || sub == nil || blk.off[9] != 1 || sub.off[9] != 1 || sub.align != exact || blk.align != 2 {
		t.Fatalf("u/8 %+v, u%%8 %+v", blk, sub)
	}
	p := add(uniformVal(8, 0), mulConst(blk, 292))
	if p.param != 0 || p.off[8] != 292 {
		t.Errorf("address %+v", p)
	}
	if join(constVal(0), constVal(32)).align != 5 || join(laneVal(exact), constVal(0)) != nil {
		t.Error("join")
	}
	// q8_0's 34-byte blocks read by aligned words: buffer 1 plus a column's offset (a multiple
	// of 2 only) plus 34 per lane, aligned down to 4 bytes, keeps its buffer and the lanes'
	// spread; a mask the common part's alignment covers stays exact
	q := add(add(uniformVal(8, 1), uniformVal(1, noParam)), mulConst(and(tid, 31), 34))
	if w := and(q, ^int64(3)); w == nil || w.param != 1 || w.off[1] != 32 || w.off[3] != 100 {
		t.Errorf("a block address aligned down to a word: %+v", w)
	}
	if w := and(p, ^int64(3)); w == nil || w.param != 0 || w.align != p.align || w.off[8] != 292 {
		t.Errorf("an aligned address masked: %+v", w)
	}
	// a bitfield insert (LOP3.LUT 0xe2: b ? a : c) of a chunk's base 32k over the lane: 32k + lane
	k32 := mulConst(uniformVal(0, noParam), 32)
	if v := lop3(k32, constVal(int64(^uint32(31))), laneVal(exact), 0xe2); v == nil || v.align != 5 || v.off[7] != 7 {
		t.Errorf("a bitfield insert: %+v", v)
	}
	if v := lop3(k32, constVal(31), laneVal(5), 0xf8); v == nil || v.align != 5 || v.off[7] != 7 { // a | b & c
		t.Errorf("an insert by or and mask: %+v", v)
	}
	if v := lop3(k32, constVal(int64(^uint32(31))), laneVal(exact), 0xe4); v != nil && v.uniform() {
		t.Errorf("another LUT taken for the insert: %+v", v)
	}
	// an aligned base or'ed with lane-dependent low bits (LOP3.LUT 0xfc, c = 0): a sum
	base := uniformVal(8, 0)
	if v := lop3(base, mulConst(and(tid, 7), 4), constVal(0), 0xfc); v == nil || v.param != 0 || v.off[3] != 12 || v.align != 8 {
		t.Errorf("an or of disjoint bits: %+v", v)
	}
	if v := lop3(base, add(laneVal(exact), constVal(300)), constVal(0), 0xfc); v != nil && v.param == 0 {
		t.Errorf("an or past the base's alignment kept the buffer: %+v", v)
	}
	if w := and(q, 0xff); w != nil && w.param != noParam {
		t.Errorf("a low-bits mask of an address is no address: %+v", w)
	}
}

// TestUnprinted: an instruction nvdisasm leaves out, with its label (sm_90's VIMNMX with an
// immediate), becomes a placeholder at its address, and a branch to it (the only one of the
// function) or a BSSY's reconvergence point (the first after it) finds it.
func TestUnprinted(t *testing.T) {
	const text = `
        .section        .text.k,"ax",@progbits
.text.k:
        /*0000*/                   MOV R3, RZ ;
        /*0010*/                   BSSY B0, ` + "`" + `(.L_x_7) ;
        /*0020*/                   IADD3 R3, R3, 0x1, RZ ;
        /*0040*/                   ISETP.NE.AND P0, PT, R3, 0x8, PT ;
        /*0050*/               @P0 BRA ` + "`" + `(.L_x_7) ;
        /*0060*/                   EXIT ;
`
	fs, err := ParseSASS(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	f := fs[0]
	if len(f.Insts) != 7 || f.Insts[3].Op != Unprinted || f.Insts[3].Addr != 0x30 {
		t.Fatalf("instructions %+v", f.Insts)
	}
	for _, i := range []int{1, 5} {
		if a := f.Insts[i].Args[len(f.Insts[i].Args)-1]; a.Kind != OpImm || a.Imm != 0x30 {
			t.Errorf("%s: target %+v, want 0x30", f.Insts[i].Text, a)
		}
	}
	// two placeholders: a branch's target is ambiguous
	two := strings.Replace(text, "/*0060*/", "/*0080*/", 1)
	if _, err := ParseSASS(strings.NewReader(two)); err == nil || !strings.Contains(err.Error(), "not defined") {
		t.Errorf("two placeholders: %v", err)
	}
}

// TestPrefetchAccess: an L2 prefetch (CCTL.E.PML2) is an access of its own kind, attributed to
// the parameter its address derives from, whose cost is the tag stage's alone: 32 lanes 16
// bytes apart name four lines, one cycle.
func TestPrefetchAccess(t *testing.T) {
	src := strings.Replace(sample, "        /*00b0*/                   LDG.E.U16.CONSTANT R20, [R12.64+0x2] ;",
		"        /*00b0*/                   CCTL.E.PML2 [R6.64+0x1000] ;", 1)
	fns, err := ParseSASS(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Analyse(&fns[0], ParamSlots(ParamBase(90), []string{"u64", "u64"}))
	if err != nil {
		t.Fatal(err)
	}
	var got []Access
	for _, a := range f.Regions[1].Access {
		if a.Op == Prefetch {
			got = append(got, a)
		}
	}
	if len(got) != 1 || got[0].Param != 0 || got[0].Space != Global || got[0].Bytes != 512 || got[0].Cycles != 1 {
		t.Fatalf("prefetch accesses %+v", got)
	}
	if len(f.Regions[1].Path.Global) != 1 {
		t.Errorf("the loop waits for %+v: a prefetch is never waited for", f.Regions[1].Path.Global)
	}
}

// Register operands with every suffix nvdisasm prints are registers: a half of a register
// (R20.H0_H0, which HADD2.F32 widens fp16 from), a reuse flag after an absolute value's bars.
// Reading one as anything else would drop the dependency on the load that wrote it.
func TestRegisterOperands(t *testing.T) {
	for _, c := range []struct {
		text string
		reg  int
		neg  bool
		abs  bool
	}{
		{"R7", 7, false, false},
		{"R20.H0_H0", 20, false, false},
		{"-R20.H1_H1", 20, true, false},
		{"R5.reuse.H1_H1", 5, false, false},
		{"|R0|.reuse", 0, false, true},
		{"-R3.reuse", 3, true, false},
	} {
		o, err := parseOperand(c.text)
		if err != nil || o.Kind != OpReg || o.Reg != c.reg || o.Neg != c.neg || o.Abs != c.abs {
			t.Errorf("%q: %+v (%v), want register %d", c.text, o, err, c.reg)
		}
	}
}

// A loop that widens each loaded fp16 value with HADD2.F32 (the conversion ptxas emits for a
// half's .H0_H0 operand) waits for its load every iteration: the path through the loop holds
// the global load.
func TestHalfOperandDependency(t *testing.T) {
	const loop = `
k:
.text.k:
        /*0000*/                   LDC.64 R4, c[0x0][0x210] ;
        /*0010*/                   MOV R3, RZ ;
.L_x_0:
        /*0020*/                   LDG.E.U16.CONSTANT R16, [R4.64] ;
        /*0030*/                   IADD3 R4, P1, R4, 0x2, RZ ;
        /*0040*/                   IMAD.X R5, RZ, RZ, R5, P1 ;
        /*0050*/                   HADD2.F32 R20, -RZ, R16.H0_H0 ;
        /*0060*/                   FADD R3, R3, R20 ;
        /*0070*/                   FSETP.NEU.AND P2, PT, R3, RZ, PT ;
        /*0080*/               @P2 BRA ` + "`" + `(.L_x_0) ;
        /*0090*/                   EXIT ;
`
	fns, err := ParseSASS(strings.NewReader(loop))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Analyse(&fns[0], ParamSlots(ParamBase(90), []string{"u64"}))
	if err != nil {
		t.Fatal(err)
	}
	var r *Region
	for i := range f.Regions {
		if f.Regions[i].Loop {
			r = &f.Regions[i]
		}
	}
	if r == nil {
		t.Fatalf("no loop in %+v", f.Regions)
	}
	n := 0
	for _, w := range r.Path.Global {
		n += w.N
	}
	if n != 1 {
		t.Errorf("loop path %+v: want the widened load's wait once an iteration", r.Path)
	}
}

// Cold code is in no region: a shuffle's divergence fallback (where BRA.DIV jumps, after the
// exit, ending in a jump back that closes no loop) and a subroutine reached only by CALL (an
// IEEE division's slow path). The one loop is the real one, and the shuffle and the fallback's
// instructions are counted once: the loop's own.
func TestColdCode(t *testing.T) {
	const text = `
k:
.text.k:
        /*0000*/                   MOV R3, RZ ;
        /*0010*/                   MOV R2, RZ ;
.L_x_0:
        /*0020*/                   IADD3 R2, R2, 0x1, RZ ;
        /*0030*/                   BRA.DIV UR4, ` + "`" + `(.L_x_2) ;
        /*0040*/                   SHFL.BFLY PT, R5, R2, 0x1, 0x1f ;
.L_x_1:
        /*0050*/                   FADD R3, R3, R5 ;
        /*0060*/                   ISETP.NE.AND P0, PT, R2, 0x8, PT ;
        /*0070*/               @P0 BRA ` + "`" + `(.L_x_0) ;
        /*0080*/                   FCHK P1, R3, R2 ;
        /*0090*/              @!P1 BRA ` + "`" + `(.L_x_4) ;
        /*00a0*/                   CALL.REL.NOINC ` + "`" + `(.L_x_3) ;
.L_x_4:
        /*00b0*/                   EXIT ;
.L_x_2:
        /*00c0*/                   WARPSYNC.COLLECTIVE R16, ` + "`" + `(.L_x_5) ;
        /*00d0*/                   SHFL.BFLY P1, R5, R2, R18, R19 ;
.L_x_5:
        /*00e0*/                   ENDCOLLECTIVE ;
        /*00f0*/                   BRA ` + "`" + `(.L_x_1) ;
.L_x_3:
        /*0100*/                   FFMA R3, R3, R3, R3 ;
        /*0110*/                   RET.REL.NODEC R2 ` + "`" + `(k) ;
`
	fns, err := ParseSASS(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Analyse(&fns[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	var loops []Region
	total := 0
	for _, r := range f.Regions {
		total += r.Instrs
		if r.Loop {
			loops = append(loops, r)
		}
	}
	if len(loops) != 1 || loops[0].Start != 0x20 || loops[0].End != 0x70 {
		t.Fatalf("loops %+v: want the one at 0x20 … 0x70", loops)
	}
	// the fallback (0xc0 … 0xf0) and the subroutine (0x100, 0x110) are in no region
	for _, r := range f.Regions {
		if r.End >= 0xc0 {
			t.Errorf("region %#x … %#x holds cold code", r.Start, r.End)
		}
	}
	if total > 12 {
		t.Errorf("%d instructions in the regions: the cold code's counted", total)
	}
}

// A warp matrix product writes D's registers (two for IMMA.8816, four for an f32 HMMA.16816),
// reads C's as many, and its results come after the tensor cores' latency, not an ALU's.
func TestMatrixProductOperands(t *testing.T) {
	for _, c := range []struct {
		text     string
		dst, src []int
	}{
		{"IMMA.8816.S8.S8 R10, R2.ROW, R3.COL, R12", []int{10, 11}, []int{2, 3, 12, 13}},
		{"IMMA.8816.S8.S8 R10, R2.ROW, R3.COL, RZ", []int{10, 11}, []int{2, 3}},
		{"HMMA.16816.F32 R20, R4, R8, R20", []int{20, 21, 22, 23}, []int{4, 8, 20, 21, 22, 23}},
	} {
		in, err := parseInst(c.text)
		if err != nil {
			t.Fatal(err)
		}
		dst, src := regsOf(&in, classify(&in))
		if fmt.Sprint(dst) != fmt.Sprint(c.dst) || fmt.Sprint(src) != fmt.Sprint(c.src) {
			t.Errorf("%s: writes %v and reads %v, want %v and %v", c.text, dst, src, c.dst, c.src)
		}
		if l := aluLatency(&in); l != mmaLatency {
			t.Errorf("%s: latency %d, want mmaLatency", c.text, l)
		}
	}
}
