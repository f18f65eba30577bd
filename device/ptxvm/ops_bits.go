package ptxvm

import (
	"math/bits"
)

// Logic and bit manipulation: and or xor not cnot (also on .pred), shl shr, bfe bfi, prmt,
// popc clz brev bfind, lop3, shf, bmsk szext, dp4a dp2a.

func init() {
	register(logic, "and", "or", "xor", "not", "cnot")
	register(shift, "shl", "shr")
	register(bitfield, "bfe", "bfi")
	register(prmt, "prmt")
	register(count, "popc", "clz", "brev", "bfind")
	register(lop3, "lop3")
	register(shf, "shf")
	register(dot, "dp4a", "dp2a")
	register(bmsk, "bmsk", "szext")
}

func logic(o *opcode, ins *inst) error {
	k, err := o.typ()
	if err != nil {
		return err
	}
	mask := k.mask()
	if k == kPred {
		mask = 1
	}
	switch o.name {
	case "and":
		return o.simple(ins, k, 2, func(a, b uint64) uint64 { return a & b & mask })
	case "or":
		return o.simple(ins, k, 2, func(a, b uint64) uint64 { return (a | b) & mask })
	case "xor":
		return o.simple(ins, k, 2, func(a, b uint64) uint64 { return (a ^ b) & mask })
	case "not":
		return o.simple(ins, k, 1, func(a uint64) uint64 { return ^a & mask })
	}
	// cnot: d = (a == 0) ? 1 : 0
	return o.simple(ins, k, 1, func(a uint64) uint64 {
		if a&mask == 0 {
			return 1
		}
		return 0
	})
}

// shl/shr: the shift amount is an unsigned 32-bit value; shifts past the width give 0
// (or the sign fill for shr.s).
func shift(o *opcode, ins *inst) error {
	k, err := o.typ()
	if err != nil {
		return err
	}
	if err := o.nargs(3); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	a, err := o.src(1, k)
	if err != nil {
		return err
	}
	b, err := o.src(2, kU32)
	if err != nil {
		return err
	}
	w := uint64(k.bits())
	mask := k.mask()
	if o.name == "shl" {
		ins.fn = lanes2(d, a, b, func(a, b uint64) uint64 {
			n := b & 0xffffffff
			if n >= w {
				return 0
			}
			return (a << n) & mask
		})
		return nil
	}
	if k.signed() {
		ins.fn = lanes2(d, a, b, func(a, b uint64) uint64 {
			n := b & 0xffffffff
			if n >= w {
				n = w - 1
			}
			return uint64(k.sext(a)>>n) & mask
		})
		return nil
	}
	ins.fn = lanes2(d, a, b, func(a, b uint64) uint64 {
		n := b & 0xffffffff
		if n >= w {
			return 0
		}
		return (a & mask) >> n
	})
	return nil
}

// bfe d, a, pos, len / bfi d, f, b, pos, len (pos and len are .u32, only their low 8 bits
// count).
func bitfield(o *opcode, ins *inst) error {
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k.size() < 4 {
		return o.c.errf("%s.%v is not supported", o.name, k)
	}
	msb := uint64(k.bits() - 1)
	mask := k.mask()
	if o.name == "bfe" {
		if err := o.nargs(4); err != nil {
			return err
		}
		d, err := o.dst(0)
		if err != nil {
			return err
		}
		a, err := o.src(1, k)
		if err != nil {
			return err
		}
		pl, err := o.srcs(2, 2, kU32)
		if err != nil {
			return err
		}
		ins.fn = lanes3(d, a, pl[0], pl[1], func(a, p, n uint64) uint64 {
			pos, ln := p&0xff, n&0xff
			var sbit uint64
			if k.signed() && ln != 0 {
				sbit = (a >> min(pos+ln-1, msb)) & 1
			}
			var r uint64
			for i := uint64(0); i <= msb; i++ {
				var bit uint64
				if i < ln && pos+i <= msb {
					bit = (a >> (pos + i)) & 1
				} else {
					bit = sbit
				}
				r |= bit << i
			}
			return r & mask
		})
		return nil
	}
	if err := o.nargs(5); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	fb, err := o.srcs(1, 2, k)
	if err != nil {
		return err
	}
	pl, err := o.srcs(3, 2, kU32)
	if err != nil {
		return err
	}
	ins.fn = lanes4(d, fb[0], fb[1], pl[0], pl[1], func(f, b, p, n uint64) uint64 {
		pos, ln := p&0xff, n&0xff
		r := b & mask
		for i := uint64(0); i < ln && pos+i <= msb; i++ {
			r = r&^(1<<(pos+i)) | ((f>>i)&1)<<(pos+i)
		}
		return r
	})
	return nil
}

