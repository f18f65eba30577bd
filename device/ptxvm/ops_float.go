package ptxvm

import (
	"math"
	"math/bits"

	"verity/device/num"
)

// Float arithmetic on .f32 and .f64: add sub mul fma mad div sqrt rcp (with .rn .rz .rm
// .rp, .ftz, .sat), min max (.NaN, .xorsign.abs), abs neg copysign testp. Every NaN result is
// the canonical NaN. Approximate instructions (.approx, div.full, ex2, lg2, sin, cos, tanh,
// rsqrt) are refused: their results are not specified bit for bit.
//
// A bare add/sub/mul.f32 (no rounding modifier) runs as .rn; ptxas may contract such a pair
// into an fma, so bit-exact kernels must not contain one (the ptx package's tests check).

func init() {
	register(floatOnly, "fma", "sqrt", "rcp", "copysign", "testp")
	register(approx, "ex2", "lg2", "sin", "cos", "tanh", "rsqrt")
}

func approx(o *opcode, ins *inst) error {
	return o.c.errf("%s is an approximate instruction: its results are hardware-specific and not supported", o.name)
}

func f32of(x uint64) float32 { return math.Float32frombits(uint32(x)) }

func bitsOf32(x float32) uint64 {
	if x != x {
		return uint64(nan32)
	}
	return uint64(math.Float32bits(x))
}

func bitsOf64(x float64) uint64 {
	if x != x {
		return nan64
	}
	return math.Float64bits(x)
}

func sat01(x float64) float64 {
	switch {
	case x != x || x <= 0:
		return 0 // also turns −0 into +0
	case x > 1:
		return 1
	}
	return x
}

func floatOnly(o *opcode, ins *inst) error {
	if o.name == "testp" {
		return testp(o, ins)
	}
	return floatArith(o, ins)
}

func floatArith(o *opcode, ins *inst) error {
	if o.has("approx") || o.has("full") {
		return o.c.errf("%s.approx/.full is an approximate instruction: its results are hardware-specific and not supported", o.name)
	}
	explicit := o.oneOf("rn", "rz", "rm", "rp")
	mode := map[string]rmode{"": rn, "rn": rn, "rz": rz, "rm": rm, "rp": rp}[explicit]
	ftz := o.has("ftz")
	sat := o.has("sat")
	nanMode := o.has("NaN")
	xorsign := o.has("xorsign")
	if xorsign && !o.has("abs") {
		return o.c.errf("min/max.xorsign needs .abs")
	}
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k != kF32 && k != kF64 {
		return o.c.errf("%s.%v is not supported (only .f32 and .f64)", o.name, k)
	}
	if k == kF64 && (ftz || sat) {
		return o.c.errf(".ftz and .sat do not apply to .f64")
	}
	switch o.name {
	case "fma", "mad", "div", "sqrt", "rcp":
		if explicit == "" {
			return o.c.errf("%s.%v needs a rounding modifier (.rn, .rz, .rm or .rp)", o.name, k)
		}
	}
	f := fmtF32
	if k == kF64 {
		f = fmtF64
	}
	// in converts an operand to float64 (flushing subnormals under .ftz), out rounds back
	in := func(x uint64) float64 {
		if k == kF64 {
			return math.Float64frombits(x)
		}
		v := f32of(x)
		if ftz {
			v = ftz32(v)
		}
		return float64(v)
	}
	out := func(v float64) uint64 {
		if sat {
			v = sat01(v)
		}
		if k == kF64 {
			return bitsOf64(v)
		}
		r := float32(v)
		if ftz {
			r = ftz32(r)
		}
		return bitsOf32(r)
	}
	fast := k == kF32 && mode == rn && !ftz && !sat
	switch o.name {
	case "add", "sub":
		neg := o.name == "sub"
		if fast {
			d, s, err := o.operands(2, k)
			if err != nil {
				return err
			}
			if neg {
				ins.fn = func(w *warp, m uint32) {
					D, A, B := w.s(d), w.s(s[0]), w.s(s[1])
					for ; m != 0; m &= m - 1 {
						l := bits.TrailingZeros32(m)
						D[l] = bitsOf32(f32of(A[l]) - f32of(B[l]))
					}
				}
			} else {
				ins.fn = func(w *warp, m uint32) {
					D, A, B := w.s(d), w.s(s[0]), w.s(s[1])
					for ; m != 0; m &= m - 1 {
						l := bits.TrailingZeros32(m)
						D[l] = bitsOf32(f32of(A[l]) + f32of(B[l]))
					}
				}
			}
			return nil
		}
		return o.simple(ins, k, 2, func(a, b uint64) uint64 {
			y := in(b)
			if neg {
				y = -y
			}
			return out(add(in(a), y, f, mode))
		})
	case "mul":
		if fast {
			d, s, err := o.operands(2, k)
			if err != nil {
				return err
			}
			ins.fn = func(w *warp, m uint32) {
				D, A, B := w.s(d), w.s(s[0]), w.s(s[1])
				for ; m != 0; m &= m - 1 {
					l := bits.TrailingZeros32(m)
					D[l] = bitsOf32(f32of(A[l]) * f32of(B[l]))
				}
			}
			return nil
		}
		return o.simple(ins, k, 2, func(a, b uint64) uint64 { return out(mul(in(a), in(b), f, mode)) })
	case "fma", "mad":
		if fast {
			d, s, err := o.operands(3, k)
			if err != nil {
				return err
			}
			ins.fn = func(w *warp, m uint32) {
				D, A, B, C := w.s(d), w.s(s[0]), w.s(s[1]), w.s(s[2])
				for ; m != 0; m &= m - 1 {
					l := bits.TrailingZeros32(m)
					D[l] = bitsOf32(num.FMA32(f32of(A[l]), f32of(B[l]), f32of(C[l])))
				}
			}
			return nil
		}
		return o.simple(ins, k, 3, func(a, b, c uint64) uint64 { return out(fma(in(a), in(b), in(c), f, mode)) })
	case "div":
		return o.simple(ins, k, 2, func(a, b uint64) uint64 { return out(div(in(a), in(b), f, mode)) })
	case "rcp":
		return o.simple(ins, k, 1, func(a uint64) uint64 { return out(div(1, in(a), f, mode)) })
	case "sqrt":
		return o.simple(ins, k, 1, func(a uint64) uint64 { return out(sqrt(in(a), f, mode)) })
	case "abs", "neg":
		if explicit != "" || sat {
			return o.c.errf("%s takes no rounding or saturation modifier", o.name)
		}
		isAbs := o.name == "abs"
		return o.simple(ins, k, 1, func(a uint64) uint64 {
			v := in(a)
			if isAbs {
				v = math.Abs(v)
			} else {
				v = -v
			}
			return out(v)
		})
	case "min", "max":
		if explicit != "" || sat {
			return o.c.errf("%s takes no rounding or saturation modifier", o.name)
		}
		isMax := o.name == "max"
		return o.simple(ins, k, 2, func(a, b uint64) uint64 {
			x, y := in(a), in(b)
			var r float64
			switch {
			case x != x || y != y:
				if nanMode || x != x && y != y {
					return out(math.NaN())
				}
				if x != x {
					r = y
				} else {
					r = x
				}
			case xorsign:
				ax, ay := math.Abs(x), math.Abs(y)
				r = minMax(ax, ay, isMax)
				if math.Signbit(x) != math.Signbit(y) {
					r = -r
				}
			default:
				r = minMax(x, y, isMax)
			}
			return out(r)
		})
	case "copysign":
		// copysign d, a, b: b's magnitude with a's sign
		if explicit != "" || sat || ftz {
			return o.c.errf("copysign takes no modifiers besides its type")
		}
		sign := uint64(1) << (k.bits() - 1)
		return o.simple(ins, k, 2, func(a, b uint64) uint64 { return b&^sign | a&sign })
	}
	return o.c.errf("%s is not a float instruction", o.name)
}

