package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"verity/device/dtype"
)

// Limits of the format as ggml enforces them.
const (
	// MaxDims is the most dims a tensor may have (GGML_MAX_DIMS).
	MaxDims = 4
	// MaxNameLen is the longest tensor name in bytes (GGML_MAX_NAME is 64, including the NUL).
	MaxNameLen = 63
	// DefaultAlignment is the data alignment of a file without a general.alignment key.
	DefaultAlignment = 32
	// KeyAlignment is the metadata key that sets the alignment; it must hold a uint32.
	KeyAlignment = "general.alignment"
	// maxDepth bounds how deeply arrays may nest (ggml allows no nesting at all).
	maxDepth = 8
)

// The smallest encodings of a key-value pair (8-byte key length, a 1-byte key, 4-byte type,
// 1-byte value) and of a tensor info (8-byte name length, 4-byte n_dims, 4-byte type, 8-byte
// offset); they bound the counts a header can claim.
const (
	minKVBytes     = 8 + 1 + 4 + 1
	minTensorBytes = 8 + 4 + 4 + 8
)

// ErrTruncated is wrapped by the errors of Parse when the header ends before a field it needs.
var ErrTruncated = errors.New("truncated")

var magic = [4]byte{'G', 'G', 'U', 'F'}

// decoder reads little-endian fields from b, starting at off.
type decoder struct {
	b   []byte
	off int
}

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) need(n int, what string) error {
	if n > d.left() {
		return fmt.Errorf("%w: %s needs %d bytes at offset %d, the file ends at %d", ErrTruncated, what, n, d.off, len(d.b))
	}
	return nil
}

func (d *decoder) u32(what string) (uint32, error) {
	if err := d.need(4, what); err != nil {
		return 0, err
	}
	x := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return x, nil
}

func (d *decoder) u64(what string) (uint64, error) {
	if err := d.need(8, what); err != nil {
		return 0, err
	}
	x := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return x, nil
}

// strLen reads a string's length prefix and checks that the bytes are there.
func (d *decoder) strLen(what string) (int, error) {
	if d.left() < 8 {
		return 0, fmt.Errorf("%w: %s length needs 8 bytes at offset %d, the file ends at %d", ErrTruncated, what, d.off, len(d.b))
	}
	n := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	if n > uint64(d.left()) {
		return 0, fmt.Errorf("%w: %s of %d bytes at offset %d runs past the end of the file (%d)", ErrTruncated, what, n, d.off, len(d.b))
	}
	return int(n), nil
}

func (d *decoder) str(what string) (string, error) {
	n, err := d.strLen(what)
	if err != nil {
		return "", err
	}
	s := string(d.b[d.off : d.off+n])
	d.off += n
	return s, nil
}

