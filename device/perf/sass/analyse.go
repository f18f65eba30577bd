package sass

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// This file turns one function's SASS into Facts: a control-flow graph, the lane analysis of
// every register (lanes.go) over it to a fixed point, the loops (back edges), and for each
// region its memory instructions with their lane patterns and a single warp's critical path.

// ParamSlot is a kernel parameter's place in constant bank 0 (the PTX parameter list in
// order, each aligned to its size).
type ParamSlot struct {
	Off     int64 // byte offset in bank 0
	Size    int   // 4 or 8
	Pointer bool  // a .u64 parameter: an address
}

// ParamBase is where an architecture's kernel parameters start in constant bank 0.
func ParamBase(arch int) int64 {
	if arch >= 90 {
		return 0x210
	}
	return 0x160
}

// ParamSlots lays out PTX parameter types ("u64", "u32", "s32", "f32", …) from base.
func ParamSlots(base int64, types []string) []ParamSlot {
	out := make([]ParamSlot, len(types))
	off := base
	for i, t := range types {
		size := 4
		if strings.HasSuffix(t, "64") {
			size = 8
		}
		off = (off + int64(size) - 1) / int64(size) * int64(size)
		out[i] = ParamSlot{Off: off, Size: size, Pointer: t == "u64"}
		off += int64(size)
	}
	return out
}

// Nominal latencies in cycles, used only to choose each region's critical path at analysis
// time; the model prices the chosen path with a card's own figures (Card.Latency).
var nominal = struct{ global, shared, shuffle, cnst, local, sync int }{700, 30, 25, 12, 700, 20}

// Register file indices: R0–R255 (255 = RZ), UR0–UR63 (319 = URZ), P0–P7, UP0–UP7.
const (
	urBase = 256
	pBase  = 320
	upBase = 328
	nRegs  = 336
)

func regIndex(o Operand) (int, bool) {
	switch o.Kind {
	case OpReg:
		return o.Reg, o.Reg != RZ
	case OpUReg:
		return urBase + o.Reg, o.Reg != URZ
	case OpPred:
		return pBase + o.Reg, o.Reg != 7
	case OpUPred:
		return upBase + o.Reg, o.Reg != 7
	}
	return 0, false
}

// instruction classes
type class uint8

const (
	cALU class = iota
	cGlobalLoad
	cGlobalStore
	cGlobalAtomic
	cSharedLoad
	cSharedStore
	cLocalLoad
	cLocalStore
	cConstLoad
	cShuffle
	cSync
	cControl
	cNop
	cPrefetch // CCTL with a prefetch modifier: an L2 (PML2, PF2) or L1 (PF1) prefetch
)

var noDst = map[string]bool{"ST": true, "STG": true, "STS": true, "STL": true, "RED": true, "REDG": true, "BRA": true,
	"BRX": true, "JMP": true, "JMX": true, "EXIT": true, "RET": true, "CALL": true, "BSSY": true, "BSYNC": true,
	"WARPSYNC": true, "NOP": true, "BAR": true, "MEMBAR": true, "DEPBAR": true, "ERRBAR": true, "CGAERRBAR": true,
	"CCTL": true, "YIELD": true, "BPT": true, "NANOSLEEP": true, "BREAK": true, "ENDCOLLECTIVE": true, "KILL": true,
	"FENCE": true, "UCGABAR_ARV": true, "UCGABAR_WAIT": true, "ACQBULK": true}

var twoDst = map[string]bool{"ISETP": true, "FSETP": true, "DSETP": true, "HSETP2": true, "UISETP": true, "PLOP3": true,
	"UPLOP3": true, "PSETP": true}

var carryDst = map[string]bool{"IADD3": true, "UIADD3": true, "LEA": true, "ULEA": true, "IMAD": true, "UIMAD": true}

