package ptxvm

import (
	"math"
	"math/big"

	"verity/device/num"
)

// This file holds the IEEE 754 arithmetic the float instructions need. Round-to-nearest-even
// uses Go's own float32/float64 operations (which are correctly rounded, subnormals included)
// and num.FMA32; the directed modes (.rz, .rm, .rp), which Go lacks, compute the exact result
// with math/big and round it once with roundExact.

// rmode is a PTX rounding modifier.
type rmode uint8

const (
	rn rmode = iota // to nearest, ties to even
	rz              // towards zero
	rm              // towards −∞
	rp              // towards +∞
)

func (m rmode) big() big.RoundingMode {
	return [...]big.RoundingMode{big.ToNearestEven, big.ToZero, big.ToNegativeInf, big.ToPositiveInf}[m]
}

// Canonical NaNs: what NVIDIA hardware returns for every NaN result (sign clear, all other
// bits set).
const (
	nan16 = 0x7fff
	nan32 = num.NaNBits
	nan64 = 0x7fffffffffffffff
)

// format describes a binary floating-point format.
type format struct {
	p    int // significand precision, hidden bit included
	emin int // exponent of the smallest normal number
	emax int // exponent of the largest finite number
}

var (
	fmtF16  = format{11, -14, 15}
	fmtBF16 = format{8, -126, 127}
	fmtF32  = format{24, -126, 127}
	fmtF64  = format{53, -1022, 1023}
)

func (f format) ebits() int { return map[int]int{15: 5, 127: 8, 1023: 11}[f.emax] }

// nanBits is the canonical NaN of the format.
func (f format) nanBits() uint64 {
	switch f {
	case fmtF16, fmtBF16:
		return nan16
	case fmtF32:
		return uint64(nan32)
	}
	return nan64
}

func (f format) infBits(neg bool) uint64 {
	b := uint64(1<<f.ebits()-1) << (f.p - 1)
	if neg {
		b |= 1 << (f.p - 1 + f.ebits())
	}
	return b
}

func (f format) signBit() uint64 { return 1 << (f.p - 1 + f.ebits()) }

// roundExact rounds the exact value x + sticky·ε (ε positive and far smaller than any
// precision in play; sticky is −1, 0 or +1) to format f in mode m, with gradual underflow and
// IEEE overflow, and returns its bits. x must be finite; zero x with zero sticky returns a
// zero of x's sign.
func roundExact(x *big.Float, sticky int, f format, m rmode) uint64 {
	neg := x.Signbit()
	if x.Sign() == 0 && sticky == 0 {
		if neg {
			return f.signBit()
		}
		return 0
	}
	v := new(big.Float).SetPrec(x.MinPrec() + 64).Set(x)
	if sticky != 0 {
		// place ε well below the last significant bit of x (or at an absurdly small scale
		// when x is zero)
		e := -2000
		if x.Sign() != 0 {
			e = x.MantExp(nil) - int(x.MinPrec()) - 32
		}
		eps := new(big.Float).SetMantExp(big.NewFloat(float64(sticky)), e)
		v.Add(v, eps)
		neg = v.Signbit()
	}
	abs := new(big.Float).Abs(v)
	exp := abs.MantExp(nil) - 1 // abs in [2^exp, 2^(exp+1))
	prec := f.p
	if exp < f.emin {
		prec = f.p - (f.emin - exp)
	}
	sub := f.emin - f.p + 1 // exponent of the smallest subnormal
	var r *big.Float
	if prec <= 0 {
		// |v| < 2^sub: zero or the smallest subnormal
		up := false
		switch m {
		case rn:
			half := new(big.Float).SetMantExp(big.NewFloat(1), sub-1)
			up = prec == 0 && abs.Cmp(half) > 0
		case rp:
			up = !neg
		case rm:
			up = neg
		}
		if !up {
			if neg {
				return f.signBit()
			}
			return 0
		}
		r = new(big.Float).SetMantExp(big.NewFloat(1), sub)
	} else {
		r = new(big.Float).SetMode(m.big()).SetPrec(uint(prec))
		if neg {
			// round the magnitude with the mode mirrored, so the sign is handled once below
			mm := m
			if m == rm {
				mm = rp
			} else if m == rp {
				mm = rm
			}
			r.SetMode(mm.big())
		}
		r.Set(abs)
	}
	var bits uint64
	re := r.MantExp(nil) - 1
	switch {
	case re > f.emax:
		away := m == rn || (m == rp && !neg) || (m == rm && neg)
		if away {
			return f.infBits(neg)
		}
		bits = f.infBits(false) - 1 // largest finite
	case re >= f.emin:
		// normal: fraction = (r/2^re − 1)·2^(p−1)
		frac := new(big.Float).SetMantExp(r, f.p-1-re)
		fi, _ := frac.Uint64()
		bits = uint64(re+(f.emax))<<(f.p-1) | fi&(1<<(f.p-1)-1)
	default:
		fr := new(big.Float).SetMantExp(r, -sub)
		bits, _ = fr.Uint64()
	}
	if neg {
		bits |= f.signBit()
	}
	return bits
}

