package repack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"

	"verity/device/dtype"
)

// Align is the byte alignment of every row and every expert matrix in a packed tensor.
const Align = 256

// A lane loads one 16-byte piece; a warp's 32 loads read one 512-byte chunk.
const (
	piece = 16
	lanes = 32
	chunk = piece * lanes
)

// span is a byte range [off, off+n) of a ggml block.
type span struct{ off, n int }

// field is one quant plane of a block type: value l (l < count) of unit s is
// blk[base(s)+l] >> shift(s) & (1<<bits − 1). In the packed plane a unit has
// w = count·bits/8 bytes, and value l lies in byte l mod w at bit bits·⌊l/w⌋ (valueAt).
type field struct {
	bits, count int
	base        func(s int) int
	shift       func(s int) int
}

// whole is the plane of n verbatim bytes at off (one unit per block).
func whole(off, n int) field {
	return field{8, n, func(int) int { return off }, func(int) int { return 0 }}
}

// scheme describes how one quantised block type is split into sections.
type scheme struct {
	f16    []int // offsets of the fp16 fields, in section order
	scales span  // packed scale bytes; n == 0 if none
	outSc  int   // unpacked scale bytes per block
	unpack func(dst, src []byte)
	pack   func(dst, src []byte)
	units  int     // matvec units per block
	planes []field // quant planes
}

var schemes = map[dtype.Type]*scheme{
	dtype.Q4_0: {f16: []int{0}, units: 1, planes: []field{whole(2, 16)}},
	dtype.Q4_1: {f16: []int{0, 2}, units: 1, planes: []field{whole(4, 16)}},
	dtype.Q5_0: {f16: []int{0}, units: 1, planes: []field{whole(6, 16), whole(2, 4)}},
	dtype.Q5_1: {f16: []int{0, 2}, units: 1, planes: []field{whole(8, 16), whole(4, 4)}},
	dtype.Q8_0: {f16: []int{0}, units: 1, planes: []field{whole(2, 32)}},
	dtype.Q2_K: {f16: []int{80, 82}, scales: span{0, 16}, outSc: 32, unpack: unpackQ2K, pack: packQ2K, units: 8,
		planes: []field{
			{2, 32, func(s int) int { return 16 + 32*(s/4) }, func(s int) int { return 2 * (s % 4) }},
		}},
	dtype.Q3_K: {f16: []int{108}, scales: span{96, 12}, outSc: 16, unpack: unpackQ3K, pack: packQ3K, units: 8,
		planes: []field{
			{2, 32, func(s int) int { return 32 + 32*(s/4) }, func(s int) int { return 2 * (s % 4) }},
			{1, 32, func(int) int { return 0 }, func(s int) int { return s }},
		}},
	dtype.Q4_K: {f16: []int{0, 2}, scales: span{4, 12}, outSc: 16, unpack: unpackK4, pack: packK4, units: 8,
		planes: []field{
			{4, 32, func(s int) int { return 16 + 32*(s/2) }, func(s int) int { return 4 * (s % 2) }},
		}},
	dtype.Q5_K: {f16: []int{0, 2}, scales: span{4, 12}, outSc: 16, unpack: unpackK4, pack: packK4, units: 8,
		planes: []field{
			{4, 32, func(s int) int { return 48 + 32*(s/2) }, func(s int) int { return 4 * (s % 2) }},
			{1, 32, func(int) int { return 16 }, func(s int) int { return s }},
		}},
	dtype.Q6_K: {f16: []int{208}, scales: span{192, 16}, outSc: 16, unpack: copyBytes, pack: copyBytes, units: 8,
		planes: []field{
			{4, 32, func(s int) int { return 64*(s/4) + 32*(s%2) }, func(s int) int { return 4 * (s % 4 / 2) }},
			{2, 32, func(s int) int { return 128 + 32*(s/4) }, func(s int) int { return 2 * (s % 4) }},
		}},
}

