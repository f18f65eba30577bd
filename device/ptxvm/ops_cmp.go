package ptxvm

import (
	"math"
	"math/bits"
)

// Comparison and selection: setp set selp slct.

func init() {
	register(setp, "setp", "set")
	register(selp, "selp")
	register(slct, "slct")
}

var cmpOps = []string{"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs",
	"equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"}

// compare returns the comparison function for op on type k (with .ftz flushing f32 inputs).
func compare(o *opcode, op string, k kind, ftz bool) (func(a, b uint64) bool, error) {
	if k.float() {
		if k != kF32 && k != kF64 {
			return nil, o.c.errf("comparisons on .%v are not supported", k)
		}
		conv := func(x uint64) float64 {
			if k == kF64 {
				return math.Float64frombits(x)
			}
			v := f32of(x)
			if ftz {
				v = ftz32(v)
			}
			return float64(v)
		}
		var f func(x, y float64) bool
		switch op {
		case "eq", "equ":
			f = func(x, y float64) bool { return x == y }
		case "ne", "neu":
			f = func(x, y float64) bool { return x != y }
		case "lt", "ltu":
			f = func(x, y float64) bool { return x < y }
		case "le", "leu":
			f = func(x, y float64) bool { return x <= y }
		case "gt", "gtu":
			f = func(x, y float64) bool { return x > y }
		case "ge", "geu":
			f = func(x, y float64) bool { return x >= y }
		case "num":
			return func(a, b uint64) bool { x, y := conv(a), conv(b); return x == x && y == y }, nil
		case "nan":
			return func(a, b uint64) bool { x, y := conv(a), conv(b); return x != x || y != y }, nil
		default:
			return nil, o.c.errf("comparison %s does not apply to floats", op)
		}
		unordered := len(op) == 3
		return func(a, b uint64) bool {
			x, y := conv(a), conv(b)
			if x != x || y != y {
				return unordered
			}
			return f(x, y)
		}, nil
	}
	if ftz {
		return nil, o.c.errf(".ftz applies only to .f32 comparisons")
	}
	mask := k.mask()
	signed := k.signed()
	bitsOnly := k == kB16 || k == kB32 || k == kB64
	switch op {
	case "eq":
		return func(a, b uint64) bool { return a&mask == b&mask }, nil
	case "ne":
		return func(a, b uint64) bool { return a&mask != b&mask }, nil
	case "lo":
		return func(a, b uint64) bool { return a&mask < b&mask }, nil
	case "ls":
		return func(a, b uint64) bool { return a&mask <= b&mask }, nil
	case "hi":
		return func(a, b uint64) bool { return a&mask > b&mask }, nil
	case "hs":
		return func(a, b uint64) bool { return a&mask >= b&mask }, nil
	}
	if bitsOnly {
		return nil, o.c.errf("comparison %s needs a signed or unsigned type, not .%v", op, k)
	}
	lt := func(a, b uint64) bool { return a&mask < b&mask }
	if signed {
		lt = func(a, b uint64) bool { return k.sext(a) < k.sext(b) }
	}
	switch op {
	case "lt":
		return lt, nil
	case "le":
		return func(a, b uint64) bool { return !lt(b, a) }, nil
	case "gt":
		return func(a, b uint64) bool { return lt(b, a) }, nil
	case "ge":
		return func(a, b uint64) bool { return !lt(a, b) }, nil
	}
	return nil, o.c.errf("comparison %s does not apply to integers", op)
}

