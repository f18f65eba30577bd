package quantize_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/gguf"
	"verity/host/quantize"
)

func fixtureFile(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Parse(fixtureBytes(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// derivedF32 names F32 forms of catalogue shapes that the catalogue holds only quantised (its
// small Gemmas): the weights of the entry named, every 2-D weight F32, as the catalogue's own
// F32 entries are.
var derivedF32 = map[string]string{
	"small-gemma2-f32": "small-gemma2-q4_k_m",
	"small-gemma3-f32": "small-gemma3-q6_k",
}

// fixtureBytes generates the catalogue fixture name, or a derivedF32 one, in memory.
func fixtureBytes(t *testing.T, name string) []byte {
	t.Helper()
	from, ok := derivedF32[name]
	if !ok {
		b, err := fixtures.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s, err := fixtures.Lookup(from)
	if err != nil {
		t.Fatal(err)
	}
	s.Name, s.FileType, s.Types = name, fixtures.FileF32, fixtures.Pure(fixtures.FileF32.Base(), s.NLayer)
	var buf bytes.Buffer
	if _, err := fixtures.WriteTo(&buf, s, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Re-quantising an F32 fixture gives the tensors of the fixture generated directly with that
// file type from the same weights (the fixtures quantise with the same reference quantisers
// and choose llama.cpp's mix through Mix as well).
func TestMatchesDirectlyQuantisedFixture(t *testing.T) {
	for _, c := range []struct {
		src, fixture string
		ft           quantize.FileType
		pure         bool
	}{
		{"tiny-llama-f32", "tiny-llama-q4_0", quantize.FileQ4_0, true},
		{"tiny-llama-f32", "tiny-llama-q8_0", quantize.FileQ8_0, true},
		{"tiny-llama-f32", "tiny-llama-bf16", quantize.FileBF16, false},
		{"small-llama-f32", "small-llama-q4_k_m", quantize.FileQ4_KM, false},
		{"small-llama-f32", "small-llama-q3_k_m", quantize.FileQ3_KM, false},
		{"small-llama-f32", "small-llama-q2_k", quantize.FileQ2_K, false},
		{"small-qwen3-f32", "small-qwen3-q5_k_m", quantize.FileQ5_KM, false},
		{"small-qwen3-f32", "small-qwen3-q6_k", quantize.FileQ6_K, false},
	} {
		src := fixtureFile(t, c.src)
		var out bytes.Buffer
		var last int64
		plan, err := quantize.Write(src, &out, quantize.Options{MixOptions: quantize.MixOptions{FileType: c.ft, Pure: c.pure}, Workers: 3,
			Progress: func(done, total int64) { last = done }})
		if err != nil {
			t.Fatal(err)
		}
		got, err := gguf.Parse(out.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		want := fixtureFile(t, c.fixture)
		for _, ti := range want.Tensors {
			g, ok := got.Tensor(ti.Name)
			if !ok || g.Type != ti.Type || !bytes.Equal(got.Data(g), want.Data(ti)) {
				t.Errorf("%s: tensor %s (%s) differs from the fixture's (%s)", c.fixture, ti.Name, g.Type, ti.Type)
			}
		}
		if ft, _ := got.Uint32("general.file_type"); quantize.FileType(ft) != c.ft {
			t.Errorf("%s: file_type %d", c.fixture, ft)
		}
		for _, a := range plan {
			if strings.HasSuffix(a.Name, "_norm.weight") && a.To != dtype.F32 {
				t.Errorf("norm %s converted", a.Name)
			}
		}
		if last == 0 {
			t.Error("no progress reported")
		}
	}
}

func TestErrors(t *testing.T) {
	src := fixtureFile(t, "tiny-llama-f32") // rows of 64 and 128 values: no K-quant fits
	plan, err := quantize.Plan(src, quantize.Options{MixOptions: quantize.MixOptions{FileType: quantize.FileQ4_KM, Pure: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range plan {
		if a.To != a.From && (a.To != dtype.Q5_0 || !strings.Contains(a.Why, "not whole q4_K blocks")) {
			t.Errorf("%s: %s (%q), want the fallback q5_0", a.Name, a.To, a.Why)
		}
	}
	if _, err := quantize.Plan(src, quantize.Options{MixOptions: quantize.MixOptions{FileType: quantize.FileType(99)}}); err == nil {
		t.Error("unknown file type accepted")
	}
	q := fixtureFile(t, "tiny-llama-q4_0")
	if _, err := quantize.Plan(q, quantize.Options{MixOptions: quantize.MixOptions{FileType: quantize.FileQ8_0}}); err == nil || !strings.Contains(err.Error(), "allow-requantize") {
		t.Errorf("requantising without the flag: %v", err)
	}
	if _, err := quantize.Plan(q, quantize.Options{MixOptions: quantize.MixOptions{FileType: quantize.FileQ8_0}, AllowRequantize: true}); err != nil {
		t.Error(err)
	}
}

func TestQuantizable(t *testing.T) {
	for _, c := range []struct {
		name string
		dims int
		want bool
	}{
		{"blk.0.attn_q.weight", 2, true}, {"token_embd.weight", 2, true}, {"output.weight", 2, true},
		{"blk.0.ffn_gate_exps.weight", 3, true}, {"blk.0.attn_norm.weight", 1, false},
		{"blk.0.attn_q_norm.weight", 2, false}, {"blk.0.ffn_gate_inp.weight", 2, false},
		{"blk.0.ssm_conv1d.weight", 2, false}, {"blk.0.attn_q.bias", 2, false}, {"rope_freqs.weight", 1, false},
	} {
		if got := quantize.Quantizable(c.name, c.dims); got != c.want {
			t.Errorf("quantize.Quantizable(%q, %d) = %v", c.name, c.dims, got)
		}
	}
}

// A tensor with a zero dimension (which the reader accepts) has nothing to convert: it is
// copied, in any shape, instead of dividing by its zero-byte rows.
func TestEmptyTensors(t *testing.T) {
	for _, dims := range [][]int64{{0, 4}, {32, 0}, {0}, {64, 0, 8}} {
		w := gguf.NewWriter()
		w.Set("general.architecture", gguf.Str("llama"))
		if err := w.AddTensor("blk.0.attn_q.weight", dtype.F32, dims, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor("blk.0.ffn_up.weight", dtype.F32, []int64{32, 2}, make([]byte, 32*2*4)); err != nil {
			t.Fatal(err)
		}
		var in bytes.Buffer
		if _, err := w.WriteTo(&in); err != nil {
			t.Fatal(err)
		}
		src, err := gguf.Parse(in.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		plan, err := quantize.Write(src, &out, quantize.Options{MixOptions: quantize.MixOptions{FileType: quantize.FileQ8_0}})
		if err != nil {
			t.Fatalf("dims %v: %v", dims, err)
		}
		if plan[0].To != dtype.F32 || !strings.Contains(plan[0].Why, "empty") {
			t.Errorf("dims %v: %+v, want kept as F32 (empty)", dims, plan[0])
		}
		if plan[1].To != dtype.Q8_0 {
			t.Errorf("the non-empty tensor was not converted: %+v", plan[1])
		}
		if _, err := gguf.Parse(out.Bytes()); err != nil {
			t.Errorf("dims %v: output does not parse: %v", dims, err)
		}
	}
}

var update = flag.Bool("update", false, "with VERITY_ORACLE: rewrite testdata/llama_quantize.txt's hashes from llama.cpp's llama_quantize")

// TestLlamaCppQuantize: quantising the F32 fixtures gives llama.cpp's files byte for byte —
// every file type on every architecture's tiny fixture (rows of 64: the fallbacks; 8 experts:
// the Mixtral rules), the K-quant mixes on the small ones (and on F32 forms of the small
// Gemmas, derivedF32), and the flags. testdata holds the SHA-256 of llama.cpp's
// llama_model_quantize output for each line (commit 22dc605, the oracle's llama_quantize:
// `llama_quantize --quantize IN OUT --ftype FT [flags]`). The Qwen3.5-MoE lines (a 210 MB
// fixture) run only with VERITY_QUANTIZE_ALL=1.
//
// To add lines, or regenerate the hashes: build the oracle (shared/oracle: `make
// llama_quantize llama_quant.so` in a copy of it), add the lines with any hash, and run
// VERITY_ORACLE=/path/to/copy go test -run TestLlamaCppQuantize -update ./host/quantize: each
// line's fixture is written to a temporary file and quantised by llama.cpp, and its hash
// replaces the line's (then Verity's output is checked against it as usual).
func TestLlamaCppQuantize(t *testing.T) {
	const file = "testdata/llama_quantize.txt"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	oracle, tmp := os.Getenv("VERITY_ORACLE"), ""
	if *update {
		if oracle == "" {
			t.Fatal("-update needs VERITY_ORACLE (the oracle's directory, with llama_quantize built)")
		}
		tmp = t.TempDir()
	}
	files := map[string]*gguf.File{}
	paths := map[string]string{}
	n, changed := 0, 0
	lines := strings.Split(string(b), "\n")
	for li, line := range lines {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		want, fixture, ftName, flags := fs[0], fs[1], fs[2], fs[3:]
		if strings.HasPrefix(fixture, "small-q35moe") && os.Getenv("VERITY_QUANTIZE_ALL") != "1" {
			continue
		}
		ft, err := quantize.ParseFileType(ftName)
		if err != nil {
			t.Fatal(err)
		}
		o := quantize.Options{MixOptions: quantize.MixOptions{FileType: ft}}
		for i := 0; i < len(flags); i++ {
			switch flags[i] {
			case "--pure":
				o.Pure = true
			case "--leave-output-tensor":
				o.LeaveOutput = true
			case "--output-tensor-type", "--token-embedding-type":
				tt, err := dtype.Parse(flags[i+1])
				if err != nil {
					t.Fatal(err)
				}
				if flags[i] == "--output-tensor-type" {
					o.OutputType = &tt
				} else {
					o.TokenEmbeddingType = &tt
				}
				i++
			default:
				t.Fatalf("%s: unknown flag %s", line, flags[i])
			}
		}
		f, ok := files[fixture]
		if !ok {
			raw := fixtureBytes(t, fixture)
			if f, err = gguf.Parse(raw); err != nil {
				t.Fatal(err)
			}
			files[fixture] = f
			if *update {
				paths[fixture] = filepath.Join(tmp, fixture+".gguf")
				if err := os.WriteFile(paths[fixture], raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if *update {
			h, err := llamaQuantize(oracle, paths[fixture], filepath.Join(tmp, "out.gguf"), ftName, flags)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if h != want {
				want = h
				lines[li] = strings.Join(append([]string{h + " ", fixture, ftName}, flags...), " ")
				changed++
			}
		}
		h := sha256.New()
		if _, err := quantize.Write(f, h, o); err != nil {
			t.Errorf("%s %s %v: %v", fixture, ft, flags, err)
			continue
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			t.Errorf("%s %s %v: sha256 %s, llama.cpp's %s", fixture, ft, flags, got, want)
		}
		n++
	}
	if *update && changed > 0 {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d of %d hashes rewritten from llama.cpp's output", file, changed, n)
	}
	if n < 220 {
		t.Errorf("only %d cases", n)
	}
}

// llamaQuantize quantises in with the oracle's llama_quantize (llama.cpp's
// llama_model_quantize) into out and returns the output's SHA-256.
func llamaQuantize(oracle, in, out, ft string, flags []string) (string, error) {
	args := append([]string{"--quantize", in, out, "--ftype", ft, "-q"}, flags...)
	cmd := exec.Command(filepath.Join(oracle, "llama_quantize"), args...)
	cmd.Dir = oracle
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("llama_quantize %v: %v\n%s", args, err, msg)
	}
	fh, err := os.Open(out)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
