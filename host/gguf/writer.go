package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"verity/device/dtype"
	"verity/host/atomicfile"
)

// Writer builds a GGUF file: metadata pairs in first-insertion order, then tensors in the order
// added. The layout is ggml's (gguf_write_to_file): version 3, the header padded with zeros to the
// alignment, each tensor's data starting at an aligned offset and followed by zero padding to the
// next multiple of the alignment, the last one included. The alignment is general.alignment when
// that key is set (it must be a uint32 power of two), else 32; a writer does not add the key.
//
// Given the same pairs and tensors in the same order, the output is byte for byte what ggml's
// writer produces, and llama.cpp loads it. Arrays of arrays are valid GGUF and are written, but
// ggml's reader rejects them.
type Writer struct {
	kvs     []KV
	kvIndex map[string]int
	tensors []wtensor
	tIndex  map[string]int
}

type wtensor struct {
	info  TensorInfo
	data  []byte
	write func(io.Writer) error // instead of data, for AddTensorFunc
}

// NewWriter returns an empty writer.
func NewWriter() *Writer {
	return &Writer{kvIndex: map[string]int{}, tIndex: map[string]int{}}
}

// NewWriterFrom returns a writer holding a copy of f's metadata (see CopyMetadata), ready for
// tensors to be added.
func NewWriterFrom(f *File) *Writer {
	w := NewWriter()
	w.CopyMetadata(f)
	return w
}

// CopyMetadata sets every key-value pair of f, in f's order. Values share their slices with f.
func (w *Writer) CopyMetadata(f *File) {
	for _, kv := range f.KVs {
		w.Set(kv.Key, kv.Value)
	}
}

