package sass

import "math/bits"

// The lane analysis: what each register holds in the 32 lanes of a warp, as far as the
// addresses of memory instructions need it. A value is either unknown (differs between lanes
// in a way not followed) or a common part, the same in every lane and a multiple of 2^align
// (align 64: the common part is zero, so the value is known exactly), plus a known offset per
// lane. A pointer parameter's value is a common part marked with the parameter's index, so
// that an address says which buffer it reads. Threads are assumed to be numbered along x in
// blocks of a whole number of warps: %tid.x is 32w + lane.

const (
	exact   = 64 // align of a value with no common part
	noParam = -1
)

type val struct {
	off   [32]int64
	align uint8 // the common part is a multiple of 2^align; exact: there is none
	param int8  // the pointer parameter the common part holds, or noParam
}

// A nil *val is unknown.

func constVal(k int64) *val {
	v := &val{align: exact, param: noParam}
	for i := range v.off {
		v.off[i] = k
	}
	return v
}

// uniformVal is a value the same in every lane, nothing else known.
func uniformVal(align uint8, param int8) *val { return &val{align: align, param: param} }

func laneVal(align uint8) *val {
	v := &val{align: align, param: noParam}
	for i := range v.off {
		v.off[i] = int64(i)
	}
	return v
}

// uniform reports whether every lane holds the same value.
func (v *val) uniform() bool {
	if v == nil {
		return false
	}
	for _, o := range v.off[1:] {
		if o != v.off[0] {
			return false
		}
	}
	return true
}

// constant returns the value when it is known and the same in every lane.
func (v *val) constant() (int64, bool) {
	if v == nil || v.align != exact || !v.uniform() {
		return 0, false
	}
	return v.off[0], true
}

func tz(k int64) uint8 {
	if k == 0 {
		return exact
	}
	return uint8(bits.TrailingZeros64(uint64(k)))
}

// totalAlign is the alignment of a uniform value as a whole.
func (v *val) totalAlign() uint8 { return min(v.align, tz(v.off[0])) }

func same(a, b *val) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return *a == *b
}

// join is the value a register holds where two paths meet (or after a guarded write).
func join(a, b *val) *val {
	if same(a, b) {
		return a
	}
	if a == nil || b == nil {
		return nil
	}
	d := b.off[0] - a.off[0]
	for i := range a.off {
		if b.off[i]-a.off[i] != d {
			return nil
		}
	}
	v := &val{off: a.off, align: min(a.align, b.align, tz(d)), param: a.param}
	if a.param != b.param {
		v.param = noParam
	}
	if *v == *a {
		return a
	}
	return v
}

// generic is the result of an operation the analysis does not follow: the same in every lane
// if every input is, else unknown.
func generic(in ...*val) *val {
	for _, v := range in {
		if !v.uniform() {
			return nil
		}
	}
	return uniformVal(0, noParam)
}

func add(a, b *val) *val {
	if a == nil || b == nil {
		return nil
	}
	v := &val{align: min(a.align, b.align), param: noParam}
	for i := range v.off {
		v.off[i] = a.off[i] + b.off[i]
	}
	switch {
	case a.param != noParam && b.param == noParam:
		v.param = a.param
	case b.param != noParam && a.param == noParam:
		v.param = b.param
	}
	return v
}

func neg(a *val) *val {
	if a == nil {
		return nil
	}
	v := &val{align: a.align, param: noParam}
	for i := range v.off {
		v.off[i] = -a.off[i]
	}
	return v
}

func mulConst(a *val, k int64) *val {
	if a == nil {
		return nil
	}
	if k == 0 {
		return constVal(0)
	}
	v := &val{align: exact, param: noParam}
	if a.align != exact {
		v.align = uint8(min(63, int(a.align)+int(tz(k))))
	}
	if k == 1 {
		v.param = a.param
	}
	for i := range v.off {
		v.off[i] = a.off[i] * k
	}
	return v
}

