package sass

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// This file reads the SASS text that CUDA's nvdisasm prints for a cubin (and cuobjdump -sass,
// which runs it): one function per ".text.name:" label (cuobjdump: "Function : name" header),
// one instruction per "/*addr*/ [@pred] OPCODE.MODS operands ;" line. Branch targets are
// addresses or, from nvdisasm, labels (`(.L_x_12)) defined on lines of their own before the
// instruction they name. Encodings in comments and directives are skipped.

// Function is one kernel's machine code.
type Function struct {
	Name  string
	Insts []Inst
}

// Inst is one SASS instruction.
type Inst struct {
	Addr int    // byte offset in the function
	Pred string // guard ("P0", "!P0", "UP1", …), "" when unconditional
	Op   string // opcode without modifiers ("LDG")
	Mods []string
	Args []Operand
	Text string // the instruction as printed, without the address and the encoding
}

// OperandKind says what an operand is.
type OperandKind uint8

const (
	OpOther   OperandKind = iota // anything not listed below (labels, barriers, special names)
	OpReg                        // Rn or RZ
	OpUReg                       // URn or URZ
	OpPred                       // Pn, PT (guards and predicate results)
	OpUPred                      // UPn, UPT
	OpImm                        // an integer immediate
	OpFloat                      // a float immediate (also INF, QNAN)
	OpConst                      // c[bank][offset], offset possibly indexed by a register
	OpMem                        // [base(.64)(.X4) + offset + ureg]
	OpSpecial                    // SR_TID.X, SR_LANEID, SRZ, …
)

// RZ and URZ are the register numbers of the zero registers.
const (
	RZ  = 255
	URZ = 63
)

// Operand is one operand of an instruction.
type Operand struct {
	Kind OperandKind
	Reg  int  // OpReg, OpUReg, OpPred, OpUPred: the register number (RZ, URZ; PT = 7, UPT = 7)
	Neg  bool // -R
	Not  bool // ~R, !P
	Abs  bool // |R|
	Imm  int64
	// OpConst: bank and offset, and an index register (-1: none)
	Bank, Off int64
	// OpMem: base register (Reg, -1 when none), whether it is a 64-bit pair, its scale (.X4),
	// a uniform register added (-1: none) and the immediate offset (Imm).
	Wide  bool
	Scale int
	UBase int // OpMem: a uniform register added; OpConst: a uniform index register (-1: none)
	Text  string
	Index int // OpConst: index register, -1 when none
}

var (
	funcRE  = regexp.MustCompile(`^\s*(?:Function\s*:\s*(\S+)|\.text\.([A-Za-z_$][A-Za-z0-9_$]*):)\s*$`)
	labelRE = regexp.MustCompile(`^(\.L_[A-Za-z0-9_]+):\s*$`)
	useRE   = regexp.MustCompile("`\\((\\.L_[A-Za-z0-9_]+)\\)")
	instRE  = regexp.MustCompile(`^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;`)
	predRE  = regexp.MustCompile(`^@(!?U?P[0-9T])\s+`)
	regRE   = regexp.MustCompile(`^(-|~|\|)?(U?R)(Z|[0-9]+)\|?((?:\.[A-Za-z0-9_]+)*)\|?$`)
	pRE     = regexp.MustCompile(`^(!?)(U?P)([0-9]|T)$`)
)

