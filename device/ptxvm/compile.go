package ptxvm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// compile.go turns a parsed entry function into a Kernel: every register, immediate and
// special register becomes a slot in the warp's register file (32 lanes of 64 bits each),
// labels become instruction indices, and each instruction becomes an exec closure chosen by
// its family's builder (the ops_*.go files).

// execFn runs one instruction for the lanes in m.
type execFn func(w *warp, m uint32)

type ctlKind uint8

const (
	ctlNone    ctlKind = iota
	ctlBra             // branch to target for the lanes in the guard mask
	ctlExit            // the lanes end (exit, or ret from the entry)
	ctlBar             // the lanes wait at barrier barID until barCount threads arrive
	ctlArrive          // the lanes arrive at barrier barID without waiting
	ctlWarpReq         // like ctlNone, but all member lanes of the warp must execute it together
)

// inst is one compiled instruction.
type inst struct {
	fn       execFn
	ctl      ctlKind
	target   int32 // branch target
	barID    int32 // slot holding the barrier number
	barCount int32 // slot holding the thread count, or -1 (all threads)
	member   int32 // slot holding a warp member mask (warp-synchronous instructions), or -1
	guard    int32 // predicate slot, or -1
	guardNeg bool
	line     int
	text     string
}

// symbol is a variable visible to a kernel, with its address in its state space.
type symbol struct {
	space string // "param", "shared", "local", "global", "const"
	addr  uint64
	size  int64
	decl  *varDecl
}

type regInfo struct {
	slot int32
	typ  kind
	vec  int
}

type constSlot struct {
	slot int32
	val  uint64
}

// specials are the special registers a kernel may read, filled per warp.
var specials = map[string]bool{
	"%tid.x": true, "%tid.y": true, "%tid.z": true,
	"%ntid.x": true, "%ntid.y": true, "%ntid.z": true,
	"%ctaid.x": true, "%ctaid.y": true, "%ctaid.z": true,
	"%nctaid.x": true, "%nctaid.y": true, "%nctaid.z": true,
	"%laneid": true, "%warpid": true, "%nwarpid": true,
	"%lanemask_eq": true, "%lanemask_le": true, "%lanemask_lt": true, "%lanemask_ge": true, "%lanemask_gt": true,
	"%smid": true, "%nsmid": true, "%gridid": true,
	"%dynamic_smem_size": true, "%total_smem_size": true,
}

type specialSlot struct {
	slot int32
	name string
}

type compiler struct {
	mod      *Module
	fn       *function
	scopes   []map[string]regInfo
	syms     map[string]*symbol
	labels   map[string]int32
	nslots   int32
	consts   map[uint64]int32
	cvals    []constSlot
	specials map[string]int32
	slist    []specialSlot
	prog     []inst
	cur      *instr
	local    int64 // bytes of .local per thread
	shared   int64 // bytes of static .shared
	extern   []*symbol
}

// errf reports an error at the instruction being compiled.
func (c *compiler) errf(format string, args ...any) error {
	return &SyntaxError{Line: c.cur.line, Msg: fmt.Sprintf("%s: %s", c.cur.text, fmt.Sprintf(format, args...))}
}

func alignUp(n, a int64) int64 {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}

func declAlign(v *varDecl) int64 {
	a := int64(v.align)
	el := int64(v.typ.size())
	if v.vec > 0 {
		el *= int64(v.vec)
	}
	if a < el {
		a = el
	}
	return a
}

// maxRegs bounds the register slots of a kernel (registers, constants and special
// registers): each costs 256 bytes per warp. nvcc's kernels use about a thousand; the
// megakernel, which inlines every kernel's body, about 66,000 (17 MB per warp).
const maxRegs = 1 << 17

func (c *compiler) newSlot() int32 {
	s := c.nslots
	c.nslots++
	return s
}

// constant returns the slot holding value v in every lane.
func (c *compiler) constant(v uint64) int32 {
	if s, ok := c.consts[v]; ok {
		return s
	}
	s := c.newSlot()
	c.consts[v] = s
	c.cvals = append(c.cvals, constSlot{s, v})
	return s
}