func mul(a, b *val) *val {
	if k, ok := b.constant(); ok {
		return mulConst(a, k)
	}
	if k, ok := a.constant(); ok {
		return mulConst(b, k)
	}
	if a.uniform() && b.uniform() {
		return uniformVal(uint8(min(63, int(a.totalAlign())+int(b.totalAlign()))), noParam)
	}
	return nil
}

// shr is a right shift by s of a 32-bit value (arith: sign-filling).
func shr(a *val, s int64, arith bool) *val {
	if a == nil || s < 0 || s > 63 {
		return nil
	}
	v := &val{align: exact, param: noParam}
	if a.align == exact {
		for i := range v.off {
			if arith {
				v.off[i] = int64(int32(a.off[i])) >> s
			} else {
				v.off[i] = int64(uint32(a.off[i]) >> s)
			}
		}
		return v
	}
	if int64(a.align) < s {
		return generic(a)
	}
	for i, o := range a.off {
		if o < 0 {
			return generic(a)
		}
		v.off[i] = o >> s
	}
	v.align = a.align - uint8(s)
	return v
}

// and is a bitwise and with a known uniform mask m.
func and(a *val, m int64) *val {
	if a == nil {
		return nil
	}
	m = int64(uint32(m))
	v := &val{align: exact, param: noParam}
	hb := 64 - bits.LeadingZeros64(uint64(m)) // m < 2^hb
	low := bits.TrailingZeros64(uint64(m))
	switch {
	case a.align == exact || int(a.align) >= hb:
		// the common part has no bits where m has any
		for i := range v.off {
			v.off[i] = int64(uint32(a.off[i])) & m
		}
		return v
	case m == int64(uint32(^uint32(0)<<low)) && (int(a.align) >= low || a.param != noParam && low <= 4):
		// clearing the low bits keeps the common part. For an address aligned down to a word
		// or vector (a misaligned block read by aligned words) whose common part may have low
		// bits of its own, this takes it as if it had none, so that the access keeps its
		// buffer and the lanes' spread, each lane's address within the mask's 2^low bytes of
		// its true one
		for i := range v.off {
			v.off[i] = a.off[i] &^ (1<<low - 1)
		}
		v.align, v.param = a.align, a.param
		return v
	}
	return generic(a)
}

// or is a bitwise or with a known uniform c.
func or(a *val, c int64) *val {
	if a == nil {
		return nil
	}
	c = int64(uint32(c))
	if a.align == exact {
		v := &val{align: exact, param: noParam}
		for i := range v.off {
			v.off[i] = int64(uint32(a.off[i])) | c
		}
		return v
	}
	if hb := 64 - bits.LeadingZeros64(uint64(c)); int(a.align) >= hb {
		v := &val{align: a.align, param: a.param}
		for i, o := range a.off {
			if o < 0 || o&c != 0 {
				return generic(a)
			}
			v.off[i] = o | c
		}
		return v
	}
	return generic(a)
}

// orDisjoint is a | b where b is known in every lane and its bits lie below a's common part and
// clear of a's own offsets (an address's low bits set over an aligned base): then the or is a
// sum, and a's buffer stays; nil otherwise.
func orDisjoint(a, b *val) *val {
	if a == nil || b == nil || b.align != exact || a.align == exact {
		return nil
	}
	v := &val{align: a.align, param: a.param}
	for i := range v.off {
		if b.off[i] < 0 || b.off[i] >= 1<<a.align || a.off[i] < 0 || a.off[i]&b.off[i] != 0 {
			return nil
		}
		v.off[i] = a.off[i] | b.off[i]
	}
	return v
}

// bitwise applies a three-input LUT to known values.
func lut3(a, b, c *val, lut int64) *val {
	v := &val{align: exact, param: noParam}
	for i := range v.off {
		x, y, z := uint32(a.off[i]), uint32(b.off[i]), uint32(c.off[i])
		var r uint32
		for bit := 0; bit < 32; bit++ {
			idx := (x>>bit&1)<<2 | (y>>bit&1)<<1 | (z >> bit & 1)
			r |= uint32(lut>>idx&1) << bit
		}
		v.off[i] = int64(r)
	}
	return v
}

