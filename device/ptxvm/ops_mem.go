package ptxvm

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strings"
)

// Memory instructions: ld ldu st (scalar and .v2/.v4, every state space; cache qualifiers
// accepted and ignored, ordering qualifiers — .weak .relaxed .acquire .release .volatile .mmio,
// scopes, .nc — kept for the weak-memory mode), prefetch, and atom/red (integer operations;
// float adds only with Config.AllowFloatAtomics).

func init() {
	register(ldst, "ld", "ldu", "st")
	register(atom, "atom", "red")
	register(nop, "prefetch", "prefetchu")
}

func nop(o *opcode, ins *inst) error {
	for i := range o.mods {
		o.has(o.mods[i])
	}
	ins.fn = func(*warp, uint32) {}
	return nil
}

// memSpace consumes the state-space modifier (default generic), the ordering qualifiers
// (returned as a memOrder: ld and st default to weak, atom and red to .relaxed.gpu; .volatile
// and .mmio are relaxed at system scope) and the cache qualifiers.
func memSpace(o *opcode) (space, memOrder, error) {
	sp := spGeneric
	for i, m := range o.mods {
		base, _, _ := strings.Cut(m, "::")
		s := map[string]space{"global": spGlobal, "shared": spShared, "local": spLocal, "param": spParam, "const": spConst}
		if v, ok := s[base]; ok && (o.used == nil || !o.used[i]) {
			o.has(m)
			sp = v
			break
		}
	}
	var ord memOrder
	atomic := o.name == "atom" || o.name == "red"
	switch o.oneOf("weak", "relaxed", "acquire", "release", "acq_rel", "volatile") {
	case "relaxed":
		ord.sem = semRelaxed
	case "acquire":
		ord.sem = semAcquire
	case "release":
		ord.sem = semRelease
	case "acq_rel":
		ord.sem = semAcqRel
	case "volatile":
		ord = memOrder{sem: semRelaxed, scope: scopeGPU}
	case "":
		if atomic {
			ord.sem = semRelaxed
		}
	}
	if o.has("mmio") {
		ord = memOrder{sem: semRelaxed, scope: scopeGPU}
	}
	switch o.oneOf("cta", "cluster", "gpu", "sys") {
	case "cta", "cluster":
		ord.scope = scopeCTA
	case "gpu", "sys":
		ord.scope = scopeGPU
	case "":
		if ord.sem != semWeak && ord.scope == scopeNone {
			ord.scope = scopeGPU
		}
	}
	switch {
	case o.name == "ld" && (ord.sem == semRelease || ord.sem == semAcqRel),
		o.name == "st" && (ord.sem == semAcquire || ord.sem == semAcqRel),
		o.name == "red" && (ord.sem == semAcquire || ord.sem == semAcqRel):
		return sp, ord, o.c.errf("%s cannot have this ordering", o.name)
	}
	ord.nc = o.has("nc") || o.name == "ldu"
	o.ignore("ca", "cg", "cs", "lu", "cv", "wb", "wt", "aligned", "sync")
	for _, m := range o.mods {
		if strings.HasPrefix(m, "L1::") || strings.HasPrefix(m, "L2::") {
			o.has(m)
		}
	}
	return sp, ord, nil
}

func loadBits(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func storeBits(b []byte, v uint64) {
	switch len(b) {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

// resolve computes lane l's address of a compiled address operand.
func (a *address) at(w *warp, base *[32]uint64, l int) uint64 {
	v := base[l]
	if a.mask32 {
		v &= 0xffffffff
	}
	return v + uint64(a.off)
}

func ldst(o *opcode, ins *inst) error {
	sp, ord, err := memSpace(o)
	if err != nil {
		return err
	}
	vec := 1
	switch o.oneOf("v2", "v4", "v8") {
	case "v2":
		vec = 2
	case "v4":
		vec = 4
	case "v8":
		vec = 8
	}
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k == kPred || k == kB128 {
		return o.c.errf("%s.%v is not supported", o.name, k)
	}
	if err := o.nargs(2, 3); err != nil { // an optional cache-policy operand
		return err
	}
	store := o.name == "st"
	ai, vi := 1, 0
	if store {
		ai, vi = 0, 1
	}
	a, err := o.addr(ai)
	if err != nil {
		return err
	}
	if a.space != "" && sp == spGeneric {
		switch a.space {
		case "shared":
			a.off += int64(sharedBase)
		case "local":
			a.off += int64(localBase)
		case "param":
			return o.c.errf("generic access to a kernel parameter by name")
		}
	}
	if a.space != "" && sp != spGeneric && a.space != sp.String() {
		return o.c.errf("%s is a .%s variable, accessed as .%v", o.args[ai].name, a.space, sp)
	}
	regs, err := o.vec(vi, k, !store)
	if err != nil {
		return err
	}
	if len(regs) != vec {
		return o.c.errf("%d registers for a .v%d access", len(regs), vec)
	}
	size := k.size()
	total := size * vec
	if total > 16 {
		return o.c.errf("accesses wider than 16 bytes are not supported")
	}
	defer func() {
		// the weak-memory mode takes over global accesses; strong accesses are not races
		plain := ins.fn
		weakable := sp == spGlobal || sp == spGeneric
		strong := ord.anyStrong()
		ins.fn = func(w *warp, m uint32) {
			if weakable && w.b.l.wk != nil {
				w.atomic = strong
				if store {
					w.weakSt(sp, &a, regs, size, total, ord, m)
				} else {
					w.weakLd(sp, &a, regs, k, size, total, ord, m)
				}
				w.atomic = false
				return
			}
			if strong {
				w.atomic = true
				plain(w, m)
				w.atomic = false
				return
			}
			plain(w, m)
		}
	}()
	if store {
		ins.fn = func(w *warp, m uint32) {
			base := w.s(a.base)
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				b := w.access(sp, a.at(w, base, l), total, true, l)
				if b == nil {
					return
				}
				for i, r := range regs {
					storeBits(b[i*size:(i+1)*size], w.s(r)[l])
				}
			}
		}
		return nil
	}
	if vec == 1 {
		d := regs[0]
		ins.fn = func(w *warp, m uint32) {
			base, D := w.s(a.base), w.s(d)
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				b := w.access(sp, a.at(w, base, l), total, false, l)
				if b == nil {
					return
				}
				D[l] = k.norm(loadBits(b))
			}
		}
		return nil
	}
	ins.fn = func(w *warp, m uint32) {
		base := w.s(a.base)
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			b := w.access(sp, a.at(w, base, l), total, false, l)
			if b == nil {
				return
			}
			for i, r := range regs {
				w.s(r)[l] = k.norm(loadBits(b[i*size : (i+1)*size]))
			}
		}
	}
	return nil
}

