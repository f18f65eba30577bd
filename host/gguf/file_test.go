package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"verity/device/dtype"
)

func accessorFile(t *testing.T) *File {
	t.Helper()
	w := NewWriter()
	w.Set("llama.block_count", U32(16))
	w.Set("name", Str("tiny"))
	w.Set("i8", I8(-3))
	w.Set("u64.big", U64(math.MaxUint64))
	w.Set("u64", U64(1<<40))
	w.Set("i64", I64(-1<<40))
	w.Set("i32", I32(-5))
	w.Set("f32", F32(1e-5))
	w.Set("f64", F64(0.25))
	w.Set("bool", Bool(true))
	w.Set("tokens", ArrStrings([]string{"a", "b"}))
	w.Set("types", ArrInt32s([]int32{1, -2}))
	w.Set("ids", ArrUint32s([]uint32{3}))
	w.Set("scales", ArrFloat32s([]float32{0.5}))
	w.Set("u16s", ArrOf([]uint16{1, 2}))
	w.Set("u64s.big", ArrOf([]uint64{1, math.MaxUint64}))
	w.Set("empty.u8", ArrOf([]uint8{}))
	w.Set("empty.f32", ArrOf([]float32{}))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return mustParse(t, buf.Bytes())
}

func TestAccessors(t *testing.T) {
	f := accessorFile(t)
	call := map[string]func(string) (any, error){
		"Uint32":   func(k string) (any, error) { return f.Uint32(k) },
		"Int32":    func(k string) (any, error) { return f.Int32(k) },
		"Uint64":   func(k string) (any, error) { return f.Uint64(k) },
		"Int64":    func(k string) (any, error) { return f.Int64(k) },
		"Float32":  func(k string) (any, error) { return f.Float32(k) },
		"Float64":  func(k string) (any, error) { return f.Float64(k) },
		"Bool":     func(k string) (any, error) { return f.Bool(k) },
		"String":   func(k string) (any, error) { return f.String(k) },
		"Int":      func(k string) (any, error) { return f.Int(k) },
		"Float":    func(k string) (any, error) { return f.Float(k) },
		"Strings":  func(k string) (any, error) { return f.Strings(k) },
		"Int32s":   func(k string) (any, error) { return f.Int32s(k) },
		"Uint32s":  func(k string) (any, error) { return f.Uint32s(k) },
		"Float32s": func(k string) (any, error) { return f.Float32s(k) },
		"Ints":     func(k string) (any, error) { return f.Ints(k) },
	}
	tests := []struct {
		fn, key string
		want    any
		err     string
	}{
		{"Uint32", "llama.block_count", uint32(16), ""},
		{"Uint32", "name", nil, `gguf: key "name": want uint32, found string`},
		{"Uint32", "llama.head_count", nil, `gguf: key "llama.head_count" not found`},
		{"Uint32", "ids", nil, `gguf: key "ids": want uint32, found array of uint32`},
		{"Int32", "i32", int32(-5), ""},
		{"Uint64", "u64", uint64(1 << 40), ""},
		{"Int64", "i64", int64(-1 << 40), ""},
		{"Int64", "u64", nil, `want int64, found uint64`},
		{"Float32", "f32", float32(1e-5), ""},
		{"Float32", "f64", nil, `want float32, found float64`},
		{"Float64", "f64", 0.25, ""},
		{"Bool", "bool", true, ""},
		{"Bool", "i8", nil, "want bool, found int8"},
		{"String", "name", "tiny", ""},
		{"Int", "llama.block_count", int64(16), ""},
		{"Int", "i8", int64(-3), ""},
		{"Int", "u64", int64(1 << 40), ""},
		{"Int", "i64", int64(-1 << 40), ""},
		{"Int", "u64.big", nil, `gguf: key "u64.big": value 18446744073709551615 overflows int64`},
		{"Int", "bool", nil, `gguf: key "bool": want integer, found bool`},
		{"Int", "f32", nil, "want integer, found float32"},
		{"Float", "f32", float64(float32(1e-5)), ""},
		{"Float", "f64", 0.25, ""},
		{"Float", "i8", -3.0, ""},
		{"Float", "u64.big", float64(math.MaxUint64), ""},
		{"Float", "name", nil, "want number, found string"},
		{"Strings", "tokens", []string{"a", "b"}, ""},
		{"Strings", "types", nil, `gguf: key "types": want array of string, found array of int32`},
		{"Strings", "name", nil, "want array of string, found string"},
		{"Int32s", "types", []int32{1, -2}, ""},
		{"Uint32s", "ids", []uint32{3}, ""},
		{"Float32s", "scales", []float32{0.5}, ""},
		{"Float32s", "empty.f32", []float32{}, ""},
		{"Ints", "types", []int64{1, -2}, ""},
		{"Ints", "u16s", []int64{1, 2}, ""},
		{"Ints", "ids", []int64{3}, ""},
		{"Ints", "empty.u8", []int64{}, ""},
		{"Ints", "empty.f32", nil, "want array of integers, found array of float32"},
		{"Ints", "u64s.big", nil, `gguf: key "u64s.big": element 1: value 18446744073709551615 overflows int64`},
		{"Ints", "scales", nil, "want array of integers, found array of float32"},
		{"Ints", "llama.block_count", nil, "want array of integers, found uint32"},
		{"Ints", "missing", nil, `gguf: key "missing" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.fn+"/"+tt.key, func(t *testing.T) {
			got, err := call[tt.fn](tt.key)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
	if _, err := f.Uint32("missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing key: %v does not wrap ErrNotFound", err)
	}
}

func TestAccessorDefaults(t *testing.T) {
	f := accessorFile(t)
	check := func(name string, got any, err error, want any, wantErr bool) {
		t.Helper()
		if (err != nil) != wantErr || (!wantErr && got != want) {
			t.Errorf("%s = %v, %v; want %v (error %v)", name, got, err, want, wantErr)
		}
	}
	u, err := f.Uint32Or("llama.block_count", 7)
	check("Uint32Or/present", u, err, uint32(16), false)
	u, err = f.Uint32Or("absent", 7)
	check("Uint32Or/absent", u, err, uint32(7), false)
	_, err = f.Uint32Or("name", 7)
	check("Uint32Or/wrong-type", nil, err, nil, true)
	i32, err := f.Int32Or("absent", -1)
	check("Int32Or", i32, err, int32(-1), false)
	u64, err := f.Uint64Or("u64", 0)
	check("Uint64Or", u64, err, uint64(1<<40), false)
	n, err := f.IntOr("i8", 0)
	check("IntOr/present", n, err, int64(-3), false)
	n, err = f.IntOr("absent", 9)
	check("IntOr/absent", n, err, int64(9), false)
	_, err = f.IntOr("f32", 9)
	check("IntOr/wrong-type", nil, err, nil, true)
	f32, err := f.Float32Or("absent", 1e-6)
	check("Float32Or", f32, err, float32(1e-6), false)
	x, err := f.FloatOr("f64", 1)
	check("FloatOr", x, err, 0.25, false)
	s, err := f.StringOr("absent", "def")
	check("StringOr", s, err, "def", false)
	_, err = f.StringOr("bool", "def")
	check("StringOr/wrong-type", nil, err, nil, true)
	b, err := f.BoolOr("absent", true)
	check("BoolOr", b, err, true, false)
}

func TestOpen(t *testing.T) {
	b := sampleFile(t, 64, 3)
	path := filepath.Join(t.TempDir(), "sample.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" && !f.Mapped() {
		t.Error("Open did not map the file")
	}
	p := mustParse(t, b)
	if len(f.KVs) != len(p.KVs) || len(f.Tensors) != len(p.Tensors) || f.DataOffset != p.DataOffset {
		t.Fatalf("Open and Parse differ")
	}
	if err := f.AdviseRandom(); err != nil {
		t.Error(err)
	}
	for i, ti := range f.Tensors {
		if !reflect.DeepEqual(ti, p.Tensors[i]) || !bytes.Equal(f.Data(ti), p.Data(ti)) {
			t.Errorf("tensor %q differs", ti.Name)
		}
		if err := f.AdviseWillNeed(ti); err != nil {
			t.Errorf("AdviseWillNeed(%q): %v", ti.Name, err)
		}
		if err := f.AdviseDontNeed(ti); err != nil {
			t.Errorf("AdviseDontNeed(%q): %v", ti.Name, err)
		}
		if !bytes.Equal(f.Data(ti), p.Data(ti)) {
			t.Errorf("tensor %q differs after MADV_DONTNEED", ti.Name)
		}
	}
	if err := f.AdviseWillNeed(TensorInfo{Name: "bogus", Offset: 1 << 40, Size: 1}); err == nil && f.Mapped() {
		t.Error("AdviseWillNeed accepted a tensor outside the file")
	}
	if f.Data(TensorInfo{Offset: int64(len(b)), Size: 1}) != nil {
		t.Error("Data of a range outside the file is not nil")
	}
	kv := f.KVs[0]
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Data(f.Tensors[0]) != nil {
		t.Error("Data after Close is not nil")
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if kv.Key != "general.architecture" || kv.Value.Any() != "llama" {
		t.Errorf("metadata after Close: %v", kv)
	}
	// Parse'd files: Close and the advice are no-ops.
	if p.Mapped() || p.AdviseRandom() != nil || p.AdviseWillNeed(p.Tensors[0]) != nil || p.Close() != nil {
		t.Error("Parse'd file: advice or Close failed")
	}
	if !bytes.Equal(p.Data(p.Tensors[0]), b[p.DataOffset:p.DataOffset+p.Tensors[0].Size]) {
		t.Error("Parse'd file: Data after Close differs")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.gguf")
	bad := filepath.Join(dir, "bad.gguf")
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(bad, []byte("GGUF\x01\x00\x00\x00"), 0o644)
	tests := []struct{ path, want string }{
		{filepath.Join(dir, "missing.gguf"), "no such file"},
		{empty, "magic needs 4 bytes"},
		{bad, "version 1 (GGUFv1) is not supported"},
		{dir, "is a directory"},
	}
	for _, tt := range tests {
		f, err := Open(tt.path)
		if err == nil {
			f.Close()
			t.Errorf("Open(%s): no error", tt.path)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "gguf: ") {
			t.Errorf("Open(%s): %v, want %q", tt.path, err, tt.want)
		}
		if tt.path == bad && !strings.Contains(err.Error(), bad) {
			t.Errorf("Open(%s): %v does not name the file", tt.path, err)
		}
	}
}

// A view replaces and adds tensors without touching the file it reads the rest from.
func TestWithTensors(t *testing.T) {
	w := NewWriter()
	w.Set("general.architecture", Str("llama"))
	a := []byte{1, 0, 0, 0, 2, 0, 0, 0}
	b := []byte{3, 0, 0, 0}
	if err := w.AddTensor("a", dtype.I32, []int64{2}, a); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("b", dtype.I32, []int64{1}, b); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	newA := []byte{9, 0, 9, 0}
	c := []byte{7, 0, 0, 0, 8, 0, 0, 0, 9, 0, 0, 0}
	v, err := f.WithTensors([]MemTensor{{Name: "a", Type: dtype.F16, Dims: []int64{2}, Data: newA}, {Name: "c", Type: dtype.I32, Dims: []int64{3}, Data: c}})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Tensors) != 3 || v.Tensors[0].Name != "a" || v.Tensors[2].Name != "c" {
		t.Fatalf("view tensors %+v", v.Tensors)
	}
	ta, _ := v.Tensor("a")
	if ta.Type != dtype.F16 || ta.Offset != -1 || ta.Size != 4 || !bytes.Equal(v.Data(ta), newA) {
		t.Errorf("replaced tensor %+v, data %v", ta, v.Data(ta))
	}
	tb, _ := v.Tensor("b")
	if !bytes.Equal(v.Data(tb), b) {
		t.Errorf("kept tensor data %v", v.Data(tb))
	}
	tc, ok := v.Tensor("c")
	if !ok || !bytes.Equal(v.Data(tc), c) {
		t.Errorf("added tensor %+v, %v", tc, ok)
	}
	if fa, _ := f.Tensor("a"); fa.Type != dtype.I32 || !bytes.Equal(f.Data(fa), a) || len(f.Tensors) != 2 {
		t.Errorf("the file changed: %+v", f.Tensors)
	}
	if v.Architecture() != "llama" {
		t.Errorf("view metadata: %q", v.Architecture())
	}
	if err := v.AdviseWillNeed(ta); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]MemTensor{
		{{Name: "a", Type: dtype.I32, Dims: []int64{2}, Data: newA}},                                                       // wrong size
		{{Name: "d", Type: dtype.Q8_0, Dims: []int64{3}, Data: nil}},                                                       // not whole blocks
		{{Name: "c", Type: dtype.I32, Dims: []int64{3}, Data: c}, {Name: "c", Type: dtype.I32, Dims: []int64{3}, Data: c}}, // twice
	} {
		if _, err := f.WithTensors(bad); err == nil {
			t.Errorf("WithTensors(%v) accepted", bad[0].Name)
		}
	}
}