func classify(in *Inst) class {
	switch in.Op {
	case "LDG", "LD":
		return cGlobalLoad
	case "STG", "ST":
		return cGlobalStore
	case "ATOMG", "ATOM", "RED", "REDG":
		return cGlobalAtomic
	case "LDS", "LDSM", "ATOMS":
		return cSharedLoad
	case "STS":
		return cSharedStore
	case "LDL":
		return cLocalLoad
	case "STL":
		return cLocalStore
	case "LDC":
		return cConstLoad
	case "SHFL":
		return cShuffle
	case "BAR":
		return cSync
	case "NOP":
		return cNop
	case "CCTL":
		for _, m := range in.Mods {
			if m == "PML2" || m == "PF2" || m == "PF1" {
				return cPrefetch
			}
		}
	case "BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL", "BSSY", "BSYNC", "WARPSYNC", "BREAK", "ENDCOLLECTIVE", "YIELD":
		return cControl
	}
	return cALU
}

// width is the bytes per lane a memory instruction moves.
func width(in *Inst) int {
	for _, m := range in.Mods {
		switch m {
		case "128":
			return 16
		case "64":
			return 8
		case "U16", "S16":
			return 2
		case "U8", "S8":
			return 1
		}
	}
	return 4
}

// dstCount is how many leading operands an instruction writes.
func dstCount(in *Inst) int {
	if noDst[in.Op] || len(in.Args) == 0 {
		return 0
	}
	if twoDst[in.Op] {
		return min(2, len(in.Args))
	}
	switch in.Op {
	case "SHFL", "ATOMG", "ATOM":
		if in.Args[0].Kind == OpPred {
			return min(2, len(in.Args))
		}
		return 1
	}
	n := 1
	if carryDst[in.Op] && !in.Has("X") && in.Args[0].Kind != OpPred && in.Args[0].Kind != OpUPred {
		for n < len(in.Args) && (in.Args[n].Kind == OpPred || in.Args[n].Kind == OpUPred) {
			n++
		}
	}
	return n
}

// dstWidth is how many consecutive registers the first destination spans.
func dstWidth(in *Inst, c class) int {
	switch c {
	case cGlobalLoad, cSharedLoad, cLocalLoad, cConstLoad, cGlobalAtomic:
		return max(1, width(in)/4)
	}
	switch in.Op {
	case "IMAD", "UIMAD":
		if in.Has("WIDE") {
			return 2
		}
	case "ULDC":
		if in.Has("64") {
			return 2
		}
	case "CS2R":
		if !in.Has("32") {
			return 2
		}
	case "DADD", "DMUL", "DFMA", "DMNMX":
		return 2
	case "IMMA", "HMMA": // D of a warp's matrix product: m8n8 a lane's two values, m16n8 (f32) four
		if in.Has("8816") || in.Op == "HMMA" && !in.Has("F32") {
			return 2
		}
		return 4
	}
	return 1
}

// regsOf lists the registers an instruction writes and reads.
func regsOf(in *Inst, c class) (dst, src []int) {
	nd := dstCount(in)
	for i, a := range in.Args {
		r, ok := regIndex(a)
		if i < nd {
			if !ok {
				continue
			}
			w := 1
			if i == 0 {
				w = dstWidth(in, c)
			}
			for k := 0; k < w; k++ {
				dst = append(dst, r+k)
			}
			continue
		}
		switch a.Kind {
		case OpMem:
			if a.Reg >= 0 && a.Reg != RZ {
				src = append(src, a.Reg)
				if a.Wide {
					src = append(src, a.Reg+1)
				}
			}
			if a.UBase >= 0 && a.UBase != URZ {
				src = append(src, urBase+a.UBase)
			}
		case OpConst:
			if a.Index >= 0 && a.Index != RZ {
				src = append(src, a.Index)
			}
			if a.UBase >= 0 && a.UBase != URZ {
				src = append(src, urBase+a.UBase)
			}
		default:
			if !ok {
				continue
			}
			w := 1
			if (c == cGlobalStore || c == cSharedStore || c == cLocalStore || c == cGlobalAtomic) && a.Kind == OpReg {
				w = max(1, width(in)/4)
			}
			if (in.Op == "IMAD" || in.Op == "UIMAD") && in.Has("WIDE") && i == len(in.Args)-1 {
				w = 2
			}
			if (in.Op == "IMMA" || in.Op == "HMMA") && i == len(in.Args)-1 { // C: D's registers
				w = dstWidth(in, c)
			}
			for k := 0; k < w; k++ {
				src = append(src, r+k)
			}
		}
	}
	if in.Pred != "" {
		p := strings.TrimPrefix(in.Pred, "!")
		if p != "PT" && p != "UPT" {
			if strings.HasPrefix(p, "UP") {
				src = append(src, upBase+int(p[2]-'0'))
			} else {
				src = append(src, pBase+int(p[1]-'0'))
			}
		}
	}
	return dst, src
}