func setp(o *opcode, ins *inst) error {
	op := o.oneOf(cmpOps...)
	if op == "" {
		return o.c.errf("%s needs a comparison", o.name)
	}
	boolOp := o.oneOf("and", "or", "xor")
	ftz := o.has("ftz")
	ts := o.types()
	var k, dk kind
	switch {
	case o.name == "setp" && len(ts) == 1:
		k = ts[0]
	case o.name == "set" && len(ts) == 2:
		dk, k = ts[0], ts[1]
		if dk != kU32 && dk != kS32 && dk != kF32 && dk != kB32 {
			return o.c.errf("set.%v: the result type must be .u32, .s32, .b32 or .f32", dk)
		}
	default:
		return o.c.errf("%s has the wrong number of types", o.name)
	}
	cmp, err := compare(o, op, k, ftz)
	if err != nil {
		return err
	}
	n := 3
	if boolOp != "" {
		n = 4
	}
	if err := o.nargs(n); err != nil {
		return err
	}
	var d, q int32 = 0, -1
	if o.name == "setp" {
		p, _, err := o.pred(0)
		if o.args[0].kind == oSink {
			p, err = o.c.newSlot(), nil
		}
		if err != nil {
			return err
		}
		d = p
		if o.args[0].pipe != "" {
			r, ok := o.c.lookupReg(o.args[0].pipe)
			if !ok || r.typ != kPred {
				return o.c.errf("%s is not a predicate register", o.args[0].pipe)
			}
			q = r.slot
		}
	} else if d, err = o.dst(0); err != nil {
		return err
	}
	s, err := o.srcs(1, 2, k)
	if err != nil {
		return err
	}
	var c int32 = -1
	var cneg bool
	if boolOp != "" {
		if c, cneg, err = o.pred(3); err != nil {
			return err
		}
	}
	combine := func(t bool, cv uint64) bool {
		if c < 0 {
			return t
		}
		cb := cv&1 != 0
		if cneg {
			cb = !cb
		}
		switch boolOp {
		case "and":
			return t && cb
		case "or":
			return t || cb
		}
		return t != cb
	}
	one := uint64(1)
	switch dk {
	case kU32, kS32, kB32:
		one = 0xffffffff
	case kF32:
		one = uint64(math.Float32bits(1))
	}
	cs := c
	if cs < 0 {
		cs = s[0] // unused
	}
	ins.fn = func(w *warp, m uint32) {
		D, A, B, C := w.s(d), w.s(s[0]), w.s(s[1]), w.s(cs)
		var Q *[32]uint64
		if q >= 0 {
			Q = w.s(q)
		}
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			t := cmp(A[l], B[l])
			cv := C[l]
			var r uint64
			if combine(t, cv) {
				r = one
			}
			if Q != nil {
				Q[l] = 0
				if combine(!t, cv) {
					Q[l] = 1
				}
			}
			D[l] = r
		}
	}
	return nil
}

// selp.type d, a, b, c: d = c ? a : b.
func selp(o *opcode, ins *inst) error {
	k, err := o.typ()
	if err != nil {
		return err
	}
	if err := o.nargs(4); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, 2, k)
	if err != nil {
		return err
	}
	c, neg, err := o.pred(3)
	if err != nil {
		return err
	}
	flip := uint64(0)
	if neg {
		flip = 1
	}
	ins.fn = lanes3(d, s[0], s[1], c, func(a, b, c uint64) uint64 {
		if (c^flip)&1 != 0 {
			return a
		}
		return b
	})
	return nil
}

// slct.dtype.s32 d, a, b, c / slct.dtype.f32 d, a, b, c: d = c >= 0 ? a : b.
func slct(o *opcode, ins *inst) error {
	ftz := o.has("ftz")
	ts := o.types()
	if len(ts) != 2 || (ts[1] != kS32 && ts[1] != kF32) {
		return o.c.errf("slct needs a result type and .s32 or .f32")
	}
	if err := o.nargs(4); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, 2, ts[0])
	if err != nil {
		return err
	}
	c, err := o.src(3, ts[1])
	if err != nil {
		return err
	}
	isF := ts[1] == kF32
	ins.fn = lanes3(d, s[0], s[1], c, func(a, b, c uint64) uint64 {
		var ge bool
		if isF {
			v := f32of(c)
			if ftz {
				v = ftz32(v)
			}
			ge = v >= 0
		} else {
			ge = int32(c) >= 0
		}
		if ge {
			return a
		}
		return b
	})
	return nil
}
