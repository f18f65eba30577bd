package gguf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"

	"verity/device/dtype"
)

// ErrNotFound is wrapped by the typed accessors' error for a missing key.
var ErrNotFound = errors.New("not found")

// KV is one metadata key-value pair.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name   string
	Dims   []int64    // ne, fastest-varying first, as stored: a matrix of y = W·x has [in, out]
	Type   dtype.Type // ggml type id
	Offset int64      // bytes from the start of the data section; a multiple of the alignment
	Size   int64      // bytes of data (dtype.TensorBytes of Type and Dims)
}

// Elements returns the number of values (the product of the dims; 1 for no dims).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file. KVs and Tensors are in file order; DataOffset is the absolute
// offset of the data section, to which the tensor offsets are relative. The metadata is decoded
// into Go values; tensor data stays in the backing bytes (an mmap for Open).
type File struct {
	Version    uint32
	Alignment  int64 // general.alignment, or DefaultAlignment
	KVs        []KV
	Tensors    []TensorInfo
	DataOffset int64

	data    []byte // the whole file
	mapped  []byte // data when it is an mmap, else nil
	source  Source // the file Open read
	kvIndex map[string]int
	tIndex  map[string]int
	mem     map[string][]byte // a view's tensors held in memory (WithTensors)
}

// Source is the file a File was opened from: its path and what it was when opened (a file
// replaced since then has another modification time or inode).
type Source struct {
	Path  string
	Info  os.FileInfo
	Inode uint64 // 0 where the platform has none
}

// Open reads the GGUF file at path. It maps the file read-only (mmap) where the platform allows
// and falls back to reading it into memory. Tensor data of a mapped file is read lazily by the
// kernel; the slices Data returns are valid until Close, and touching them after Close faults.
// A mapped file that another process truncates also faults when the missing pages are read.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	var b, mapped []byte
	st, err := fd.Stat()
	if err == nil && st.Mode().IsRegular() {
		mapped, _ = mapFile(fd, st.Size())
		b = mapped
	}
	if mapped == nil {
		if b, err = io.ReadAll(fd); err != nil {
			return nil, fmt.Errorf("gguf: %w", err)
		}
	}
	f, err := Parse(b)
	if err != nil {
		if mapped != nil {
			unmapFile(mapped)
		}
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	f.mapped = mapped
	if st != nil {
		f.source = Source{Path: path, Info: st, Inode: inode(st)}
	}
	return f, nil
}

// Source returns the file Open read (a zero Source for a File from Parse).
func (f *File) Source() Source { return f.source }

// Offset returns the offset in the file of b, a sub-slice of the backing store (a tensor's
// Data, or part of it), and whether it is one (a view's tensor held in memory is not).
func (f *File) Offset(b []byte) (int64, bool) {
	if len(b) == 0 || len(f.data) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(f.data)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p-base > uintptr(len(f.data)) || uintptr(len(b)) > uintptr(len(f.data))-(p-base) {
		return 0, false
	}
	return int64(p - base), true
}

// WillNeedBytes asks the kernel to start reading the pages of b, a sub-slice of the mapping
// (as Offset takes). No-op when the file is not mapped or b is not part of it.
func (f *File) WillNeedBytes(b []byte) error { return f.adviseBytes(b, adviceWillNeed) }

// DontNeedBytes lets the kernel drop the pages of b, a sub-slice of the mapping, from the
// process's memory (they are re-read from the file if touched again); the page the slice
// begins in is dropped too. No-op when the file is not mapped or b is not part of it.
func (f *File) DontNeedBytes(b []byte) error { return f.adviseBytes(b, adviceDontNeed) }

func (f *File) adviseBytes(b []byte, advice int) error {
	if f.mapped == nil {
		return nil
	}
	lo, ok := f.Offset(b)
	if !ok {
		return nil
	}
	hi := lo + int64(len(b))
	lo &^= int64(os.Getpagesize() - 1)
	return adviseErr(madvise(f.mapped[lo:hi], advice))
}