// Set sets key to v. A key already set keeps its position and takes the new value. Invalid keys or
// values (an empty key, the zero Value) are reported by WriteTo.
func (w *Writer) Set(key string, v Value) {
	if i, ok := w.kvIndex[key]; ok {
		w.kvs[i].Value = v
		return
	}
	w.kvIndex[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
}

// Get returns the value set for key.
func (w *Writer) Get(key string) (Value, bool) {
	i, ok := w.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return w.kvs[i].Value, true
}

// Delete removes key, if set; the other pairs keep their order.
func (w *Writer) Delete(key string) {
	i, ok := w.kvIndex[key]
	if !ok {
		return
	}
	w.kvs = slices.Delete(w.kvs, i, i+1)
	delete(w.kvIndex, key)
	for j := i; j < len(w.kvs); j++ {
		w.kvIndex[w.kvs[j].Key] = j
	}
}

// KVs returns the pairs set so far, in order (the writer's own slice: do not modify it).
func (w *Writer) KVs() []KV { return w.kvs }

// AddTensor appends a tensor. dims are fastest-first (ne); data must hold exactly the tensor's
// bytes and is not copied: it must stay unchanged until the file is written. The name, type and
// dims are checked as Parse checks them.
func (w *Writer) AddTensor(name string, t dtype.Type, dims []int64, data []byte) error {
	info, err := w.newTensor(name, t, dims)
	if err != nil {
		return err
	}
	if int64(len(data)) != info.Size {
		return fmt.Errorf("gguf: tensor %q: %s %v takes %d bytes, got %d", name, t, dims, info.Size, len(data))
	}
	w.add(wtensor{info: info, data: data})
	return nil
}

// AddTensorFunc appends a tensor whose data is produced while the file is written: write must
// write exactly the tensor's bytes to its argument. It lets large outputs stream without holding
// every tensor in memory.
func (w *Writer) AddTensorFunc(name string, t dtype.Type, dims []int64, write func(io.Writer) error) error {
	info, err := w.newTensor(name, t, dims)
	if err != nil {
		return err
	}
	w.add(wtensor{info: info, write: write})
	return nil
}

func (w *Writer) newTensor(name string, t dtype.Type, dims []int64) (TensorInfo, error) {
	if len(name) > MaxNameLen {
		return TensorInfo{}, fmt.Errorf("gguf: tensor name %q is %d bytes, longer than ggml's limit of %d", name, len(name), MaxNameLen)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return TensorInfo{}, fmt.Errorf("gguf: tensor name %q contains a NUL byte", name)
	}
	if _, dup := w.tIndex[name]; dup {
		return TensorInfo{}, fmt.Errorf("gguf: duplicate tensor name %q", name)
	}
	if len(dims) > MaxDims {
		return TensorInfo{}, fmt.Errorf("gguf: tensor %q has %d dims, more than ggml's %d", name, len(dims), MaxDims)
	}
	size, err := tensorSize(t, dims)
	if err != nil {
		return TensorInfo{}, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	return TensorInfo{Name: name, Dims: slices.Clone(dims), Type: t, Size: size}, nil
}

func (w *Writer) add(t wtensor) {
	w.tIndex[t.info.Name] = len(w.tensors)
	w.tensors = append(w.tensors, t)
}

// alignment returns the alignment the file will use.
func (w *Writer) alignment() (int64, error) {
	v, ok := w.Get(KeyAlignment)
	if !ok {
		return DefaultAlignment, nil
	}
	a, isU32 := v.x.(uint32)
	if !isU32 || v.typ != TypeUint32 {
		return 0, fmt.Errorf("gguf: key %q: want uint32, found %s", KeyAlignment, v.typeName())
	}
	if a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("gguf: alignment %d is not a power of two", a)
	}
	return int64(a), nil
}

// Tensors returns the infos of the tensors added so far, with the offsets they will be written at.
func (w *Writer) Tensors() ([]TensorInfo, error) {
	align, err := w.alignment()
	if err != nil {
		return nil, err
	}
	out := make([]TensorInfo, len(w.tensors))
	var off int64
	for i, t := range w.tensors {
		out[i] = t.info
		out[i].Offset = off
		if t.info.Size > math.MaxInt64-off-align {
			return nil, fmt.Errorf("gguf: tensor %q: data offset overflows int64", t.info.Name)
		}
		off = alignUp(off+t.info.Size, align)
	}
	return out, nil
}

// header encodes everything before the data section, padding included.
func (w *Writer) header() ([]byte, []TensorInfo, error) {
	infos, err := w.Tensors()
	if err != nil {
		return nil, nil, err
	}
	le := binary.LittleEndian
	b := append([]byte(nil), magic[:]...)
	b = le.AppendUint32(b, 3)
	b = le.AppendUint64(b, uint64(len(w.tensors)))
	b = le.AppendUint64(b, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		if kv.Key == "" {
			return nil, nil, fmt.Errorf("gguf: empty key")
		}
		if err := kv.Value.check(maxDepth); err != nil {
			return nil, nil, fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
		b = appendString(b, kv.Key)
		b = le.AppendUint32(b, uint32(kv.Value.typ))
		b = appendValue(b, kv.Value)
	}
	for _, t := range infos {
		b = appendString(b, t.Name)
		b = le.AppendUint32(b, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			b = le.AppendUint64(b, uint64(d))
		}
		b = le.AppendUint32(b, uint32(t.Type))
		b = le.AppendUint64(b, uint64(t.Offset))
	}
	// Padding is written by the caller: an alignment can be large, and needs no buffer.
	return b, infos, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue encodes v's payload (not its type tag).
func appendValue(b []byte, v Value) []byte {
	le := binary.LittleEndian
	switch x := v.x.(type) {
	case uint8:
		return append(b, x)
	case int8:
		return append(b, byte(x))
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case uint16:
		return le.AppendUint16(b, x)
	case int16:
		return le.AppendUint16(b, uint16(x))
	case uint32:
		return le.AppendUint32(b, x)
	case int32:
		return le.AppendUint32(b, uint32(x))
	case float32:
		return le.AppendUint32(b, math.Float32bits(x))
	case uint64:
		return le.AppendUint64(b, x)
	case int64:
		return le.AppendUint64(b, uint64(x))
	case float64:
		return le.AppendUint64(b, math.Float64bits(x))
	case string:
		return appendString(b, x)
	}
	// An array: element type, count, elements.
	b = le.AppendUint32(b, uint32(v.elem))
	n := v.Len()
	b = le.AppendUint64(b, uint64(n))
	switch s := v.x.(type) {
	case []uint8:
		return append(b, s...)
	case []Value:
		for _, e := range s { // no type tag per element: the array's element type covers them
			b = appendValue(b, e)
		}
		return b
	}
	for i := range n {
		b = appendValue(b, Value{typ: v.elem, x: index(v.x, i)})
	}
	return b
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

var zeros [4096]byte

func writeZeros(w io.Writer, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// WriteTo writes the file to out and returns the number of bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	hdr, infos, err := w.header()
	if err != nil {
		return 0, err
	}
	align, _ := w.alignment()
	cw := &countWriter{w: out}
	bw := bufio.NewWriterSize(cw, 1<<20)
	fail := func(err error) (int64, error) {
		bw.Flush()
		return cw.n, fmt.Errorf("gguf: write: %w", err)
	}
	if _, err := bw.Write(hdr); err != nil {
		return fail(err)
	}
	if err := writeZeros(bw, alignUp(int64(len(hdr)), align)-int64(len(hdr))); err != nil {
		return fail(err)
	}
	for i, t := range w.tensors {
		if t.write != nil {
			tc := &countWriter{w: bw}
			if err := t.write(tc); err != nil {
				bw.Flush()
				return cw.n, fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
			}
			if tc.n != t.info.Size {
				bw.Flush()
				return cw.n, fmt.Errorf("gguf: tensor %q: wrote %d bytes of data, want %d", t.info.Name, tc.n, t.info.Size)
			}
		} else if _, err := bw.Write(t.data); err != nil {
			return fail(err)
		}
		if err := writeZeros(bw, alignUp(infos[i].Size, align)-infos[i].Size); err != nil {
			return fail(err)
		}
	}
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("gguf: write: %w", err)
	}
	return cw.n, nil
}

// WriteFile writes the file to path atomically (host/atomicfile): under a temporary name in the
// same directory, synced, then renamed over path, so an interrupted write leaves no partial
// file. A new file gets mode 0644 (less the umask); a file rewritten in place keeps its mode.
func (w *Writer) WriteFile(path string) error {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer f.Abort()
	if _, err := w.WriteTo(f); err != nil {
		return err
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}