// block is a basic block: instructions [lo, hi) of the function.
type block struct {
	lo, hi int
	succ   []int
}

func branchTarget(in *Inst) (int, bool) {
	for _, a := range in.Args {
		if a.Kind == OpImm {
			return int(a.Imm), true
		}
	}
	return 0, false
}

func unconditional(in *Inst) bool { return in.Pred == "" || in.Pred == "PT" }

// fallbacks marks the instructions of f's divergence fallbacks: from each BRA.DIV's target to
// the first unconditional jump, exit or return at or after it.
func fallbacks(f *Function, index map[int]int) []bool {
	cold := make([]bool, len(f.Insts))
	for i := range f.Insts {
		in := &f.Insts[i]
		if in.Op != "BRA" || !slices.Contains(in.Mods, "DIV") {
			continue
		}
		t, ok := branchTarget(in)
		if !ok {
			continue
		}
		j, ok := index[t]
		if !ok || j <= i {
			continue
		}
		for ; j < len(f.Insts) && !cold[j]; j++ {
			cold[j] = true
			if x := &f.Insts[j]; unconditional(x) && (x.Op == "BRA" || x.Op == "EXIT" || x.Op == "RET") {
				break
			}
		}
	}
	return cold
}

// buildBlocks splits f into basic blocks and links them.
func buildBlocks(f *Function) ([]block, map[int]int) {
	index := map[int]int{} // address → instruction index
	for i := range f.Insts {
		index[f.Insts[i].Addr] = i
	}
	leader := make([]bool, len(f.Insts)+1)
	leader[0] = true
	for i := range f.Insts {
		in := &f.Insts[i]
		switch in.Op {
		case "BRA":
			if t, ok := branchTarget(in); ok {
				if j, ok := index[t]; ok {
					leader[j] = true
				}
			}
			leader[i+1] = true
		case "EXIT", "RET", "BRX", "JMP", "JMX":
			leader[i+1] = true
		}
	}
	var blocks []block
	at := map[int]int{} // first instruction index → block
	for i := 0; i < len(f.Insts); {
		j := i + 1
		for j < len(f.Insts) && !leader[j] {
			j++
		}
		at[i] = len(blocks)
		blocks = append(blocks, block{lo: i, hi: j})
		i = j
	}
	for b := range blocks {
		last := &f.Insts[blocks[b].hi-1]
		next, hasNext := at[blocks[b].hi]
		fall := hasNext
		switch last.Op {
		case "BRA":
			if t, ok := branchTarget(last); ok {
				if j, ok := index[t]; ok {
					blocks[b].succ = append(blocks[b].succ, at[j])
				}
			}
			fall = hasNext && !unconditional(last)
		case "EXIT", "RET", "JMP", "JMX":
			fall = hasNext && !unconditional(last)
		}
		if fall {
			blocks[b].succ = append(blocks[b].succ, next)
		}
	}
	return blocks, index
}

// state is every register's lane value at a point.
type state [nRegs]*val

type lanes struct {
	f      *Function
	params []ParamSlot
	in     []*state // per block: the state at its entry (nil: not reached yet)
}

