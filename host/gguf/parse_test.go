package gguf

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"verity/device/dtype"
)

func TestParseSample(t *testing.T) {
	for _, tc := range []struct {
		name               string
		alignment, version uint32
		wantAlign          int64
	}{
		{"v3/align=default", 0, 3, 32},
		{"v2/align=default", 0, 2, 32},
		{"v3/align=64", 64, 3, 64},
		{"v3/align=1", 1, 3, 1},
		{"v3/align=4096", 4096, 3, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := sampleFile(t, tc.alignment, tc.version)
			f := mustParse(t, b)
			if f.Version != tc.version || f.Alignment != tc.wantAlign {
				t.Errorf("version %d alignment %d, want %d %d", f.Version, f.Alignment, tc.version, tc.wantAlign)
			}
			want := sampleKVs()
			if tc.alignment != 0 {
				want = append(want, KV{KeyAlignment, U32(tc.alignment)})
			}
			if len(f.KVs) != len(want) {
				t.Fatalf("%d KVs, want %d", len(f.KVs), len(want))
			}
			for i, kv := range want {
				if got := f.KVs[i]; got.Key != kv.Key || !got.Value.Equal(kv.Value) {
					t.Errorf("KV %d = %s: %v, want %s: %v", i, got.Key, got.Value, kv.Key, kv.Value)
				}
				if v, ok := f.Lookup(kv.Key); !ok || !v.Equal(kv.Value) || !f.Has(kv.Key) {
					t.Errorf("Lookup(%q) = %v, %v", kv.Key, v, ok)
				}
			}
			if f.DataOffset%f.Alignment != 0 {
				t.Errorf("DataOffset %d not aligned", f.DataOffset)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var off int64
			for i, st := range sampleTensors {
				ti := f.Tensors[i]
				size, _ := tensorSize(st.typ, st.dims)
				if ti.Name != st.name || ti.Type != st.typ || !equalDims(ti.Dims, st.dims) || ti.Size != size || ti.Offset != off {
					t.Errorf("tensor %d = %+v, want %+v size %d offset %d", i, ti, st, size, off)
				}
				if got, ok := f.Tensor(st.name); !ok || got.Name != st.name {
					t.Errorf("Tensor(%q) = %+v, %v", st.name, got, ok)
				}
				if d := f.Data(ti); !bytes.Equal(d, randBytes(rng, int(size))) || int64(len(d)) != size {
					t.Errorf("tensor %q: data differs", st.name)
				}
				off = alignUp(off+size, f.Alignment)
			}
			if _, ok := f.Tensor("missing"); ok || f.Has("missing") {
				t.Error("found a missing name")
			}
			if f.Architecture() != "llama" {
				t.Errorf("Architecture = %q", f.Architecture())
			}
		})
	}
}

func equalDims(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseEmpty(t *testing.T) {
	// No KVs, no tensors: the data section starts right after the header, unpadded, as in ggml.
	f := mustParse(t, header(3, 0, 0).b)
	if f.DataOffset != 24 || len(f.KVs) != 0 || len(f.Tensors) != 0 || f.Alignment != 32 {
		t.Errorf("%+v", f)
	}
	if f.Architecture() != "" {
		t.Errorf("Architecture = %q", f.Architecture())
	}
}

// validLayouts are files the specification allows besides ggml's packed order, and edge cases
// ggml accepts.
func validLayouts() []struct {
	name string
	b    []byte
} {
	return []struct {
		name string
		b    []byte
	}{
		{"reverse-order", header(3, 2, 0).tensor("a", dtype.F32, 32, 8).tensor("b", dtype.F32, 0, 8).pad(32, 64).b},
		{"gap", header(3, 2, 0).tensor("a", dtype.F32, 0, 8).tensor("b", dtype.F32, 64, 8).pad(32, 96).b},
		{"empty-tensors-share-offset", header(3, 3, 0).tensor("a", dtype.F32, 0, 0).tensor("b", dtype.Q4_K, 0, 0, 3).
			tensor("c", dtype.F32, 0, 1).pad(32, 4).b},
		{"empty-tensor-at-end", header(3, 1, 0).tensor("a", dtype.F32, 0, 0).pad(32, 0).b},
		{"no-trailing-padding", header(3, 1, 0).tensor("a", dtype.F32, 0, 3).pad(32, 12).b},
		{"zero-dim-huge-others", header(3, 1, 0).tensor("a", dtype.F32, 0, 1<<40, 0, 1<<40).pad(32, 0).b},
		{"empty-name", header(3, 1, 0).tensor("", dtype.F32, 0, 1).pad(32, 4).b},
		{"bool-2-is-true", header(3, 0, 1).str("b").u32(uint32(TypeBool)).u8(2).b},
	}
}

func TestParseLayouts(t *testing.T) {
	for _, tt := range validLayouts() {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, tt.b)
			for _, ti := range f.Tensors {
				if int64(len(f.Data(ti))) != ti.Size {
					t.Errorf("tensor %q: %d bytes of data, want %d", ti.Name, len(f.Data(ti)), ti.Size)
				}
			}
		})
	}
}

