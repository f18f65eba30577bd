package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"verity/device/dtype"
)

func TestWriterLayout(t *testing.T) {
	// A file small enough to check byte by byte: header, one KV, two tensors, alignment 32.
	w := NewWriter()
	w.Set("k", U8(9))
	if err := w.AddTensor("a", dtype.F32, []int64{1}, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("b", dtype.I8, []int64{2}, []byte{5, 6}); err != nil {
		t.Fatal(err)
	}
	want := header(3, 2, 1).str("k").u32(uint32(TypeUint8)).u8(9).
		tensor("a", dtype.F32, 0, 1).tensor("b", dtype.I8, 32, 2).pad(32, 0).
		bytes([]byte{1, 2, 3, 4}).pad(32, 0).bytes([]byte{5, 6}).pad(32, 0).b
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(want)) || !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("wrote %d bytes\n% x\nwant %d\n% x", n, buf.Bytes(), len(want), want)
	}
	infos, err := w.Tensors()
	if err != nil || infos[1].Offset != 32 || infos[1].Size != 2 {
		t.Errorf("Tensors() = %+v, %v", infos, err)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 1, 8, 64, 4096} {
		b := sampleFile(t, align, 3)
		f := mustParse(t, b)
		w := NewWriterFrom(f)
		for _, ti := range f.Tensors {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti)); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), b) {
			t.Errorf("align=%d: re-written file differs from the original", align)
		}
	}
}

func TestWriterSet(t *testing.T) {
	w := NewWriter()
	w.Set("a", U32(1))
	w.Set("b", U32(2))
	w.Set("c", U32(3))
	w.Set("a", Str("x")) // replaced in place
	w.Delete("b")
	w.Delete("absent")
	w.Set("b", U32(4)) // appended again
	var keys []string
	for _, kv := range w.KVs() {
		keys = append(keys, kv.Key+"="+kv.Value.String())
	}
	if got := strings.Join(keys, " "); got != `a="x" c=3 b=4` {
		t.Errorf("KVs = %s", got)
	}
	if v, ok := w.Get("c"); !ok || !v.Equal(U32(3)) {
		t.Errorf("Get(c) = %v, %v", v, ok)
	}
}