func (l *lanes) operand(s *state, o Operand) *val {
	switch o.Kind {
	case OpReg, OpUReg:
		var v *val
		if o.Kind == OpReg && o.Reg == RZ || o.Kind == OpUReg && o.Reg == URZ {
			v = constVal(0)
		} else {
			r, _ := regIndex(o)
			v = s[r]
		}
		switch {
		case o.Neg:
			v = neg(v)
		case o.Not:
			if k, ok := v.constant(); ok {
				v = constVal(int64(^uint32(k)))
			} else {
				v = generic(v)
			}
		case o.Abs:
			v = generic(v)
		}
		return v
	case OpImm:
		return constVal(o.Imm)
	case OpConst:
		if o.UBase >= 0 {
			return uniformVal(0, noParam) // indexed by a uniform register: the same in every lane
		}
		if o.Index >= 0 {
			if o.Index == RZ {
				return uniformVal(0, noParam)
			}
			return generic(s[o.Index])
		}
		if o.Bank == 0 {
			for i, p := range l.params {
				if p.Pointer && o.Off == p.Off {
					return uniformVal(8, int8(i)) // allocations are 256-byte aligned
				}
			}
		}
		return uniformVal(0, noParam)
	case OpSpecial:
		switch o.Text {
		case "SRZ":
			return constVal(0)
		case "SR_TID.X":
			return laneVal(5)
		case "SR_LANEID":
			return laneVal(exact)
		}
		return uniformVal(0, noParam)
	case OpFloat:
		return uniformVal(0, noParam)
	}
	return nil
}

// values returns the value operands of in: those after its destinations, predicates left out.
func (l *lanes) values(s *state, in *Inst) []*val {
	var out []*val
	for _, a := range in.Args[dstCount(in):] {
		if a.Kind == OpPred || a.Kind == OpUPred || a.Kind == OpOther {
			continue
		}
		out = append(out, l.operand(s, a))
	}
	return out
}

// address is the lane value of a memory operand's address, or nil.
func (l *lanes) address(s *state, in *Inst) (*val, bool) {
	for _, a := range in.Args {
		if a.Kind != OpMem {
			continue
		}
		v := constVal(0)
		if a.Reg >= 0 && a.Reg != RZ {
			v = s[a.Reg]
			if a.Scale > 1 {
				v = mulConst(v, int64(a.Scale))
			}
		}
		if a.UBase >= 0 && a.UBase != URZ {
			v = add(v, s[urBase+a.UBase])
		}
		return add(v, constVal(a.Imm)), true
	}
	return nil, false
}