// valueAt returns the byte and bit of value l in a packed unit of w bytes with b-bit values:
// byte l mod w, bit b·⌊l/w⌋. So the 4-byte word m of a unit, shifted right by b·t and masked
// to b bits per byte, holds values 4(m + (w/4)·t) … +3 in its four bytes — the four
// consecutive activation values of one 32-bit word, which a kernel multiplies with one dp4a.
func valueAt(b, w, l int) (byte, bit int) { return l % w, b * (l / w) }

// values8 returns values 8g … 8g+7 of a packed unit with b-bit values (b < 8), one per byte
// of a little-endian word (the word-at-a-time form of valueAt).
func values8(unit []byte, b, g int) uint64 {
	rep := 0x0101010101010101 * uint64(1<<b-1)
	w := 4 * b
	if w >= 8 { // all eight in bytes (8g mod w) … +7 at the same bit
		return binary.LittleEndian.Uint64(unit[8*g%w:]) >> (b * (8 * g / w)) & rep
	}
	x := uint64(binary.LittleEndian.Uint32(unit)) // w = 4: two 4-value halves, bits 2g and 2g+1
	return (x>>(2*g))&0x01010101 | (x>>(2*g+1)&0x01010101)<<32
}

// setValues8 ors values 8g … 8g+7 (b bits each, one per byte of v) into a packed unit whose
// bits for them are clear: values8's inverse.
func setValues8(unit []byte, b, g int, v uint64) {
	w := 4 * b
	if w >= 8 {
		at := unit[8*g%w:]
		binary.LittleEndian.PutUint64(at, binary.LittleEndian.Uint64(at)|v<<(b*(8*g/w)))
		return
	}
	x := binary.LittleEndian.Uint32(unit)
	x |= uint32(v&0x01010101)<<(2*g) | uint32(v>>32&0x01010101)<<(2*g+1)
	binary.LittleEndian.PutUint32(unit, x)
}

func copyBytes(dst, src []byte) { copy(dst, src) }

// unpackQ2K splits the 16 scale bytes into 16 scales (low nibbles) then 16 mins (high).
func unpackQ2K(dst, src []byte) {
	for i, b := range src[:16] {
		dst[i], dst[16+i] = b&0xf, b>>4
	}
}

func packQ2K(dst, src []byte) {
	for i := range dst[:16] {
		dst[i] = src[i]&0xf | src[16+i]<<4
	}
}

// unpackQ3K gives the 16 raw 6-bit scales: low 4 bits from bytes 0…7 (low nibble for
// scales 0…7, high for 8…15), high 2 bits from bytes 8…11 at shift 2·(g/4).
func unpackQ3K(dst, src []byte) {
	for g := 0; g < 16; g++ {
		lo := src[g%8] >> (4 * (g / 8)) & 0xf
		hi := src[8+g%4] >> (2 * (g / 4)) & 3
		dst[g] = lo | hi<<4
	}
}

func packQ3K(dst, src []byte) {
	clear(dst[:12])
	for g := 0; g < 16; g++ {
		dst[g%8] |= (src[g] & 0xf) << (4 * (g / 8))
		dst[8+g%4] |= (src[g] >> 4 & 3) << (2 * (g / 4))
	}
}

// unpackK4 gives the 8 scales then the 8 mins of a q4_K/q5_K block (get_scale_min_k4).
func unpackK4(dst, src []byte) {
	for j := 0; j < 4; j++ {
		dst[j], dst[8+j] = src[j]&63, src[j+4]&63
	}
	for j := 4; j < 8; j++ {
		dst[j] = src[j+4]&0xf | src[j-4]>>6<<4
		dst[8+j] = src[j+4]>>4 | src[j]>>6<<4
	}
}

