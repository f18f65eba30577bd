package quantize_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/gguf"
	"verity/host/quantize"
)

func fixtureFile(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := fixtures.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
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

// TestLlamaCppQuantize: quantising the F32 fixtures gives llama.cpp's files byte for byte —
// every file type on every architecture's tiny fixture (rows of 64: the fallbacks; 8 experts:
// the Mixtral rules), the K-quant mixes on the small ones, and the flags. testdata holds the
// SHA-256 of llama.cpp's llama_model_quantize output for each line (commit 22dc605, the
// oracle's llama_quantize: `llama_quantize --quantize IN OUT --ftype FT [flags]`). The
// Qwen3.5-MoE lines (a 210 MB fixture) run only with VERITY_QUANTIZE_ALL=1.
func TestLlamaCppQuantize(t *testing.T) {
	b, err := os.ReadFile("testdata/llama_quantize.txt")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*gguf.File{}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
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
			f = fixtureFile(t, fixture)
			files[fixture] = f
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
	if n < 100 {
		t.Errorf("only %d cases", n)
	}
}
