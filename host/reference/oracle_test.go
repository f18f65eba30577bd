package reference

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/gguf"
)

// The test in this file compares the reference with llama.cpp through the oracle (a prebuilt
// llama.cpp with a logits dumper and llama.cpp's own quantiser, see its README). It runs only
// when VERITY_ORACLE names the oracle's directory, e.g. VERITY_ORACLE=/work/oracle.

func oracleDir(t *testing.T) string {
	dir := os.Getenv("VERITY_ORACLE")
	if dir == "" {
		t.Skip("VERITY_ORACLE is not set")
	}
	return dir
}

func runOracle(t *testing.T, dir string, name string, args ...string) []byte {
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

// withVocab adds a SentencePiece-style vocabulary of n tokens (n ≥ 259), which llama.cpp needs to
// load a model: <unk>, <s>, </s>, the 256 byte tokens, then placeholder pieces.
func withVocab(w *gguf.Writer, n int) {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	for i := len(tokens); i < n; i++ {
		tokens = append(tokens, fmt.Sprintf("\u2581p%d", i))
		types = append(types, 1)
	}
	scores := make([]float32, n)
	for i := 259; i < n; i++ {
		scores[i] = float32(259 - i)
	}
	w.Set("tokenizer.ggml.model", gguf.Str("llama"))
	w.Set("tokenizer.ggml.tokens", gguf.ArrStrings(tokens))
	w.Set("tokenizer.ggml.scores", gguf.ArrFloat32s(scores))
	w.Set("tokenizer.ggml.token_type", gguf.ArrInt32s(types))
	w.Set("tokenizer.ggml.unknown_token_id", gguf.U32(0))
	w.Set("tokenizer.ggml.bos_token_id", gguf.U32(1))
	w.Set("tokenizer.ggml.eos_token_id", gguf.U32(2))
}

// oracleModels are written by the test (ne0 of every matrix a multiple of 256, so that every
// K-quant applies with --pure). llama-scaled checks the RoPE frequency divisors, linear scaling
// given by its factor alone, and that llama.cpp ignores llama.attention.scale.
var oracleModels = []struct {
	name  string
	model tinyModel
}{
	{"llama", tinyModel{arch: "llama", layers: 2, embd: 256, ff: 512, heads: 4, kvHeads: 2, vocab: 300, typ: dtype.F32, seed: 21}},
	{"llama-tied", tinyModel{arch: "llama", layers: 2, embd: 256, ff: 512, heads: 8, kvHeads: 8, vocab: 300, typ: dtype.F32, tied: true, seed: 22}},
	{"llama-scaled", tinyModel{arch: "llama", layers: 2, embd: 256, ff: 512, heads: 4, kvHeads: 1, vocab: 300, typ: dtype.F32, ropeFreqs: true, seed: 23,
		meta: map[string]gguf.Value{"%s.rope.scaling.factor": gguf.F32(4), "%s.attention.scale": gguf.F32(0.5), "%s.rope.freq_base": gguf.F32(500000)}}},
	{"qwen3", tinyModel{arch: "qwen3", layers: 2, embd: 256, ff: 512, heads: 4, kvHeads: 2, headDim: 128, vocab: 300, typ: dtype.F32, seed: 24}},
	{"qwen3-tied", tinyModel{arch: "qwen3", layers: 2, embd: 256, ff: 768, heads: 8, kvHeads: 2, headDim: 32, vocab: 300, typ: dtype.F32, tied: true, seed: 25}},
	// Gemma with the feed-forward's output zeroed (zeroFFN): everything but the GELU — scaled
	// embeddings, sliding windows of 16 keys (24 tokens), soft-capped scores and logits, the
	// sandwich norms, gemma3's q/k norms and two RoPE bases — at float32 precision.
	{"gemma2-nogelu", tinyModel{arch: "gemma2", layers: 2, embd: 256, ff: 512, heads: 4, kvHeads: 2, headDim: 64, vocab: 300, typ: dtype.F32, tied: true, seed: 28, zeroFFN: true,
		meta: map[string]gguf.Value{"%s.attention.sliding_window": gguf.U32(16), "%s.attn_logit_softcapping": gguf.F32(5), "%s.final_logit_softcapping": gguf.F32(10)}}},
	{"gemma3-nogelu", tinyModel{arch: "gemma3", layers: 3, embd: 256, ff: 512, heads: 4, kvHeads: 1, headDim: 64, vocab: 300, typ: dtype.F32, tied: true, seed: 29, zeroFFN: true,
		meta: map[string]gguf.Value{"%s.attention.sliding_window": gguf.U32(16), "%s.attention.sliding_window_pattern": gguf.U32(3),
			"%s.rope.freq_base": gguf.F32(1e6), "%s.rope.freq_base_swa": gguf.F32(10000)}}},
}

// oracleFtypes are the llama_quantize file types tried on each model (with --pure).
var oracleFtypes = []string{"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}

// oracleQ35Models are qwen35moe models written by the test, every matrix's ne0 a multiple of 256.
// q35-a: partial RoPE (16 of 64 dims) with sections (1, 1, 1, 1), so that pairs 3 and 7 take
// the fourth section's position 0; GDN value heads tiled over 2 key heads. q35-b: layer kinds
// from attention.recurrent_layers, rotation of the whole head with sections (2, 1, 0, 0) (the
// pairs cycle through the 3 sectors), one GDN key head for 4 value heads, every expert used,
// tied output, conv kernel 3.
var oracleQ35Models = []struct {
	name  string
	model q35Model
}{
	{"q35-a", q35Model{layers: 4, interval: 2, embd: 256, heads: 4, kvHeads: 2, headDim: 64, nrot: 16, sections: [4]int32{1, 1, 1, 1},
		experts: 8, used: 2, ffExp: 256, ffShr: 256, conv: 4, state: 64, kHeads: 2, vHeads: 4, vocab: 300, typ: dtype.F32, seed: 26}},
	{"q35-b", q35Model{layers: 3, pattern: []bool{true, false, true}, interval: 4, embd: 256, heads: 8, kvHeads: 8, headDim: 32, nrot: 32,
		sections: [4]int32{2, 1, 0, 0}, experts: 4, used: 4, ffExp: 256, ffShr: 512, conv: 3, state: 64, kHeads: 1, vHeads: 4,
		vocab: 300, typ: dtype.F32, tied: true, seed: 27}},
}

// oracleQ35Ftypes are the file types tried on the qwen35moe models.
var oracleQ35Ftypes = []string{"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q3_K", "Q4_K", "Q6_K"}

// TestOracleLogits compares Forward with llama.cpp's logits (F32 KV cache, no flash attention):
//   - on every file, Forward with ActQuant against llama.cpp on the same file: the same
//     computation up to float32 arithmetic, except where an activation lies within float32 noise
//     of a rounding boundary of its conversion (8-bit, fp16 or bf16) and flips one step; a flip
//     moves these random models' logits by up to ~1e-2 (see the oracle's README), so the
//     conversion itself is checked exactly, kernel by kernel, by TestOracleMatmul;
//   - on quantised files, Forward without ActQuant against llama.cpp on its own float32
//     dequantisation of the file (llama_quantize --ftype F32 --allow-requantize): an exact check
//     of the weight decoding, free of such flips.
//
// llama and qwen3 files get 24 tokens, qwen35moe files 80 (more than one 64-token chunk of
// llama.cpp's Gated DeltaNet). Besides the files above, it runs on the oracle's own synthetic
// models (mkgguf.py), when python3 is available. With -v it logs a table. VERITY_ORACLE_MODELS,
// when set, restricts the test to the models whose name contains it (e.g. "q35").
func TestOracleLogits(t *testing.T) {
	oracle := oracleDir(t)
	tmp := t.TempDir()
	wanted := func(name string) bool { return strings.Contains(name, os.Getenv("VERITY_ORACLE_MODELS")) }
	type file struct {
		name, path, ftype string
		nTok              int
	}
	var files []file
	addModel := func(name string, w *gguf.Writer, vocab, nTok int, ftypes []string) {
		if !wanted(name) {
			return
		}
		withVocab(w, vocab)
		path := filepath.Join(tmp, name+".gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		files = append(files, file{name, path, "F32", nTok})
		for _, ft := range ftypes {
			q := filepath.Join(tmp, name+"-"+ft+".gguf")
			runOracle(t, oracle, "./llama_quantize", path, q, "--ftype", ft, "--pure", "-q")
			files = append(files, file{name, q, ft, nTok})
		}
	}
	for _, om := range oracleModels {
		ftypes := oracleFtypes
		if om.model.zeroFFN {
			// these check the arithmetic on F32 weights and on llama.cpp's dequantisations; the
			// flips of converted activations are those of the other models
			ftypes = []string{"F16", "BF16", "Q8_0", "Q6_K"}
		}
		addModel(om.name, om.model.writer(t, om.model.tensors()), om.model.vocab, 24, ftypes)
	}
	for _, om := range oracleQ35Models {
		addModel(om.name, om.model.writer(t, om.model.tensors()), om.model.vocab, 80, oracleQ35Ftypes)
	}
	// Mixtral-style llama and qwen3moe (experts, no shared expert), qwen2 (q, k, v biases) and phi3
	// (fused projections), from the
	// fixtures, quantised by llama.cpp.
	for _, name := range []string{"tiny-mixtral-f32", "small-mixtral-q6_k", "tiny-qwen2-f32", "small-qwen2-q4_k_m", "tiny-qwen3moe-f32", "small-qwen3moe-q4_k_m", "tiny-phi3-f32", "small-phi3-q6_k", "tiny-phi3-longrope-f32",
		"tiny-gemma-f32", "tiny-gemma2-f32", "small-gemma2-q4_k_m", "tiny-gemma3-f32", "small-gemma3-q6_k"} {
		if !wanted(name) {
			continue
		}
		spec, err := fixtures.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(tmp, name+".gguf")
		if err := fixtures.Generate(spec, path, nil); err != nil {
			t.Fatal(err)
		}
		if spec.FileType != fixtures.FileF32 {
			files = append(files, file{name, path, strings.ToUpper(spec.FileType.String()), 80})
			continue
		}
		files = append(files, file{name, path, "F32", 80})
		for _, ft := range []string{"Q8_0", "Q4_0"} {
			q := filepath.Join(tmp, name+"-"+ft+".gguf")
			runOracle(t, oracle, "./llama_quantize", path, q, "--ftype", ft, "--pure", "-q")
			files = append(files, file{name, q, ft, 80})
		}
	}
	if _, err := exec.LookPath("python3"); err == nil {
		dir := filepath.Join(tmp, "mkgguf")
		runOracle(t, oracle, "python3", "mkgguf.py", "all", "--outdir", dir)
		for _, n := range []string{"f32", "f16", "q8_0", "tied-f32", "spm-f32"} {
			files = append(files, file{"mkgguf tiny-llama", filepath.Join(dir, "tiny-llama-"+n+".gguf"), strings.ToUpper(n), 24})
		}
		for _, n := range []string{"f32", "q8_0"} {
			files = append(files, file{"mkgguf tiny-q35moe", filepath.Join(dir, "tiny-q35moe-"+n+".gguf"), strings.ToUpper(n), 80})
		}
		// The K-quant friendly qwen35moe of the oracle's README, quantised by llama.cpp.
		wide := filepath.Join(dir, "q35moe-256.gguf")
		runOracle(t, oracle, "python3", "mkgguf.py", "qwen35moe", "-o", wide,
			"--n-embd", "256", "--n-ff", "256", "--head-dim", "64", "--hp", "ssm_state=64")
		files = append(files, file{"mkgguf q35moe-256", wide, "F32", 80})
		for _, ft := range []string{"Q8_0", "Q4_K_M", "Q6_K", "Q5_0"} {
			q := filepath.Join(dir, "q35moe-256-"+ft+".gguf")
			runOracle(t, oracle, "./llama_quantize", wide, q, "--ftype", ft, "--pure", "-q")
			files = append(files, file{"mkgguf q35moe-256", q, ft, 80})
		}
	} else {
		t.Log("python3 not found: the oracle's mkgguf.py models are skipped")
	}

	rng := rand.New(rand.NewPCG(31, 32))
	tokens := []int32{1}
	for range 79 {
		tokens = append(tokens, int32(3+rng.IntN(297)))
	}
	logits := func(path string, tokens []int32) [][]float64 {
		var list []string
		for _, tok := range tokens {
			list = append(list, fmt.Sprint(tok))
		}
		out := path + ".logits"
		runOracle(t, oracle, "./llama_logits", "--tokens", strings.Join(list, ","), "--out", out, path)
		return readLogits(t, out, len(tokens))
	}
	forward := func(f *gguf.File, opt Options, tokens []int32) ([][]float64, Config) {
		m, err := Load(f, opt)
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Forward(tokens)
		if err != nil {
			t.Fatal(err)
		}
		return l, m.Config()
	}
	// firstFlip returns the first position whose logits differ by more than 1e-5 relative to
	// their largest magnitude, or −1.
	firstFlip := func(got, want [][]float64) int {
		for i := range want {
			if maxRel(got[i:i+1], want[i:i+1]) > 1e-5 {
				return i
			}
		}
		return -1
	}

	t.Logf("max |ref − llama.cpp| / max |llama.cpp|; flip: the first position (ActQuant) off by more than 1e-5")
	t.Logf("%-18s %-7s %6s %12s %5s %12s %12s", "model", "type", "tokens", "actquant", "flip", "plain", "plain vs DEQ")
	for _, fl := range files {
		if !wanted(fl.name) {
			continue
		}
		f, err := gguf.Open(fl.path)
		if err != nil {
			t.Fatal(err)
		}
		toks := tokens[:fl.nTok]
		want := logits(fl.path, toks)
		// GELUF16: ggml's CPU GELU reads a float16 table (the Gemma families' feed-forward)
		actq, c := forward(f, Options{ActQuant: true, GELUF16: true}, toks)
		plain, _ := forward(f, Options{GELUF16: true}, toks)
		if c.Gemma {
			exactGELU, _ := forward(f, Options{ActQuant: true}, toks)
			t.Logf("%s %s: with the exact GELU %.3g", fl.name, fl.ftype, maxRel(exactGELU, want))
		}
		eAct, ePlain, eDeq := maxRel(actq, want), maxRel(plain, want), math.NaN()
		f.Close()

		// float32 against float64 arithmetic; qwen35moe's 80 positions through a recurrent
		// state accumulate somewhat more of it.
		exact := 1e-6
		if c.Arch == "qwen35moe" {
			exact = 3e-6
		}
		if c.Gemma && !strings.HasSuffix(fl.name, "-nogelu") {
			// ggml's CPU GELU rounds its argument to float16 (GELUF16 does too): an argument
			// within float32 noise of a float16 rounding boundary flips a step of about 5e-4 of
			// it, in every feed-forward, on F32 weights too — the flips of converted activations
			// described above. The -nogelu models check the rest at float32 precision.
			exact = 3e-4
		}
		limit := exact
		if fl.ftype != "F32" && !strings.HasSuffix(fl.ftype, "-F32") {
			limit = 2e-2 // a converted activation that flips a step, see above
			if c.NExpertUsed < c.NExpert {
				// A flip that changes a routing decision replaces a whole expert's output
				// (~0.2 here): only logged. The conversion itself is checked by
				// TestOracleMatmul, the weights by the DEQ comparison.
				limit = math.Inf(1)
			}
		}
		if strings.HasPrefix(fl.ftype, "Q") {
			deq := fl.path + ".deq.gguf"
			runOracle(t, oracle, "./llama_quantize", fl.path, deq, "--ftype", "F32", "--allow-requantize", "-q")
			if eDeq = maxRel(plain, logits(deq, toks)); eDeq > exact {
				t.Errorf("%s %s: reference vs llama.cpp on the dequantised file: %.3g", fl.name, fl.ftype, eDeq)
			}
		}
		t.Logf("%-18s %-7s %6d %12.3g %5d %12.3g %12.3g", fl.name, fl.ftype, fl.nTok, eAct, firstFlip(actq, want), ePlain, eDeq)
		if !(eAct <= limit) {
			t.Errorf("%s %s: reference (ActQuant) vs llama.cpp: %.3g, limit %.3g", fl.name, fl.ftype, eAct, limit)
		}
	}
}

// readLogits reads a llama_logits output of n positions: float32 rows of n_vocab values.
func readLogits(t *testing.T, path string, n int) [][]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	V := len(b) / 4 / n
	if V == 0 || len(b) != 4*V*n {
		t.Fatalf("%s: %d bytes of logits for %d tokens", path, len(b), n)
	}
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = make([]float64, V)
		for j := range rows[i] {
			rows[i][j] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*(i*V+j):])))
		}
	}
	return rows
}