func (c *compiler) lookupReg(name string) (regInfo, bool) {
	for i := len(c.scopes) - 1; i >= 0; i-- {
		if r, ok := c.scopes[i][name]; ok {
			return r, true
		}
	}
	return regInfo{}, false
}

func (c *compiler) declare(v *varDecl) error {
	switch v.space {
	case "reg":
		scope := c.scopes[len(c.scopes)-1]
		add := func(name string) {
			scope[name] = regInfo{slot: c.newSlot(), typ: v.typ, vec: v.vec}
		}
		if v.vec > 0 {
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("vector register %s is not supported", v.name)}
		}
		if int(c.nslots)+max(v.count, 1) > maxRegs {
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("more than %d registers", maxRegs)}
		}
		if v.count > 0 {
			for i := 0; i < v.count; i++ {
				add(v.name + strconv.Itoa(i))
			}
		} else {
			add(v.name)
		}
	case "local":
		a := declAlign(v)
		c.local = alignUp(c.local, a)
		c.syms[v.name] = &symbol{space: "local", addr: uint64(c.local), size: v.bytes(), decl: v}
		c.local += v.bytes()
	case "shared":
		// laid out before the instructions are compiled (compileEntry)
	default:
		return &SyntaxError{Line: v.line, Msg: fmt.Sprintf(".%s declaration inside a function is not supported", v.space)}
	}
	return nil
}

func (c *compiler) addShared(v *varDecl) {
	if v.bytes() == 0 && len(v.dims) > 0 && v.dims[len(v.dims)-1] < 0 {
		s := &symbol{space: "shared", decl: v}
		c.syms[v.name] = s
		c.extern = append(c.extern, s)
		return
	}
	c.shared = alignUp(c.shared, declAlign(v))
	c.syms[v.name] = &symbol{space: "shared", addr: uint64(c.shared), size: v.bytes(), decl: v}
	c.shared += v.bytes()
}

// compileEntry compiles entry function f of module m.
func compileEntry(m *Module, f *function) (*Kernel, error) {
	c := &compiler{
		mod: m, fn: f,
		scopes:   []map[string]regInfo{{}},
		syms:     map[string]*symbol{},
		labels:   map[string]int32{},
		consts:   map[uint64]int32{},
		specials: map[string]int32{},
	}
	k := &Kernel{Name: f.name, line: f.line}
	for name, s := range m.globals {
		c.syms[name] = s
	}
	for _, v := range m.src.vars {
		if v.space == "shared" {
			c.addShared(v)
		}
	}
	var off int64
	for _, p := range f.params {
		a := declAlign(p)
		off = alignUp(off, a)
		c.syms[p.name] = &symbol{space: "param", addr: uint64(off), size: p.bytes(), decl: p}
		k.params = append(k.params, kernelParam{name: p.name, off: off, size: p.bytes(), typ: p.typ})
		off += p.bytes()
	}
	k.paramBytes = off
	if off > maxParams {
		return nil, &SyntaxError{Line: f.line, Msg: fmt.Sprintf("entry %s has %d bytes of parameters (at most %d)", f.name, off, maxParams)}
	}
	// shared variables next: the extern (dynamic) arrays start after all the static ones,
	// and instructions take their addresses as constants
	for _, st := range f.body {
		if st.kind == sDecl && st.decl.space == "shared" {
			c.addShared(st.decl)
		}
	}
	var ealign int64 = 16
	for _, s := range c.extern {
		if a := declAlign(s.decl); a > ealign {
			ealign = a
		}
	}
	k.dynOff = alignUp(c.shared, ealign)
	for _, s := range c.extern {
		s.addr = uint64(k.dynOff)
	}
	// labels first: branches may jump forward
	n := int32(0)
	for _, s := range f.body {
		switch s.kind {
		case sLabel:
			if _, dup := c.labels[s.label]; dup {
				return nil, &SyntaxError{Line: s.line, Msg: fmt.Sprintf("label %s defined twice", s.label)}
			}
			c.labels[s.label] = n
		case sInstr:
			n++
		}
	}
	for _, s := range f.body {
		switch s.kind {
		case sOpen:
			c.scopes = append(c.scopes, map[string]regInfo{})
		case sClose:
			c.scopes = c.scopes[:len(c.scopes)-1]
		case sDecl:
			if err := c.declare(s.decl); err != nil {
				return nil, err
			}
		case sInstr:
			if err := c.instruction(s.ins); err != nil {
				return nil, err
			}
		}
	}
	// the end of the body returns
	c.prog = append(c.prog, inst{ctl: ctlExit, guard: -1, member: -1, line: f.line, text: "(end of " + f.name + ")"})
	if c.nslots > maxRegs {
		return nil, &SyntaxError{Line: f.line, Msg: fmt.Sprintf("entry %s uses %d register slots (at most %d)", f.name, c.nslots, maxRegs)}
	}
	if c.local > maxLocal {
		return nil, &SyntaxError{Line: f.line, Msg: fmt.Sprintf("entry %s uses %d bytes of local memory per thread (at most %d)", f.name, c.local, maxLocal)}
	}
	if k.dynOff > maxShared {
		return nil, &SyntaxError{Line: f.line, Msg: fmt.Sprintf("entry %s uses %d bytes of shared memory (at most %d)", f.name, k.dynOff, maxShared)}
	}
	k.prog = c.prog
	k.nslots = int(c.nslots)
	k.consts = c.cvals
	k.specials = c.slist
	k.staticShared = c.shared
	k.localBytes = c.local
	return k, nil
}

