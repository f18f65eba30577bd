// Package packfile keeps a model's matrices in their device layout (package repack) in a file
// written once beside the model and mapped read-only, so that the CPU twin computes from pages
// the kernel can drop and read again — a model larger than memory streams from the disk —
// instead of from a private copy that doubles the model's memory (the file's mapping plus the
// repacked weights).
//
// The file, "<model>.packed" (or, where the model's directory is not writable, one named by
// the model's path under $VERITY_CACHE/packed), is a header then the packed tensors in the
// order given, each at a page boundary so that a range of them can be read ahead or dropped
// alone:
//
//	"VERITYPK" | uint32 version | uint32 header length | JSON header | padding to a page | data
//
// The header's key covers the model file (size, modification time, inode, tensor table) and
// the repack layouts (the bytes of a sample of every type packed), so a changed model or a
// changed layout makes Open write the file again. It is written under a temporary name and
// renamed (host/atomicfile), so readers never see a partial file, and each tensor is packed a
// few megabytes at a time, the model's pages dropped behind, so writing it takes little memory.
package packfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"

	"verity/device/dtype"
	"verity/host/atomicfile"
	"verity/host/gguf"
	"verity/repack"
)

// Version is the file format's version; part of the key.
const Version = 1

const magic = "VERITYPK"

// Page is the alignment of every tensor in the file.
const Page = 4096

const page = Page

// Tensor is a matrix to pack: its name in the Program, its type and GGUF dims, and its bytes, a
// slice of the model file's mapping (at Src in the file).
type Tensor struct {
	Name string
	Type dtype.Type
	Dims []int64
	Data []byte
}

// Entry is a packed tensor's place in the file.
type Entry struct {
	Name string     `json:"name"`
	Type dtype.Type `json:"type"`
	Dims []int64    `json:"dims"`
	Src  int64      `json:"src"`  // offset of its GGUF bytes in the model file
	Len  int64      `json:"len"`  // their length
	Off  int64      `json:"off"`  // offset of the packed bytes in this file
	Size int64      `json:"size"` // their length (repack.Layout.Size)
}

type header struct {
	Key     string  `json:"key"`
	Model   string  `json:"model"` // the model's path when written (for a reader of the file)
	Size    int64   `json:"size"`  // the whole file's
	Entries []Entry `json:"entries"`
}

// File is an open packed file: the tensors' device-layout bytes in a read-only mapping.
type File struct {
	path    string
	fd      *os.File
	rfd     *os.File // ReadAhead's own descriptor: no kernel readahead past what it asks for
	data    []byte
	entries map[string]Entry
	order   []Entry
	Wrote   bool // Open wrote the file (it was absent or stale)
}

// Open returns the packed file of model m holding the tensors ts, writing it first when it is
// absent, stale, or lacks one of them. m must be a mapped file from gguf.Open, and every
// tensor's Data a slice of its mapping. progress, if not nil, is called as bytes are packed.
func Open(m *gguf.File, ts []Tensor, progress func(done, total int64)) (*File, error) {
	src := m.Source()
	if src.Path == "" || !m.Mapped() {
		return nil, errors.New("packfile: the model is not a file mapped by gguf.Open")
	}
	want := make([]Entry, len(ts))
	for i, t := range ts {
		off, ok := m.Offset(t.Data)
		if !ok {
			return nil, fmt.Errorf("packfile: tensor %s is not part of the model file", t.Name)
		}
		want[i] = Entry{Name: t.Name, Type: t.Type, Dims: slices.Clone(t.Dims), Src: off, Len: int64(len(t.Data))}
	}
	key, err := modelKey(m, ts)
	if err != nil {
		return nil, err
	}
	for _, path := range Candidates(src.Path) {
		f, err := openExisting(path, key, want)
		if err == nil {
			return f, nil
		}
	}
	var errs []error
	for _, path := range Candidates(src.Path) {
		if err := write(path, key, src.Path, ts, want, m, progress); err != nil {
			errs = append(errs, err)
			continue
		}
		f, err := openExisting(path, key, want)
		if err != nil {
			return nil, err
		}
		f.Wrote = true
		return f, nil
	}
	return nil, fmt.Errorf("packfile: no place to write the packed weights of %s: %w", src.Path, errors.Join(errs...))
}

