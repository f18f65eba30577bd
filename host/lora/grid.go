package lora

import (
	"encoding/binary"
	"math"

	"verity/device/dtype"
	"verity/device/num"
)

// A grid reads and writes the integer codes of one quantised block type, leaving its scales
// (and every other bit) as they are. Element i of a block has the value step_i·code_i + base_i
// for some base that does not depend on the code; codes run from lo to hi.
type grid struct {
	lo, hi int32
	// decode sets q[i] to element i's code and step[i] to the value of one code there.
	decode func(b []byte, q []int32, step []float32)
	// encode writes the codes q (each within lo…hi) into block b.
	encode func(b []byte, q []int32)
}

var grids = map[dtype.Type]*grid{}

// register adds the grid of a block type (at init time).
func register(t dtype.Type, g *grid) {
	if grids[t] != nil {
		panic("lora: grid " + t.String() + " registered twice")
	}
	grids[t] = g
}

// half reads a little-endian fp16 at b[0:2].
func half(b []byte) float32 { return num.F16ToF32(binary.LittleEndian.Uint16(b)) }

// nibbles32 decodes the 16 bytes of 4-bit codes of a legacy 32-value block: byte j holds
// code j in its low nibble and code j+16 in its high one.
func nibbles32(qs []byte, q []int32) {
	for j := range 16 {
		q[j] = int32(qs[j] & 0xf)
		q[j+16] = int32(qs[j] >> 4)
	}
}

func putNibbles32(qs []byte, q []int32) {
	for j := range 16 {
		qs[j] = uint8(q[j]) | uint8(q[j+16])<<4
	}
}

// fifth32 adds bit 4 of each code of a legacy 5-bit block from qh (bit j for code j).
func fifth32(qh uint32, q []int32) {
	for j := range 32 {
		q[j] |= int32(qh>>j&1) << 4
	}
}

// splitFifth32 writes the low 4 bits of the codes as nibbles32 and returns their bits 4.
func splitFifth32(qs []byte, q []int32) uint32 {
	var qh uint32
	var lo [32]int32
	for j := range 32 {
		lo[j] = q[j] & 0xf
		qh |= uint32(q[j]>>4&1) << j
	}
	putNibbles32(qs, lo[:])
	return qh
}

func fill(s []float32, v float32) {
	for i := range s {
		s[i] = v
	}
}

// uniform is the stochastic rounding draw of element col of row row of the tensor whose name
// hashes to h: a uniform value in [0, 1), the same on every run and machine.
func uniform(h uint64, row, col int) float64 {
	x := mix64(h + uint64(row)*0x9e3779b97f4a7c15)
	x = mix64(x ^ uint64(col)*0xd1b54a32d192ed03)
	return float64(x>>11) / (1 << 53)
}

// mix64 is SplitMix64's finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// nameHash is FNV-1a of a tensor's name.
func nameHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// maxMove bounds a code move before it is converted to an integer (any move past a code range
// is clamped anyway).
const maxMove = 1 << 40

// round rounds x (a move or a code, in steps) with the draw u: stochastically, up with
// probability equal to the fraction, or to nearest.
func round(x, u float64, r Rounding) int64 {
	if x != x {
		return 0 // NaN: no move (only an overflowing adapter can give one)
	}
	x = max(-maxMove, min(maxMove, x))
	if r == Nearest {
		return int64(math.Round(x))
	}
	f := int64(x) // toward zero; exact below 2⁵³
	if float64(f) > x {
		f-- // floor for negative x
	}
	if u < x-float64(f) {
		f++
	}
	return f
}