// Close releases the mapping of an opened file; afterwards Data returns nil, and the metadata stays
// usable. Close is a no-op for a File that is not mapped (from Parse, or read into memory) and on
// a second call.
func (f *File) Close() error {
	m := f.mapped
	if m == nil {
		return nil
	}
	f.mapped, f.data = nil, nil
	if err := unmapFile(m); err != nil {
		return fmt.Errorf("gguf: munmap: %w", err)
	}
	return nil
}

// Mapped reports whether the tensor data is an mmap of the file.
func (f *File) Mapped() bool { return f.mapped != nil }

// Data returns the bytes of tensor t, a sub-slice of the backing store (not a copy; do not
// modify it). It returns nil when t does not lie inside the file, or after Close.
func (f *File) Data(t TensorInfo) []byte {
	if b, ok := f.mem[t.Name]; ok {
		return b
	}
	lo, hi, ok := f.span(t)
	if !ok {
		return nil
	}
	return f.data[lo:hi:hi]
}

// span returns the absolute byte range of t.
func (f *File) span(t TensorInfo) (lo, hi int64, ok bool) {
	n := int64(len(f.data))
	if t.Offset < 0 || t.Size < 0 || f.DataOffset > n || t.Offset > n-f.DataOffset || t.Size > n-f.DataOffset-t.Offset {
		return 0, 0, false
	}
	lo = f.DataOffset + t.Offset
	return lo, lo + t.Size, true
}

// MemTensor is a tensor held in memory, for WithTensors.
type MemTensor struct {
	Name string
	Type dtype.Type
	Dims []int64
	Data []byte // exactly the tensor's bytes
}