// prmt.b32{.mode} d, a, b, c: picks bytes of {b, a} (a is bytes 0-3, b bytes 4-7).
func prmt(o *opcode, ins *inst) error {
	mode := o.oneOf("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")
	if _, err := o.typ(); err != nil {
		return err
	}
	if err := o.nargs(4); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, 3, kB32)
	if err != nil {
		return err
	}
	ins.fn = lanes3(d, s[0], s[1], s[2], func(a, b, c uint64) uint64 {
		src := (b&0xffffffff)<<32 | a&0xffffffff
		byteAt := func(i uint64) uint64 { return (src >> (8 * (i & 7))) & 0xff }
		var sel [4]uint64
		switch mode {
		case "":
			var r uint64
			for i := 0; i < 4; i++ {
				s := (c >> (4 * i)) & 0xf
				v := byteAt(s & 7)
				if s&8 != 0 {
					if v&0x80 != 0 {
						v = 0xff
					} else {
						v = 0
					}
				}
				r |= v << (8 * i)
			}
			return r
		case "f4e":
			n := c & 3
			sel = [4]uint64{n, n + 1, n + 2, n + 3}
		case "b4e":
			n := c & 3
			sel = [4]uint64{n, (n - 1) & 7, (n - 2) & 7, (n - 3) & 7}
		case "rc8":
			n := c & 3
			sel = [4]uint64{n, n, n, n}
		case "ecl":
			n := c & 3
			sel = [4]uint64{n, max(n, 1), max(n, 2), 3}
		case "ecr":
			n := c & 3
			sel = [4]uint64{0, min(n, 1), min(n, 2), n}
		case "rc16":
			if c&1 == 0 {
				sel = [4]uint64{0, 1, 0, 1}
			} else {
				sel = [4]uint64{2, 3, 2, 3}
			}
		}
		var r uint64
		for i := 0; i < 4; i++ {
			r |= byteAt(sel[i]) << (8 * i)
		}
		return r
	})
	return nil
}

func count(o *opcode, ins *inst) error {
	shiftAmt := o.has("shiftamt")
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k.size() < 4 {
		return o.c.errf("%s.%v is not supported", o.name, k)
	}
	if err := o.nargs(2); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	a, err := o.src(1, k)
	if err != nil {
		return err
	}
	w := k.bits()
	mask := k.mask()
	switch o.name {
	case "popc":
		ins.fn = lanes1(d, a, func(a uint64) uint64 { return uint64(bits.OnesCount64(a & mask)) })
	case "clz":
		ins.fn = lanes1(d, a, func(a uint64) uint64 { return uint64(bits.LeadingZeros64(a&mask) - (64 - int(w))) })
	case "brev":
		ins.fn = lanes1(d, a, func(a uint64) uint64 { return bits.Reverse64(a&mask) >> (64 - w) })
	case "bfind":
		// position of the most significant non-sign bit; 0xffffffff when there is none
		ins.fn = lanes1(d, a, func(a uint64) uint64 {
			v := a & mask
			if k.signed() && k.sext(a) < 0 {
				v = ^v & mask
			}
			if v == 0 {
				return 0xffffffff
			}
			p := uint64(63 - bits.LeadingZeros64(v))
			if shiftAmt {
				p = uint64(w-1) - p
			}
			return p
		})
	}
	return nil
}

// lop3.b32 d, a, b, c, immLut: any three-input logic function given by its truth table.
func lop3(o *opcode, ins *inst) error {
	if _, err := o.typ(); err != nil {
		return err
	}
	if err := o.nargs(5); err != nil {
		return err
	}
	if o.args[4].kind != oImm {
		return o.c.errf("lop3's lookup table must be an immediate")
	}
	lut, err := immBits(o.args[4], kU32)
	if err != nil {
		return o.c.errf("%v", err)
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, 3, kB32)
	if err != nil {
		return err
	}
	ins.fn = lanes3(d, s[0], s[1], s[2], func(a, b, c uint64) uint64 {
		var r uint64
		for i := uint(0); i < 8; i++ {
			if lut>>i&1 == 0 {
				continue
			}
			x, y, z := a, b, c
			if i&4 == 0 {
				x = ^a
			}
			if i&2 == 0 {
				y = ^b
			}
			if i&1 == 0 {
				z = ^c
			}
			r |= x & y & z
		}
		return r & 0xffffffff
	})
	return nil
}