type errCase struct {
	name string
	b    []byte
	want string // a part of the error message
}

// malformedCases are inputs Parse must reject, one per check.
func malformedCases() []errCase {
	tensorOK := func(nt uint64) *raw { return header(3, nt, 0) }
	return []errCase{
		{"empty", nil, "magic needs 4 bytes"},
		{"bad-magic", []byte("GGML\x03\x00\x00\x00"), `bad magic "GGML"`},
		{"version-0", header(0, 0, 0).b, "invalid version 0"},
		{"version-1", header(1, 0, 0).b, "version 1 (GGUFv1) is not supported"},
		{"version-4", header(4, 0, 0).b, "version 4 is newer"},
		{"big-endian", header(0x03000000, 0, 0).b, "big-endian"},
		{"tensor-count-huge", header(3, 1<<62, 0).b, "tensor count 4611686018427387904 is more than the 0 bytes"},
		{"tensor-count-max", header(3, math.MaxUint64, 0).b, "tensor count"},
		{"kv-count-huge", header(3, 0, 1<<40).pad(1, 100).b, "key-value count 1099511627776 is more than the 100 bytes"},
		{"kv-count-one-short", header(3, 0, 2).kvU32("k", 1).u64(100).pad(1, 3).b, "key 1: truncated: key of 100 bytes at offset 49 runs past the end"},
		{"key-empty", header(3, 0, 1).kvU32("", 1).b, "key 0 is empty"},
		{"key-duplicate", header(3, 0, 2).kvU32("k", 1).kvU32("k", 2).b, `duplicate key "k" (pairs 0 and 1)`},
		{"key-length-past-end", header(3, 0, 1).u64(1000).bytes(make([]byte, 20)).b, "gguf: key 0: truncated: key of 1000 bytes at offset 32 runs past the end"},
		{"key-length-huge", header(3, 0, 1).u64(math.MaxUint64).bytes(make([]byte, 20)).b, "runs past the end"},
		{"value-type-invalid", header(3, 0, 1).str("k").u32(13).u32(0).b, `key "k": invalid value type 13`},
		{"value-truncated", header(3, 0, 1).str("k").u32(uint32(TypeUint64)).u32(0).b, `key "k": truncated: uint64 needs 8 bytes`},
		{"string-past-end", header(3, 0, 1).str("k").u32(uint32(TypeString)).u64(5).bytes([]byte("abc")).b, "string of 5 bytes"},
		{"array-elem-invalid", header(3, 0, 1).kvArr("k", 13, 0).b, "array of invalid element type 13"},
		{"array-length-huge", header(3, 0, 1).kvArr("k", TypeUint8, 1<<50).pad(1, 64).b, "array of 1125899906842624 uint8"},
		{"array-length-u32", header(3, 0, 1).kvArr("k", TypeUint32, 3).pad(1, 11).b, "array of 3 uint32"},
		{"array-length-max", header(3, 0, 1).kvArr("k", TypeString, math.MaxUint64).b, "array of 18446744073709551615 string"},
		{"array-string-past-end", header(3, 0, 1).kvArr("k", TypeString, 2).str("ab").u64(9).bytes([]byte("abc")).b, "string 1 of 9 bytes"},
		{"array-string-length-cut", header(3, 0, 1).kvArr("k", TypeString, 2).str("ab").pad(1, 6).b, "string 1 length needs 8 bytes"},
		{"array-nested-huge", header(3, 0, 1).kvArr("k", TypeArray, 1).u32(uint32(TypeInt64)).u64(1 << 60).b, "element 0: truncated: array of 1152921504606846976 int64"},
		{"array-nested-deep", nested(9), "arrays nested more than 8 deep"},
		{"array-nested-elem-invalid", header(3, 0, 1).kvArr("k", TypeArray, 2).u32(uint32(TypeUint8)).u64(0).u32(99).u64(0).b, "element 1: array of invalid element type 99"},
		{"alignment-type", header(3, 0, 1).str(KeyAlignment).u32(uint32(TypeUint64)).u64(32).b, `key "general.alignment": want uint32, found uint64`},
		{"alignment-zero", header(3, 0, 1).kvU32(KeyAlignment, 0).b, "alignment 0 is not a power of two"},
		{"alignment-3", header(3, 0, 1).kvU32(KeyAlignment, 3).b, "alignment 3 is not a power of two"},
		{"tensor-truncated", tensorOK(1).str("a").u32(1).pad(1, 12).b, `tensor "a": truncated: data offset needs 8 bytes`},
		{"tensor-name-long", tensorOK(1).tensor(strings.Repeat("n", 64), dtype.F32, 0, 1).b, "name of 64 bytes is longer than ggml's limit of 63"},
		{"tensor-name-nul", tensorOK(1).tensor("a\x00b", dtype.F32, 0, 1).b, "contains a NUL byte"},
		{"tensor-duplicate", tensorOK(2).tensor("a", dtype.F32, 0, 1).tensor("a", dtype.F32, 32, 1).pad(32, 64).b, `duplicate tensor name "a" (tensors 0 and 1)`},
		{"dims-5", tensorOK(1).tensor("a", dtype.F32, 0, 1, 1, 1, 1, 1).b, `tensor "a" has 5 dims, more than ggml's 4`},
		{"dim-negative", tensorOK(1).tensor("a", dtype.F32, 0, 4, -1).b, "dim 1 is negative (-1)"},
		{"elements-overflow", tensorOK(1).tensor("a", dtype.F32, 0, 1<<32, 1<<32).b, "element count overflows int64"},
		{"elements-overflow-4d", tensorOK(1).tensor("a", dtype.I8, 0, 1<<16, 1<<16, 1<<16, 1<<16).b, "element count overflows int64"},
		{"bytes-overflow", tensorOK(1).tensor("a", dtype.F32, 0, 1<<62).b, "f32 size in bytes overflows int64"},
		{"bytes-overflow-q8_0", tensorOK(1).tensor("a", dtype.Q8_0, 0, math.MaxInt64&^31).b, "q8_0 size in bytes overflows int64"},
		{"bytes-overflow-2d", tensorOK(1).tensor("a", dtype.F64, 0, 1<<31, 1<<30).b, "f64 size in bytes overflows int64"},
		{"type-removed", tensorOK(1).tensor("a", dtype.Type(4), 0, 32).b, "unknown ggml type id 4"},
		{"type-unknown", tensorOK(1).tensor("a", dtype.Type(1<<31), 0, 32).b, "unknown ggml type id 2147483648"},
		{"row-not-blocks", tensorOK(1).tensor("a", dtype.Q4_K, 0, 100, 2).b, "row of 100 values is not a whole number of q4_K blocks of 256"},
		{"row-not-blocks-no-dims", tensorOK(1).tensor("a", dtype.Q8_0, 0).b, "row of 1 values is not a whole number of q8_0 blocks"},
		{"offset-misaligned", tensorOK(1).tensor("a", dtype.F32, 8, 1).pad(32, 64).b, "data offset 8 is not a multiple of the alignment 32"},
		{"offset-huge", tensorOK(1).tensor("a", dtype.F32, 1<<63, 1).pad(32, 64).b, "data offset 9223372036854775808 is not a multiple"},
		{"data-past-end", tensorOK(1).tensor("a", dtype.F32, 0, 8).pad(32, 31).b, `tensor "a": data [64, 96) beyond file size 95`},
		{"data-offset-past-end", tensorOK(1).tensor("a", dtype.F32, 1<<40, 0).pad(32, 0).b, `tensor "a": data [1099511627840, 1099511627840) beyond file size 64`},
		{"data-huge", tensorOK(1).tensor("a", dtype.F32, 0, 1<<60).pad(32, 0).b, "beyond file size"},
		{"data-section-past-end", tensorOK(1).tensor("a", dtype.F32, 0, 0).b, "data section at offset 64 starts past the end of the file (57 bytes)"},
		{"overlap", tensorOK(2).tensor("a", dtype.F32, 0, 16).tensor("b", dtype.F32, 32, 8).pad(32, 128).b, `tensors "a" [0, 64) and "b" [32, 64) overlap`},
		{"overlap-same-offset", tensorOK(2).tensor("a", dtype.F32, 0, 8).tensor("b", dtype.F32, 0, 8).pad(32, 64).b, "overlap"},
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range malformedCases() {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(tt.b)
			if err == nil {
				t.Fatalf("no error; parsed %d KVs, %d tensors", len(f.KVs), len(f.Tensors))
			}
			if !strings.HasPrefix(err.Error(), "gguf: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// nested returns a file whose one value is an array nested depth deep.
func nested(depth int) []byte {
	r := header(3, 0, 1).str("k").u32(uint32(TypeArray))
	for range depth - 1 {
		r.u32(uint32(TypeArray)).u64(1)
	}
	return r.u32(uint32(TypeUint8)).u64(0).b
}

func TestParseNestingLimit(t *testing.T) {
	f := mustParse(t, nested(maxDepth))
	v := f.KVs[0].Value
	for range maxDepth - 1 {
		if e, _ := v.Elem(); e != TypeArray || v.Len() != 1 {
			t.Fatalf("%v", v)
		}
		v = v.Any().([]Value)[0]
	}
	if e, _ := v.Elem(); e != TypeUint8 || v.Len() != 0 {
		t.Fatalf("innermost %v", v)
	}
}

// Every prefix of a valid file shorter than the end of its last tensor's data is an error; the
// padding after the last tensor is optional, as for ggml.
func TestParseTruncated(t *testing.T) {
	b := sampleFile(t, 0, 3)
	f := mustParse(t, b)
	var end int64
	for _, ti := range f.Tensors {
		end = max(end, f.DataOffset+ti.Offset+ti.Size)
	}
	for n := range len(b) {
		_, err := Parse(b[:n])
		if (err != nil) != (int64(n) < end) {
			t.Fatalf("prefix of %d bytes (data ends at %d, file %d): err = %v", n, end, len(b), err)
		}
		if n < int(f.DataOffset) && err != nil && !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix of %d bytes: %v does not say the file is truncated", n, err)
		}
	}
}

// Parse allocates in proportion to the input, whatever the counts claim.
func TestParseAllocationBounded(t *testing.T) {
	fill := func(r *raw, n int) []byte { return r.pad(1, n).b }
	tests := []struct {
		name string
		b    []byte
	}{
		{"u8-array", fill(header(3, 0, 1).kvArr("k", TypeUint8, 1<<16), 1<<16)},
		{"bool-array", fill(header(3, 0, 1).kvArr("k", TypeBool, 1<<16), 1<<16)},
		{"empty-strings", fill(header(3, 0, 1).kvArr("k", TypeString, 1<<13), 1<<16)},
		{"empty-arrays", emptyArrays(1 << 12)},
		{"many-kvs", manyKVs(1 << 12)},
		{"many-tensors", manyTensors(1 << 11)},
		{"huge-claims", fill(header(3, 1<<40, 1<<40), 1<<16)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Parse(tt.b)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			limit := 8*uint64(len(tt.b)) + 64<<10
			t.Logf("input %d bytes, allocated %d (%.1fx), err %v", len(tt.b), alloc, float64(alloc)/float64(len(tt.b)), err)
			if alloc > limit {
				t.Errorf("allocated %d bytes for %d bytes of input", alloc, len(tt.b))
			}
		})
	}
}

func emptyArrays(n int) []byte {
	r := header(3, 0, 1).kvArr("k", TypeArray, uint64(n))
	for range n {
		r.u32(uint32(TypeUint8)).u64(0)
	}
	return r.b
}

func manyKVs(n int) []byte {
	r := header(3, 0, uint64(n))
	for i := range n {
		r.str(string(rune('a'+i%26)) + strings.Repeat("x", i/26)).u32(uint32(TypeUint8)).u8(1)
	}
	return r.b
}

func manyTensors(n int) []byte {
	r := header(3, uint64(n), 0)
	for i := range n {
		r.tensor(string(rune('a'+i%26))+strings.Repeat("x", i/26%40)+string(rune('A'+i/(26*40))), dtype.F32, 0, 0)
	}
	return r.pad(32, 0).b
}