func packK4(dst, src []byte) {
	for j := 0; j < 4; j++ {
		dst[j] = src[j]&63 | src[4+j]>>4<<6      // scale j, top bits of scale j+4
		dst[j+4] = src[8+j]&63 | src[12+j]>>4<<6 // min j, top bits of min j+4
		dst[j+8] = src[4+j]&0xf | src[12+j]&0xf<<4
	}
}

// Layout describes one packed tensor. Offsets are in bytes; section offsets are relative
// to the start of a row. Fields that do not apply to the type are zero.
type Layout struct {
	Type dtype.Type
	Dims []int64 // GGUF dims, fastest first

	Experts      int64 // matrices (product of Dims[2:]; 1 for 1-D and 2-D tensors)
	Rows         int64 // rows per matrix
	RowValues    int64 // values per row (Dims[0])
	Blocks       int64 // blocks per row
	RowBytes     int64 // GGUF bytes per row
	RowStride    int64 // packed bytes per row, a multiple of Align
	ExpertStride int64 // packed bytes per matrix, a multiple of Align

	F16Off, F16Fields    int64   // fp16 section; fields per block
	ScaleOff, ScaleBytes int64   // unpacked scale section; bytes per block
	Units                int64   // matvec units per row
	Planes               []Plane // interleaved quant sections
}

// Plane is one interleaved quant section of a row: Width bytes per unit, at Off.
type Plane struct{ Off, Width int64 }

// Size is the packed tensor's total byte count.
func (l *Layout) Size() int64 { return l.Experts * l.ExpertStride }

// Packed is a tensor in device layout.
type Packed struct {
	Layout Layout
	Data   []byte
}