// minMax orders −0 below +0, as PTX min/max do.
func minMax(x, y float64, isMax bool) float64 {
	if x == y {
		if math.Signbit(x) != isMax {
			return x
		}
		return y
	}
	if (x > y) == isMax {
		return x
	}
	return y
}

// operands compiles "op d, s1, …, sn" with sources of type k.
func (o *opcode) operands(n int, k kind) (int32, []int32, error) {
	if err := o.nargs(n + 1); err != nil {
		return 0, nil, err
	}
	d, err := o.dst(0)
	if err != nil {
		return 0, nil, err
	}
	s, err := o.srcs(1, n, k)
	return d, s, err
}

// testp.op.type p, a: finite, infinite, number, notanumber, normal, subnormal.
func testp(o *opcode, ins *inst) error {
	op := o.oneOf("finite", "infinite", "number", "notanumber", "normal", "subnormal")
	if op == "" {
		return o.c.errf("testp needs a test (.finite, .infinite, .number, .notanumber, .normal or .subnormal)")
	}
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k != kF32 && k != kF64 {
		return o.c.errf("testp.%v is not supported", k)
	}
	return o.simple(ins, k, 1, func(a uint64) uint64 {
		var x float64
		var minNormal float64
		if k == kF32 {
			x, minNormal = float64(f32of(a)), 0x1p-126
		} else {
			x, minNormal = math.Float64frombits(a), 0x1p-1022
		}
		ax := math.Abs(x)
		var r bool
		switch op {
		case "finite":
			r = !math.IsInf(x, 0) && x == x
		case "infinite":
			r = math.IsInf(x, 0)
		case "number":
			r = x == x
		case "notanumber":
			r = x != x
		case "normal":
			r = ax >= minNormal && !math.IsInf(x, 0) && x == x
		case "subnormal":
			r = ax > 0 && ax < minNormal
		}
		if r {
			return 1
		}
		return 0
	})
}