// Parse decodes a GGUF file held in b and validates it (see the package documentation for what is
// checked). The File keeps b as the backing store of tensor data: b must not be modified while the
// File is in use. Metadata values are copies and stay valid on their own.
func Parse(b []byte) (*File, error) {
	d := &decoder{b: b}
	if err := d.need(4, "magic"); err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if [4]byte(b[:4]) != magic {
		return nil, fmt.Errorf("gguf: bad magic %q, want \"GGUF\"", b[:4])
	}
	d.off = 4
	version, err := d.u32("version")
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	switch {
	case version == 0:
		return nil, fmt.Errorf("gguf: invalid version 0")
	case version&0xFFFF == 0:
		return nil, fmt.Errorf("gguf: version %#x: a big-endian file? Only little-endian files are supported", version)
	case version == 1:
		return nil, fmt.Errorf("gguf: version 1 (GGUFv1) is not supported; convert the model again")
	case version > 3:
		return nil, fmt.Errorf("gguf: version %d is newer than the supported versions 2 and 3", version)
	}
	nTensors, err := d.u64("tensor count")
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	nKV, err := d.u64("key-value count")
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if nKV > uint64(d.left()/minKVBytes) {
		return nil, fmt.Errorf("gguf: %w: key-value count %d is more than the %d bytes after the header could hold", ErrTruncated, nKV, d.left())
	}
	if nTensors > uint64(d.left()/minTensorBytes) {
		return nil, fmt.Errorf("gguf: %w: tensor count %d is more than the %d bytes after the header could hold", ErrTruncated, nTensors, d.left())
	}

	f := &File{
		Version:   version,
		Alignment: DefaultAlignment,
		KVs:       make([]KV, 0, nKV),
		Tensors:   make([]TensorInfo, 0, nTensors),
		data:      b,
		kvIndex:   make(map[string]int, nKV),
		tIndex:    make(map[string]int, nTensors),
	}
	for i := range int(nKV) {
		key, err := d.str("key")
		if err != nil {
			return nil, fmt.Errorf("gguf: key %d: %w", i, err)
		}
		if key == "" {
			return nil, fmt.Errorf("gguf: key %d is empty", i)
		}
		if j, dup := f.kvIndex[key]; dup {
			return nil, fmt.Errorf("gguf: duplicate key %q (pairs %d and %d)", key, j, i)
		}
		t, err := d.u32("value type")
		if err != nil {
			return nil, fmt.Errorf("gguf: key %q: %w", key, err)
		}
		v, err := d.value(ValueType(t), maxDepth)
		if err != nil {
			return nil, fmt.Errorf("gguf: key %q: %w", key, err)
		}
		f.kvIndex[key] = i
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}
	if v, ok := f.Lookup(KeyAlignment); ok {
		a, isU32 := v.x.(uint32)
		if !isU32 {
			return nil, fmt.Errorf("gguf: key %q: want uint32, found %s", KeyAlignment, v.typeName())
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("gguf: alignment %d is not a power of two", a)
		}
		f.Alignment = int64(a)
	}

	var dims []int64
	for i := range int(nTensors) {
		t, err := d.tensorInfo(i, f.Alignment, &dims)
		if err != nil {
			return nil, err
		}
		if j, dup := f.tIndex[t.Name]; dup {
			return nil, fmt.Errorf("gguf: duplicate tensor name %q (tensors %d and %d)", t.Name, j, i)
		}
		f.tIndex[t.Name] = i
		f.Tensors = append(f.Tensors, t)
	}

	// ggml starts the data section at the next aligned offset, but only seeks there when the file
	// has tensors; an empty file may end without the padding.
	f.DataOffset = int64(d.off)
	if nTensors > 0 {
		f.DataOffset = alignUp(int64(d.off), f.Alignment)
		if f.DataOffset > int64(len(b)) {
			return nil, fmt.Errorf("gguf: %w: data section at offset %d starts past the end of the file (%d bytes)", ErrTruncated, f.DataOffset, len(b))
		}
	}
	if err := f.checkLayout(); err != nil {
		return nil, err
	}
	return f, nil
}