// TestOracleMatmul checks the activation conversion of ActQuant where no rounding flip can
// hide anything: one matrix product at a time, against llama.cpp's CPU matmul kernel
// (llama_quantize --matmul: ggml-cpu's from_float into the vec_dot_type, then vec_dot) on the
// same float32 inputs. They agree to float32 summation error. The products are those of a llama
// layer and, of a qwen35moe Gated DeltaNet layer, the QKV projection, two experts of the 3-D
// expert tensors, the router and the shared expert's 1-D gate (both stay F32).
func TestOracleMatmul(t *testing.T) {
	oracle := oracleDir(t)
	tmp := t.TempDir()
	s := oracleModels[0].model
	s.layers = 1
	w := s.writer(t, s.tensors())
	withVocab(w, s.vocab)
	base := filepath.Join(tmp, "base.gguf")
	if err := w.WriteFile(base); err != nil {
		t.Fatal(err)
	}
	s35 := oracleQ35Models[0].model
	s35.layers = 1
	w = s35.writer(t, s35.tensors())
	withVocab(w, s35.vocab)
	base35 := filepath.Join(tmp, "base35.gguf")
	if err := w.WriteFile(base35); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(41, 42))
	t.Logf("%-6s %-40s %12s %12s", "type", "tensor", "actquant", "plain")
	type product struct {
		mat    *matrix
		tensor string
		expert int // −1: a 2-D (or 1-D) tensor
	}
	for _, ft := range oracleFtypes {
		path, path35 := filepath.Join(tmp, ft+".gguf"), filepath.Join(tmp, ft+"-35.gguf")
		runOracle(t, oracle, "./llama_quantize", base, path, "--ftype", ft, "--pure", "-q")
		runOracle(t, oracle, "./llama_quantize", base35, path35, "--ftype", ft, "--pure", "-q")
		load := func(path string) *Model {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m, err := Load(f, Options{ActQuant: true})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		ly, ly35 := load(path).layers[0], load(path35).layers[0]
		for _, p := range []struct {
			file string
			product
		}{
			{path, product{ly.down, ly.down.name, -1}},
			{path, product{ly.wq, ly.wq.name, -1}},
			{path35, product{ly35.gdn.qkv, ly35.gdn.qkv.name, -1}},
			{path35, product{ly35.moe.down[5], "blk.0.ffn_down_exps.weight", 5}},
			{path35, product{ly35.moe.gate[2], "blk.0.ffn_gate_exps.weight", 2}},
			{path35, product{ly35.moe.router, ly35.moe.router.name, -1}},
			{path35, product{ly35.moe.shInp, ly35.moe.shInp.name, -1}},
		} {
			mat := p.mat
			// 8 activation vectors, heavy-tailed like SwiGLU outputs, at different scales.
			const n = 8
			xs := make([][]float64, n)
			var raw []byte
			for i := range xs {
				xs[i] = make([]float64, mat.cols)
				scale := math.Pow(10, float64(i%4)-2)
				for j := range xs[i] {
					g := rng.NormFloat64()
					v := float32(scale * g * math.Abs(g))
					xs[i][j] = float64(v)
					raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
				}
			}
			xf, yf := filepath.Join(tmp, "x.f32"), filepath.Join(tmp, "y.f32")
			if err := os.WriteFile(xf, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"--matmul", p.file, p.tensor, xf, yf}
			if p.expert >= 0 {
				args = append(args, "--expert", fmt.Sprint(p.expert))
			}
			runOracle(t, oracle, "./llama_quantize", args...)
			yb, err := os.ReadFile(yf)
			if err != nil || len(yb) != 4*n*mat.rows {
				t.Fatalf("%s: %d bytes of output, %v", yf, len(yb), err)
			}
			want, gotQ, gotPlain := make([][]float64, n), make([][]float64, n), make([][]float64, n)
			for i := range want {
				want[i] = make([]float64, mat.rows)
				for r := range want[i] {
					want[i][r] = float64(math.Float32frombits(binary.LittleEndian.Uint32(yb[4*(i*mat.rows+r):])))
				}
				gotQ[i], gotPlain[i] = mat.mul(xs[i], true), mat.mul(xs[i], false)
			}
			// Each row of a product is compared relative to the largest output of its vector; a
			// single dot product relative to Σ|w·x|, the scale of its float32 rounding error.
			var eQ, ePlain float64
			for i := range want {
				if mat.rows == 1 {
					var scale float64
					for j, x := range xs[i] {
						scale += math.Abs(mat.w[j] * x)
					}
					eQ = max(eQ, math.Abs(gotQ[i][0]-want[i][0])/scale)
					ePlain = max(ePlain, math.Abs(gotPlain[i][0]-want[i][0])/scale)
					continue
				}
				eQ = max(eQ, maxRel(gotQ[i:i+1], want[i:i+1]))
				ePlain = max(ePlain, maxRel(gotPlain[i:i+1], want[i:i+1]))
			}
			t.Logf("%-6s %-40s %12.3g %12.3g", ft, mat.name, eQ, ePlain)
			if !(eQ <= 1e-6) {
				t.Errorf("%s %s: reference (ActQuant) vs llama.cpp's kernel: %.3g", ft, mat.name, eQ)
			}
		}
	}
}
