package ptxvm

import (
	"fmt"
	"strconv"
	"strings"
)

// The parser turns PTX text into this syntax tree; compile.go turns a function's tree into
// executable form.

type source struct {
	version  string
	target   []string
	addrSize int
	vars     []*varDecl // module-scope .global/.const/.shared declarations
	funcs    []*function
}

// varDecl is a variable or register declaration.
type varDecl struct {
	space  string // "reg", "global", "const", "shared", "local", "param"
	align  int
	typ    kind
	vec    int     // 0, 2 or 4 (.v2/.v4)
	name   string  // for a register range %r<N>, the prefix "%r"
	count  int     // register range size (%r<N>), or 0
	dims   []int64 // array dimensions; -1 for an unsized []
	init   []operand
	extern bool
	line   int
}

// maxVarBytes bounds any one variable (far above what a GPU allows in any state space).
const maxVarBytes = 1 << 28

// bytes is the storage size of a declared variable (0 for an unsized extern array).
func (v *varDecl) bytes() int64 {
	n := int64(v.typ.size())
	if v.vec > 0 {
		n *= int64(v.vec)
	}
	for _, d := range v.dims {
		if d < 0 {
			return 0
		}
		n *= d
	}
	return n
}

// check rejects declarations no GPU could hold.
func (v *varDecl) check() error {
	n := int64(v.typ.size())
	for _, d := range v.dims {
		if d > maxVarBytes || d < -1 {
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("%s: array dimension %d is too large", v.name, d)}
		}
		if d > 0 {
			n *= d
		}
		if n > maxVarBytes {
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("%s: more than %d bytes", v.name, maxVarBytes)}
		}
	}
	if v.count < 0 || v.count > maxRegs {
		return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("%s<%d>: too many registers", v.name, v.count)}
	}
	return nil
}

type function struct {
	name   string
	entry  bool
	params []*varDecl
	rets   []*varDecl
	body   []stmt
	line   int
	decl   bool // a prototype without a body
}

type stmtKind uint8

const (
	sInstr stmtKind = iota
	sLabel
	sDecl
	sOpen  // {
	sClose // }
)

type stmt struct {
	kind  stmtKind
	label string
	ins   *instr
	decl  *varDecl
	line  int
}

type instr struct {
	guard    string // predicate register, or ""
	guardNeg bool
	op       string // the full opcode, e.g. "ld.global.v4.f32"
	args     []operand
	line     int
	text     string // the source line, for messages
}

type opKind uint8

const (
	oReg  opKind = iota // %r1 (also special registers such as %tid.x)
	oImm                // a number
	oSym                // a variable, parameter, label or function name (with optional +offset)
	oAddr               // [base+offset], base a register, a symbol or nothing
	oVec                // {a, b, …}
	oSink               // _
	oList               // (a, b, …) in call
)

type operand struct {
	kind  opKind
	name  string // register or symbol name; address base
	neg   bool   // !%p
	pipe  string // %r|%p: the second destination
	lit   string // number literal text
	minus bool   // a leading '-' on a literal
	off   int64  // address or symbol offset
	base  opKind // for oAddr: oReg, oSym or oImm (absolute)
	elems []operand
}

