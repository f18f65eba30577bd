package gguf

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The tests in this file cross-check the package against the llama.cpp oracle (a prebuilt
// llama.cpp with a logits dumper, and an independent Python GGUF writer and reader). They run
// only when VERITY_ORACLE names the oracle's directory.

// oracleDumpPy prints, as JSON, what the oracle's reader (mkgguf.GGUFReader) decodes from a file.
const oracleDumpPy = `import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import mkgguf
r = mkgguf.GGUFReader(sys.argv[2])
out = {"version": r.version, "data_start": r.data_start, "kv": [], "tensors": []}
for k, v in r.kv.items():
    out["kv"].append({"key": k, "type": r.kv_types[k], "value": v})
for name in r.tensor_order:
    raw, ne, t, start = r.raw(name)
    out["tensors"].append({"name": name, "ne": ne, "type": t, "offset": r.tinfo[name][2],
                           "size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()})
json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
print()
`

func oracleDir(t *testing.T) string {
	dir := os.Getenv("VERITY_ORACLE")
	if dir == "" {
		t.Skip("VERITY_ORACLE is not set")
	}
	return dir
}

func run(t *testing.T, dir string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// mkgguf writes the oracle's synthetic models into a temporary directory.
func mkgguf(t *testing.T, oracle string) string {
	tmp := t.TempDir()
	run(t, oracle, "python3", "mkgguf.py", "all", "--outdir", tmp)
	run(t, oracle, "python3", "mkgguf.py", "llama", "--type", "q8_0", "--n-embd", "32", "--n-ff", "64",
		"--n-layer", "1", "-o", filepath.Join(tmp, filepath.Base(fixtureGGUF)))
	return tmp
}

func TestOracleMkgguf(t *testing.T) {
	oracle := oracleDir(t)
	models := mkgguf(t, oracle)
	script := filepath.Join(t.TempDir(), "dump.py")
	if err := os.WriteFile(script, []byte(oracleDumpPy), 0o644); err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(models, "*.gguf"))
	if len(paths) < 5 {
		t.Fatalf("mkgguf wrote %d files", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			j := run(t, oracle, "python3", script, oracle, path)
			d, err := decodeDump(j)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			compareDump(t, f, d)
			orig, _ := os.ReadFile(path)
			got := rewrite(t, f)
			t.Logf("%d KVs, %d tensors, %d bytes; Writer output byte-identical: %v",
				len(f.KVs), len(f.Tensors), len(orig), bytes.Equal(got, orig))
			if !bytes.Equal(got, orig) {
				t.Errorf("re-written file differs from mkgguf's")
			}
			if *update && filepath.Base(path) == filepath.Base(fixtureGGUF) {
				os.WriteFile(fixtureGGUF, orig, 0o644)
				os.WriteFile(fixtureJSON, j, 0o644)
			}
		})
	}
}

// TestOracleLlamaLoadsWriterOutput re-writes models with the Writer, once as they are and once
// rearranged (alignment 64, tensors in reverse order, keys in reverse order, extra keys of every
// type llama.cpp reads), and checks that llama.cpp gives bit-identical logits for all of them.
func TestOracleLlamaLoadsWriterOutput(t *testing.T) {
	oracle := oracleDir(t)
	models := mkgguf(t, oracle)
	for _, name := range []string{"tiny-llama-f32.gguf", "tiny-llama-q8_0.gguf", "tiny-q35moe-q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(models, name)
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()

			same := filepath.Join(t.TempDir(), "same.gguf")
			if err := os.WriteFile(same, rewrite(t, f), 0o644); err != nil {
				t.Fatal(err)
			}

			w := NewWriter()
			for _, kv := range slices.Backward(f.KVs) {
				w.Set(kv.Key, kv.Value)
			}
			w.Set(KeyAlignment, U32(64))
			for _, kv := range sampleKVs() {
				if _, nested := kv.Value.Any().([]Value); !nested && kv.Key != "general.architecture" {
					w.Set("verity.test."+kv.Key, kv.Value)
				}
			}
			for _, ti := range slices.Backward(f.Tensors) {
				if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti)); err != nil {
					t.Fatal(err)
				}
			}
			moved := filepath.Join(t.TempDir(), "moved.gguf")
			if err := w.WriteFile(moved); err != nil {
				t.Fatal(err)
			}
			g, err := Open(moved)
			if err != nil {
				t.Fatal(err)
			}
			g.Close()
			if g.Alignment != 64 || g.Tensors[0].Name != f.Tensors[len(f.Tensors)-1].Name {
				t.Fatalf("rearranged file: alignment %d, first tensor %s", g.Alignment, g.Tensors[0].Name)
			}

			logits := func(model string) []byte {
				out := filepath.Join(t.TempDir(), "logits.bin")
				run(t, oracle, "./llama_logits", "--tokens", "1,2,3,4", "--out", out, model)
				b, err := os.ReadFile(out)
				if err != nil || len(b) == 0 {
					t.Fatalf("logits of %s: %d bytes, %v", model, len(b), err)
				}
				return b
			}
			ref := logits(path)
			for _, p := range []string{same, moved} {
				if got := logits(p); !bytes.Equal(got, ref) {
					t.Errorf("%s: llama.cpp logits differ from the original's", filepath.Base(p))
				}
			}
			t.Logf("%d logits bytes identical for the re-written and the rearranged file (first %g)",
				len(ref), math.Float32frombits(uint32(ref[0])|uint32(ref[1])<<8|uint32(ref[2])<<16|uint32(ref[3])<<24))
		})
	}
}

// TestOracleLlamaWrittenFile re-writes a file written by llama.cpp itself (its quantiser, which
// uses ggml's GGUF writer) and expects the same bytes.
func TestOracleLlamaWrittenFile(t *testing.T) {
	oracle := oracleDir(t)
	models := mkgguf(t, oracle)
	out := filepath.Join(t.TempDir(), "q8_0.gguf")
	run(t, oracle, "./llama_quantize", filepath.Join(models, "tiny-llama-f32.gguf"), out, "--ftype", "Q8_0", "--pure", "-q")
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f := mustParse(t, b)
	if got := rewrite(t, f); !bytes.Equal(got, b) {
		t.Errorf("re-written llama.cpp file differs (%d bytes, want %d)", len(got), len(b))
	}
	t.Logf("%d KVs, %d tensors, %d bytes: re-written byte for byte", len(f.KVs), len(f.Tensors), len(b))
}