// instruction compiles one instruction through its family's builder.
func (c *compiler) instruction(in *instr) error {
	c.cur = in
	parts := strings.Split(in.op, ".")
	b, ok := builders[parts[0]]
	if !ok {
		return &SyntaxError{Line: in.line, Msg: fmt.Sprintf("unknown instruction %s in %q", parts[0], in.text)}
	}
	ins := inst{guard: -1, barCount: -1, member: -1, line: in.line, text: in.text}
	if in.guard != "" {
		r, ok := c.lookupReg(in.guard)
		if !ok || r.typ != kPred {
			return c.errf("guard %s is not a predicate register", in.guard)
		}
		ins.guard, ins.guardNeg = r.slot, in.guardNeg
	}
	op := &opcode{name: parts[0], mods: parts[1:], args: in.args, c: c}
	if err := b(op, &ins); err != nil {
		return err
	}
	if err := op.leftover(); err != nil {
		return err
	}
	c.prog = append(c.prog, ins)
	return nil
}

// opcode is an instruction being compiled: its modifiers (consumed by the builder as it
// recognises them; any left over is an error) and operands.
type opcode struct {
	name string
	mods []string
	used []bool
	args []operand
	c    *compiler
}

// has consumes modifier m if present.
func (o *opcode) has(m string) bool {
	if o.used == nil {
		o.used = make([]bool, len(o.mods))
	}
	for i, x := range o.mods {
		if x == m && !o.used[i] {
			o.used[i] = true
			return true
		}
	}
	return false
}

// oneOf consumes the first present modifier among ms and returns it ("" if none).
func (o *opcode) oneOf(ms ...string) string {
	for _, m := range ms {
		if o.has(m) {
			return m
		}
	}
	return ""
}

// ignore consumes modifiers that do not change results here (cache hints, scopes, .uni …).
func (o *opcode) ignore(ms ...string) {
	for _, m := range ms {
		for o.has(m) {
		}
	}
}

// types consumes the type modifiers, in order.
func (o *opcode) types() []kind {
	if o.used == nil {
		o.used = make([]bool, len(o.mods))
	}
	var out []kind
	for i, x := range o.mods {
		if k, ok := kindNames[x]; ok && !o.used[i] {
			o.used[i] = true
			out = append(out, k)
		}
	}
	return out
}

// typ consumes exactly one type modifier.
func (o *opcode) typ() (kind, error) {
	ts := o.types()
	if len(ts) != 1 {
		return kNone, o.c.errf("%s needs exactly one type", o.name)
	}
	return ts[0], nil
}