// Candidates are the places the packed file of the model at path may be, in the order Open
// tries them: beside it, then in the cache.
func Candidates(model string) []string {
	out := []string{model + ".packed"}
	if dir, err := cacheDir(); err == nil {
		abs, err := filepath.Abs(model)
		if err != nil {
			abs = model
		}
		h := sha256.Sum256([]byte(abs))
		out = append(out, filepath.Join(dir, filepath.Base(model)+"-"+hex.EncodeToString(h[:8])+".packed"))
	}
	return out
}

// cacheDir is $VERITY_CACHE/packed, else verity/packed under the user cache directory.
func cacheDir() (string, error) {
	if d := os.Getenv("VERITY_CACHE"); d != "" {
		return filepath.Join(d, "packed"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "verity", "packed"), nil
}

// modelKey hashes what the packed bytes depend on: the format, the model file (its size,
// modification time, inode and tensor table) and the repack layouts of its types.
func modelKey(m *gguf.File, ts []Tensor) (string, error) {
	src := m.Source()
	h := sha256.New()
	fmt.Fprintf(h, "packfile %d\n%d %d %d\n", Version, src.Info.Size(), src.Info.ModTime().UnixNano(), src.Inode)
	for _, t := range m.Tensors {
		fmt.Fprintf(h, "%s %d %v %d\n", t.Name, t.Type, t.Dims, t.Offset)
	}
	types := map[dtype.Type]bool{}
	for _, t := range m.Tensors {
		types[t.Type] = repack.Supported(t.Type)
	}
	for _, t := range ts {
		types[t.Type] = true
	}
	sorted := make([]dtype.Type, 0, len(types))
	for t, ok := range types {
		if ok {
			sorted = append(sorted, t)
		}
	}
	slices.Sort(sorted)
	for _, t := range sorted {
		if err := layoutSample(h, t); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// layoutSample hashes the packing of a fixed two-row matrix of type t (bytes counting up), so
// that any change to the layout or the packing of that type changes the key.
func layoutSample(h hash.Hash, t dtype.Type) error {
	dims := []int64{512, 2}
	n, err := t.TensorBytes(dims)
	if err != nil {
		return fmt.Errorf("packfile: %w", err)
	}
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	if t == dtype.F32 || t == dtype.F16 || t == dtype.BF16 {
		for i := range data {
			data[i] &= 0x3f // finite values
		}
	}
	p, err := repack.Pack(t, dims, data)
	if err != nil {
		return fmt.Errorf("packfile: %w", err)
	}
	fmt.Fprintf(h, "%s %+v\n", t, p.Layout)
	h.Write(p.Data)
	return nil
}

// openExisting maps the packed file at path when its key is key and it holds every entry of
// want (the same source bytes).
func openExisting(path, key string, want []Entry) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			fd.Close()
		}
	}()
	h, hlen, err := readHeader(fd)
	if err != nil {
		return nil, fmt.Errorf("packfile: %s: %w", path, err)
	}
	if h.Key != key {
		return nil, fmt.Errorf("packfile: %s is for another model or layout", path)
	}
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() != h.Size {
		return nil, fmt.Errorf("packfile: %s has %d bytes, its header says %d", path, st.Size(), h.Size)
	}
	f := &File{path: path, fd: fd, entries: map[string]Entry{}, order: h.Entries}
	for _, e := range h.Entries {
		if e.Off < hlen || e.Off%page != 0 || e.Size < 0 || e.Off > h.Size-e.Size {
			return nil, fmt.Errorf("packfile: %s: entry %s at [%d, +%d) outside the file", path, e.Name, e.Off, e.Size)
		}
		f.entries[e.Name] = e
	}
	for _, w := range want {
		e, ok := f.entries[w.Name]
		if !ok || e.Type != w.Type || !slices.Equal(e.Dims, w.Dims) || e.Src != w.Src || e.Len != w.Len {
			return nil, fmt.Errorf("packfile: %s lacks %s", path, w.Name)
		}
		l, err := repack.NewLayout(w.Type, w.Dims)
		if err != nil || l.Size() != e.Size {
			return nil, fmt.Errorf("packfile: %s: %s has %d packed bytes, its layout %d", path, w.Name, e.Size, l.Size())
		}
	}
	if f.data, err = mapFile(fd, h.Size); err != nil {
		return nil, fmt.Errorf("packfile: map %s: %w", path, err)
	}
	ok = true
	return f, nil
}