// Supported reports whether Pack handles type t.
func Supported(t dtype.Type) bool {
	switch t {
	case dtype.F32, dtype.F16, dtype.BF16:
		return true
	}
	_, ok := schemes[t]
	return ok
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// maxBytes bounds every size so that offset arithmetic cannot overflow.
const maxBytes = 1 << 50

// NewLayout computes the layout of a tensor of type t and GGUF dims.
func NewLayout(t dtype.Type, dims []int64) (Layout, error) {
	if !t.Known() {
		return Layout{}, fmt.Errorf("repack: unknown ggml type id %d", uint32(t))
	}
	if !Supported(t) {
		return Layout{}, fmt.Errorf("repack: type %s is not supported", t)
	}
	if len(dims) == 0 || len(dims) > 4 {
		return Layout{}, fmt.Errorf("repack: %s tensor has %d dims, want 1 to 4", t, len(dims))
	}
	for i, d := range dims {
		if d <= 0 {
			return Layout{}, fmt.Errorf("repack: %s tensor dim %d is %d, want > 0", t, i, d)
		}
	}
	if _, err := t.TensorBytes(dims); err != nil {
		return Layout{}, fmt.Errorf("repack: %w", err)
	}
	l := Layout{Type: t, Dims: append([]int64(nil), dims...), Experts: 1, Rows: 1, RowValues: dims[0]}
	if len(dims) > 1 {
		l.Rows = dims[1]
	}
	for _, d := range dims[min(2, len(dims)):] {
		l.Experts *= d
	}
	l.Blocks = dims[0] / int64(t.BlockSize())
	l.RowBytes = l.Blocks * int64(t.BlockBytes())
	if l.RowBytes > maxBytes {
		return Layout{}, fmt.Errorf("repack: %s row of %d values is too large", t, dims[0])
	}
	end := l.RowBytes
	if s, ok := schemes[t]; ok {
		l.F16Fields = int64(len(s.f16))
		l.ScaleBytes = int64(s.outSc)
		l.ScaleOff = alignUp(2*l.F16Fields*l.Blocks, piece)
		end = l.ScaleOff + l.ScaleBytes*l.Blocks
		l.Units = l.Blocks * int64(s.units)
		for _, f := range s.planes {
			w := int64(f.bits * f.count / 8)
			off := alignUp(end, 128)
			l.Planes = append(l.Planes, Plane{Off: off, Width: w})
			end = off + (((l.Units+lanes-1)/lanes*w)+piece-1)/piece*chunk
		}
	}
	l.RowStride = alignUp(end, Align)
	if l.Rows > maxBytes/l.RowStride || l.Experts > maxBytes/(l.Rows*l.RowStride) {
		return Layout{}, fmt.Errorf("repack: %s tensor of dims %v is too large", t, dims)
	}
	l.ExpertStride = l.Rows * l.RowStride
	return l, nil
}

// Pack converts a GGUF tensor of type t and dims (fastest first) into its device layout.
func Pack(t dtype.Type, dims []int64, data []byte) (Packed, error) {
	l, err := NewLayout(t, dims)
	if err != nil {
		return Packed{}, err
	}
	if want := l.Experts * l.Rows * l.RowBytes; int64(len(data)) != want {
		return Packed{}, fmt.Errorf("repack: %s tensor of dims %v has %d bytes, want %d", t, dims, len(data), want)
	}
	out := make([]byte, l.Size())
	s := schemes[t]
	eachRow(&l, func(e, r int64) {
		src := data[(e*l.Rows+r)*l.RowBytes:][:l.RowBytes]
		dst := out[e*l.ExpertStride+r*l.RowStride:][:l.RowStride]
		if s == nil {
			copy(dst, src)
			return
		}
		packRow(&l, s, dst, src)
	})
	return Packed{Layout: l, Data: out}, nil
}

// Unpack restores the GGUF bytes of a packed tensor.
func Unpack(p Packed) ([]byte, error) {
	if p.Layout.Dims == nil {
		return nil, errors.New("repack: packed tensor has no layout")
	}
	l, err := NewLayout(p.Layout.Type, p.Layout.Dims)
	if err != nil {
		return nil, err
	}
	if !sameLayout(&l, &p.Layout) {
		return nil, fmt.Errorf("repack: packed %s layout does not match dims %v", l.Type, l.Dims)
	}
	if int64(len(p.Data)) != l.Size() {
		return nil, fmt.Errorf("repack: packed %s tensor has %d bytes, want %d", l.Type, len(p.Data), l.Size())
	}
	out := make([]byte, l.Experts*l.Rows*l.RowBytes)
	s := schemes[l.Type]
	eachRow(&l, func(e, r int64) {
		dst := out[(e*l.Rows+r)*l.RowBytes:][:l.RowBytes]
		src := p.Data[e*l.ExpertStride+r*l.RowStride:][:l.RowStride]
		if s == nil {
			copy(dst, src)
			return
		}
		unpackRow(&l, s, dst, src)
	})
	return out, nil
}

// eachRow calls f for every row r of every matrix e, spreading large tensors over
// GOMAXPROCS goroutines (rows are independent).
func eachRow(l *Layout, f func(e, r int64)) {
	n := l.Experts * l.Rows
	workers := int64(runtime.GOMAXPROCS(0))
	if n*l.RowBytes < 1<<20 || workers < 2 {
		workers = 1
	}
	workers = min(workers, n)
	var wg sync.WaitGroup
	for w := int64(0); w < workers; w++ {
		wg.Go(func() {
			for i := n * w / workers; i < n*(w+1)/workers; i++ {
				f(i/l.Rows, i%l.Rows)
			}
		})
	}
	wg.Wait()
}

func sameLayout(a, b *Layout) bool {
	return reflect.DeepEqual(*a, *b)
}

// unitAt returns the row offset of byte i of unit u in plane p (a unit's bytes are
// contiguous within each 16-byte piece, since widths are 4, 8, 16 or 32): the bytes of lane l's
// units l, l+32, … follow one another in a stream cut into 16-byte pieces, and piece m of
// lane l lies at 512·m + 16·l.
func unitAt(p Plane, u, i int64) int64 {
	o := (u/lanes)*p.Width + i
	return p.Off + chunk*(o/piece) + piece*(u%lanes) + o%piece
}

func packRow(l *Layout, s *scheme, dst, src []byte) {
	bb := int64(l.Type.BlockBytes())
	var buf [32]byte
	for b := int64(0); b < l.Blocks; b++ {
		blk := src[b*bb:][:bb]
		for f, off := range s.f16 {
			binary.LittleEndian.PutUint16(dst[l.F16Off+2*(int64(f)*l.Blocks+b):], binary.LittleEndian.Uint16(blk[off:]))
		}
		if s.outSc > 0 {
			s.unpack(dst[l.ScaleOff+b*l.ScaleBytes:][:l.ScaleBytes], blk[s.scales.off:][:s.scales.n])
		}
		for pi, f := range s.planes {
			pl := l.Planes[pi]
			mask := byte(1<<f.bits - 1)
			for su := 0; su < s.units; su++ {
				u := b*int64(s.units) + int64(su)
				unit := buf[:pl.Width]
				q, sh := blk[f.base(su):][:f.count], f.shift(su)
				if f.bits == 8 {
					copy(unit, q)
					q = nil
				} else {
					clear(unit)
				}
				for g := 0; g < len(q)/8; g++ {
					setValues8(unit, f.bits, g, binary.LittleEndian.Uint64(q[8*g:])>>sh&(0x0101010101010101*uint64(mask)))
				}
				for i := int64(0); i < pl.Width; i += piece {
					putPiece(dst[unitAt(pl, u, i):], unit[i:min(i+piece, pl.Width)])
				}
			}
		}
	}
}

// putPiece copies a unit's piece (4, 8 or 16 bytes) with word moves, not a memmove call.
func putPiece(dst, src []byte) {
	switch len(src) {
	case 16:
		binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(src))
		binary.LittleEndian.PutUint64(dst[8:], binary.LittleEndian.Uint64(src[8:]))
	case 8:
		binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(src))
	default:
		copy(dst, src)
	}
}