func TestWriterAlignment(t *testing.T) {
	w := NewWriter()
	w.Set(KeyAlignment, U32(64))
	w.AddTensor("a", dtype.F32, []int64{1}, make([]byte, 4))
	w.AddTensor("b", dtype.F32, []int64{1}, make([]byte, 4))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f := mustParse(t, buf.Bytes())
	if f.Alignment != 64 || f.Tensors[1].Offset != 64 || f.DataOffset%64 != 0 || buf.Len()%64 != 0 {
		t.Errorf("alignment %d, offset %d, data at %d, %d bytes", f.Alignment, f.Tensors[1].Offset, f.DataOffset, buf.Len())
	}
	for _, tt := range []struct {
		v    Value
		want string
	}{
		{U32(0), "alignment 0 is not a power of two"},
		{U32(48), "alignment 48 is not a power of two"},
		{U64(64), `key "general.alignment": want uint32, found uint64`},
	} {
		w.Set(KeyAlignment, tt.v)
		if _, err := w.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("alignment %v: err = %v, want %q", tt.v, err, tt.want)
		}
	}
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name string
		f    func(w *Writer) error
		want string
	}{
		{"size", func(w *Writer) error { return w.AddTensor("a", dtype.F32, []int64{4}, make([]byte, 15)) },
			`tensor "a": f32 [4] takes 16 bytes, got 15`},
		{"duplicate", func(w *Writer) error {
			w.AddTensor("a", dtype.F32, []int64{1}, make([]byte, 4))
			return w.AddTensor("a", dtype.F32, []int64{1}, make([]byte, 4))
		}, `duplicate tensor name "a"`},
		{"long-name", func(w *Writer) error {
			return w.AddTensor(strings.Repeat("x", 64), dtype.F32, []int64{1}, make([]byte, 4))
		},
			"longer than ggml's limit of 63"},
		{"nul-name", func(w *Writer) error { return w.AddTensor("a\x00", dtype.F32, []int64{1}, make([]byte, 4)) },
			"contains a NUL byte"},
		{"dims-5", func(w *Writer) error { return w.AddTensor("a", dtype.F32, []int64{1, 1, 1, 1, 1}, make([]byte, 4)) },
			"has 5 dims"},
		{"dim-negative", func(w *Writer) error { return w.AddTensor("a", dtype.F32, []int64{-1}, nil) },
			"dim 0 is negative (-1)"},
		{"unknown-type", func(w *Writer) error { return w.AddTensor("a", dtype.Type(5), []int64{32}, nil) },
			"unknown ggml type id 5"},
		{"not-blocks", func(w *Writer) error { return w.AddTensor("a", dtype.Q6_K, []int64{255}, nil) },
			"row of 255 values is not a whole number of q6_K blocks of 256"},
		{"empty-key", func(w *Writer) error { w.Set("", U8(1)); _, err := w.WriteTo(io.Discard); return err },
			"gguf: empty key"},
		{"zero-value", func(w *Writer) error { w.Set("k", Value{}); _, err := w.WriteTo(io.Discard); return err },
			`gguf: key "k": invalid (zero) value`},
		{"too-deep", func(w *Writer) error {
			v := ArrOf([]uint8{})
			for range maxDepth {
				v = ArrOf([]Value{v})
			}
			w.Set("k", v)
			_, err := w.WriteTo(io.Discard)
			return err
		}, "arrays nested more than 8 deep"},
		{"func-short", func(w *Writer) error {
			w.AddTensorFunc("a", dtype.F32, []int64{2}, func(out io.Writer) error { _, err := out.Write(make([]byte, 4)); return err })
			_, err := w.WriteTo(io.Discard)
			return err
		}, `tensor "a": wrote 4 bytes of data, want 8`},
		{"func-error", func(w *Writer) error {
			w.AddTensorFunc("a", dtype.F32, []int64{2}, func(io.Writer) error { return errors.New("boom") })
			_, err := w.WriteTo(io.Discard)
			return err
		}, `tensor "a": boom`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f(NewWriter())
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "gguf: ") {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestWriterTensorFunc(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	w := NewWriter()
	w.AddTensorFunc("a", dtype.F32, []int64{2}, func(out io.Writer) error {
		_, err := out.Write(data)
		return err
	})
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f := mustParse(t, buf.Bytes())
	if !bytes.Equal(f.Data(f.Tensors[0]), data) {
		t.Errorf("data % x", f.Data(f.Tensors[0]))
	}
}

type failWriter struct{ left int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		n := w.left
		w.left = 0
		return n, errors.New("disk full")
	}
	w.left -= len(p)
	return len(p), nil
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.gguf")
	w := NewWriter()
	w.Set("general.architecture", Str("llama"))
	w.AddTensor("a", dtype.F32, []int64{300000}, make([]byte, 1200000))
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Architecture() != "llama" || len(f.Tensors) != 1 {
		t.Errorf("read back %+v", f)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode())
	}
	// A failing write leaves the old file and no temporary behind.
	w.AddTensorFunc("b", dtype.F32, []int64{1}, func(io.Writer) error { return errors.New("boom") })
	if err := w.WriteFile(path); err == nil {
		t.Fatal("no error")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries", len(entries))
	}
	if g, err := Open(path); err != nil || len(g.Tensors) != 1 {
		t.Errorf("old file damaged: %v", err)
	} else {
		g.Close()
	}
	if _, err := w.WriteTo(&failWriter{left: 100}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("failing writer: %v", err)
	}
	if err := w.WriteFile(filepath.Join(dir, "missing", "x.gguf")); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}