// tensorInfo reads and validates the i'th tensor info.
// Dims are carved from *dims, a buffer shared by all tensors of the file.
func (d *decoder) tensorInfo(i int, alignment int64, dims *[]int64) (TensorInfo, error) {
	var t TensorInfo
	name, err := d.str("name")
	if err != nil {
		return t, fmt.Errorf("gguf: tensor %d: %w", i, err)
	}
	if len(name) > MaxNameLen {
		return t, fmt.Errorf("gguf: tensor %d: name of %d bytes is longer than ggml's limit of %d", i, len(name), MaxNameLen)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return t, fmt.Errorf("gguf: tensor %d: name %q contains a NUL byte", i, name)
	}
	t.Name = name
	nDims, err := d.u32("dim count")
	if err != nil {
		return t, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if nDims > MaxDims {
		return t, fmt.Errorf("gguf: tensor %q has %d dims, more than ggml's %d", name, nDims, MaxDims)
	}
	if len(*dims) < int(nDims) {
		*dims = make([]int64, max(int(nDims), 256))
	}
	t.Dims, *dims = (*dims)[:nDims:nDims], (*dims)[nDims:]
	for j := range t.Dims {
		ne, err := d.u64("dim")
		if err != nil {
			return t, fmt.Errorf("gguf: tensor %q: %w", name, err)
		}
		if int64(ne) < 0 {
			return t, fmt.Errorf("gguf: tensor %q: dim %d is negative (%d)", name, j, int64(ne))
		}
		t.Dims[j] = int64(ne)
	}
	typ, err := d.u32("ggml type")
	if err != nil {
		return t, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	t.Type = dtype.Type(typ)
	off, err := d.u64("data offset")
	if err != nil {
		return t, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if t.Size, err = tensorSize(t.Type, t.Dims); err != nil {
		return t, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if off > math.MaxInt64 || int64(off)%alignment != 0 {
		return t, fmt.Errorf("gguf: tensor %q: data offset %d is not a multiple of the alignment %d", name, off, alignment)
	}
	t.Offset = int64(off)
	return t, nil
}

// tensorSize validates a tensor's type and dims as ggml does and returns its size in bytes.
// Missing dims count as 1 and a zero dim makes an empty tensor; the element count must be
// below 2^63 and the first dim a whole number of blocks.
func tensorSize(t dtype.Type, dims []int64) (int64, error) {
	if uint32(t) >= uint32(len(blocks)) || blocks[t].size == 0 {
		return 0, fmt.Errorf("unknown ggml type id %d", uint32(t))
	}
	bs, bb := blocks[t].size, blocks[t].bytes
	for j, ne := range dims {
		if ne < 0 {
			return 0, fmt.Errorf("dim %d is negative (%d)", j, ne)
		}
	}
	row := int64(1)
	if len(dims) > 0 {
		row = dims[0]
	}
	if row%bs != 0 {
		return 0, fmt.Errorf("row of %d values is not a whole number of %s blocks of %d", row, t, bs)
	}
	if slices.Contains(dims, 0) {
		return 0, nil
	}
	var n uint64 = 1
	for _, ne := range dims {
		hi, lo := bits.Mul64(n, uint64(ne))
		if hi != 0 || lo >= math.MaxInt64 {
			return 0, fmt.Errorf("dims %v: the element count overflows int64", dims)
		}
		n = lo
	}
	// Bytes: whole blocks of the first dim, times the other dims. The count of elements fits, but
	// a block can take more bytes than it holds values (f32: 4 per value).
	hi, size := bits.Mul64(uint64(row)/uint64(bs), uint64(bb))
	for i := 1; i < len(dims) && hi == 0; i++ {
		hi, size = bits.Mul64(size, uint64(dims[i]))
	}
	if hi != 0 || size > math.MaxInt64 {
		return 0, fmt.Errorf("dims %v: the %s size in bytes overflows int64", dims, t)
	}
	return int64(size), nil
}

// blocks caches dtype's block geometry by type id, for the tensor-info loop.
var blocks = func() (tab [64]struct{ size, bytes int64 }) {
	for _, t := range dtype.All() {
		tab[t].size, tab[t].bytes = int64(t.BlockSize()), int64(t.BlockBytes())
	}
	return tab
}()

// checkLayout checks that every tensor's data lies inside the file and that no two overlap.
func (f *File) checkLayout() error {
	end := int64(len(f.data)) - f.DataOffset
	order := make([]int, len(f.Tensors))
	for i, t := range f.Tensors {
		if t.Offset > end || t.Size > end-t.Offset {
			return fmt.Errorf("gguf: tensor %q: data [%d, %d) beyond file size %d",
				t.Name, f.DataOffset+t.Offset, f.DataOffset+t.Offset+t.Size, len(f.data))
		}
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ta, tb := f.Tensors[a], f.Tensors[b]
		if ta.Offset != tb.Offset {
			return cmpInt(ta.Offset, tb.Offset)
		}
		return cmpInt(ta.Size, tb.Size)
	})
	prev := -1
	for _, i := range order {
		t := f.Tensors[i]
		if t.Size == 0 {
			continue
		}
		if prev >= 0 {
			p := f.Tensors[prev]
			if p.Offset+p.Size > t.Offset {
				return fmt.Errorf("gguf: tensors %q [%d, %d) and %q [%d, %d) overlap",
					p.Name, p.Offset, p.Offset+p.Size, t.Name, t.Offset, t.Offset+t.Size)
			}
		}
		prev = i
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func alignUp(x, a int64) int64 { return (x + a - 1) &^ (a - 1) }

// value reads a value of type t; depth is how many more array levels may open.
func (d *decoder) value(t ValueType, depth int) (Value, error) {
	le := binary.LittleEndian
	if t != TypeArray {
		if !t.valid() {
			return Value{}, fmt.Errorf("invalid value type %d", uint32(t))
		}
		if t == TypeString {
			s, err := d.str("string")
			return Value{typ: t, x: s}, err
		}
		n := t.minSize()
		if err := d.need(n, t.String()); err != nil {
			return Value{}, err
		}
		p := d.b[d.off:]
		d.off += n
		var x any
		switch t {
		case TypeUint8:
			x = p[0]
		case TypeInt8:
			x = int8(p[0])
		case TypeBool:
			x = p[0] != 0 // as ggml: any nonzero byte is true
		case TypeUint16:
			x = le.Uint16(p)
		case TypeInt16:
			x = int16(le.Uint16(p))
		case TypeUint32:
			x = le.Uint32(p)
		case TypeInt32:
			x = int32(le.Uint32(p))
		case TypeFloat32:
			x = math.Float32frombits(le.Uint32(p))
		case TypeUint64:
			x = le.Uint64(p)
		case TypeInt64:
			x = int64(le.Uint64(p))
		case TypeFloat64:
			x = math.Float64frombits(le.Uint64(p))
		}
		return Value{typ: t, x: x}, nil
	}

	if depth <= 0 {
		return Value{}, fmt.Errorf("arrays nested more than %d deep", maxDepth)
	}
	et, err := d.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, fmt.Errorf("array of invalid element type %d", et)
	}
	count, err := d.u64("array length")
	if err != nil {
		return Value{}, err
	}
	size := elem.minSize()
	if count > uint64(d.left()/size) {
		return Value{}, fmt.Errorf("%w: array of %d %s at offset %d needs at least %d bytes per element, %d left",
			ErrTruncated, count, elem, d.off, size, d.left())
	}
	n := int(count)
	arr := Value{typ: TypeArray, elem: elem}
	p := d.b[d.off:]
	switch elem {
	case TypeString:
		// Lengths are checked first; then all the strings are copied at once and sliced.
		start, q := d.off, d.off
		for i := range n {
			if len(d.b)-q < 8 {
				d.off = q
				return Value{}, d.need(8, fmt.Sprintf("string %d length", i))
			}
			l := le.Uint64(d.b[q:])
			q += 8
			if l > uint64(len(d.b)-q) {
				return Value{}, fmt.Errorf("%w: string %d of %d bytes at offset %d runs past the end of the file (%d)",
					ErrTruncated, i, l, q, len(d.b))
			}
			q += int(l)
		}
		all := string(d.b[start:q])
		s := make([]string, n)
		q = 0
		for i := range s {
			l := int(le.Uint64(d.b[start+q:]))
			s[i] = all[q+8 : q+8+l]
			q += 8 + l
		}
		d.off = start + q
		arr.x = s
		return arr, nil
	case TypeArray:
		vs := make([]Value, n)
		for i := range vs {
			v, err := d.value(TypeArray, depth-1)
			if err != nil {
				return Value{}, fmt.Errorf("element %d: %w", i, err)
			}
			vs[i] = v
		}
		arr.x = vs
		return arr, nil
	}
	d.off += n * size
	switch elem {
	case TypeUint8:
		arr.x = slices.Clone(p[:n:n])
	case TypeInt8:
		arr.x = fixedArray(p, n, 1, func(b []byte) int8 { return int8(b[0]) })
	case TypeBool:
		arr.x = fixedArray(p, n, 1, func(b []byte) bool { return b[0] != 0 })
	case TypeUint16:
		arr.x = fixedArray(p, n, 2, le.Uint16)
	case TypeInt16:
		arr.x = fixedArray(p, n, 2, func(b []byte) int16 { return int16(le.Uint16(b)) })
	case TypeUint32:
		arr.x = fixedArray(p, n, 4, le.Uint32)
	case TypeInt32:
		arr.x = fixedArray(p, n, 4, func(b []byte) int32 { return int32(le.Uint32(b)) })
	case TypeFloat32:
		arr.x = fixedArray(p, n, 4, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) })
	case TypeUint64:
		arr.x = fixedArray(p, n, 8, le.Uint64)
	case TypeInt64:
		arr.x = fixedArray(p, n, 8, func(b []byte) int64 { return int64(le.Uint64(b)) })
	case TypeFloat64:
		arr.x = fixedArray(p, n, 8, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) })
	}
	return arr, nil
}

// fixedArray decodes n little-endian elements of size bytes each from p.
func fixedArray[T any](p []byte, n, size int, dec func([]byte) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = dec(p[size*i:])
	}
	return out
}