// atom{.space}.op.type d, [a], b{, c} and red{.space}.op.type [a], b: read-modify-write,
// lane by lane in lane order. Global atomics are serialised across the launch.
func atom(o *opcode, ins *inst) error {
	sp, ord, err := memSpace(o)
	if err != nil {
		return err
	}
	if sp != spGlobal && sp != spShared && sp != spGeneric {
		return o.c.errf("%s on .%v is not supported", o.name, sp)
	}
	op := o.oneOf("and", "or", "xor", "cas", "exch", "add", "inc", "dec", "min", "max")
	if op == "" {
		return o.c.errf("%s needs an operation", o.name)
	}
	o.ignore("noftz")
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k.size() != 4 && k.size() != 8 {
		return o.c.errf("%s.%v is not supported", o.name, k)
	}
	isFloat := k.float()
	if isFloat && op != "add" && op != "exch" {
		return o.c.errf("%s.%s.%v is not supported", o.name, op, k)
	}
	red := o.name == "red"
	first := 1
	if red {
		first = 0
	}
	n := 2
	if op == "cas" {
		n = 3
	}
	if err := o.nargs(first + n); err != nil {
		return err
	}
	var d int32 = -1
	if !red {
		if d, err = o.dst(0); err != nil {
			return err
		}
	}
	a, err := o.addr(first)
	if err != nil {
		return err
	}
	if a.space != "" && sp == spGeneric && a.space == "shared" {
		a.off += int64(sharedBase)
	}
	s, err := o.srcs(first+1, n-1, k)
	if err != nil {
		return err
	}
	size := k.size()
	mask := k.mask()
	update := func(old, b, c uint64) uint64 {
		switch op {
		case "and":
			return old & b
		case "or":
			return old | b
		case "xor":
			return old ^ b
		case "exch":
			return b
		case "cas":
			if old&mask == b&mask {
				return c
			}
			return old
		case "inc":
			if old&mask >= b&mask {
				return 0
			}
			return old + 1
		case "dec":
			if old&mask == 0 || old&mask > b&mask {
				return b
			}
			return old - 1
		case "min", "max":
			less := old&mask < b&mask
			if k.signed() {
				less = k.sext(old) < k.sext(b)
			}
			if less == (op == "min") {
				return old
			}
			return b
		}
		// add
		switch {
		case k == kF32:
			return bitsOf32(f32of(old) + f32of(b))
		case k == kF64:
			return bitsOf64(math.Float64frombits(old) + math.Float64frombits(b))
		}
		return old + b
	}
	ins.fn = func(w *warp, m uint32) {
		if isFloat && op == "add" {
			if !w.b.l.cfg.AllowFloatAtomics {
				w.fault(bits.TrailingZeros32(m), "float atomic add: the result depends on the order threads arrive (set Config.AllowFloatAtomics to run it)")
				return
			}
			w.b.l.fatom.Add(1)
		}
		wk := w.b.l.wk
		if sp != spShared && wk == nil {
			w.b.l.atomMu.Lock()
			defer w.b.l.atomMu.Unlock()
		}
		w.atomic = true
		defer func() { w.atomic = false }()
		base := w.s(a.base)
		B := w.s(s[0])
		C := B
		if len(s) > 1 {
			C = w.s(s[1])
		}
		if wk != nil && sp != spShared && ord.releases() {
			w.release()
		}
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			addr := a.at(w, base, l)
			if wk != nil && isGlobal(sp, addr) && addr&uint64(size-1) == 0 {
				// the weak-memory mode: on the latest committed value, as a strong write
				mem := w.global(addr, size, true, l)
				if mem == nil {
					return
				}
				b, c := B[l], C[l]
				old := wk.atomic(w, addr, mem, ord, red, func(old uint64) uint64 { return update(old, b, c) & mask })
				if d >= 0 {
					w.s(d)[l] = k.norm(old)
				}
				continue
			}
			mem := w.access(sp, addr, size, true, l)
			if mem == nil {
				return
			}
			old := loadBits(mem)
			storeBits(mem, update(old, B[l], C[l])&mask)
			if d >= 0 {
				w.s(d)[l] = k.norm(old)
			}
		}
		if wk != nil {
			wk.maybeYield(w)
		}
	}
	return nil
}