// WithTensors returns a view of f in which each of ts takes the place of f's tensor of the same
// name (its type, dims and data), or follows f's tensors when f has none of that name. A
// tensor of the view held in memory has Offset −1, and Data returns its bytes (not a copy).
// The metadata and the other tensors are f's, read from f's backing store: the view is valid
// until f is closed, and closing the view does nothing.
func (f *File) WithTensors(ts []MemTensor) (*File, error) {
	v := *f
	v.mapped = nil
	v.Tensors = append([]TensorInfo(nil), f.Tensors...)
	v.tIndex = make(map[string]int, len(f.Tensors)+len(ts))
	for k, i := range f.tIndex {
		v.tIndex[k] = i
	}
	v.mem = make(map[string][]byte, len(f.mem)+len(ts))
	for k, b := range f.mem {
		v.mem[k] = b
	}
	seen := make(map[string]bool, len(ts))
	for _, t := range ts {
		if seen[t.Name] {
			return nil, fmt.Errorf("gguf: tensor %q given twice", t.Name)
		}
		seen[t.Name] = true
		size, err := tensorSize(t.Type, t.Dims)
		if err != nil {
			return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
		if size != int64(len(t.Data)) {
			return nil, fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d", t.Name, len(t.Data), size)
		}
		info := TensorInfo{Name: t.Name, Dims: append([]int64(nil), t.Dims...), Type: t.Type, Offset: -1, Size: size}
		if i, ok := v.tIndex[t.Name]; ok {
			v.Tensors[i] = info
		} else {
			v.tIndex[t.Name] = len(v.Tensors)
			v.Tensors = append(v.Tensors, info)
		}
		v.mem[t.Name] = t.Data
	}
	return &v, nil
}

// Tensor returns the info of the tensor called name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Lookup returns the value of key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// Has reports whether key is present.
func (f *File) Has(key string) bool {
	_, ok := f.kvIndex[key]
	return ok
}

// Architecture returns general.architecture, or "" when it is absent or not a string.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// AdviseRandom tells the kernel that the mapping will be read in random order (no read-ahead).
// It is a no-op for a file that is not mapped.
func (f *File) AdviseRandom() error {
	if f.mapped == nil {
		return nil
	}
	return adviseErr(madvise(f.mapped, adviceRandom))
}

// AdviseWillNeed asks the kernel to start reading tensor t's pages. No-op when not mapped.
func (f *File) AdviseWillNeed(t TensorInfo) error { return f.adviseTensor(t, adviceWillNeed) }

// AdviseDontNeed lets the kernel drop tensor t's pages (they are re-read from the file if touched
// again). No-op when not mapped. Pages shared with a neighbouring tensor are dropped too.
func (f *File) AdviseDontNeed(t TensorInfo) error { return f.adviseTensor(t, adviceDontNeed) }

func (f *File) adviseTensor(t TensorInfo, advice int) error {
	if f.mapped == nil || f.mem[t.Name] != nil {
		return nil
	}
	lo, hi, ok := f.span(t)
	if !ok {
		return fmt.Errorf("gguf: tensor %q lies outside the file", t.Name)
	}
	if lo == hi {
		return nil
	}
	lo &^= int64(os.Getpagesize() - 1) // madvise needs a page-aligned start; the map is page-aligned
	return adviseErr(madvise(f.mapped[lo:hi], advice))
}

func adviseErr(err error) error {
	if err != nil {
		return fmt.Errorf("gguf: madvise: %w", err)
	}
	return nil
}

// typeName describes v's type for error messages: "uint32", "array of string".
func (v Value) typeName() string {
	if v.typ == TypeArray {
		return "array of " + v.elem.String()
	}
	return v.typ.String()
}

func (f *File) get(key string) (Value, error) {
	v, ok := f.Lookup(key)
	if !ok {
		return Value{}, fmt.Errorf("gguf: key %q %w", key, ErrNotFound)
	}
	return v, nil
}

func wrongType(key, want string, v Value) error {
	return fmt.Errorf("gguf: key %q: want %s, found %s", key, want, v.typeName())
}

// typed returns the value of key when it holds exactly a T (a scalar or a typed slice).
func typed[T any](f *File, key, want string) (T, error) {
	var zero T
	v, err := f.get(key)
	if err != nil {
		return zero, err
	}
	x, ok := v.x.(T)
	if !ok {
		return zero, wrongType(key, want, v)
	}
	return x, nil
}

// Uint32 returns key's value, which must be a uint32. The other typed accessors are alike: the
// error names the key and, for a value of another type, the type found.
func (f *File) Uint32(key string) (uint32, error)   { return typed[uint32](f, key, "uint32") }
func (f *File) Int32(key string) (int32, error)     { return typed[int32](f, key, "int32") }
func (f *File) Uint64(key string) (uint64, error)   { return typed[uint64](f, key, "uint64") }
func (f *File) Int64(key string) (int64, error)     { return typed[int64](f, key, "int64") }
func (f *File) Float32(key string) (float32, error) { return typed[float32](f, key, "float32") }
func (f *File) Float64(key string) (float64, error) { return typed[float64](f, key, "float64") }
func (f *File) Bool(key string) (bool, error)       { return typed[bool](f, key, "bool") }
func (f *File) String(key string) (string, error)   { return typed[string](f, key, "string") }

// Strings, Int32s, Uint32s and Float32s return arrays of exactly that element type. The slice is
// the File's own: do not modify it.
func (f *File) Strings(key string) ([]string, error) {
	return typed[[]string](f, key, "array of string")
}
func (f *File) Int32s(key string) ([]int32, error) { return typed[[]int32](f, key, "array of int32") }
func (f *File) Uint32s(key string) ([]uint32, error) {
	return typed[[]uint32](f, key, "array of uint32")
}
func (f *File) Float32s(key string) ([]float32, error) {
	return typed[[]float32](f, key, "array of float32")
}

// Int returns an integer of any width or signedness as an int64; a uint64 above 2^63-1 is an
// error. Bools and floats are not integers.
func (f *File) Int(key string) (int64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	n, ok, err := asInt(v.x)
	if !ok {
		return 0, wrongType(key, "integer", v)
	}
	if err != nil {
		return 0, fmt.Errorf("gguf: key %q: %w", key, err)
	}
	return n, nil
}

// Float returns a float32, float64 or integer value as a float64 (exact for float32).
func (f *File) Float(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	switch x := v.x.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	case uint64:
		return float64(x), nil
	}
	if n, ok, _ := asInt(v.x); ok {
		return float64(n), nil
	}
	return 0, wrongType(key, "number", v)
}

