package gguf

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeeds are small valid files (v2 and v3, every value type, arrays, nested arrays, several
// tensor types and alignments, layouts ggml would not write) and one malformed file per check.
func fuzzSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{
		"valid-v3":       sampleFile(t, 0, 3),
		"valid-v2":       sampleFile(t, 0, 2),
		"valid-align-1":  sampleFile(t, 1, 3),
		"valid-align-64": sampleFile(t, 64, 3),
		"valid-empty":    header(3, 0, 0).b,
		"valid-nested":   nested(maxDepth),
	}
	for _, c := range validLayouts() {
		seeds["valid-"+c.name] = c.b
	}
	for _, c := range malformedCases() {
		seeds["bad-"+c.name] = c.b
	}
	return seeds
}

func FuzzParse(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	if b, err := os.ReadFile(fixtureGGUF); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b)
		if err != nil {
			return
		}
		checkParsed(t, g, b)
		// The Writer pads the header to the alignment even without tensors, as ggml does; a file
		// claiming a huge alignment would make a huge output.
		if g.Alignment > 1<<16 {
			return
		}
		out := rewrite(t, g)
		h, err := Parse(out)
		if err != nil {
			t.Fatalf("re-written file does not parse: %v", err)
		}
		checkParsed(t, h, out)
		if len(h.KVs) != len(g.KVs) || len(h.Tensors) != len(g.Tensors) {
			t.Fatalf("re-written file has %d KVs %d tensors, want %d %d", len(h.KVs), len(h.Tensors), len(g.KVs), len(g.Tensors))
		}
		for i, kv := range g.KVs {
			if h.KVs[i].Key != kv.Key || !h.KVs[i].Value.Equal(kv.Value) {
				t.Fatalf("KV %d: %q = %v, want %q = %v", i, h.KVs[i].Key, h.KVs[i].Value, kv.Key, kv.Value)
			}
		}
		for i, ti := range g.Tensors {
			hi := h.Tensors[i]
			if hi.Name != ti.Name || hi.Type != ti.Type || !equalDims(hi.Dims, ti.Dims) || hi.Size != ti.Size ||
				!bytes.Equal(h.Data(hi), g.Data(ti)) {
				t.Fatalf("tensor %d: %+v, want %+v", i, hi, ti)
			}
		}
		if again := rewrite(t, h); !bytes.Equal(again, out) {
			t.Fatalf("writing the re-parsed file again gives different bytes")
		}
	})
}

// checkParsed checks the invariants of a successfully parsed file.
func checkParsed(t *testing.T, f *File, b []byte) {
	t.Helper()
	if f.Alignment <= 0 || f.Alignment&(f.Alignment-1) != 0 {
		t.Fatalf("alignment %d", f.Alignment)
	}
	if f.DataOffset < 0 || f.DataOffset > int64(len(b)) {
		t.Fatalf("data offset %d in a file of %d bytes", f.DataOffset, len(b))
	}
	for i, ti := range f.Tensors {
		if ti.Offset%f.Alignment != 0 {
			t.Fatalf("tensor %q: offset %d not aligned to %d", ti.Name, ti.Offset, f.Alignment)
		}
		if end := f.DataOffset + ti.Offset + ti.Size; ti.Offset < 0 || ti.Size < 0 || end > int64(len(b)) || end < 0 {
			t.Fatalf("tensor %q: [%d, +%d) outside the file (%d bytes)", ti.Name, ti.Offset, ti.Size, len(b))
		}
		if size, err := tensorSize(ti.Type, ti.Dims); err != nil || size != ti.Size {
			t.Fatalf("tensor %q: size %d, computed %d, %v", ti.Name, ti.Size, size, err)
		}
		if d := f.Data(ti); int64(len(d)) != ti.Size {
			t.Fatalf("tensor %q: Data has %d bytes, want %d", ti.Name, len(d), ti.Size)
		}
		if got, ok := f.Tensor(ti.Name); !ok || got.Offset != ti.Offset {
			t.Fatalf("Tensor(%q) = %+v, %v", ti.Name, got, ok)
		}
		for _, tj := range f.Tensors[:min(i, 256)] {
			if ti.Size > 0 && tj.Size > 0 && ti.Offset < tj.Offset+tj.Size && tj.Offset < ti.Offset+ti.Size {
				t.Fatalf("tensors %q and %q overlap", ti.Name, tj.Name)
			}
		}
	}
	for _, kv := range f.KVs {
		if v, ok := f.Lookup(kv.Key); !ok || !v.Equal(kv.Value) {
			t.Fatalf("Lookup(%q) = %v, %v", kv.Key, v, ok)
		}
		if err := kv.Value.check(maxDepth); err != nil {
			t.Fatalf("key %q: %v", kv.Key, err)
		}
	}
}

// TestFuzzCorpus keeps testdata/fuzz/FuzzParse in step with fuzzSeeds: with -update it writes one
// corpus file per seed; without, it checks that every seed has its file.
func TestFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	for name, b := range fuzzSeeds(t) {
		path := filepath.Join(dir, "seed-"+name)
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Errorf("%s is missing or stale (go test -run FuzzCorpus -update): %v", path, err)
		}
	}
}
