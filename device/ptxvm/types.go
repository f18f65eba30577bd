package ptxvm

// kind is a PTX fundamental type: its class (bits, unsigned, signed, float, predicate) and
// size in bytes.
type kind uint8

const (
	kNone kind = iota
	kB8
	kB16
	kB32
	kB64
	kB128
	kU8
	kU16
	kU32
	kU64
	kS8
	kS16
	kS32
	kS64
	kF16
	kF16x2
	kBF16
	kBF16x2
	kF32
	kF64
	kPred
)

var kindNames = map[string]kind{
	"b8": kB8, "b16": kB16, "b32": kB32, "b64": kB64, "b128": kB128,
	"u8": kU8, "u16": kU16, "u32": kU32, "u64": kU64,
	"s8": kS8, "s16": kS16, "s32": kS32, "s64": kS64,
	"f16": kF16, "f16x2": kF16x2, "bf16": kBF16, "bf16x2": kBF16x2,
	"f32": kF32, "f64": kF64, "pred": kPred,
}

func (k kind) String() string {
	for n, v := range kindNames {
		if v == k {
			return n
		}
	}
	return "?"
}

// size is the type's width in bytes (predicates: 1).
func (k kind) size() int {
	switch k {
	case kB8, kU8, kS8, kPred:
		return 1
	case kB16, kU16, kS16, kF16, kBF16:
		return 2
	case kB32, kU32, kS32, kF32, kF16x2, kBF16x2:
		return 4
	case kB64, kU64, kS64, kF64:
		return 8
	case kB128:
		return 16
	}
	return 0
}

func (k kind) bits() uint { return uint(k.size()) * 8 }

func (k kind) signed() bool { return k == kS8 || k == kS16 || k == kS32 || k == kS64 }

func (k kind) float() bool { return k == kF32 || k == kF64 || k == kF16 || k == kBF16 }

func (k kind) integer() bool { return !k.float() && k != kPred && k != kF16x2 && k != kBF16x2 }

// mask is the all-ones value of the type's width.
func (k kind) mask() uint64 {
	if k.size() >= 8 {
		return ^uint64(0)
	}
	return 1<<k.bits() - 1
}

// norm brings a result to the register representation: truncated to the type's width, then
// sign-extended for signed types and zero-extended otherwise.
func (k kind) norm(v uint64) uint64 {
	switch k.size() {
	case 1:
		if k.signed() {
			return uint64(int64(int8(v)))
		}
		return v & 0xff
	case 2:
		if k.signed() {
			return uint64(int64(int16(v)))
		}
		return v & 0xffff
	case 4:
		if k.signed() {
			return uint64(int64(int32(v)))
		}
		return v & 0xffffffff
	}
	return v
}

// sext reads v as a value of type k: sign-extended from the type's width for signed types,
// zero-extended otherwise.
func (k kind) sext(v uint64) int64 {
	switch k.size() {
	case 1:
		if k.signed() {
			return int64(int8(v))
		}
		return int64(v & 0xff)
	case 2:
		if k.signed() {
			return int64(int16(v))
		}
		return int64(v & 0xffff)
	case 4:
		if k.signed() {
			return int64(int32(v))
		}
		return int64(v & 0xffffffff)
	}
	return int64(v)
}