// step applies in to s.
func (l *lanes) step(s *state, in *Inst, c class) {
	dst, _ := regsOf(in, c)
	if len(dst) == 0 || dst[0] >= pBase {
		return
	}
	d := dst[0]
	var res, hi *val // the first destination, and the second of a pair
	vs := l.values(s, in)
	arg := func(i int) *val {
		if i < len(vs) {
			return vs[i]
		}
		return nil
	}
	switch c {
	case cGlobalLoad, cSharedLoad, cLocalLoad, cConstLoad, cGlobalAtomic:
		addr, _ := l.address(s, in)
		res = generic(addr)
		if c == cConstLoad {
			res = generic(vs...)
			if len(in.Args) > 1 && in.Args[1].Kind == OpConst && in.Args[1].Index < 0 {
				res = l.operand(s, in.Args[1]) // a parameter
			}
		}
		for k := 0; k < len(dst); k++ {
			if dst[k] < pBase {
				s[dst[k]] = res
			}
		}
		return
	case cShuffle:
		res = generic(vs...)
		for _, r := range dst {
			if r < pBase {
				s[r] = res
			}
		}
		return
	}
	op := in.Op
	if strings.HasPrefix(op, "U") && op != "UMOV" && len(op) > 1 {
		switch op[1:] {
		case "IADD3", "IMAD", "LEA", "SHF", "LOP3", "SEL", "MOV":
			op = op[1:]
		}
	}
	shiftAmount := func(v *val) (int64, bool) { k, ok := v.constant(); return k & 63, ok }
	switch op {
	case "MOV", "UMOV", "R2UR", "IMNMX":
		if op == "IMNMX" {
			res = generic(vs...)
		} else {
			res = arg(0)
		}
	case "IADD3":
		if in.Has("X") {
			res = generic(vs...)
		} else {
			res = add(add(arg(0), arg(1)), arg(2))
		}
	case "IMAD":
		switch {
		case in.Has("X") || in.Has("HI"):
			res = generic(vs...)
		default:
			res = add(mul(arg(0), arg(1)), arg(2))
			if in.Has("WIDE") {
				hi = generic(vs...)
			}
		}
	case "LEA":
		if in.Has("HI") {
			// LEA.HI d, a, b, c, s: b + the high word of (c:a) << s; with c = 0, b + a >> (32 − s)
			res = generic(vs...)
			if k, ok := shiftAmount(arg(3)); ok && !in.Has("X") && !in.Has("SX32") && k > 0 && k < 32 {
				if z, ok := arg(2).constant(); ok && z == 0 {
					res = add(shr(arg(0), 32-k, false), arg(1))
				}
			}
		} else if k, ok := shiftAmount(arg(2)); ok {
			res = add(mulConst(arg(0), 1<<k), arg(1))
		} else {
			res = generic(vs...)
		}
	case "SHF":
		k, ok := shiftAmount(arg(1))
		switch {
		case !ok:
			res = generic(vs...)
		case in.Has("L") && in.Has("U32"):
			res = mulConst(arg(0), 1<<k)
		case in.Has("R") && in.Has("HI") && (in.Has("U32") || in.Has("S32")):
			res = shr(arg(2), k, in.Has("S32"))
		case in.Has("R") && in.Has("U64") && !in.Has("HI"):
			if z, ok := arg(2).constant(); ok && z == 0 {
				res = shr(arg(0), k, false)
			} else {
				res = generic(vs...)
			}
		default:
			res = generic(vs...)
		}
	case "LOP3":
		if len(vs) >= 4 {
			if lut, ok := vs[3].constant(); ok {
				res = lop3(arg(0), arg(1), arg(2), lut)
				break
			}
		}
		res = generic(vs...)
	case "SEL", "FSEL":
		if same(arg(0), arg(1)) {
			res = arg(0)
		} else {
			res = generic(arg(0), arg(1))
		}
	case "S2R", "CS2R":
		res = l.operand(s, in.Args[len(in.Args)-1])
		if op == "CS2R" {
			hi = res
		}
	case "S2UR", "VOTE", "VOTEU", "UFLO":
		res = uniformVal(0, noParam)
	case "LDC", "ULDC":
		res = arg(0)
		if in.Has("64") {
			hi = uniformVal(0, noParam)
		}
	default:
		res = generic(vs...)
	}
	if in.Pred != "" && in.Pred != "PT" {
		res = join(s[d], res)
		if hi != nil && d+1 < pBase {
			hi = join(s[d+1], hi)
		}
	}
	s[d] = res
	if len(dst) > 1 && dst[1] < pBase && dst[1] == d+1 {
		s[d+1] = hi
	}
	for _, r := range dst[1:] {
		if r < pBase && r != d+1 {
			s[r] = nil
		}
	}
}

// run computes the lane state at every block's entry, to a fixed point.
func (l *lanes) run(blocks []block) {
	l.in = make([]*state, len(blocks))
	entry := &state{}
	l.in[0] = entry
	work := []int{0}
	queued := make([]bool, len(blocks))
	queued[0] = true
	for steps := 0; len(work) > 0 && steps < 50*len(blocks)+100; steps++ {
		b := work[0]
		work = work[1:]
		queued[b] = false
		s := *l.in[b]
		for i := blocks[b].lo; i < blocks[b].hi; i++ {
			in := &l.f.Insts[i]
			l.step(&s, in, classify(in))
		}
		for _, n := range blocks[b].succ {
			changed := false
			if l.in[n] == nil {
				c := s
				l.in[n] = &c
				changed = true
			} else {
				t := l.in[n]
				for r := range t {
					if j := join(t[r], s[r]); !same(j, t[r]) {
						t[r] = j
						changed = true
					}
				}
			}
			if changed && !queued[n] {
				work = append(work, n)
				queued[n] = true
			}
		}
	}
}

