package ptxvm

import (
	"math"
	"math/bits"
)

// Integer arithmetic: add sub mul mad (.lo .hi .wide, .sat, .cc carry chains with addc
// subc madc), mul24 mad24, sad, div rem, min max (.relu), abs neg. The opcodes shared with float arithmetic
// dispatch on their type.

func init() {
	register(arith, "add", "sub", "mul", "mad", "min", "max", "abs", "neg", "div")
	register(intArith, "rem", "addc", "subc", "madc", "sad", "mul24", "mad24")
}

func hasFloatType(o *opcode) bool {
	for _, m := range o.mods {
		if k, ok := kindNames[m]; ok && (k.float() || k == kF16x2 || k == kBF16x2) {
			return true
		}
	}
	return false
}

func arith(o *opcode, ins *inst) error {
	if hasFloatType(o) {
		return floatArith(o, ins)
	}
	return intArith(o, ins)
}

// ccSlot is the per-lane carry flag (CC.CF) of carry-chain instructions.
func (c *compiler) ccSlot() int32 {
	if s, ok := c.specials["%cc"]; ok {
		return s
	}
	s := c.newSlot()
	c.specials["%cc"] = s
	return s
}

func sat32(v int64) uint64 {
	switch {
	case v > math.MaxInt32:
		return math.MaxInt32
	case v < math.MinInt32:
		return 0x80000000
	}
	return uint64(uint32(v))
}

// mulHi returns the high half of the 2w-bit product of a and b read as type k.
func mulHi(a, b uint64, k kind) uint64 {
	w := k.bits()
	if w < 64 {
		p := uint64(k.sext(a) * k.sext(b))
		if !k.signed() {
			p = (a & k.mask()) * (b & k.mask())
		}
		return (p >> w) & k.mask()
	}
	hi, _ := bits.Mul64(a, b)
	if k.signed() {
		if int64(a) < 0 {
			hi -= b
		}
		if int64(b) < 0 {
			hi -= a
		}
	}
	return hi
}

// mulWide returns the 2w-bit product of a and b read as type k (w ≤ 32).
func mulWide(a, b uint64, k kind) uint64 {
	if k.signed() {
		return uint64(k.sext(a) * k.sext(b))
	}
	return (a & k.mask()) * (b & k.mask())
}