// readHeader reads and checks the header; hlen is where the data may begin.
func readHeader(r io.Reader) (header, int64, error) {
	var pre [16]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return header{}, 0, err
	}
	if string(pre[:8]) != magic {
		return header{}, 0, errors.New("not a packed weights file")
	}
	if v := binary.LittleEndian.Uint32(pre[8:]); v != Version {
		return header{}, 0, fmt.Errorf("format version %d, want %d", v, Version)
	}
	n := binary.LittleEndian.Uint32(pre[12:])
	if n > 64<<20 {
		return header{}, 0, fmt.Errorf("a header of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return header{}, 0, err
	}
	var h header
	if err := json.Unmarshal(b, &h); err != nil {
		return header{}, 0, err
	}
	return h, 16 + int64(n), nil
}

// chunkBytes bounds the packed bytes made at once: a tensor is packed a few rows at a time.
const chunkBytes = 8 << 20

// write packs ts into a new file at path (atomically).
func write(path, key, model string, ts []Tensor, want []Entry, m *gguf.File, progress func(done, total int64)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// place the entries: the header's size depends on the offsets, so size it first with
	// the largest offsets it can hold, then lay out the data after it
	h := header{Key: key, Model: model, Entries: slices.Clone(want)}
	var total int64
	for i := range h.Entries {
		l, err := repack.NewLayout(ts[i].Type, ts[i].Dims)
		if err != nil {
			return fmt.Errorf("packfile: %s: %w", ts[i].Name, err)
		}
		h.Entries[i].Size = l.Size()
		h.Entries[i].Off = 1 << 50
		total += l.Size()
	}
	h.Size = 1 << 50
	probe, err := json.Marshal(h)
	if err != nil {
		return err
	}
	off := alignUp(16+int64(len(probe)), page)
	for i := range h.Entries {
		h.Entries[i].Off = off
		off = alignUp(off+h.Entries[i].Size, page)
	}
	h.Size = off
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	w := &offsetWriter{w: f}
	var pre [16]byte
	copy(pre[:], magic)
	binary.LittleEndian.PutUint32(pre[8:], Version)
	binary.LittleEndian.PutUint32(pre[12:], uint32(len(hb)))
	w.Write(pre[:])
	w.Write(hb)
	var done int64
	for i, t := range ts {
		e := h.Entries[i]
		if err := w.pad(e.Off); err != nil {
			return err
		}
		if err := packTensor(w, t, func(src []byte, n int64) {
			m.DontNeedBytes(src) // the model's pages behind: writing must not hold the model in memory
			done += n
			if progress != nil {
				progress(done, total)
			}
		}); err != nil {
			return fmt.Errorf("packfile: %s: %w", t.Name, err)
		}
	}
	if err := w.pad(h.Size); err != nil {
		return err
	}
	if w.err != nil {
		return w.err
	}
	return f.Commit()
}