// ParseSASS reads cuobjdump -sass output: every function it holds, in order.
func ParseSASS(r io.Reader) ([]Function, error) {
	var out []Function
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	n := 0
	labels := map[string]int{} // label → address, within the current function
	var pending []string       // labels waiting for their instruction
	type use struct {
		inst, arg int
		label     string
	}
	var uses []use
	resolve := func() error {
		if len(out) == 0 {
			return nil
		}
		f := &out[len(out)-1]
		for _, u := range uses {
			addr, ok := labels[u.label]
			if !ok {
				addr, ok = unprintedLabel(f, f.Insts[u.inst])
			}
			if !ok {
				return fmt.Errorf("sass: %s: label %s is not defined", f.Name, u.label)
			}
			a := &f.Insts[u.inst].Args[u.arg]
			a.Kind, a.Imm = OpImm, int64(addr)
		}
		labels, pending, uses = map[string]int{}, nil, nil
		return nil
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		if m := funcRE.FindStringSubmatch(line); m != nil {
			name := m[1] + m[2]
			if len(out) > 0 && out[len(out)-1].Name == name {
				continue // nvdisasm names a function twice (its symbol and its section)
			}
			if err := resolve(); err != nil {
				return nil, err
			}
			out = append(out, Function{Name: name})
			continue
		}
		if m := labelRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			pending = append(pending, m[1])
			continue
		}
		m := instRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("sass line %d: an instruction before any function", n)
		}
		addr, err := strconv.ParseInt(m[1], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("sass line %d: address %q", n, m[1])
		}
		in, err := parseInst(m[2])
		if err != nil {
			return nil, fmt.Errorf("sass line %d: %v", n, err)
		}
		in.Addr = int(addr)
		f := &out[len(out)-1]
		if k := len(f.Insts); k > 0 {
			// an instruction nvdisasm leaves out (its line and its label's): a placeholder
			for a := f.Insts[k-1].Addr + instBytes; a < in.Addr; a += instBytes {
				f.Insts = append(f.Insts, Inst{Op: Unprinted, Text: Unprinted, Addr: a})
			}
		}
		for _, l := range pending {
			labels[l] = in.Addr
		}
		pending = pending[:0]
		for i, a := range in.Args {
			if u := useRE.FindStringSubmatch(a.Text); u != nil {
				uses = append(uses, use{len(f.Insts), i, u[1]})
			}
		}
		f.Insts = append(f.Insts, in)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := resolve(); err != nil {
		return nil, err
	}
	return out, nil
}

// instBytes is the size of one instruction (sm_70 on).
const instBytes = 16

// Unprinted is the opcode of a placeholder for an instruction nvdisasm 11.8 leaves out of its
// listing, line and label alike (sm_90's VIMNMX with an immediate operand, which ptxas 11.8
// emits for a clamp such as min(x, 2)): taken as one ALU instruction.
const Unprinted = "UNPRINTED"

// unprintedLabel finds the address of a label nvdisasm used but never printed, which belongs
// to a left-out instruction (a placeholder): the only placeholder of the function, or, for a
// BSSY's reconvergence point, the first one after the BSSY.
func unprintedLabel(f *Function, use Inst) (int, bool) {
	var at []int
	for _, in := range f.Insts {
		if in.Op == Unprinted {
			at = append(at, in.Addr)
		}
	}
	if len(at) == 1 {
		return at[0], true
	}
	if use.Op == "BSSY" {
		for _, a := range at {
			if a > use.Addr {
				return a, true
			}
		}
	}
	return 0, false
}

func parseInst(s string) (Inst, error) {
	in := Inst{Text: s}
	if m := predRE.FindStringSubmatch(s); m != nil {
		in.Pred = m[1]
		s = s[len(m[0]):]
	}
	op, rest, _ := strings.Cut(s, " ")
	parts := strings.Split(op, ".")
	in.Op, in.Mods = parts[0], parts[1:]
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return in, nil
	}
	for _, a := range splitArgs(rest) {
		o, err := parseOperand(a)
		if err != nil {
			return in, fmt.Errorf("%s: %v", in.Text, err)
		}
		in.Args = append(in.Args, o)
	}
	return in, nil
}

// splitArgs splits at commas outside brackets; an operand list without commas (RET.REL R20
// 0x0) splits at spaces.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	out = append(out, strings.TrimSpace(s[start:]))
	if len(out) == 1 && strings.Contains(out[0], " ") && !strings.Contains(out[0], "[") {
		return strings.Fields(out[0])
	}
	return out
}