// bigOf returns the exact value of a float32 or float64.
func bigOf(x float64) *big.Float { return new(big.Float).SetPrec(64).SetFloat64(x) }

// Float operations on float32. Every NaN result is the canonical NaN.

func canon32(x float32) float32 {
	if x != x {
		return num.NaN32()
	}
	return x
}

func canon64(x float64) float64 {
	if x != x {
		return math.Float64frombits(nan64)
	}
	return x
}

func isSpecial(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }

// zeroSum is the sign rule for an exact zero sum of terms with signs na, nb: equal signs keep
// theirs; otherwise −0 when rounding towards −∞, +0 else.
func zeroSum(na, nb bool, m rmode) float64 {
	if na == nb {
		if na {
			return math.Copysign(0, -1)
		}
		return 0
	}
	if m == rm {
		return math.Copysign(0, -1)
	}
	return 0
}

func fromBits(f format, b uint64) float64 {
	if f == fmtF32 {
		return float64(math.Float32frombits(uint32(b)))
	}
	return math.Float64frombits(b)
}

// add computes a + b in format f (fmtF32 or fmtF64) in mode m; a and b are exact values of f.
func add(a, b float64, f format, m rmode) float64 {
	if m == rn || isSpecial(a) || isSpecial(b) || a == 0 || b == 0 {
		var s float64
		if f == fmtF32 {
			s = float64(float32(a) + float32(b))
		} else {
			s = a + b
		}
		if s == 0 && m == rm && a == -b && !(a == 0 && b == 0 && !math.Signbit(a) && !math.Signbit(b)) {
			s = zeroSum(math.Signbit(a), math.Signbit(b), m)
		}
		return s
	}
	x := new(big.Float).SetPrec(4096).Add(bigOf(a), bigOf(b))
	if x.Sign() == 0 {
		return zeroSum(math.Signbit(a), math.Signbit(b), m)
	}
	return fromBits(f, roundExact(x, 0, f, m))
}

func mul(a, b float64, f format, m rmode) float64 {
	if m == rn || isSpecial(a) || isSpecial(b) || a == 0 || b == 0 {
		if f == fmtF32 {
			return float64(float32(a) * float32(b))
		}
		return a * b
	}
	x := new(big.Float).SetPrec(256).Mul(bigOf(a), bigOf(b))
	return fromBits(f, roundExact(x, 0, f, m))
}

// fma computes a·b + c rounded once.
func fma(a, b, c float64, f format, m rmode) float64 {
	if f == fmtF32 && m == rn {
		return float64(num.FMA32(float32(a), float32(b), float32(c)))
	}
	if m == rn || isSpecial(a) || isSpecial(b) || isSpecial(c) {
		if f == fmtF32 {
			return float64(num.FMA32(float32(a), float32(b), float32(c)))
		}
		return math.FMA(a, b, c)
	}
	p := new(big.Float).SetPrec(256).Mul(bigOf(a), bigOf(b))
	x := new(big.Float).SetPrec(4096).Add(p, bigOf(c))
	if x.Sign() == 0 {
		pneg := math.Signbit(a) != math.Signbit(b)
		return zeroSum(pneg, math.Signbit(c), m)
	}
	return fromBits(f, roundExact(x, 0, f, m))
}

func div(a, b float64, f format, m rmode) float64 {
	if m == rn || isSpecial(a) || isSpecial(b) || a == 0 || b == 0 {
		if f == fmtF32 {
			return float64(float32(a) / float32(b))
		}
		return a / b
	}
	const prec = 256
	ba, bb := bigOf(a), bigOf(b)
	q := new(big.Float).SetPrec(prec).Quo(ba, bb)
	// residual a − q·b, exact, gives the side of the true quotient relative to q
	r := new(big.Float).SetPrec(2048).Mul(q, bb)
	r.Sub(new(big.Float).SetPrec(2048).Set(ba), r)
	return fromBits(f, roundExact(q, r.Sign()*bb.Sign(), f, m))
}