// shf.{l,r}.{wrap,clamp}.b32 d, a, b, c: funnel shift of the 64-bit {b, a} by c.
func shf(o *opcode, ins *inst) error {
	dir := o.oneOf("l", "r")
	mode := o.oneOf("wrap", "clamp")
	if dir == "" || mode == "" {
		return o.c.errf("shf needs .l or .r and .wrap or .clamp")
	}
	if _, err := o.typ(); err != nil {
		return err
	}
	if err := o.nargs(4); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, 3, kB32)
	if err != nil {
		return err
	}
	ins.fn = lanes3(d, s[0], s[1], s[2], func(a, b, c uint64) uint64 {
		n := c & 0xffffffff
		if mode == "wrap" {
			n &= 31
		} else if n > 32 {
			n = 32
		}
		v := (b&0xffffffff)<<32 | a&0xffffffff
		if dir == "l" {
			return (v << n) >> 32 & 0xffffffff
		}
		return (v >> n) & 0xffffffff
	})
	return nil
}

// dp4a.atype.btype d, a, b, c: c + the sum of the four byte products;
// dp2a.{lo,hi}.atype.btype: c + two 16-bit × 8-bit products (b's low or high byte pair).
func dot(o *opcode, ins *inst) error {
	half := o.oneOf("lo", "hi")
	ts := o.types()
	if len(ts) != 2 {
		return o.c.errf("%s needs two types (.u32/.s32 each)", o.name)
	}
	as, bs := ts[0] == kS32, ts[1] == kS32
	if o.name == "dp2a" && half == "" {
		return o.c.errf("dp2a needs .lo or .hi")
	}
	if err := o.nargs(4); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, 3, kB32)
	if err != nil {
		return err
	}
	ext := func(v uint64, bitsN uint, signed bool) int64 {
		if signed {
			return int64(v<<(64-bitsN)) >> (64 - bitsN)
		}
		return int64(v & (1<<bitsN - 1))
	}
	if o.name == "dp4a" {
		ins.fn = lanes3(d, s[0], s[1], s[2], func(a, b, c uint64) uint64 {
			sum := int64(int32(c))
			for i := uint(0); i < 4; i++ {
				sum += ext(a>>(8*i), 8, as) * ext(b>>(8*i), 8, bs)
			}
			return uint64(sum) & 0xffffffff
		})
		return nil
	}
	off := uint(0)
	if half == "hi" {
		off = 16
	}
	ins.fn = lanes3(d, s[0], s[1], s[2], func(a, b, c uint64) uint64 {
		sum := int64(int32(c))
		for i := uint(0); i < 2; i++ {
			sum += ext(a>>(16*i), 16, as) * ext(b>>(off+8*i), 8, bs)
		}
		return uint64(sum) & 0xffffffff
	})
	return nil
}

// bmsk.{clamp,wrap}.b32 d, a, b: b one-bits starting at bit a;
// szext.{clamp,wrap}.{s32,u32} d, a, b: a's low b bits, sign- or zero-extended.
func bmsk(o *opcode, ins *inst) error {
	mode := o.oneOf("clamp", "wrap")
	if mode == "" {
		return o.c.errf("%s needs .clamp or .wrap", o.name)
	}
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k.size() != 4 || o.name == "szext" && k != kS32 && k != kU32 {
		return o.c.errf("%s.%v is not supported", o.name, k)
	}
	lim := func(v uint64) uint64 {
		v &= 0xffffffff
		if mode == "wrap" {
			return v & 31
		}
		return min(v, 32)
	}
	if o.name == "bmsk" {
		return o.simple(ins, k, 2, func(a, b uint64) uint64 {
			pos, n := lim(a), lim(b)
			return (uint64(1)<<n - 1) << pos & 0xffffffff
		})
	}
	return o.simple(ins, k, 2, func(a, b uint64) uint64 {
		n := lim(b)
		if n == 0 {
			return 0
		}
		v := a & (1<<n - 1)
		if k.signed() && v>>(n-1)&1 != 0 {
			v |= ^uint64(0) << n
		}
		return v & 0xffffffff
	})
}