func parseImm(s string) (int64, bool) {
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	var v uint64
	var err error
	if strings.HasPrefix(s, "0x") {
		v, err = strconv.ParseUint(s[2:], 16, 64)
	} else {
		v, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil {
		return 0, false
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}

func parseOperand(s string) (Operand, error) {
	o := Operand{Text: s, Reg: -1, UBase: -1, Index: -1, Scale: 1}
	switch {
	case s == "":
		return o, nil
	case strings.HasPrefix(s, "c["):
		return parseConst(s, o)
	case strings.HasPrefix(s, "["):
		return parseMem(s, o)
	case strings.HasPrefix(s, "SR_") || s == "SRZ":
		o.Kind = OpSpecial
		return o, nil
	}
	if m := pRE.FindStringSubmatch(s); m != nil {
		o.Kind = OpPred
		if m[2] == "UP" {
			o.Kind = OpUPred
		}
		o.Not = m[1] == "!"
		o.Reg = 7
		if m[3] != "T" {
			o.Reg = int(m[3][0] - '0')
		}
		return o, nil
	}
	if m := regRE.FindStringSubmatch(s); m != nil {
		o.Kind = OpReg
		zero := RZ
		if m[2] == "UR" {
			o.Kind, zero = OpUReg, URZ
		}
		switch m[1] {
		case "-":
			o.Neg = true
		case "~":
			o.Not = true
		case "|":
			o.Abs = true
		}
		if m[3] == "Z" {
			o.Reg = zero
		} else {
			n, _ := strconv.Atoi(m[3])
			o.Reg = n
		}
		return o, nil
	}
	if v, ok := parseImm(s); ok {
		o.Kind, o.Imm = OpImm, v
		return o, nil
	}
	if _, err := strconv.ParseFloat(strings.TrimPrefix(s, "+"), 64); err == nil || strings.HasSuffix(s, "INF") || strings.HasSuffix(s, "QNAN") {
		o.Kind = OpFloat
		return o, nil
	}
	return o, nil // labels, barriers (B0), PR, SB0: OpOther
}

func parseConst(s string, o Operand) (Operand, error) {
	// c[0x0][0x210] or c[0x0][R2+0x10]
	o.Kind = OpConst
	i := strings.Index(s, "][")
	if i < 0 || !strings.HasSuffix(s, "]") {
		return o, fmt.Errorf("constant operand %q", s)
	}
	b, ok := parseImm(s[2:i])
	if !ok {
		return o, fmt.Errorf("constant bank in %q", s)
	}
	o.Bank = b
	for _, t := range strings.Split(s[i+2:len(s)-1], "+") {
		if t == "" {
			continue
		}
		if v, ok := parseImm(t); ok {
			o.Off += v
			continue
		}
		if m := regRE.FindStringSubmatch(t); m != nil {
			n := RZ
			if m[2] == "UR" {
				n = URZ
			}
			if m[3] != "Z" {
				n, _ = strconv.Atoi(m[3])
			}
			if m[2] == "UR" {
				o.UBase = n
			} else {
				o.Index = n
			}
			continue
		}
		return o, fmt.Errorf("constant offset term %q in %q", t, s)
	}
	return o, nil
}

func parseMem(s string, o Operand) (Operand, error) {
	o.Kind = OpMem
	if !strings.HasSuffix(s, "]") {
		return o, fmt.Errorf("memory operand %q", s)
	}
	body := s[1 : len(s)-1]
	body = strings.ReplaceAll(body, "+-", "+~") // a negative offset: "+-0x10"
	for _, t := range strings.Split(body, "+") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if strings.HasPrefix(t, "~") {
			t = "-" + t[1:]
		}
		if v, ok := parseImm(t); ok {
			o.Imm += v
			continue
		}
		m := regRE.FindStringSubmatch(t)
		if m == nil {
			return o, fmt.Errorf("memory operand term %q in %q", t, s)
		}
		n := RZ
		if m[2] == "UR" {
			n = URZ
		}
		if m[3] != "Z" {
			n, _ = strconv.Atoi(m[3])
		}
		if m[2] == "UR" {
			o.UBase = n
			continue
		}
		o.Reg = n
		for _, suf := range strings.Split(strings.TrimPrefix(m[4], "."), ".") {
			switch suf {
			case "64":
				o.Wide = true
			case "X4":
				o.Scale = 4
			case "X8":
				o.Scale = 8
			case "X16":
				o.Scale = 16
			}
		}
	}
	return o, nil
}

// Has reports whether the instruction carries modifier m.
func (in *Inst) Has(m string) bool {
	for _, x := range in.Mods {
		if x == m {
			return true
		}
	}
	return false
}
