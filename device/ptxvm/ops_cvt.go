package ptxvm

import (
	"math"
	"math/bits"
)

// Conversions: cvt between every integer width (sign- or zero-extending per the source
// type, .sat clamping), integer ↔ float (.rn .rz .rm .rp / .rni .rzi .rmi .rpi, float to
// integer always saturating with NaN → 0), float ↔ float (f16, bf16, f32, f64; widening is
// exact, narrowing takes a rounding mode; .rni etc. round to an integral value), .ftz, .sat,
// .relu, and the f16x2/bf16x2 packs. cvta converts between generic and state-space addresses.

func init() {
	register(cvt, "cvt")
	register(cvta, "cvta")
}

// floatIn reads register bits of float type k as a float64 (exact); NaN stays NaN.
func floatIn(x uint64, k kind, ftz bool) float64 {
	switch k {
	case kF16:
		return float64(f16ToF32(uint16(x)))
	case kBF16:
		return float64(bf16ToF32(uint16(x)))
	case kF32:
		v := f32of(x)
		if ftz {
			v = ftz32(v)
		}
		return float64(v)
	}
	return math.Float64frombits(x)
}

func formatOf(k kind) format {
	switch k {
	case kF16:
		return fmtF16
	case kBF16:
		return fmtBF16
	case kF32:
		return fmtF32
	}
	return fmtF64
}

func cvt(o *opcode, ins *inst) error {
	irnd := o.oneOf("rni", "rzi", "rmi", "rpi")
	frnd := o.oneOf("rn", "rz", "rm", "rp")
	ftz := o.has("ftz")
	sat := o.has("sat")
	relu := o.has("relu")
	if o.has("satfinite") || o.has("rna") {
		return o.c.errf("cvt .satfinite/.rna is not supported")
	}
	ts := o.types()
	if len(ts) != 2 {
		return o.c.errf("cvt needs a destination and a source type")
	}
	dk, ak := ts[0], ts[1]
	if irnd != "" && frnd != "" {
		return o.c.errf("cvt takes one rounding modifier")
	}
	mode := map[string]rmode{"": rn, "rn": rn, "rz": rz, "rm": rm, "rp": rp, "rni": rn, "rzi": rz, "rmi": rm, "rpi": rp}[irnd+frnd]
	if dk == kF16x2 || dk == kBF16x2 {
		return cvtPack(o, ins, dk, ak, mode, frnd, relu)
	}
	if relu && dk != kF16 && dk != kBF16 {
		return o.c.errf(".relu applies only to f16 and bf16 results")
	}
	if ftz && ak != kF32 && dk != kF32 {
		return o.c.errf(".ftz applies only to .f32 conversions")
	}
	if err := o.nargs(2); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	a, err := o.src(1, ak)
	if err != nil {
		return err
	}
	var f func(x uint64) uint64
	switch {
	case dk.integer() && ak.integer():
		if irnd != "" || frnd != "" {
			return o.c.errf("integer-to-integer cvt takes no rounding modifier")
		}
		f = func(x uint64) uint64 {
			if !sat {
				return dk.norm(uint64(ak.sext(x)))
			}
			return dk.norm(satInt(x, ak, dk))
		}
	case dk.integer():
		if !ak.float() {
			return o.c.errf("cvt from .%v is not supported", ak)
		}
		if irnd == "" {
			return o.c.errf("float-to-integer cvt needs .rni, .rzi, .rmi or .rpi")
		}
		f = func(x uint64) uint64 {
			return dk.norm(floatToInt(floatIn(x, ak, ftz), mode, dk.bits(), dk.signed()))
		}
	case ak.integer():
		if !dk.float() {
			return o.c.errf("cvt to .%v is not supported", dk)
		}
		if irnd != "" {
			return o.c.errf("integer-to-float cvt takes .rn, .rz, .rm or .rp")
		}
		ff := formatOf(dk)
		f = func(x uint64) uint64 {
			var v uint64
			if ak.signed() {
				v = intToFloat(uint64(ak.sext(x)), true, ff, mode)
			} else {
				v = intToFloat(x&ak.mask(), false, ff, mode)
			}
			return floatOut(v, dk, sat, ftz, relu)
		}
	default: // float to float
		if !dk.float() || !ak.float() {
			return o.c.errf("cvt.%v.%v is not supported", dk, ak)
		}
		ff := formatOf(dk)
		widen := dk.size() > ak.size() || dk == kF32 && ak == kBF16
		same := dk == ak
		switch {
		case same && frnd != "":
			return o.c.errf("cvt to the same float type takes .rni, .rzi, .rmi or .rpi, not .%s", frnd)
		case !same && irnd != "":
			return o.c.errf("cvt between float types takes .rn, .rz, .rm or .rp, not .%s", irnd)
		case widen && frnd != "":
			return o.c.errf("widening cvt.%v.%v is exact and takes no rounding modifier", dk, ak)
		case !widen && !same && frnd == "":
			return o.c.errf("narrowing cvt.%v.%v needs a rounding modifier", dk, ak)
		case dk.size() == ak.size() && !same:
			return o.c.errf("cvt.%v.%v is not supported", dk, ak)
		}
		f = func(x uint64) uint64 {
			v := floatIn(x, ak, ftz)
			if same && irnd != "" && !math.IsInf(v, 0) && v == v {
				v = roundInt(v, mode)
			}
			var b uint64
			switch {
			case ak == kF32 && dk == kF16 && v == v:
				b = uint64(f32ToF16(float32(v), mode))
			case ak == kF32 && dk == kBF16 && v == v:
				b = uint64(f32ToBF16(float32(v), mode))
			default:
				b = convert(v, ff, mode)
			}
			return floatOut(b, dk, sat, ftz, relu)
		}
	}
	ins.fn = lanes1(d, a, f)
	return nil
}