// Ints returns an array of any integer element type as []int64 (a new slice); a uint64 element
// above 2^63-1 is an error.
func (f *File) Ints(key string) ([]int64, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	if v.typ != TypeArray {
		return nil, wrongType(key, "array of integers", v)
	}
	out := make([]int64, v.Len())
	for i := range out {
		n, ok, err := asInt(index(v.x, i))
		if !ok {
			return nil, wrongType(key, "array of integers", v)
		}
		if err != nil {
			return nil, fmt.Errorf("gguf: key %q: element %d: %w", key, i, err)
		}
		out[i] = n
	}
	if len(out) == 0 {
		if _, ok, _ := asInt(zeroOf(v.elem)); !ok {
			return nil, wrongType(key, "array of integers", v)
		}
	}
	return out, nil
}

// asInt converts any integer type; ok is false for other types.
func asInt(x any) (n int64, ok bool, err error) {
	switch a := x.(type) {
	case uint8:
		return int64(a), true, nil
	case int8:
		return int64(a), true, nil
	case uint16:
		return int64(a), true, nil
	case int16:
		return int64(a), true, nil
	case uint32:
		return int64(a), true, nil
	case int32:
		return int64(a), true, nil
	case int64:
		return a, true, nil
	case uint64:
		if a > math.MaxInt64 {
			return 0, true, fmt.Errorf("value %d overflows int64", a)
		}
		return int64(a), true, nil
	}
	return 0, false, nil
}

// zeroOf returns the zero Go value of a scalar type.
func zeroOf(t ValueType) any {
	switch t {
	case TypeUint8:
		return uint8(0)
	case TypeInt8:
		return int8(0)
	case TypeUint16:
		return uint16(0)
	case TypeInt16:
		return int16(0)
	case TypeUint32:
		return uint32(0)
	case TypeInt32:
		return int32(0)
	case TypeUint64:
		return uint64(0)
	case TypeInt64:
		return int64(0)
	}
	return nil
}

// orDefault returns def when key is absent, else get(key) — a wrong type is still an error.
func orDefault[T any](f *File, key string, def T, get func(string) (T, error)) (T, error) {
	if !f.Has(key) {
		return def, nil
	}
	return get(key)
}

// Uint32Or and the other *Or accessors return def when key is absent; a value of the wrong type
// is still an error.
func (f *File) Uint32Or(key string, def uint32) (uint32, error) {
	return orDefault(f, key, def, f.Uint32)
}
func (f *File) Int32Or(key string, def int32) (int32, error) { return orDefault(f, key, def, f.Int32) }
func (f *File) Uint64Or(key string, def uint64) (uint64, error) {
	return orDefault(f, key, def, f.Uint64)
}
func (f *File) IntOr(key string, def int64) (int64, error) { return orDefault(f, key, def, f.Int) }
func (f *File) Float32Or(key string, def float32) (float32, error) {
	return orDefault(f, key, def, f.Float32)
}
func (f *File) FloatOr(key string, def float64) (float64, error) {
	return orDefault(f, key, def, f.Float)
}
func (f *File) StringOr(key string, def string) (string, error) {
	return orDefault(f, key, def, f.String)
}
func (f *File) BoolOr(key string, def bool) (bool, error) { return orDefault(f, key, def, f.Bool) }