// pattern measures an access from its lane addresses (nil: not followed).
func pattern(a *Access, addr *val) {
	w := a.Width
	if addr == nil {
		a.Pattern = false
		a.Bytes = 32 * w
		a.Sectors = max(1, 32*w/32)
		a.Cycles = max(1, 32*w/128)
		return
	}
	a.Pattern = true
	switch a.Space {
	case Shared:
		bytes := map[int64]bool{}
		for l := 0; l < 32; l++ {
			for k := 0; k < w; k++ {
				bytes[addr.off[l]+int64(k)] = true
			}
		}
		a.Bytes, a.Cycles = len(bytes), bankCycles(addr, w)
	default:
		// the tag stage looks up 4 lines (16 sectors) a cycle; the data stage reads 32 banks of
		// 4 bytes a cycle, in phases of 128 bytes as shared memory does
		sectors, lines, bytes := map[int64]bool{}, map[int64]bool{}, map[int64]bool{}
		for l := 0; l < 32; l++ {
			o := addr.off[l]
			for k := int64(0); k < int64(w); k++ {
				bytes[o+k] = true
				sectors[(o+k)>>5] = true
				lines[(o+k)>>7] = true
			}
		}
		a.Bytes, a.Sectors = len(bytes), len(sectors)
		a.Cycles = max(1, (len(lines)+3)/4, (len(sectors)+15)/16, bankCycles(addr, w))
		if a.Op == Prefetch { // the tag stage alone: no data comes back to the SM
			a.Bytes, a.Sectors, a.Cycles = 128*len(lines), 4*len(lines), max(1, (len(lines)+3)/4)
		}
	}
}

// bankCycles is the cycles 32 banks of 4 bytes take to serve the lanes' accesses of w bytes:
// in phases of 128 bytes (32 lanes of up to 4 bytes, 16 of 8, 8 of 16), each taking as many
// cycles as the most distinct words any one bank holds (lanes reading one word share it).
func bankCycles(addr *val, w int) int {
	per := max(1, min(32, 128/w))
	cycles := 0
	for p := 0; p < 32; p += per {
		words := map[int64]bool{}
		bank := map[int64]int{}
		deg := 1
		for l := p; l < p+per; l++ {
			for k := 0; k < max(1, w/4); k++ {
				word := (addr.off[l] + int64(4*k)) >> 2
				if words[word] {
					continue
				}
				words[word] = true
				b := word & 31
				bank[b]++
				deg = max(deg, bank[b])
			}
		}
		cycles += deg
	}
	return cycles
}

// path is a critical path's composition while it is being built.
type path struct {
	t      int // its length at the nominal latencies
	issue  int
	alu    int
	shared int
	shfl   int
	cnst   int
	local  int
	sync   int
	global map[int]int
}

func (p path) plus(c class, lat int, param int) path {
	q := p
	q.t += lat
	switch c {
	case cGlobalLoad, cGlobalAtomic:
		q.global = map[int]int{}
		for k, v := range p.global {
			q.global[k] = v
		}
		q.global[param]++
	case cSharedLoad:
		q.shared++
	case cShuffle:
		q.shfl++
	case cConstLoad:
		q.cnst++
	case cLocalLoad:
		q.local++
	case cSync:
		q.sync++
	default:
		q.alu += lat
	}
	return q
}

// aluLatency is the dependent-issue latency of an arithmetic instruction, in cycles.
// mmaLatency is a warp matrix product's latency in cycles (mma.sync on the tensor cores:
// 16–30 cycles in Ampere and Hopper microbenchmarks; to calibrate on the first GPU run).
const mmaLatency = 20

func aluLatency(in *Inst) int {
	switch in.Op {
	case "MUFU":
		return 20
	case "I2F", "F2I", "F2F", "FRND", "POPC", "FLO", "BREV", "I2I", "F2FP":
		return 6
	case "DADD", "DMUL", "DFMA":
		return 8
	case "IMMA", "HMMA":
		return mmaLatency
	case "S2R", "S2UR", "CS2R":
		return 20
	case "ULDC", "UMOV", "UIADD3", "USHF", "ULOP3", "UIMAD", "ULEA", "USEL", "UPRMT", "UISETP":
		return 2
	}
	return 4
}