// satInt converts integer x of type ak to type dk, clamping to dk's range.
func satInt(x uint64, ak, dk kind) uint64 {
	if ak.signed() {
		v := ak.sext(x)
		if dk.signed() {
			lo, hi := int64(-1)<<(dk.bits()-1), int64(dk.mask()>>1)
			return uint64(max(min(v, hi), lo))
		}
		if v < 0 {
			return 0
		}
		return min(uint64(v), dk.mask())
	}
	u := x & ak.mask()
	if dk.signed() {
		return min(u, dk.mask()>>1)
	}
	return min(u, dk.mask())
}

// floatOut applies .sat (clamp to [0, 1], NaN → 0), .relu (negative → +0) and .ftz to the
// bits of a float result of type k, and canonicalises NaN.
func floatOut(b uint64, k kind, sat, ftz, relu bool) uint64 {
	f := formatOf(k)
	v := fromFormat(b, f)
	switch {
	case v != v:
		if sat {
			return 0
		}
		return f.nanBits()
	case sat:
		return convert(sat01(v), f, rn)
	case relu && (v < 0 || math.Signbit(v)):
		return 0
	case ftz && k == kF32:
		return uint64(math.Float32bits(ftz32(float32(v))))
	}
	return b
}

// fromFormat reads bits of format f as a float64.
func fromFormat(b uint64, f format) float64 {
	switch f {
	case fmtF16:
		return float64(f16ToF32(uint16(b)))
	case fmtBF16:
		return float64(bf16ToF32(uint16(b)))
	case fmtF32:
		return float64(f32of(b))
	}
	return math.Float64frombits(b)
}

// cvtPack: cvt.rn{.relu}.f16x2.f32 d, a, b and the bf16x2 form: a goes to the upper half.
func cvtPack(o *opcode, ins *inst, dk, ak kind, mode rmode, frnd string, relu bool) error {
	if ak != kF32 || frnd == "" {
		return o.c.errf("cvt.%v needs .f32 sources and a rounding modifier", dk)
	}
	if err := o.nargs(3); err != nil {
		return err
	}
	d, err := o.dst(0)
	if err != nil {
		return err
	}
	s, err := o.srcs(1, 2, kF32)
	if err != nil {
		return err
	}
	half := func(x uint64) uint64 {
		v := f32of(x)
		var b uint64
		k := kF16
		if dk == kBF16x2 {
			k = kBF16
			b = uint64(f32ToBF16(v, mode))
		} else {
			b = uint64(f32ToF16(v, mode))
		}
		return floatOut(b, k, false, false, relu)
	}
	ins.fn = func(w *warp, m uint32) {
		D, A, B := w.s(d), w.s(s[0]), w.s(s[1])
		for ; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			D[l] = half(A[l])<<16 | half(B[l])
		}
	}
	return nil
}

// cvta.space.size d, a converts a state-space address to a generic one; cvta.to.space
// converts back. Global and const addresses are the same in both.
func cvta(o *opcode, ins *inst) error {
	to := o.has("to")
	sp := o.oneOf("global", "shared", "local", "const", "param")
	if sp == "" {
		return o.c.errf("cvta needs a state space")
	}
	k, err := o.typ()
	if err != nil {
		return err
	}
	if k != kU64 && k != kU32 && k != kB64 && k != kB32 {
		return o.c.errf("cvta.%v is not supported", k)
	}
	if sp == "param" {
		return o.c.errf("cvta.param is not supported")
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
	var base uint64
	switch sp {
	case "shared":
		base = sharedBase
	case "local":
		base = localBase
	}
	mask := k.mask()
	if to {
		ins.fn = lanes1(d, a, func(x uint64) uint64 {
			if base != 0 && x >= base {
				return (x - base) & mask
			}
			return x & mask
		})
		return nil
	}
	ins.fn = lanes1(d, a, func(x uint64) uint64 { return (x&mask + base) & mask })
	return nil
}
