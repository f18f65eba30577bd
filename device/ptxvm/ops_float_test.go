package ptxvm

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// The float tests check each result against its definition rather than against another
// implementation: with v the exact result (a math/big value, or for div and sqrt a
// comparator that decides the sign of x − v exactly), a result r rounded towards −∞ must
// satisfy r ≤ v < next(r), towards +∞ prev(r) < v ≤ r, towards zero the one of those on
// zero's side, and to nearest v must lie between the midpoints around r (ties to the even
// one).

// fbits describes a float format for the checks: its bit width, precision and exponent range.
type fbits struct {
	f     format
	width uint
}

var (
	tF16  = fbits{fmtF16, 16}
	tBF16 = fbits{fmtBF16, 16}
	tF32  = fbits{fmtF32, 32}
	tF64  = fbits{fmtF64, 64}
)

func (t fbits) value(b uint64) *big.Float {
	neg := b>>(t.width-1)&1 != 0
	mag := b &^ (1 << (t.width - 1))
	mb := uint(t.f.p - 1)
	e := int(mag >> mb)
	frac := mag & (1<<mb - 1)
	emax := 1<<(t.width-1-mb) - 1
	var v *big.Float
	switch {
	case e == emax:
		v = new(big.Float).SetInf(neg)
		return v
	case e == 0:
		v = new(big.Float).SetMantExp(new(big.Float).SetUint64(frac), t.f.emin-int(mb))
	default:
		v = new(big.Float).SetMantExp(new(big.Float).SetUint64(frac|1<<mb), e-t.f.emax-int(mb))
	}
	if neg {
		v.Neg(v)
	}
	return v
}

func (t fbits) isNaN(b uint64) bool {
	mag := b &^ (1 << (t.width - 1))
	return mag > uint64(t.f.infBits(false))
}

// next returns the bits of the next float above (up) or below b (b not NaN).
func (t fbits) next(b uint64, up bool) uint64 {
	sign := uint64(1) << (t.width - 1)
	mag := b &^ sign
	neg := b&sign != 0
	if mag == 0 {
		if up {
			return 1
		}
		return sign | 1
	}
	if neg == up {
		return b - 1
	}
	if mag == t.f.infBits(false) {
		return b
	}
	return b + 1
}

// checkRounded reports whether r is the exact value (given by cmp(x) = sign(x − v)) rounded
// in mode m; v must be nonzero and finite.
func checkRounded(t fbits, r uint64, m rmode, cmp func(x *big.Float) int) error {
	if t.isNaN(r) {
		return fmt.Errorf("NaN result")
	}
	rv := t.value(r)
	if m == rz {
		if cmp(new(big.Float)) < 0 { // v > 0
			m = rm
		} else {
			m = rp
		}
	}
	switch m {
	case rm:
		if cmp(rv) > 0 {
			return fmt.Errorf("rounded down above the exact value")
		}
		if hi := t.value(t.next(r, true)); !hi.IsInf() && cmp(hi) <= 0 {
			return fmt.Errorf("a larger float lies below the exact value")
		}
	case rp:
		if cmp(rv) < 0 {
			return fmt.Errorf("rounded up below the exact value")
		}
		if lo := t.value(t.next(r, false)); !lo.IsInf() && cmp(lo) >= 0 {
			return fmt.Errorf("a smaller float lies above the exact value")
		}
	case rn:
		lo, hi := t.value(t.next(r, false)), t.value(t.next(r, true))
		maxv := t.value(t.f.infBits(false) - 1)
		ulp := new(big.Float).Sub(maxv, t.value(t.f.infBits(false)-2))
		mid := func(a, b *big.Float) *big.Float {
			if a.IsInf() || b.IsInf() { // the midpoint towards infinity is max + ulp/2
				s := new(big.Float).SetPrec(2000).Add(maxv, new(big.Float).Quo(ulp, big.NewFloat(2)))
				if a.Signbit() && b.Signbit() || a.IsInf() && a.Signbit() {
					s.Neg(s)
				}
				return s
			}
			s := new(big.Float).SetPrec(2000).Add(a, b)
			return s.Quo(s, big.NewFloat(2))
		}
		if rv.IsInf() {
			if rv.Signbit() {
				if cmp(mid(rv, hi)) < 0 {
					return fmt.Errorf("overflowed to -Inf too early")
				}
			} else if cmp(mid(lo, rv)) > 0 {
				return fmt.Errorf("overflowed to +Inf too early")
			}
			return nil
		}
		even := r&1 == 0
		if c := cmp(mid(lo, rv)); c > 0 || c == 0 && !even {
			return fmt.Errorf("nearer to the float below")
		}
		if c := cmp(mid(rv, hi)); c < 0 || c == 0 && !even {
			return fmt.Errorf("nearer to the float above")
		}
	}
	return nil
}