func unpackRow(l *Layout, s *scheme, dst, src []byte) {
	bb := int64(l.Type.BlockBytes())
	var buf [32]byte
	for b := int64(0); b < l.Blocks; b++ {
		blk := dst[b*bb:][:bb] // zero on entry
		for f, off := range s.f16 {
			binary.LittleEndian.PutUint16(blk[off:], binary.LittleEndian.Uint16(src[l.F16Off+2*(int64(f)*l.Blocks+b):]))
		}
		if s.outSc > 0 {
			s.pack(blk[s.scales.off:][:s.scales.n], src[l.ScaleOff+b*l.ScaleBytes:][:l.ScaleBytes])
		}
		for pi, f := range s.planes {
			pl := l.Planes[pi]
			for su := 0; su < s.units; su++ {
				u := b*int64(s.units) + int64(su)
				unit := buf[:pl.Width]
				for i := int64(0); i < pl.Width; i += piece {
					copy(unit[i:], src[unitAt(pl, u, i):][:min(piece, pl.Width)])
				}
				q, sh := blk[f.base(su):][:f.count], f.shift(su)
				if f.bits == 8 {
					copy(q, unit)
					continue
				}
				for g := 0; g < f.count/8; g++ {
					v := values8(unit, f.bits, g) << sh
					binary.LittleEndian.PutUint64(q[8*g:], binary.LittleEndian.Uint64(q[8*g:])|v)
				}
			}
		}
	}
}

// UnpackRow writes the GGUF bytes of one packed row — src, RowStride bytes of a tensor of
// layout l — into dst (RowBytes bytes). It is Unpack for one row, for kernels that read a
// packed row through a format's GGUF-layout arithmetic.
func (l *Layout) UnpackRow(dst, src []byte) {
	dst = dst[:l.RowBytes]
	src = src[:l.RowStride]
	s := schemes[l.Type]
	if s == nil {
		copy(dst, src)
		return
	}
	clear(dst)
	unpackRow(l, s, dst, src)
}