func sqrt(a float64, f format, m rmode) float64 {
	if a < 0 || a != a {
		return math.NaN()
	}
	if m == rn || math.IsInf(a, 0) || a == 0 {
		if f == fmtF32 {
			return float64(num.Sqrt32(float32(a)))
		}
		return math.Sqrt(a)
	}
	const prec = 256
	ba := bigOf(a)
	q := new(big.Float).SetPrec(prec).Sqrt(ba)
	r := new(big.Float).SetPrec(2048).Mul(q, q)
	r.Sub(new(big.Float).SetPrec(2048).Set(ba), r)
	return fromBits(f, roundExact(q, r.Sign(), f, m))
}

// convert rounds x (an exact float64 value) to format f in mode m and returns its bits;
// NaN becomes f's canonical NaN.
func convert(x float64, f format, m rmode) uint64 {
	switch {
	case x != x:
		return f.nanBits()
	case math.IsInf(x, 0):
		return f.infBits(x < 0)
	}
	if m == rn {
		switch f {
		case fmtF32:
			return uint64(math.Float32bits(float32(x)))
		case fmtF64:
			return math.Float64bits(x)
		}
	}
	return roundExact(bigOf(x), 0, f, m)
}

// intToFloat rounds an integer (signed or not) to format f in mode m.
func intToFloat(v uint64, signed bool, f format, m rmode) uint64 {
	if m == rn {
		switch {
		case f == fmtF32 && signed:
			return uint64(math.Float32bits(float32(int64(v))))
		case f == fmtF32:
			return uint64(math.Float32bits(float32(v)))
		case f == fmtF64 && signed:
			return math.Float64bits(float64(int64(v)))
		case f == fmtF64:
			return math.Float64bits(float64(v))
		}
	}
	x := new(big.Float).SetPrec(64)
	if signed {
		x.SetInt64(int64(v))
	} else {
		x.SetUint64(v)
	}
	return roundExact(x, 0, f, m)
}

// roundInt rounds x to an integral value (as float64) per an integer rounding modifier.
func roundInt(x float64, m rmode) float64 {
	switch m {
	case rz:
		return math.Trunc(x)
	case rm:
		return math.Floor(x)
	case rp:
		return math.Ceil(x)
	}
	return math.RoundToEven(x)
}

// floatToInt converts x to an integer of the given width and signedness, rounding per m and
// saturating (NaN gives 0), as PTX cvt does for every float-to-integer conversion.
func floatToInt(x float64, m rmode, bits uint, signed bool) uint64 {
	if x != x {
		return 0
	}
	r := roundInt(x, m)
	if signed {
		lo, hi := -math.Ldexp(1, int(bits)-1), math.Ldexp(1, int(bits)-1)
		switch {
		case r < lo:
			return uint64(int64(-1) << (bits - 1))
		case r >= hi:
			return uint64(1)<<(bits-1) - 1
		}
		return uint64(int64(r))
	}
	hi := math.Ldexp(1, int(bits))
	switch {
	case r <= 0:
		return 0
	case r >= hi:
		if bits == 64 {
			return ^uint64(0)
		}
		return 1<<bits - 1
	}
	return uint64(r)
}

// half-precision widening (exact); NaN becomes the canonical float32 NaN.
func f16ToF32(h uint16) float32 {
	if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
		return num.NaN32()
	}
	return num.F16ToF32(h)
}

func bf16ToF32(h uint16) float32 {
	if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
		return num.NaN32()
	}
	return num.BF16ToF32(h)
}

// f32ToF16 and f32ToBF16 narrow with rounding mode m; NaN gives 0x7fff.
func f32ToF16(x float32, m rmode) uint16 {
	if x != x {
		return nan16
	}
	if m == rn {
		return num.F32ToF16(x)
	}
	return uint16(convert(float64(x), fmtF16, m))
}

func f32ToBF16(x float32, m rmode) uint16 {
	if x != x {
		return nan16
	}
	if m == rn {
		return num.F32ToBF16(x)
	}
	return uint16(convert(float64(x), fmtBF16, m))
}

// ftz32 flushes a float32 subnormal to a zero of the same sign.
func ftz32(x float32) float32 {
	if b := math.Float32bits(x); b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return x
}