// interesting float32 inputs: random bits, ordinary numbers of all magnitudes, subnormals,
// values near overflow and near powers of two.
func randF32(r *rand.Rand) float32 {
	switch r.IntN(8) {
	case 0:
		return math.Float32frombits(r.Uint32())
	case 1:
		return math.Float32frombits(r.Uint32() & 0x807fffff) // subnormal
	case 2:
		return float32(r.NormFloat64() * 3e38)
	case 3:
		v := math.Ldexp(1, r.IntN(280)-150)
		return float32(v) * (1 + float32(r.IntN(5)-2)*0x1p-23)
	case 4:
		return float32(r.IntN(100) - 50)
	}
	return float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20)))
}

func randF64(r *rand.Rand) float64 {
	switch r.IntN(6) {
	case 0:
		return math.Float64frombits(r.Uint64())
	case 1:
		return math.Float64frombits(r.Uint64() & 0x800fffffffffffff)
	case 2:
		return r.NormFloat64() * 1.7e308
	case 3:
		return math.Ldexp(1+float64(r.IntN(5)-2)*0x1p-52, r.IntN(2100)-1075)
	}
	return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
}

// rev returns the comparator x ↦ sign(x − v).
func rev(v *big.Float) func(*big.Float) int { return func(x *big.Float) int { return x.Cmp(v) } }

func bigF(x float64) *big.Float { return new(big.Float).SetPrec(64).SetFloat64(x) }