func (o operand) String() string {
	switch o.kind {
	case oReg, oSym:
		s := o.name
		if o.neg {
			s = "!" + s
		}
		if o.off != 0 {
			s += fmt.Sprintf("%+d", o.off)
		}
		return s
	case oImm:
		if o.minus {
			return "-" + o.lit
		}
		return o.lit
	case oAddr:
		return fmt.Sprintf("[%s%+d]", o.name, o.off)
	case oSink:
		return "_"
	}
	var parts []string
	for _, e := range o.elems {
		parts = append(parts, e.String())
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// SyntaxError reports PTX the parser does not accept.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("ptxvm: line %d: %s", e.Line, e.Msg) }

type parser struct {
	toks  []token
	pos   int
	lines []string
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) errf(line int, format string, args ...any) error {
	return &SyntaxError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) is(text string) bool {
	t := p.peek()
	return t.kind != tEOF && t.kind != tString && t.text == text
}

func (p *parser) accept(text string) bool {
	if p.is(text) {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expect(text string) error {
	t := p.next()
	if t.text != text || t.kind == tString {
		return p.errf(t.line, "expected %q, found %v", text, t)
	}
	return nil
}

func (p *parser) ident() (token, error) {
	t := p.next()
	if t.kind != tIdent {
		return t, p.errf(t.line, "expected a name, found %v", t)
	}
	return t, nil
}

func (p *parser) integer() (int64, int, error) {
	t := p.next()
	neg := false
	if t.text == "-" {
		neg = true
		t = p.next()
	}
	if t.kind != tNumber {
		return 0, t.line, p.errf(t.line, "expected a number, found %v", t)
	}
	v, err := parseInt(t.text)
	if err != nil {
		return 0, t.line, p.errf(t.line, "%v", err)
	}
	if neg {
		v = -v
	}
	return v, t.line, nil
}

// parseInt reads a PTX integer literal: decimal, 0x hex, 0b binary, 0 octal, optional U suffix.
func parseInt(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(s, "U"), "u")
	base := 10
	switch {
	case strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X"):
		base, t = 16, t[2:]
	case strings.HasPrefix(t, "0b") || strings.HasPrefix(t, "0B"):
		base, t = 2, t[2:]
	case len(t) > 1 && t[0] == '0':
		base, t = 8, t[1:]
	}
	u, err := strconv.ParseUint(t, base, 64)
	if err != nil {
		return 0, fmt.Errorf("bad integer %q", s)
	}
	return int64(u), nil
}

// restOfLine skips the tokens on the current token's line (directives without a ';').
func (p *parser) restOfLine(line int) {
	for p.peek().kind != tEOF && p.peek().line == line {
		p.pos++
	}
}

// skipBlock skips a balanced { … } block (e.g. .section debug data).
func (p *parser) skipBlock() error {
	if err := p.expect("{"); err != nil {
		return err
	}
	depth := 1
	for depth > 0 {
		t := p.next()
		switch {
		case t.kind == tEOF:
			return p.errf(t.line, "unterminated block")
		case t.kind == tPunct && t.text == "{":
			depth++
		case t.kind == tPunct && t.text == "}":
			depth--
		}
	}
	return nil
}

func parse(src string) (*source, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, &SyntaxError{Msg: err.Error()}
	}
	p := &parser{toks: toks, lines: strings.Split(src, "\n")}
	m := &source{}
	for p.peek().kind != tEOF {
		t := p.peek()
		if t.kind != tIdent {
			return nil, p.errf(t.line, "unexpected %v at module scope", t)
		}
		switch t.text {
		case ".version":
			p.next()
			v := p.next()
			m.version = v.text
		case ".target":
			p.next()
			for {
				id, err := p.ident()
				if err != nil {
					return nil, err
				}
				m.target = append(m.target, id.text)
				if !p.accept(",") {
					break
				}
			}
		case ".address_size":
			p.next()
			n, _, err := p.integer()
			if err != nil {
				return nil, err
			}
			if n != 64 {
				return nil, p.errf(t.line, ".address_size %d: only 64-bit addressing is supported", n)
			}
			m.addrSize = int(n)
		case ".file", ".loc":
			p.next()
			p.restOfLine(t.line)
		case ".section":
			p.next()
			p.next()
			if err := p.skipBlock(); err != nil {
				return nil, err
			}
		case ".pragma":
			p.next()
			for !p.accept(";") {
				if p.next().kind == tEOF {
					return nil, p.errf(t.line, "unterminated .pragma")
				}
			}
		default:
			if err := p.moduleDecl(m); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// moduleDecl parses a linkage-prefixed function or variable declaration.
func (p *parser) moduleDecl(m *source) error {
	extern := false
	for {
		t := p.peek()
		switch t.text {
		case ".visible", ".weak", ".common":
			p.next()
			continue
		case ".extern":
			extern = true
			p.next()
			continue
		case ".entry", ".func":
			f, err := p.function()
			if err != nil {
				return err
			}
			if !f.decl || !extern {
				m.funcs = append(m.funcs, f)
			}
			return nil
		case ".global", ".const", ".shared", ".local":
			vs, err := p.varDecls()
			if err != nil {
				return err
			}
			for _, v := range vs {
				v.extern = v.extern || extern
			}
			m.vars = append(m.vars, vs...)
			return nil
		}
		return p.errf(t.line, "unknown directive %s", t.text)
	}
}

// varDecls parses ".space [.align n] [.vN] .type name[dims] [= init], …;".
func (p *parser) varDecls() ([]*varDecl, error) {
	st := p.next()
	base := varDecl{space: st.text[1:], line: st.line}
	for {
		t := p.peek()
		if t.kind != tIdent || !strings.HasPrefix(t.text, ".") {
			break
		}
		p.next()
		switch {
		case t.text == ".align":
			n, _, err := p.integer()
			if err != nil {
				return nil, err
			}
			base.align = int(n)
		case t.text == ".v2" || t.text == ".v4" || t.text == ".v8":
			base.vec = int(t.text[2] - '0')
		case t.text == ".ptr" || t.text == ".global" || t.text == ".const" || t.text == ".shared" || t.text == ".local":
			// .param .u64 .ptr .global .align 4 name: pointer attributes
		default:
			k, ok := kindNames[t.text[1:]]
			if !ok {
				return nil, p.errf(t.line, "unknown type or attribute %s in .%s declaration", t.text, base.space)
			}
			base.typ = k
		}
	}
	if base.typ == kNone {
		return nil, p.errf(st.line, ".%s declaration without a type", base.space)
	}
	var out []*varDecl
	for {
		name, err := p.ident()
		if err != nil {
			return nil, err
		}
		v := base
		v.name = name.text
		v.line = name.line
		if p.accept("<") {
			n, _, err := p.integer()
			if err != nil {
				return nil, err
			}
			if err := p.expect(">"); err != nil {
				return nil, err
			}
			v.count = int(n)
		}
		for p.accept("[") {
			if p.accept("]") {
				v.dims = append(v.dims, -1)
				continue
			}
			n, _, err := p.integer()
			if err != nil {
				return nil, err
			}
			if err := p.expect("]"); err != nil {
				return nil, err
			}
			v.dims = append(v.dims, n)
		}
		if p.accept("=") {
			ops, err := p.initializer()
			if err != nil {
				return nil, err
			}
			v.init = ops
		}
		if err := v.check(); err != nil {
			return nil, err
		}
		out = append(out, &v)
		if p.accept(";") {
			return out, nil
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
	}
}

// initializer parses a scalar or a (nested) brace list of numbers, flattened.
func (p *parser) initializer() ([]operand, error) {
	if p.accept("{") {
		var out []operand
		for !p.accept("}") {
			sub, err := p.initializer()
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			if !p.accept(",") {
				if err := p.expect("}"); err != nil {
					return nil, err
				}
				break
			}
		}
		return out, nil
	}
	o, err := p.operand()
	if err != nil {
		return nil, err
	}
	if o.kind != oImm {
		return nil, p.errf(p.peek().line, "initializer %v: only numbers are supported", o)
	}
	return []operand{o}, nil
}

func (p *parser) paramList() ([]*varDecl, error) {
	var out []*varDecl
	if err := p.expect("("); err != nil {
		return nil, err
	}
	if p.accept(")") {
		return nil, nil
	}
	for {
		if !p.is(".param") && !p.is(".reg") {
			t := p.peek()
			return nil, p.errf(t.line, "expected .param, found %v", t)
		}
		vs, err := p.paramDecl()
		if err != nil {
			return nil, err
		}
		out = append(out, vs)
		if p.accept(")") {
			return out, nil
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
	}
}

// paramDecl parses one ".param [.align n] .type name[dims]" (no trailing ';').
func (p *parser) paramDecl() (*varDecl, error) {
	st := p.next()
	v := &varDecl{space: st.text[1:], line: st.line}
	for {
		t := p.peek()
		if t.kind != tIdent || !strings.HasPrefix(t.text, ".") {
			break
		}
		p.next()
		switch t.text {
		case ".align":
			n, _, err := p.integer()
			if err != nil {
				return nil, err
			}
			v.align = int(n)
		case ".ptr", ".global", ".const", ".shared", ".local":
		default:
			k, ok := kindNames[t.text[1:]]
			if !ok {
				return nil, p.errf(t.line, "unknown type %s in parameter", t.text)
			}
			v.typ = k
		}
	}
	name, err := p.ident()
	if err != nil {
		return nil, err
	}
	v.name = name.text
	for p.accept("[") {
		n, _, err := p.integer()
		if err != nil {
			return nil, err
		}
		if err := p.expect("]"); err != nil {
			return nil, err
		}
		v.dims = append(v.dims, n)
	}
	if v.typ == kNone {
		return nil, p.errf(st.line, "parameter %s without a type", v.name)
	}
	return v, v.check()
}

func (p *parser) function() (*function, error) {
	kw := p.next()
	f := &function{entry: kw.text == ".entry", line: kw.line}
	if !f.entry && p.is("(") {
		rets, err := p.paramList()
		if err != nil {
			return nil, err
		}
		f.rets = rets
	}
	name, err := p.ident()
	if err != nil {
		return nil, err
	}
	f.name = name.text
	if p.is("(") {
		ps, err := p.paramList()
		if err != nil {
			return nil, err
		}
		f.params = ps
	}
	// performance directives: .maxntid 256, 1, 1  .reqntid …  .minnctapersm n  .noreturn …
	for p.peek().kind == tIdent && strings.HasPrefix(p.peek().text, ".") {
		p.next()
		for p.peek().kind == tNumber || p.is(",") {
			p.next()
		}
	}
	if p.accept(";") {
		f.decl = true
		return f, nil
	}
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	depth := 1
	for depth > 0 {
		t := p.peek()
		switch {
		case t.kind == tEOF:
			return nil, p.errf(t.line, "function %s: missing '}'", f.name)
		case t.kind == tPunct && t.text == "{":
			p.next()
			depth++
			f.body = append(f.body, stmt{kind: sOpen, line: t.line})
		case t.kind == tPunct && t.text == "}":
			p.next()
			depth--
			if depth > 0 {
				f.body = append(f.body, stmt{kind: sClose, line: t.line})
			}
		case t.kind == tIdent && (t.text == ".reg" || t.text == ".local" || t.text == ".shared" || t.text == ".param" || t.text == ".const" || t.text == ".global"):
			vs, err := p.varDecls()
			if err != nil {
				return nil, err
			}
			for _, v := range vs {
				f.body = append(f.body, stmt{kind: sDecl, decl: v, line: v.line})
			}
		case t.kind == tIdent && (t.text == ".loc" || t.text == ".file"):
			p.next()
			p.restOfLine(t.line)
		case t.kind == tIdent && t.text == ".pragma":
			p.next()
			for !p.accept(";") {
				if p.next().kind == tEOF {
					return nil, p.errf(t.line, "unterminated .pragma")
				}
			}
		case t.kind == tIdent && strings.HasPrefix(t.text, ".") && t.text != ".":
			return nil, p.errf(t.line, "unknown directive %s in function %s", t.text, f.name)
		case t.kind == tIdent && p.toks[p.pos+1].text == ":" && p.toks[p.pos+1].kind == tPunct:
			p.pos += 2
			f.body = append(f.body, stmt{kind: sLabel, label: t.text, line: t.line})
		default:
			in, err := p.instruction()
			if err != nil {
				return nil, err
			}
			f.body = append(f.body, stmt{kind: sInstr, ins: in, line: in.line})
		}
	}
	return f, nil
}

func (p *parser) instruction() (*instr, error) {
	first := p.peek()
	in := &instr{line: first.line}
	if first.line-1 < len(p.lines) {
		in.text = strings.TrimSpace(p.lines[first.line-1])
	}
	if p.accept("@") {
		if p.accept("!") {
			in.guardNeg = true
		}
		g, err := p.ident()
		if err != nil {
			return nil, err
		}
		in.guard = g.text
	}
	op, err := p.ident()
	if err != nil {
		return nil, err
	}
	in.op = op.text
	if p.accept(";") {
		return in, nil
	}
	for {
		o, err := p.operand()
		if err != nil {
			return nil, err
		}
		in.args = append(in.args, o)
		if p.accept(";") {
			return in, nil
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
	}
}

func (p *parser) operand() (operand, error) {
	t := p.peek()
	switch {
	case t.text == "[" && t.kind == tPunct:
		p.next()
		o := operand{kind: oAddr, base: oImm}
		if p.peek().kind == tIdent {
			id := p.next()
			o.name = id.text
			o.base = oSym
			if strings.HasPrefix(id.text, "%") {
				o.base = oReg
			}
		} else {
			v, _, err := p.integer()
			if err != nil {
				return o, err
			}
			o.off = v
		}
		for p.is("+") || p.is("-") {
			neg := p.next().text == "-"
			v, _, err := p.integer()
			if err != nil {
				return o, err
			}
			if neg {
				v = -v
			}
			o.off += v
		}
		return o, p.expect("]")
	case t.text == "{" && t.kind == tPunct, t.text == "(" && t.kind == tPunct:
		p.next()
		closer := "}"
		o := operand{kind: oVec}
		if t.text == "(" {
			closer, o.kind = ")", oList
		}
		if p.accept(closer) {
			return o, nil
		}
		for {
			e, err := p.operand()
			if err != nil {
				return o, err
			}
			o.elems = append(o.elems, e)
			if p.accept(closer) {
				return o, nil
			}
			if err := p.expect(","); err != nil {
				return o, err
			}
		}
	case t.text == "!" && t.kind == tPunct:
		p.next()
		o, err := p.operand()
		if err != nil {
			return o, err
		}
		if o.kind != oReg {
			return o, p.errf(t.line, "'!' applies only to a predicate register")
		}
		o.neg = true
		return o, nil
	case t.text == "-" && t.kind == tPunct, t.kind == tNumber:
		minus := p.accept("-")
		n := p.next()
		if n.kind != tNumber {
			return operand{}, p.errf(n.line, "expected a number, found %v", n)
		}
		return operand{kind: oImm, lit: n.text, minus: minus}, nil
	case t.kind == tIdent:
		p.next()
		if t.text == "_" {
			return operand{kind: oSink}, nil
		}
		o := operand{kind: oSym, name: t.text}
		if strings.HasPrefix(t.text, "%") {
			o.kind = oReg
			if p.accept("|") {
				q, err := p.ident()
				if err != nil {
					return o, err
				}
				o.pipe = q.text
			}
			return o, nil
		}
		for p.is("+") {
			p.next()
			v, _, err := p.integer()
			if err != nil {
				return o, err
			}
			o.off += v
		}
		return o, nil
	}
	return operand{}, p.errf(t.line, "unexpected %v in operand", t)
}
