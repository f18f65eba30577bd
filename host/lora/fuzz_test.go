package lora

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/host/gguf"
)

// fuzzBase is the model fuzzed adapters are merged into: Q8_0 and Q4_K matrices, an F16
// embedding, tied.
func fuzzBase(t testing.TB) []byte {
	m := model{typ: dtype.Q8_0, in: 64, ff: 256, vocab: 32, layers: 1, tied: true, embdType: dtype.F16, seed: 8,
		extra: []tensorSpec{{name: "blk.0.ffn_up.weight", typ: dtype.Q4_K, dims: []int64{256, 64}}}}
	return fileBytes(t, map[string]gguf.Value{"general.architecture": gguf.Str("llama")}, m.specs(), 1)
}

// fuzzSeeds are the GGUF parser's fuzz corpus (host/gguf/testdata/fuzz/FuzzParse: valid and
// malformed files of every kind) and adapters for fuzzBase, good and bad.
func fuzzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	files, _ := filepath.Glob(filepath.Join("..", "gguf", "testdata", "fuzz", "FuzzParse", "*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, arg, ok := strings.Cut(string(b), "\n[]byte(")
		if !ok {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(arg), ")"))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		seeds = append(seeds, []byte(s))
	}
	if len(files) == 0 || len(seeds) < len(files)/2 {
		t.Fatalf("the GGUF fuzz corpus: %d of %d files read", len(seeds), len(files))
	}
	kv := adapterKV("llama", 8)
	for _, ps := range [][]pairSpec{
		{{target: "blk.0.attn_q.weight", in: 64, out: 64, rank: 2}},
		{{target: "token_embd.weight", in: 64, out: 32, rank: 3, typ: dtype.F16}, {target: "blk.0.ffn_up.weight", in: 256, out: 64, rank: 1}},
		{{target: "blk.0.ffn_down.weight", in: 256, out: 64, rank: 32, typ: dtype.Q8_0}},
		{{target: "blk.0.attn_q.weight", in: 64, out: 32, rank: 2}},
		{{target: "output.weight", in: 64, out: 32, rank: 2}},
	} {
		seeds = append(seeds, fileBytes(t, kv, pairTensors(ps), 2))
	}
	return seeds
}

// Whatever the bytes, reading and merging an adapter returns an error or a merged view whose
// tensors are whole: never a panic or a hang.
func FuzzAdapter(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, 1.0)
	}
	base, err := gguf.Parse(fuzzBase(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, scale float64) {
		af, err := gguf.Parse(b)
		if err != nil {
			return
		}
		a, err := Read(af)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		v, res, err := Merge(base, []Use{{a, scale}}, Options{Memory: 64 << 20, Threads: 2})
		if err != nil {
			return
		}
		if res.Tensors != len(a.Pairs) {
			t.Fatalf("%d tensors merged for %d pairs", res.Tensors, len(a.Pairs))
		}
		for _, ti := range v.Tensors {
			if int64(len(v.Data(ti))) != ti.Size {
				t.Fatalf("%s: %d bytes, want %d", ti.Name, len(v.Data(ti)), ti.Size)
			}
		}
		if scale == 0 {
			for _, ti := range base.Tensors {
				vi, _ := v.Tensor(ti.Name)
				if !bytes.Equal(v.Data(vi), base.Data(ti)) {
					t.Fatalf("%s changed at scale 0", ti.Name)
				}
			}
		}
	})
}

// The seeds themselves pass, including every adapter above merging.
func TestFuzzSeeds(t *testing.T) {
	base := parse(t, fuzzBase(t))
	merged := 0
	for _, s := range fuzzSeeds(t) {
		af, err := gguf.Parse(s)
		if err != nil {
			continue
		}
		a, err := Read(af)
		if err != nil {
			continue
		}
		if _, _, err := Merge(base, []Use{{a, 0.5}}, Options{}); err == nil {
			merged++
		}
	}
	if merged != 3 {
		t.Errorf("%d seeds merge, want 3", merged)
	}
}
