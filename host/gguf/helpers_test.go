package gguf

import (
	"bytes"
	"encoding/binary"
	"flag"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

var update = flag.Bool("update", false, "rewrite the committed test fixtures (testdata)")

// raw assembles GGUF bytes field by field, for inputs the Writer would refuse to produce.
type raw struct{ b []byte }

func header(version uint32, nTensors, nKV uint64) *raw {
	r := &raw{b: []byte("GGUF")}
	return r.u32(version).u64(nTensors).u64(nKV)
}

func (r *raw) u8(x uint8) *raw   { r.b = append(r.b, x); return r }
func (r *raw) u32(x uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, x); return r }
func (r *raw) u64(x uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, x); return r }
func (r *raw) str(s string) *raw { return r.u64(uint64(len(s))).bytes([]byte(s)) }
func (r *raw) bytes(p []byte) *raw {
	r.b = append(r.b, p...)
	return r
}

// kvU32 appends a uint32 pair; kvArr the head of an array pair.
func (r *raw) kvU32(key string, x uint32) *raw { return r.str(key).u32(uint32(TypeUint32)).u32(x) }
func (r *raw) kvArr(key string, elem ValueType, n uint64) *raw {
	return r.str(key).u32(uint32(TypeArray)).u32(uint32(elem)).u64(n)
}

// tensor appends a tensor info.
func (r *raw) tensor(name string, t dtype.Type, off uint64, dims ...int64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(uint64(d))
	}
	return r.u32(uint32(t)).u64(off)
}

// pad appends zeros up to a multiple of a, then n more zero bytes of data.
func (r *raw) pad(a int, n int) *raw {
	for len(r.b)%a != 0 {
		r.b = append(r.b, 0)
	}
	r.b = append(r.b, make([]byte, n)...)
	return r
}

// randBytes returns n seeded random bytes.
func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

type sampleTensor struct {
	name string
	typ  dtype.Type
	dims []int64
}

// sampleTensors covers plain and block types, 1–4 dims, an empty tensor and one with no dims.
var sampleTensors = []sampleTensor{
	{"token_embd.weight", dtype.F32, []int64{4, 3}},
	{"blk.0.attn_q.weight", dtype.Q8_0, []int64{64, 2}},
	{"blk.0.ffn_gate_exps.weight", dtype.Q4_K, []int64{256, 2, 2}},
	{"norm", dtype.F16, []int64{5}},
	{"four", dtype.I32, []int64{2, 1, 1, 2}},
	{"empty", dtype.BF16, []int64{0, 7}},
	{"scalar", dtype.F32, []int64{}},
}

// sampleKVs holds every value type, arrays of each, nested arrays, an empty array and a string
// that is not UTF-8.
func sampleKVs() []KV {
	return []KV{
		{"general.architecture", Str("llama")},
		{"u8", U8(200)}, {"i8", I8(-100)}, {"u16", U16(60000)}, {"i16", I16(-30000)},
		{"u32", U32(4000000000)}, {"i32", I32(-2000000000)}, {"f32", F32(float32(math.Pi))},
		{"bool", Bool(true)}, {"str", Str("héllo \xff")}, {"u64", U64(math.MaxUint64)},
		{"i64", I64(math.MinInt64)}, {"f64", F64(-math.E)},
		{"a.u8", ArrOf([]uint8{1, 2, 255})}, {"a.i8", ArrOf([]int8{-1, 1})},
		{"a.u16", ArrOf([]uint16{1, 65535})}, {"a.i16", ArrOf([]int16{-2})},
		{"a.u32", ArrUint32s([]uint32{7, 8, 9})}, {"a.i32", ArrInt32s([]int32{-7})},
		{"a.f32", ArrFloat32s([]float32{0.5, float32(math.Inf(-1))})}, {"a.bool", ArrOf([]bool{true, false})},
		{"a.str", ArrStrings([]string{"", "a", "Ġthe"})}, {"a.u64", ArrOf([]uint64{1 << 63})},
		{"a.i64", ArrOf([]int64{-1})}, {"a.f64", ArrOf([]float64{1e300})},
		{"a.empty", ArrOf([]float64{})},
		{"a.nested", ArrOf([]Value{ArrOf([]int32{1, 2}), ArrStrings([]string{"x"}), ArrOf([]Value{ArrOf([]uint8{})})})},
	}
}

// sampleFile writes a file with sampleKVs and sampleTensors (seeded data) at the given alignment
// (0: no general.alignment key) and version.
func sampleFile(t testing.TB, alignment uint32, version uint32) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range sampleKVs() {
		w.Set(kv.Key, kv.Value)
	}
	if alignment != 0 {
		w.Set(KeyAlignment, U32(alignment))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, st := range sampleTensors {
		size, err := tensorSize(st.typ, st.dims)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(st.name, st.typ, st.dims, randBytes(rng, int(size))); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	binary.LittleEndian.PutUint32(b[4:], version)
	return b
}

// mustParse parses b or fails the test.
func mustParse(t testing.TB, b []byte) *File {
	t.Helper()
	f, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}