// walk is one warp issuing a region's instructions in order, each as soon as its inputs are
// ready; ready carries over from one call to the next (a loop's iterations).
type walker struct {
	f      *Function
	params map[int]int // instruction index → parameter of its global access
	ready  [nRegs]path
	now    path
}

func (w *walker) walk(idx []int) {
	for _, i := range idx {
		in := &w.f.Insts[i]
		c := classify(in)
		if c == cNop {
			continue
		}
		dst, src := regsOf(in, c)
		start := w.now
		start.t++
		start.issue++
		for _, r := range src {
			if w.ready[r].t > start.t {
				start = w.ready[r]
			}
		}
		w.now = start
		var done path
		switch c {
		case cGlobalLoad, cGlobalAtomic:
			done = start.plus(c, nominal.global, w.params[i])
		case cSharedLoad:
			done = start.plus(c, nominal.shared, 0)
		case cShuffle:
			done = start.plus(c, nominal.shuffle, 0)
		case cConstLoad:
			done = start.plus(c, nominal.cnst, 0)
		case cLocalLoad:
			done = start.plus(c, nominal.local, 0)
		case cSync:
			w.now = start.plus(c, nominal.sync, 0)
			continue
		default:
			done = start.plus(cALU, aluLatency(in), 0)
		}
		for _, r := range dst {
			w.ready[r] = done
		}
	}
}

func (p path) minus(q path) Path {
	out := Path{Issue: p.issue - q.issue, ALU: p.alu - q.alu, Shared: p.shared - q.shared, Shuffle: p.shfl - q.shfl,
		Const: p.cnst - q.cnst, Local: p.local - q.local, Sync: p.sync - q.sync}
	keys := map[int]bool{}
	for k := range p.global {
		keys[k] = true
	}
	for k := range q.global {
		keys[k] = true
	}
	var ks []int
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	for _, k := range ks {
		if n := p.global[k] - q.global[k]; n != 0 {
			out.Global = append(out.Global, Waits{Param: k, N: n})
		}
	}
	return out
}