// packTensor writes t's device layout to w a few rows at a time: a row's packed bytes do not
// depend on the rows beside it, so packing rows [a, b) as a matrix of b−a rows gives exactly
// the bytes of those rows in the whole tensor's layout (experts are consecutive rows too).
func packTensor(w io.Writer, t Tensor, done func(src []byte, packed int64)) error {
	l, err := repack.NewLayout(t.Type, t.Dims)
	if err != nil {
		return err
	}
	rows := l.Experts * l.Rows
	if int64(len(t.Data)) != rows*l.RowBytes {
		return fmt.Errorf("%d bytes, want %d", len(t.Data), rows*l.RowBytes)
	}
	step := max(1, chunkBytes/l.RowStride)
	for r := int64(0); r < rows; r += step {
		n := min(step, rows-r)
		src := t.Data[r*l.RowBytes : (r+n)*l.RowBytes]
		p, err := repack.Pack(t.Type, []int64{t.Dims[0], n}, src)
		if err != nil {
			return err
		}
		if _, err := w.Write(p.Data); err != nil {
			return err
		}
		done(src, int64(len(p.Data)))
	}
	return nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// offsetWriter counts what it writes and keeps the first error.
type offsetWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (o *offsetWriter) Write(b []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(b)
	o.n += int64(n)
	o.err = err
	return n, err
}

// pad writes zeros up to offset off.
func (o *offsetWriter) pad(off int64) error {
	if off < o.n {
		return fmt.Errorf("packfile: layout overlaps at %d (written %d)", off, o.n)
	}
	_, err := o.Write(bytes.Repeat([]byte{0}, int(off-o.n)))
	return err
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Size is the file's size in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// Entries are the tensors in the file, in file order.
func (f *File) Entries() []Entry { return f.order }

// Data returns tensor name's packed bytes (a slice of the read-only mapping, valid until
// Close) and whether the file holds it.
func (f *File) Data(name string) ([]byte, bool) {
	e, ok := f.entries[name]
	if !ok || f.data == nil {
		return nil, false
	}
	return f.data[e.Off : e.Off+e.Size : e.Off+e.Size], true
}

// Span is the byte range [Off, End) of the file holding the named tensors (those it has);
// zero when it has none of them.
func (f *File) Span(names ...string) (off, end int64) {
	off = -1
	for _, n := range names {
		e, ok := f.entries[n]
		if !ok {
			continue
		}
		if off < 0 || e.Off < off {
			off = e.Off
		}
		end = max(end, e.Off+e.Size)
	}
	if off < 0 {
		return 0, 0
	}
	return off, end
}

// WillNeed asks the kernel to start reading [off, end) into the page cache (readahead; it does
// not wait for the reads).
func (f *File) WillNeed(off, end int64) error { return f.advise(off, end, true) }

// AdviseRandom turns off the kernel's reading around a fault in the mapping (while a reader
// brings the pages in itself).
func (f *File) AdviseRandom() error {
	if f.data == nil {
		return errors.New("packfile: closed")
	}
	return adviseMapRandom(f.data)
}

// ReadAhead brings [off, end) into the page cache a chunk of len(scratch) bytes at a time and
// returns when it is in: the kernel's own large reads (POSIX_FADV_WILLNEED; elsewhere, reads
// into scratch), at the disk's speed (faster than faults, or madvise's readahead, under memory
// pressure). It reads through a descriptor of its own advised random access, so the kernel
// reads no further than asked (its readahead would fill memory with pages the caller has not
// made room for), and maps each chunk's pages into the process as it goes, so that the kernels
// reading them take no page faults. Not safe for concurrent use.
func (f *File) ReadAhead(off, end int64, scratch []byte) error {
	if f.data == nil {
		return errors.New("packfile: closed")
	}
	if f.rfd == nil {
		fd, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("packfile: read ahead: %w", err)
		}
		adviseRandom(fd)
		f.rfd = fd
	}
	end = min(end, int64(len(f.data)))
	for off < end {
		n := min(int64(len(scratch)), end-off)
		if !readahead(f.rfd, off, n) { // (where the kernel cannot read ahead for us: read)
			got, err := f.rfd.ReadAt(scratch[:n], off)
			if err != nil && !(err == io.EOF && got > 0) {
				return fmt.Errorf("packfile: read ahead: %w", err)
			}
			n = int64(got)
		}
		populate(f.data[off&^(page-1) : off+n])
		off += n
	}
	return nil
}

// DontNeed drops [off, end) from the process's memory and the page cache (a later touch reads
// it from the disk again).
func (f *File) DontNeed(off, end int64) error { return f.advise(off, end, false) }

func (f *File) advise(off, end int64, need bool) error {
	if f.data == nil {
		return errors.New("packfile: closed")
	}
	off = max(0, off&^(page-1))
	end = min(end, int64(len(f.data)))
	if off >= end {
		return nil
	}
	return advise(f.fd, f.data, off, end, need)
}

// Close unmaps the file; the slices Data returned must not be touched afterwards.
func (f *File) Close() error {
	if f.data == nil {
		return nil
	}
	err := unmapFile(f.data)
	f.data = nil
	if f.rfd != nil {
		f.rfd.Close()
	}
	return errors.Join(err, f.fd.Close())
}