func TestFloatRoundingF32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	const n = 1500
	in := make([][3]uint64, n)
	for i := range in {
		a, b, c := randF32(r), randF32(r), randF32(r)
		switch i % 5 {
		case 1: // cancellation
			b = -a * (1 + float32(r.IntN(3)-1)*0x1p-23)
		case 2: // a·b close to −c
			c = -float32(float64(a) * float64(b))
		case 3: // signed zeros
			a, b = float32(math.Copysign(0, float64(r.IntN(2)*2-1))), float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
		}
		in[i] = [3]uint64{uint64(math.Float32bits(a)), uint64(math.Float32bits(b)), uint64(math.Float32bits(c))}
	}
	type op struct {
		name  string
		body  func(mode string) string
		exact func(a, b, c float64) (cmp func(*big.Float) int, special float64, zeroSigns [2]bool, isZero bool)
	}
	// binary builds the exact-result function of add, sub (negB) and mul (mul: a zero
	// operand gives an exact zero whose sign is the product's, in every mode).
	binary := func(f func(x, y *big.Float) *big.Float, native func(a, b float64) float64, negB, isMul bool) func(a, b, c float64) (func(*big.Float) int, float64, [2]bool, bool) {
		return func(a, b, c float64) (func(*big.Float) int, float64, [2]bool, bool) {
			if isSpecial(a) || isSpecial(b) || isMul && (a == 0 || b == 0) {
				return nil, native(a, b), [2]bool{}, false
			}
			v := f(bigF(a), bigF(b))
			return rev(v), 0, [2]bool{math.Signbit(a), math.Signbit(b) != negB}, v.Sign() == 0
		}
	}
	ops := []op{
		{"add", func(m string) string { return "add" + m + ".f32 %f0, %f1, %f2;" + outF32 },
			binary(func(x, y *big.Float) *big.Float { return new(big.Float).SetPrec(1000).Add(x, y) }, func(a, b float64) float64 { return a + b }, false, false)},
		{"sub", func(m string) string { return "sub" + m + ".f32 %f0, %f1, %f2;" + outF32 },
			binary(func(x, y *big.Float) *big.Float { return new(big.Float).SetPrec(1000).Sub(x, y) }, func(a, b float64) float64 { return a - b }, true, false)},
		{"mul", func(m string) string { return "mul" + m + ".f32 %f0, %f1, %f2;" + outF32 },
			binary(func(x, y *big.Float) *big.Float { return new(big.Float).SetPrec(1000).Mul(x, y) }, func(a, b float64) float64 { return a * b }, false, true)},
		{"fma", func(m string) string { return "fma" + m + ".f32 %f0, %f1, %f2, %f3;" + outF32 },
			func(a, b, c float64) (func(*big.Float) int, float64, [2]bool, bool) {
				if isSpecial(a) || isSpecial(b) || isSpecial(c) {
					return nil, a*b + c, [2]bool{}, false
				}
				v := new(big.Float).SetPrec(1000).Mul(bigF(a), bigF(b))
				v.Add(v, bigF(c))
				return rev(v), 0, [2]bool{math.Signbit(a) != math.Signbit(b), math.Signbit(c)}, v.Sign() == 0
			}},
		{"div", func(m string) string { return "div" + m + ".f32 %f0, %f1, %f2;" + outF32 },
			func(a, b, c float64) (func(*big.Float) int, float64, [2]bool, bool) {
				if isSpecial(a) || isSpecial(b) || a == 0 || b == 0 {
					return nil, a / b, [2]bool{}, false
				}
				ba, bb := bigF(a), bigF(b)
				return func(x *big.Float) int {
					p := new(big.Float).SetPrec(1000).Mul(x, bb)
					return p.Cmp(ba) * bb.Sign()
				}, 0, [2]bool{}, false
			}},
		{"sqrt", func(m string) string { return "sqrt" + m + ".f32 %f0, %f1;" + outF32 },
			func(a, b, c float64) (func(*big.Float) int, float64, [2]bool, bool) {
				if isSpecial(a) || a <= 0 {
					return nil, math.Sqrt(a), [2]bool{}, false
				}
				ba := bigF(a)
				return func(x *big.Float) int {
					if x.Sign() < 0 {
						return -1
					}
					p := new(big.Float).SetPrec(1000).Mul(x, x)
					return p.Cmp(ba)
				}, 0, [2]bool{}, false
			}},
	}
	for _, o := range ops {
		for _, mode := range []rmode{rn, rz, rm, rp} {
			name := [...]string{".rn", ".rz", ".rm", ".rp"}[mode]
			t.Run(o.name+name, func(t *testing.T) {
				got := evalALU(t, o.body(name), in)
				bad := 0
				for i, x := range in {
					a, b, c := float64(math.Float32frombits(uint32(x[0]))), float64(math.Float32frombits(uint32(x[1]))), float64(math.Float32frombits(uint32(x[2])))
					g := got[i]
					cmp, special, signs, zero := o.exact(a, b, c)
					var err error
					switch {
					case cmp == nil:
						want := uint64(math.Float32bits(float32(special)))
						if special != special {
							want = uint64(nan32)
						}
						if g != want {
							err = fmt.Errorf("special case: want %#08x", want)
						}
					case zero:
						want := uint64(math.Float32bits(float32(zeroSum(signs[0], signs[1], mode))))
						if g != want {
							err = fmt.Errorf("exact zero: want %#08x", want)
						}
					default:
						err = checkRounded(tF32, g, mode, cmp)
					}
					if err != nil && bad < 5 {
						bad++
						t.Errorf("%v, %v, %v → %#08x (%v): %v", float32(a), float32(b), float32(c), g, math.Float32frombits(uint32(g)), err)
					}
				}
			})
		}
	}
}