func intArith(o *opcode, ins *inst) error {
	cc := o.has("cc")
	sat := o.has("sat")
	mode := o.oneOf("lo", "hi", "wide")
	relu := o.has("relu")
	k, err := o.typ()
	if err != nil {
		return err
	}
	if !k.integer() || k.size() < 2 {
		return o.c.errf("%s.%v is not supported", o.name, k)
	}
	mask := k.mask()
	switch o.name {
	case "add", "sub", "addc", "subc":
		sub := o.name == "sub" || o.name == "subc"
		carryIn := o.name == "addc" || o.name == "subc"
		if sat && (k != kS32 || cc || carryIn) {
			return o.c.errf(".sat applies only to add/sub.s32")
		}
		if cc || carryIn {
			if k.size() < 4 {
				return o.c.errf("carry chains need 32- or 64-bit operands")
			}
			return carryOp(o, ins, k, sub, carryIn, cc)
		}
		switch {
		case sat && sub:
			return o.simple(ins, k, 2, func(a, b uint64) uint64 { return sat32(int64(int32(a)) - int64(int32(b))) })
		case sat:
			return o.simple(ins, k, 2, func(a, b uint64) uint64 { return sat32(int64(int32(a)) + int64(int32(b))) })
		case sub:
			return o.simple(ins, k, 2, func(a, b uint64) uint64 { return (a - b) & mask })
		}
		return o.simple(ins, k, 2, func(a, b uint64) uint64 { return (a + b) & mask })
	case "mul":
		switch mode {
		case "hi":
			return o.simple(ins, k, 2, func(a, b uint64) uint64 { return mulHi(a, b, k) })
		case "wide":
			if k.size() > 4 {
				return o.c.errf("mul.wide needs 16- or 32-bit operands")
			}
			return o.simple(ins, k, 2, func(a, b uint64) uint64 { return mulWide(a, b, k) })
		}
		return o.simple(ins, k, 2, func(a, b uint64) uint64 { return (a * b) & mask })
	case "mad", "madc":
		carryIn := o.name == "madc"
		if cc || carryIn {
			if mode == "wide" || sat {
				return o.c.errf("carry chains apply to mad.lo and mad.hi only")
			}
			return madCarry(o, ins, k, mode == "hi", carryIn, cc)
		}
		switch mode {
		case "hi":
			if sat {
				if k != kS32 {
					return o.c.errf(".sat applies only to mad.hi.s32")
				}
				return o.simple(ins, k, 3, func(a, b, c uint64) uint64 {
					return sat32(int64(int32(a))*int64(int32(b))>>32 + int64(int32(c)))
				})
			}
			return o.simple(ins, k, 3, func(a, b, c uint64) uint64 { return (mulHi(a, b, k) + c) & mask })
		case "wide":
			if k.size() > 4 {
				return o.c.errf("mad.wide needs 16- or 32-bit operands")
			}
			// c is twice as wide as a and b
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
			wk := map[kind]kind{kS16: kS32, kU16: kU32, kS32: kS64, kU32: kU64}[k]
			c, err := o.src(3, wk)
			if err != nil {
				return err
			}
			wm := wk.mask()
			ins.fn = lanes3(d, s[0], s[1], c, func(a, b, c uint64) uint64 { return (mulWide(a, b, k) + c) & wm })
			return nil
		}
		return o.simple(ins, k, 3, func(a, b, c uint64) uint64 { return (a*b + c) & mask })
	case "sad":
		// d = c + |a − b|
		return o.simple(ins, k, 3, func(a, b, c uint64) uint64 {
			var diff uint64
			if k.signed() {
				x, y := k.sext(a), k.sext(b)
				diff = uint64(max(x, y) - min(x, y))
			} else {
				x, y := a&mask, b&mask
				diff = max(x, y) - min(x, y)
			}
			return (c + diff) & mask
		})
	case "mul24", "mad24":
		// the low 24 bits of each operand, sign- or zero-extended, multiplied to 48 bits
		if k.size() != 4 {
			return o.c.errf("%s needs a 32-bit type", o.name)
		}
		ext := func(v uint64) uint64 {
			if k.signed() {
				return uint64(int64(v<<40) >> 40)
			}
			return v & 0xffffff
		}
		prod := func(a, b uint64) uint64 {
			p := ext(a) * ext(b) & (1<<48 - 1)
			if mode == "hi" {
				return p >> 16 & mask
			}
			return p & mask
		}
		if o.name == "mul24" {
			return o.simple(ins, k, 2, func(a, b uint64) uint64 { return prod(a, b) })
		}
		if sat {
			return o.c.errf("mad24.sat is not supported")
		}
		return o.simple(ins, k, 3, func(a, b, c uint64) uint64 { return (prod(a, b) + c) & mask })
	case "div", "rem":
		if err := o.nargs(3); err != nil {
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
		isRem := o.name == "rem"
		ins.fn = func(w *warp, m uint32) {
			D, A, B := w.s(d), w.s(s[0]), w.s(s[1])
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				if B[l]&mask == 0 {
					w.fault(l, "integer division by zero")
					return
				}
				D[l] = intDiv(A[l], B[l], k, isRem)
			}
		}
		return nil
	case "min", "max":
		isMax := o.name == "max"
		if relu && k != kS32 {
			return o.c.errf(".relu applies only to .s32")
		}
		return o.simple(ins, k, 2, func(a, b uint64) uint64 {
			var r uint64
			if k.signed() {
				x, y := k.sext(a), k.sext(b)
				if (x < y) != isMax {
					r = uint64(x)
				} else {
					r = uint64(y)
				}
				if relu && int64(r) < 0 {
					r = 0
				}
			} else {
				x, y := a&mask, b&mask
				if (x < y) != isMax {
					r = x
				} else {
					r = y
				}
			}
			return r & mask
		})
	case "abs", "neg":
		if !k.signed() && !(o.name == "neg" && k.size() >= 2) {
			return o.c.errf("%s needs a signed type", o.name)
		}
		if o.name == "abs" {
			return o.simple(ins, k, 1, func(a uint64) uint64 {
				v := k.sext(a)
				if v < 0 {
					v = -v
				}
				return uint64(v) & mask
			})
		}
		return o.simple(ins, k, 1, func(a uint64) uint64 { return -a & mask })
	}
	return o.c.errf("%s is not an integer instruction", o.name)
}