// rounding consumes a float rounding modifier (.rn .rz .rm .rp); def when absent.
func (o *opcode) rounding(def rmode) rmode {
	switch o.oneOf("rn", "rz", "rm", "rp") {
	case "rz":
		return rz
	case "rm":
		return rm
	case "rp":
		return rp
	case "rn":
		return rn
	}
	return def
}

func (o *opcode) leftover() error {
	for i, x := range o.mods {
		if o.used == nil || !o.used[i] {
			return o.c.errf("unsupported modifier .%s on %s", x, o.name)
		}
	}
	return nil
}

func (o *opcode) nargs(n ...int) error {
	for _, k := range n {
		if len(o.args) == k {
			return nil
		}
	}
	want := fmt.Sprint(n[0])
	for _, k := range n[1:] {
		want += fmt.Sprintf(" or %d", k)
	}
	return o.c.errf("%s takes %s operands, found %d", o.name, want, len(o.args))
}

// dst returns the slot of destination operand i (a register; _ gives a scratch slot).
func (o *opcode) dst(i int) (int32, error) {
	a := o.args[i]
	if a.kind == oSink {
		return o.c.newSlot(), nil
	}
	if a.kind != oReg || a.neg {
		return 0, o.c.errf("operand %d (%v) must be a register", i+1, a)
	}
	r, ok := o.c.lookupReg(a.name)
	if !ok {
		return 0, o.c.errf("undeclared register %s", a.name)
	}
	return r.slot, nil
}

// dstType is dst plus the register's declared type.
func (o *opcode) dstType(i int) (int32, kind, error) {
	s, err := o.dst(i)
	if err != nil {
		return 0, kNone, err
	}
	r, _ := o.c.lookupReg(o.args[i].name)
	return s, r.typ, nil
}

// src returns the slot holding source operand i read as type k: a register, a special
// register, an immediate (encoded for k), or a variable's address.
func (o *opcode) src(i int, k kind) (int32, error) {
	return o.c.value(o.args[i], k)
}

func (c *compiler) value(a operand, k kind) (int32, error) {
	switch a.kind {
	case oReg:
		if a.neg {
			return 0, c.errf("negated operand %v is not allowed here", a)
		}
		if r, ok := c.lookupReg(a.name); ok {
			return r.slot, nil
		}
		if specials[a.name] {
			if s, ok := c.specials[a.name]; ok {
				return s, nil
			}
			s := c.newSlot()
			c.specials[a.name] = s
			c.slist = append(c.slist, specialSlot{s, a.name})
			return s, nil
		}
		if strings.HasPrefix(a.name, "%clock") || a.name == "%globaltimer" {
			return 0, c.errf("special register %s is not deterministic and is not supported", a.name)
		}
		return 0, c.errf("undeclared register %s", a.name)
	case oImm:
		v, err := immBits(a, k)
		if err != nil {
			return 0, c.errf("%v", err)
		}
		return c.constant(v), nil
	case oSym:
		s, ok := c.syms[a.name]
		if !ok {
			if _, isLabel := c.labels[a.name]; isLabel {
				return 0, c.errf("label %s used as a value", a.name)
			}
			return 0, c.errf("unknown symbol %s", a.name)
		}
		return c.constant(s.addr + uint64(a.off)), nil
	}
	return 0, c.errf("operand %v cannot be used as a value", a)
}

// pred returns the slot of a predicate operand and whether it is negated (!%p).
func (o *opcode) pred(i int) (int32, bool, error) {
	a := o.args[i]
	if a.kind == oImm {
		v, err := immBits(a, kPred)
		if err != nil {
			return 0, false, o.c.errf("%v", err)
		}
		return o.c.constant(v & 1), false, nil
	}
	if a.kind != oReg {
		return 0, false, o.c.errf("operand %d (%v) must be a predicate", i+1, a)
	}
	r, ok := o.c.lookupReg(a.name)
	if !ok || r.typ != kPred {
		return 0, false, o.c.errf("%s is not a predicate register", a.name)
	}
	return r.slot, a.neg, nil
}