func TestFloatRoundingF64(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	const n = 600
	in := make([][3]uint64, n)
	for i := range in {
		a, b, c := randF64(r), randF64(r), randF64(r)
		if i%4 == 1 {
			b = -a * (1 + float64(r.IntN(3)-1)*0x1p-52)
		}
		in[i] = [3]uint64{math.Float64bits(a), math.Float64bits(b), math.Float64bits(c)}
	}
	for _, o := range []string{"add", "mul", "fma", "div", "sqrt"} {
		for _, mode := range []rmode{rn, rz, rm, rp} {
			name := [...]string{".rn", ".rz", ".rm", ".rp"}[mode]
			body := o + name + ".f64 %fd0, %fd1, %fd2;" + outF64
			switch o {
			case "fma":
				body = "fma" + name + ".f64 %fd0, %fd1, %fd2, %fd3;" + outF64
			case "sqrt":
				body = "sqrt" + name + ".f64 %fd0, %fd1;" + outF64
			}
			t.Run(o+name, func(t *testing.T) {
				got := evalALU(t, body, in)
				bad := 0
				for i, x := range in {
					a, b, c := math.Float64frombits(x[0]), math.Float64frombits(x[1]), math.Float64frombits(x[2])
					var cmp func(*big.Float) int
					var native float64
					zero, signs := false, [2]bool{}
					switch o {
					case "add":
						native = a + b
						if !isSpecial(a) && !isSpecial(b) {
							v := new(big.Float).SetPrec(5000).Add(bigF(a), bigF(b))
							cmp, zero, signs = rev(v), v.Sign() == 0, [2]bool{math.Signbit(a), math.Signbit(b)}
						}
					case "mul":
						native = a * b
						if !isSpecial(a) && !isSpecial(b) && a != 0 && b != 0 {
							cmp = rev(new(big.Float).SetPrec(5000).Mul(bigF(a), bigF(b)))
						}
					case "fma":
						native = math.FMA(a, b, c)
						if !isSpecial(a) && !isSpecial(b) && !isSpecial(c) {
							v := new(big.Float).SetPrec(5000).Mul(bigF(a), bigF(b))
							v.Add(v, bigF(c))
							cmp, zero, signs = rev(v), v.Sign() == 0, [2]bool{math.Signbit(a) != math.Signbit(b), math.Signbit(c)}
						}
					case "div":
						native = a / b
						if !isSpecial(a) && !isSpecial(b) && a != 0 && b != 0 {
							ba, bb := bigF(a), bigF(b)
							cmp = func(x *big.Float) int { return new(big.Float).SetPrec(5000).Mul(x, bb).Cmp(ba) * bb.Sign() }
						}
					case "sqrt":
						native = math.Sqrt(a)
						if !isSpecial(a) && a > 0 {
							ba := bigF(a)
							cmp = func(x *big.Float) int {
								if x.Sign() < 0 {
									return -1
								}
								return new(big.Float).SetPrec(5000).Mul(x, x).Cmp(ba)
							}
						}
					}
					var err error
					switch {
					case zero:
						if want := math.Float64bits(zeroSum(signs[0], signs[1], mode)); got[i] != want {
							err = fmt.Errorf("exact zero: want %#016x", want)
						}
					case cmp == nil:
						want := math.Float64bits(native)
						if native != native {
							want = nan64
						}
						if got[i] != want {
							err = fmt.Errorf("special case: want %#016x", want)
						}
					default:
						err = checkRounded(tF64, got[i], mode, cmp)
					}
					if err != nil && bad < 5 {
						bad++
						t.Errorf("%v, %v, %v → %#016x: %v", a, b, c, got[i], err)
					}
				}
			})
		}
	}
}