// lutOf is the LOP3 LUT of f, a function of the bits of inputs a, b, c (in[0], in[1], in[2];
// the LUT's index is a<<2 | b<<1 | c, as lut3 applies it).
func lutOf(f func(in [3]int) int) int64 {
	var lut int64
	for idx := 0; idx < 8; idx++ {
		lut |= int64(f([3]int{idx >> 2 & 1, idx >> 1 & 1, idx & 1})) << idx
	}
	return lut
}

// selectLUT is the LUT of "s ? x : y", s, x and y the inputs' positions (0: a, 1: b, 2: c).
func selectLUT(s, x, y int) int64 {
	return lutOf(func(in [3]int) int { return in[s]*in[x] | (1-in[s])*in[y] })
}

// orAndLUT is the LUT of "x | y & m" (positions as selectLUT's).
func orAndLUT(x, y, m int) int64 { return lutOf(func(in [3]int) int { return in[x] | in[y]&in[m] }) }

// lop3 is LOP3.LUT a, b, c, lut.
func lop3(a, b, c *val, lut int64) *val {
	if a != nil && b != nil && c != nil && a.align == exact && b.align == exact && c.align == exact {
		return lut3(a, b, c, lut)
	}
	// a bitfield insert: m ? x : y with a constant mask m of high bits (x's) over low ones (y's),
	// as ptxas forms x & ~(2^j − 1) | y mod 2^j: the two parts' bits are disjoint, so their or
	// is their sum
	in := []*val{a, b, c}
	for sel := 0; sel < 3; sel++ {
		m, ok := in[sel].constant()
		if !ok {
			continue
		}
		m = int64(uint32(m))
		low := bits.TrailingZeros64(uint64(m))
		if m == 0 || m != int64(uint32(^uint32(0)<<low)) {
			continue
		}
		x, y := (sel+1)%3, (sel+2)%3
		for _, o := range [][2]int{{x, y}, {y, x}} {
			if lut == selectLUT(sel, o[0], o[1]) {
				hi, lo := and(in[o[0]], m), and(in[o[1]], 1<<low-1)
				if hi != nil && lo != nil && lo.align == exact {
					return add(hi, lo)
				}
			}
		}
	}
	// x | y & m with a constant m: the same insert where x's low bits are already clear
	for mp := 0; mp < 3; mp++ {
		m, ok := in[mp].constant()
		if !ok {
			continue
		}
		x, y := (mp+1)%3, (mp+2)%3
		for _, o := range [][2]int{{x, y}, {y, x}} {
			if lut == orAndLUT(o[0], o[1], mp) {
				if v := orDisjoint(in[o[0]], and(in[o[1]], m)); v != nil {
					return v
				}
			}
		}
	}
	// two-input forms with c = 0: the LUT bits at c = 0 give f(a, b)
	if k, ok := c.constant(); ok && k == 0 {
		f := (lut>>0)&1 | (lut>>2)&1<<1 | (lut>>4)&1<<2 | (lut>>6)&1<<3 // f(0,0) f(0,1) f(1,0) f(1,1)
		switch f {
		case 0b1000: // a & b
			if m, ok := b.constant(); ok {
				return and(a, m)
			}
			if m, ok := a.constant(); ok {
				return and(b, m)
			}
		case 0b1110: // a | b
			if m, ok := b.constant(); ok {
				return or(a, m)
			}
			if m, ok := a.constant(); ok {
				return or(b, m)
			}
			if v := orDisjoint(a, b); v != nil {
				return v
			}
			if v := orDisjoint(b, a); v != nil {
				return v
			}
		case 0b1100: // a
			return a
		case 0b1010: // b
			return b
		}
	}
	return generic(a, b, c)
}