// address is a compiled [base+off] operand.
type address struct {
	base   int32 // slot of the base register (a zero constant when absolute)
	off    int64
	mask32 bool   // the base register is 32 bits wide
	space  string // the symbol's space when the base is a symbol, else ""
}

func (o *opcode) addr(i int) (address, error) {
	a := o.args[i]
	if a.kind != oAddr {
		return address{}, o.c.errf("operand %d (%v) must be an address [..]", i+1, a)
	}
	switch a.base {
	case oReg:
		r, ok := o.c.lookupReg(a.name)
		if !ok {
			return address{}, o.c.errf("undeclared register %s", a.name)
		}
		return address{base: r.slot, off: a.off, mask32: r.typ.size() == 4}, nil
	case oSym:
		s, ok := o.c.syms[a.name]
		if !ok {
			return address{}, o.c.errf("unknown symbol %s", a.name)
		}
		return address{base: o.c.constant(0), off: int64(s.addr) + a.off, space: s.space}, nil
	}
	return address{base: o.c.constant(0), off: a.off}, nil
}

// vec returns the slots of a vector operand {a, b, …} (or a single register as a 1-vector).
func (o *opcode) vec(i int, k kind, dest bool) ([]int32, error) {
	a := o.args[i]
	elems := []operand{a}
	if a.kind == oVec {
		elems = a.elems
	}
	out := make([]int32, len(elems))
	for j, e := range elems {
		var err error
		switch {
		case e.kind == oSink:
			out[j] = o.c.newSlot()
		case dest:
			if e.kind != oReg {
				return nil, o.c.errf("vector element %v must be a register", e)
			}
			r, ok := o.c.lookupReg(e.name)
			if !ok {
				return nil, o.c.errf("undeclared register %s", e.name)
			}
			out[j] = r.slot
		default:
			out[j], err = o.c.value(e, k)
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// immBits encodes a literal as a value of type k.
func immBits(a operand, k kind) (uint64, error) {
	s := a.lit
	var f64 float64
	isFloat := false
	switch {
	case len(s) == 10 && (strings.HasPrefix(s, "0f") || strings.HasPrefix(s, "0F")):
		u, err := strconv.ParseUint(s[2:], 16, 32)
		if err != nil {
			return 0, fmt.Errorf("bad float literal %s", s)
		}
		if a.minus {
			u ^= 1 << 31
		}
		if !k.float() || k == kF32 {
			return u, nil
		}
		f64, isFloat = float64(math.Float32frombits(uint32(u))), true
	case len(s) == 18 && (strings.HasPrefix(s, "0d") || strings.HasPrefix(s, "0D")):
		u, err := strconv.ParseUint(s[2:], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("bad double literal %s", s)
		}
		if a.minus {
			u ^= 1 << 63
		}
		if !k.float() || k == kF64 {
			return u, nil
		}
		f64, isFloat = math.Float64frombits(u), true
	case strings.ContainsAny(s, ".eE") && !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X"):
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("bad float literal %s", s)
		}
		f64, isFloat = v, true
		if a.minus {
			f64 = -f64
		}
	default:
		v, err := parseInt(s)
		if err != nil {
			return 0, err
		}
		if a.minus {
			v = -v
		}
		switch {
		case k == kPred:
			if v != 0 {
				return 1, nil
			}
			return 0, nil
		case k.float():
			f64, isFloat = float64(v), true
		default:
			return k.norm(uint64(v)), nil
		}
	}
	if !isFloat {
		return 0, fmt.Errorf("literal %s", s)
	}
	switch k {
	case kF32:
		return uint64(math.Float32bits(float32(f64))), nil
	case kF64:
		return math.Float64bits(f64), nil
	case kF16:
		return convert(f64, fmtF16, rn), nil
	case kBF16:
		return convert(f64, fmtBF16, rn), nil
	}
	return 0, fmt.Errorf("float literal %s used as %v", s, k)
}