func TestFloatMisc(t *testing.T) {
	f := func(x float32) uint64 { return uint64(math.Float32bits(x)) }
	negZero := uint64(0x80000000)
	nan := uint64(nan32)
	sub := uint64(1) // smallest subnormal
	runCases(t, []aluCase{
		{"add.rm.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(1), f(-1)}, negZero},
		{"add.rn.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(1), f(-1)}, 0},
		{"add.rn.f32 %f0, %f1, %f2;" + outF32, [3]uint64{negZero, negZero}, negZero},
		{"add.rn.f32 %f0, %f1, %f2;" + outF32, [3]uint64{0x7fc01234, f(1)}, nan},
		{"add.rn.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(float32(math.Inf(1))), f(float32(math.Inf(-1)))}, nan},
		{"add.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(1), f(2)}, f(3)},
		{"mul.rn.ftz.f32 %f0, %f1, %f2;" + outF32, [3]uint64{sub, f(1)}, 0},
		{"mul.rn.f32 %f0, %f1, %f2;" + outF32, [3]uint64{sub, f(1)}, sub},
		{"mul.rn.sat.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(3), f(1)}, f(1)},
		{"mul.rn.sat.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(-3), f(1)}, 0},
		{"add.rn.sat.f32 %f0, %f1, %f2;" + outF32, [3]uint64{nan, f(1)}, 0},
		{"fma.rn.f32 %f0, %f1, %f2, %f3;" + outF32, [3]uint64{f(1 + 0x1p-12), f(1 + 0x1p-12), f(0x1p-80)}, f(1+0x1p-11) + 1},
		{"div.rn.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(1), f(3)}, f(float32(1.0) / 3)},
		{"div.rn.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(1), 0}, f(float32(math.Inf(1)))},
		{"div.rn.f32 %f0, %f1, %f2;" + outF32, [3]uint64{0, 0}, nan},
		{"rcp.rn.f32 %f0, %f1;" + outF32, [3]uint64{f(3)}, f(float32(1.0) / 3)},
		{"rcp.rn.f32 %f0, %f1;" + outF32, [3]uint64{negZero}, f(float32(math.Inf(-1)))},
		{"sqrt.rn.f32 %f0, %f1;" + outF32, [3]uint64{f(-1)}, nan},
		{"sqrt.rn.f32 %f0, %f1;" + outF32, [3]uint64{negZero}, negZero},
		{"abs.f32 %f0, %f1;" + outF32, [3]uint64{f(-2)}, f(2)},
		{"abs.f32 %f0, %f1;" + outF32, [3]uint64{0xffc00001}, nan},
		{"neg.f32 %f0, %f1;" + outF32, [3]uint64{0}, negZero},
		{"neg.ftz.f32 %f0, %f1;" + outF32, [3]uint64{sub}, negZero},
		{"min.f32 %f0, %f1, %f2;" + outF32, [3]uint64{nan, f(2)}, f(2)},
		{"min.f32 %f0, %f1, %f2;" + outF32, [3]uint64{0x7fc00000, 0x7f800001}, nan},
		{"min.f32 %f0, %f1, %f2;" + outF32, [3]uint64{0, negZero}, negZero},
		{"max.f32 %f0, %f1, %f2;" + outF32, [3]uint64{negZero, 0}, 0},
		{"max.NaN.f32 %f0, %f1, %f2;" + outF32, [3]uint64{nan, f(2)}, nan},
		{"max.xorsign.abs.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(-3), f(2)}, f(-3)},
		{"min.xorsign.abs.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(-3), f(-2)}, f(2)},
		{"copysign.f32 %f0, %f1, %f2;" + outF32, [3]uint64{f(-1), f(2)}, f(-2)},
		{"testp.notanumber.f32 %p0, %f1;" + outP, [3]uint64{nan}, 1},
		{"testp.subnormal.f32 %p0, %f1;" + outP, [3]uint64{sub}, 1},
		{"testp.normal.f32 %p0, %f1;" + outP, [3]uint64{sub}, 0},
		{"testp.infinite.f32 %p0, %f1;" + outP, [3]uint64{f(float32(math.Inf(-1)))}, 1},
		{"testp.finite.f32 %p0, %f1;" + outP, [3]uint64{f(float32(math.Inf(-1)))}, 0},
		{"add.rn.f64 %fd0, %fd1, %fd2;" + outF64, [3]uint64{math.Float64bits(math.Inf(1)), math.Float64bits(math.Inf(-1))}, nan64},
		{"min.f64 %fd0, %fd1, %fd2;" + outF64, [3]uint64{nan64, math.Float64bits(2)}, math.Float64bits(2)},
	})
}
