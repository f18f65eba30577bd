package ptxvm

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
)

// Module is a loaded PTX module: its entries compiled, its module-scope .global and .const
// variables laid out in data segments of their own (which persist across launches, as module
// globals do on a GPU).
type Module struct {
	src     *source
	entries map[string]*Kernel
	globals map[string]*symbol
	data    []byte // .global variables, at dataBase
	consts  []byte // .const variables, at constBase
}

// Kernel is a compiled .entry.
type Kernel struct {
	Name         string
	line         int
	prog         []inst
	nslots       int
	consts       []constSlot
	specials     []specialSlot
	params       []kernelParam
	paramBytes   int64
	staticShared int64
	dynOff       int64 // where extern .shared arrays start
	localBytes   int64
	mod          *Module
	// runs keeps the block runs of finished launches (their register files are large), for
	// the next launch of the same block shape.
	runs sync.Pool
}

type kernelParam struct {
	name string
	off  int64
	size int64
	typ  kind
}

// Limits a kernel must respect (those of current GPUs, with room to spare).
const (
	maxShared = 1 << 20 // bytes of shared memory per block, static and dynamic
	maxLocal  = 1 << 16 // bytes of local memory per thread
	maxData   = 1 << 24 // bytes of module .global or .const data
	maxParams = 1 << 15 // bytes of kernel parameters
)

// Address windows of the interpreter's generic address space. Backend allocations lie below
// dataBase; shared and local memory are reached generically through their windows (cvta).
const (
	dataBase   uint64 = 0x3000_0000_0000
	constBase  uint64 = 0x3800_0000_0000
	sharedBase uint64 = 0x4000_0000_0000
	localBase  uint64 = 0x5000_0000_0000
	windowSize uint64 = 1 << 40
)

// Load parses and compiles PTX source. Every entry is compiled, so an unsupported
// instruction anywhere in the module is reported here, with its line.
func Load(ptx string) (*Module, error) {
	src, err := parse(ptx)
	if err != nil {
		return nil, err
	}
	m := &Module{src: src, entries: map[string]*Kernel{}, globals: map[string]*symbol{}}
	if err := m.layoutGlobals(); err != nil {
		return nil, err
	}
	funcs := map[string]bool{}
	for _, f := range src.funcs {
		if !f.entry {
			funcs[f.name] = true
		}
	}
	for _, f := range src.funcs {
		if !f.entry {
			continue
		}
		if f.decl {
			return nil, &SyntaxError{Line: f.line, Msg: fmt.Sprintf("entry %s has no body", f.name)}
		}
		if _, dup := m.entries[f.name]; dup {
			return nil, &SyntaxError{Line: f.line, Msg: fmt.Sprintf("entry %s defined twice", f.name)}
		}
		k, err := compileEntry(m, f)
		if err != nil {
			return nil, err
		}
		k.mod = m
		m.entries[f.name] = k
	}
	return m, nil
}

// Entries returns the module's entry names, sorted.
func (m *Module) Entries() []string {
	out := make([]string, 0, len(m.entries))
	for n := range m.entries {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Kernel returns the compiled entry name, or nil.
func (m *Module) Kernel(name string) *Kernel { return m.entries[name] }

func (m *Module) layoutGlobals() error {
	for _, v := range m.src.vars {
		var seg *[]byte
		var base uint64
		switch v.space {
		case "global":
			seg, base = &m.data, dataBase
		case "const":
			seg, base = &m.consts, constBase
		case "shared":
			continue
		default:
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("module-scope .%s variable %s is not supported", v.space, v.name)}
		}
		if v.extern {
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("extern .%s variable %s is not supported", v.space, v.name)}
		}
		n := v.bytes()
		if n == 0 && len(v.dims) > 0 && v.dims[0] < 0 {
			n = int64(len(v.init) * v.typ.size())
		}
		off := alignUp(int64(len(*seg)), declAlign(v))
		if off+n > maxData {
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("more than %d bytes of .%s data", maxData, v.space)}
		}
		buf := make([]byte, off+n)
		copy(buf, *seg)
		el := v.typ.size()
		if len(v.init)*el > int(n) {
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("%s: %d initialisers for %d bytes", v.name, len(v.init), n)}
		}
		for i, lit := range v.init {
			b, err := immBits(lit, v.typ)
			if err != nil {
				return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("%s: %v", v.name, err)}
			}
			var tmp [8]byte
			binary.LittleEndian.PutUint64(tmp[:], b)
			copy(buf[off+int64(i*el):], tmp[:el])
		}
		*seg = buf
		if _, dup := m.globals[v.name]; dup {
			return &SyntaxError{Line: v.line, Msg: fmt.Sprintf("variable %s declared twice", v.name)}
		}
		m.globals[v.name] = &symbol{space: v.space, addr: base + uint64(off), size: n, decl: v}
	}
	return nil
}