// Analyse computes the facts of function f, whose kernel parameters lie at params in
// constant bank 0. Resources (registers, shared memory, stack) are the caller's to fill in.
func Analyse(f *Function, params []ParamSlot) (*Facts, error) {
	if len(f.Insts) == 0 {
		return nil, fmt.Errorf("%s: no instructions", f.Name)
	}
	blocks, index := buildBlocks(f)
	l := &lanes{f: f, params: params}
	l.run(blocks)

	// memory accesses, with the lane state before each instruction
	access := map[int]*Access{}
	accParam := map[int]int{}
	for b := range blocks {
		if l.in[b] == nil {
			continue // unreachable from the entry (a subroutine called with CALL)
		}
		s := *l.in[b]
		for i := blocks[b].lo; i < blocks[b].hi; i++ {
			in := &f.Insts[i]
			c := classify(in)
			var a *Access
			switch c {
			case cGlobalLoad, cGlobalStore, cGlobalAtomic, cSharedLoad, cSharedStore, cLocalLoad, cLocalStore, cPrefetch:
				a = &Access{Addr: in.Addr, Width: width(in), Param: noParam}
				switch c {
				case cGlobalStore, cSharedStore, cLocalStore:
					a.Op = Store
				case cGlobalAtomic:
					a.Op = Atomic
				case cPrefetch:
					a.Op, a.Width = Prefetch, 1 // the lanes' addresses name the lines asked for
				}
				switch c {
				case cSharedLoad, cSharedStore:
					a.Space = Shared
					if in.Op == "ATOMS" {
						a.Op = Atomic
					}
				case cLocalLoad, cLocalStore:
					a.Space = Local
				}
				addr, _ := l.address(&s, in)
				if addr != nil && a.Space == Global {
					a.Param = int(addr.param)
				}
				pattern(a, addr)
				access[i] = a
				accParam[i] = a.Param
			}
			l.step(&s, in, c)
		}
	}
	// accesses in unreachable code: coalesced, buffer unknown
	for i := range f.Insts {
		in := &f.Insts[i]
		if _, ok := access[i]; ok {
			continue
		}
		switch c := classify(in); c {
		case cGlobalLoad, cGlobalStore, cGlobalAtomic:
			a := &Access{Addr: in.Addr, Width: width(in), Param: noParam}
			if c == cGlobalStore {
				a.Op = Store
			} else if c == cGlobalAtomic {
				a.Op = Atomic
			}
			pattern(a, nil)
			access[i] = a
			accParam[i] = noParam
		}
	}

	// Cold code, in no region: the divergence fallbacks — where a BRA.DIV jumps when the warp
	// has diverged, ptxas puts the warp-synchronous instructions that follow it in their slow
	// form (WARPSYNC.COLLECTIVE … ENDCOLLECTIVE) after the function's exit, each run ending in
	// a jump back, which closes no loop — and the subroutines reached only by CALL (the
	// IEEE division's and square root's slow paths for special operands).
	cold := fallbacks(f, index)
	for b := range blocks {
		if l.in[b] == nil {
			for i := blocks[b].lo; i < blocks[b].hi; i++ {
				cold[i] = true
			}
		}
	}

	// loops: a backward branch closes the loop from its target to itself
	type loop struct{ lo, hi int } // instruction indices, inclusive
	var loops []loop
	for i := range f.Insts {
		in := &f.Insts[i]
		if in.Op != "BRA" || cold[i] {
			continue
		}
		if t, ok := branchTarget(in); ok && t < in.Addr { // (t == Addr: the idle loop after EXIT)
			if j, ok := index[t]; ok {
				loops = append(loops, loop{j, i})
			}
		}
	}
	// merge loops with the same head (several back edges), keep the widest
	sort.Slice(loops, func(a, b int) bool {
		if loops[a].lo != loops[b].lo {
			return loops[a].lo < loops[b].lo
		}
		return loops[a].hi > loops[b].hi
	})
	var merged []loop
	for _, lp := range loops {
		if n := len(merged); n > 0 && merged[n-1].lo == lp.lo {
			continue
		}
		merged = append(merged, lp)
	}
	loops = merged
	// each instruction belongs to the innermost loop holding it (-1: none)
	owner := make([]int, len(f.Insts))
	depth := make([]int, len(loops))
	for i := range owner {
		owner[i] = -1
		best := -1
		for k, lp := range loops {
			if lp.lo <= i && i <= lp.hi && (best < 0 || lp.hi-lp.lo < loops[best].hi-loops[best].lo) {
				best = k
			}
		}
		owner[i] = best
	}
	for k, lp := range loops {
		for _, o := range loops {
			if o.lo <= lp.lo && lp.hi <= o.hi {
				depth[k]++ // itself included
			}
		}
	}

	facts := &Facts{Entry: f.Name, Instrs: len(f.Insts)}
	region := func(idx []int, isLoop bool, d int) Region {
		r := Region{Loop: isLoop, Depth: d}
		if len(idx) > 0 {
			r.Start, r.End = f.Insts[idx[0]].Addr, f.Insts[idx[len(idx)-1]].Addr
		}
		for _, i := range idx {
			if classify(&f.Insts[i]) != cNop {
				r.Instrs++
			}
			if a, ok := access[i]; ok {
				r.Access = append(r.Access, *a)
			}
		}
		w := &walker{f: f, params: accParam}
		w.walk(idx)
		if !isLoop {
			r.Path = w.now.minus(path{})
			return r
		}
		first := w.now
		w.walk(idx)
		r.Path = w.now.minus(first)
		return r
	}
	var straight []int
	for i, o := range owner {
		if o < 0 && !cold[i] {
			straight = append(straight, i)
		}
	}
	facts.Regions = append(facts.Regions, region(straight, false, 0))
	for k := range loops {
		var idx []int
		for i, o := range owner {
			if o == k {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		facts.Regions = append(facts.Regions, region(idx, true, depth[k]))
	}
	return facts, nil
}
