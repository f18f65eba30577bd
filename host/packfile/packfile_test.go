package packfile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"verity/device/dtype"
	"verity/host/gguf"
	"verity/repack"
)

// model writes a GGUF with matrices of several types (one of them 3-D, experts) and returns
// its path.
func model(t *testing.T, dir string, seed uint64) string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.Str("llama"))
	for _, c := range []struct {
		name string
		typ  dtype.Type
		dims []int64
	}{
		{"a", dtype.Q4_K, []int64{512, 40}},
		{"b", dtype.Q8_0, []int64{64, 1000}},
		{"c", dtype.F32, []int64{96, 7}},
		{"d", dtype.Q6_K, []int64{256, 3, 4}}, // experts
		{"big", dtype.Q4_0, []int64{4096, 4200}},
	} {
		n, err := c.typ.TensorBytes(c.dims)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		if c.typ == dtype.F32 {
			for i := range data {
				data[i] &= 0x3f
			}
		}
		if err := w.AddTensor(c.name, c.typ, c.dims, data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func tensors(f *gguf.File, names ...string) []Tensor {
	var ts []Tensor
	for _, n := range names {
		ti, _ := f.Tensor(n)
		ts = append(ts, Tensor{Name: n, Type: ti.Type, Dims: ti.Dims, Data: f.Data(ti)})
	}
	return ts
}

func open(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The packed bytes are repack.Pack's, whole tensor at once, for every tensor; the file is
// written once and reused, rewritten when the model changes or the file is damaged, and
// extended when a tensor is asked for that it lacks.
func TestPackedFile(t *testing.T) {
	t.Setenv("VERITY_CACHE", t.TempDir())
	dir := t.TempDir()
	path := model(t, dir, 1)
	m := open(t, path)
	all := []string{"a", "b", "c", "d", "big"}
	pf, err := Open(m, tensors(m, all...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !pf.Wrote || pf.Path() != path+".packed" {
		t.Errorf("first open: wrote %v at %s", pf.Wrote, pf.Path())
	}
	check := func(pf *File, f *gguf.File, names ...string) {
		t.Helper()
		for _, n := range names {
			ti, _ := f.Tensor(n)
			want, err := repack.Pack(ti.Type, ti.Dims, f.Data(ti))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := pf.Data(n)
			if !ok || !bytes.Equal(got, want.Data) {
				t.Errorf("%s: packed bytes differ from repack.Pack's (%v, %d vs %d bytes)", n, ok, len(got), len(want.Data))
			}
			off, end := pf.Span(n)
			if off%page != 0 || end-off != int64(len(want.Data)) {
				t.Errorf("%s: span [%d, %d)", n, off, end)
			}
		}
	}
	check(pf, m, all...)
	if err := pf.WillNeed(pf.Span("a", "b")); err != nil {
		t.Error(err)
	}
	if err := pf.DontNeed(pf.Span("big")); err != nil {
		t.Error(err)
	}
	check(pf, m, "big") // dropped pages read again
	pf.Close()

	// reused, for all of the tensors or some of them
	for _, names := range [][]string{all, {"b", "d"}} {
		pf, err := Open(m, tensors(m, names...), nil)
		if err != nil {
			t.Fatal(err)
		}
		if pf.Wrote {
			t.Errorf("%v: written again", names)
		}
		check(pf, m, names...)
		pf.Close()
	}

	// a damaged file is written again
	if err := os.Truncate(path+".packed", 100); err != nil {
		t.Fatal(err)
	}
	if pf, err = Open(m, tensors(m, all...), nil); err != nil || !pf.Wrote {
		t.Fatalf("after truncation: %v, wrote %v", err, pf != nil && pf.Wrote)
	}
	pf.Close()

	// a changed model (new bytes, new time) gets a new packed file
	m.Close()
	path2 := model(t, dir, 2)
	later := time.Now().Add(time.Minute)
	os.Chtimes(path2, later, later)
	m2 := open(t, path2)
	pf, err = Open(m2, tensors(m2, all...), nil)
	if err != nil || !pf.Wrote {
		t.Fatalf("changed model: %v, wrote %v", err, pf != nil && pf.Wrote)
	}
	check(pf, m2, all...)
	pf.Close()
	// a packed file with a tensor the first one lacked
	pf, err = Open(m2, tensors(m2, "a"), nil)
	if err != nil || pf.Wrote {
		t.Fatalf("subset: %v", err)
	}
	pf.Close()
}

// Where the model's directory cannot take the file, it goes to the cache.
func TestPackedFileInCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("VERITY_CACHE", cache)
	dir := t.TempDir()
	path := model(t, dir, 3)
	m := open(t, path)
	// a directory where the packed file should be: the model's directory cannot take it
	if err := os.Mkdir(path+".packed", 0o755); err != nil {
		t.Fatal(err)
	}
	pf, err := Open(m, tensors(m, "a", "c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if filepath.Dir(pf.Path()) != filepath.Join(cache, "packed") {
		t.Errorf("packed file at %s, want it in the cache", pf.Path())
	}
}

func TestOpenErrors(t *testing.T) {
	w := gguf.NewWriter()
	w.Set("general.architecture", gguf.Str("llama"))
	w.AddTensor("a", dtype.F32, []int64{4}, make([]byte, 16))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(f, tensors(f, "a"), nil); err == nil {
		t.Error("a parsed (unmapped) file: no error")
	}
	dir := t.TempDir()
	m := open(t, model(t, dir, 4))
	if _, err := Open(m, []Tensor{{Name: "x", Type: dtype.F32, Dims: []int64{4}, Data: make([]byte, 16)}}, nil); err == nil {
		t.Error("a tensor outside the file: no error")
	}
}