// intDiv divides (truncating towards zero) or takes the remainder (sign of the dividend).
// The most negative value divided by −1 wraps, as on the hardware.
func intDiv(a, b uint64, k kind, rem bool) uint64 {
	mask := k.mask()
	if k.signed() {
		x, y := k.sext(a), k.sext(b)
		if y == -1 {
			if rem {
				return 0
			}
			return uint64(-x) & mask
		}
		if rem {
			return uint64(x%y) & mask
		}
		return uint64(x/y) & mask
	}
	x, y := a&mask, b&mask
	if rem {
		return x % y
	}
	return x / y
}

// carryOp is add.cc/addc/sub.cc/subc: CC.CF is the carry (add) or borrow (sub).
func carryOp(o *opcode, ins *inst, k kind, sub, carryIn, carryOut bool) error {
	if err := o.nargs(3); err != nil {
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
	cf := o.c.ccSlot()
	w64 := k.size() == 8
	ins.fn = func(w *warp, m uint32) {
		D, A, B, C := w.s(d), w.s(s[0]), w.s(s[1]), w.s(cf)
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			var in uint64
			if carryIn {
				in = C[l] & 1
			}
			var r, c uint64
			if w64 {
				if sub {
					r, c = bits.Sub64(A[l], B[l], in)
				} else {
					r, c = bits.Add64(A[l], B[l], in)
				}
			} else {
				a, b := A[l]&0xffffffff, B[l]&0xffffffff
				if sub {
					t := a - b - in
					r, c = t&0xffffffff, (t>>32)&1
				} else {
					t := a + b + in
					r, c = t&0xffffffff, t>>32
				}
			}
			D[l] = r
			if carryOut {
				C[l] = c
			}
		}
	}
	return nil
}

// madCarry is mad.lo.cc/mad.hi.cc/madc: d = (lo or hi half of a·b) + c (+ CC.CF).
func madCarry(o *opcode, ins *inst, k kind, hi, carryIn, carryOut bool) error {
	if k.size() < 4 {
		return o.c.errf("carry chains need 32- or 64-bit operands")
	}
	if err := o.nargs(4); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, 3, k)
	if err != nil {
		return err
	}
	cf := o.c.ccSlot()
	mask := k.mask()
	ins.fn = func(w *warp, m uint32) {
		D, A, B, Cc, C := w.s(d), w.s(s[0]), w.s(s[1]), w.s(s[2]), w.s(cf)
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			p := (A[l] * B[l]) & mask
			if hi {
				p = mulHi(A[l], B[l], k)
			}
			var in uint64
			if carryIn {
				in = C[l] & 1
			}
			var r, c uint64
			if k.size() == 8 {
				r, c = bits.Add64(p, Cc[l], in)
			} else {
				t := p + Cc[l]&0xffffffff + in
				r, c = t&0xffffffff, t>>32
			}
			D[l] = r
			if carryOut {
				C[l] = c
			}
		}
	}
	return nil
}
