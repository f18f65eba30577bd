package ptxvm

import "math/bits"

// Data movement between registers: mov (including vector pack {a, b} → d and unpack
// d → {a, b}, special registers and variable addresses).

func init() {
	register(mov, "mov")
}

func mov(o *opcode, ins *inst) error {
	k, err := o.typ()
	if err != nil {
		return err
	}
	if err := o.nargs(2); err != nil {
		return err
	}
	switch {
	case o.args[1].kind == oVec: // pack: element 0 is the least significant
		es, err := o.vec(1, kNone, false)
		if err != nil {
			return err
		}
		// immediates in a pack take the element width
		ew := k.bits() / uint(len(es))
		if ew*uint(len(es)) != k.bits() {
			return o.c.errf("cannot pack %d elements into .%v", len(es), k)
		}
		ek := map[uint]kind{8: kB8, 16: kB16, 32: kB32}[ew]
		for i, e := range o.args[1].elems {
			if e.kind == oImm {
				if es[i], err = o.c.value(e, ek); err != nil {
					return err
				}
			}
		}
		d, err := o.dst(0)
		if err != nil {
			return err
		}
		em := uint64(1)<<ew - 1
		ins.fn = func(w *warp, m uint32) {
			D := w.s(d)
			var src [4]*[32]uint64
			for i, e := range es {
				src[i] = w.s(e)
			}
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				var v uint64
				for i := len(es) - 1; i >= 0; i-- {
					v = v<<ew | src[i][l]&em
				}
				D[l] = v
			}
		}
		return nil
	case o.args[0].kind == oVec: // unpack
		ds, err := o.vec(0, kNone, true)
		if err != nil {
			return err
		}
		ew := k.bits() / uint(len(ds))
		if ew*uint(len(ds)) != k.bits() {
			return o.c.errf("cannot unpack .%v into %d elements", k, len(ds))
		}
		a, err := o.src(1, k)
		if err != nil {
			return err
		}
		em := uint64(1)<<ew - 1
		ins.fn = func(w *warp, m uint32) {
			A := w.s(a)
			var dst [4]*[32]uint64
			for i, e := range ds {
				dst[i] = w.s(e)
			}
			for ; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				v := A[l]
				for i := range ds {
					dst[i][l] = v >> (uint(i) * ew) & em
				}
			}
		}
		return nil
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	var a int32
	if k == kPred && o.args[1].kind == oReg {
		a, _, err = o.pred(1)
	} else {
		a, err = o.src(1, k)
	}
	if err != nil {
		return err
	}
	mask := k.mask()
	if k == kPred {
		mask = 1
	}
	ins.fn = func(w *warp, m uint32) {
		D, A := w.s(d), w.s(a)
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			D[l] = A[l] & mask
		}
	}
	return nil
}
