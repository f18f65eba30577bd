package engine_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/lora"
	"verity/host/quant"
)

var writeLoRAVectors = flag.Bool("write-lora-vectors", false, "regenerate testdata/"+loraVectorFile+" with llama.cpp's run-time LoRA (needs VERITY_ORACLE)")

// loraVectorFile holds llama.cpp's logits for loraCases: for each case in turn, for each of
// loraVectorTokens positions, the first loraVectorCols logits as float32 little-endian. They
// come from the oracle's llama.cpp (commit 22dc605, CPU, F32 KV cache, flash attention off),
// `llama_logits --lora ADAPTER --lora-scale S` on the fixtures as the catalogue writes them:
// llama.cpp adds scale·alpha/r·B(A·x) to each adapted matmul at run time, where Verity merges
// the adapter into the weights at load.
const (
	loraVectorFile   = "lora_llamacpp.f32"
	loraVectorTokens = 16
	loraVectorCols   = 128
)

// loraCases cover scales (negative and zero among them), ranks 2 to 16, alpha 0, target sets
// from two projections to every matrix, the embedding alone and with the rest, the fused
// projections of phi3, and F16 adapters — also widened to F32 (the same values), because
// llama.cpp rounds the activations of an F16 adapter's matmuls to F16 (ggml's vec_dot_type),
// which puts its logits off the exact low-rank product by about 2⁻¹¹ of the adapter's effect.
// llama.cpp aborts on a tied model with an adapted embedding (its tied head shares
// token_embd's name, so build_lora_mm applies the embedding's pair to the head, and the shapes
// do not fit): there it runs the untied file the merge makes, with output.weight the base
// embedding, and Verity loads the tied fixture itself.
var loraCases = []struct {
	model, adapter string
	scale          float64
	widen          bool // the adapter's tensors rewritten as F32
}{
	{"tiny-llama-tied-f32", "lora-r8", 0.8, false},
	{"tiny-llama-f32", "lora-r8", 1, false},
	{"tiny-llama-f32", "lora-r8", -0.5, false},
	{"tiny-llama-f32", "lora-r8", 0, false},
	{"tiny-llama-f32", "lora-r2-qv", 2, false},
	{"tiny-llama-f32", "lora-r4-embd", 1, false},
	{"tiny-qwen3-f32", "lora-r16-proj", 1, false},
	{"tiny-qwen3-f32", "lora-r16-proj", 1, true},
	{"tiny-phi3-f32", "lora-r8", 0.7, false},
	{"small-llama-f32", "lora-r16-proj", 1.5, false},
	{"small-llama-f32", "lora-r16-proj", 1.5, true},
}

func loraVectorTokenIDs(vocab int) []int32 {
	return randTokens(rand.New(rand.NewPCG(19, 1)), loraVectorTokens, vocab)
}

func loraUse(t testing.TB, model, adapter string, scale float64) (fixtures.Spec, lora.Use, []byte) {
	return loraUseWiden(t, model, adapter, scale, false)
}

// loraUseWiden is loraUse with, for widen, the adapter's tensors rewritten as F32.
func loraUseWiden(t testing.TB, model, adapter string, scale float64, widen bool) (fixtures.Spec, lora.Use, []byte) {
	t.Helper()
	s, err := fixtures.Lookup(model)
	if err != nil {
		t.Fatal(err)
	}
	a, err := fixtures.LookupAdapter(adapter)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fixtures.AdapterBytes(s, a)
	if err != nil {
		t.Fatal(err)
	}
	if widen {
		b = widenAdapter(t, b)
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := lora.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return s, lora.Use{Adapter: ad, Scale: scale}, b
}

// TestLoRAAgainstLlamaCpp compares the twin on F32 fixtures with adapters merged at load
// against llama.cpp's run-time LoRA, committed in testdata (-write-lora-vectors regenerates
// it), to the tolerance of the base models' agreement with llama.cpp.
func TestLoRAAgainstLlamaCpp(t *testing.T) {
	path := filepath.Join("testdata", loraVectorFile)
	if *writeLoRAVectors {
		writeLoRAVectorFile(t, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	per := loraVectorTokens * loraVectorCols
	if len(b) != 4*per*len(loraCases) {
		t.Fatalf("%s: %d bytes, want %d", path, len(b), 4*per*len(loraCases))
	}
	for k, c := range loraCases {
		name := fmt.Sprintf("%s+%s@%g", c.model, c.adapter, c.scale)
		if c.widen {
			name += "/f32"
		}
		t.Run(name, func(t *testing.T) {
			s, u, _ := loraUseWiden(t, c.model, c.adapter, c.scale, c.widen)
			m := loadWith(t, c.model, 2, engine.LoadOptions{MaxRows: 16, Context: 32, Adapters: []lora.Use{u}})
			toks := loraVectorTokenIDs(s.NVocab)
			got, err := m.NewSession().Prefill(toks, true)
			if err != nil {
				t.Fatal(err)
			}
			var maxErr, maxRef float64
			for i := range toks {
				for j := range loraVectorCols {
					want := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*(k*per+i*loraVectorCols+j):])))
					maxErr = math.Max(maxErr, math.Abs(float64(got[i][j])-want))
					maxRef = math.Max(maxRef, math.Abs(want))
				}
			}
			rel := maxErr / maxRef
			t.Logf("max |Verity − llama.cpp| / max |llama.cpp| = %.3g", rel)
			f16 := u.Adapter.Pairs[0].A.Type == dtype.F16
			if !(rel <= 3e-6) && !f16 {
				t.Errorf("max relative difference %.3g from llama.cpp's run-time LoRA", rel)
			}
			if c.scale != 0 { // the adapter must matter: compare with the base
				base := loadWith(t, c.model, 2, engine.LoadOptions{MaxRows: 16, Context: 32})
				bl, err := base.NewSession().Prefill(toks, true)
				if err != nil {
					t.Fatal(err)
				}
				var d float64
				for i := range toks {
					for j := range loraVectorCols {
						d = math.Max(d, math.Abs(float64(bl[i][j]-got[i][j])))
					}
				}
				t.Logf("the adapter moves the logits by up to %.3g; llama.cpp differs by %.3g of that", d, maxErr/d)
				if d < 100*maxErr {
					t.Errorf("the adapter moves the logits by %.3g, not far above the difference from llama.cpp (%.3g)", d, maxErr)
				}
				if f16 && maxErr > d/1024 { // llama.cpp's F16 activations in the adapter's matmuls
					t.Errorf("F16 adapter: llama.cpp differs by %.3g, more than 2⁻¹⁰ of the adapter's effect %.3g", maxErr, d)
				}
			}
		})
	}
}

func writeLoRAVectorFile(t *testing.T, path string) {
	oracle := os.Getenv("VERITY_ORACLE")
	if oracle == "" {
		t.Fatal("-write-lora-vectors needs VERITY_ORACLE")
	}
	tmp := t.TempDir()
	var out []byte
	for k, c := range loraCases {
		s, _, ab := loraUseWiden(t, c.model, c.adapter, c.scale, c.widen)
		model := filepath.Join(tmp, "model.gguf")
		if err := fixtures.Generate(s, model, nil); err != nil {
			t.Fatal(err)
		}
		if s.Tied {
			untie(t, model)
		}
		adapter := filepath.Join(tmp, fmt.Sprintf("adapter-%d.gguf", k))
		if err := os.WriteFile(adapter, ab, 0o644); err != nil {
			t.Fatal(err)
		}
		var list []string
		for _, tok := range loraVectorTokenIDs(s.NVocab) {
			list = append(list, fmt.Sprint(tok))
		}
		logits := filepath.Join(tmp, "logits.f32")
		cmd := exec.Command("./llama_logits", "--tokens", strings.Join(list, ","), "--lora", adapter,
			"--lora-scale", fmt.Sprint(c.scale), "--out", logits, model)
		cmd.Dir = oracle
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("llama_logits: %v\n%s", err, stderr.Bytes())
		}
		raw, err := os.ReadFile(logits)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) != 4*loraVectorTokens*s.NVocab {
			t.Fatalf("%s: %d bytes of logits, want %d", c.model, len(raw), 4*loraVectorTokens*s.NVocab)
		}
		for i := range loraVectorTokens {
			out = append(out, raw[4*i*s.NVocab:4*(i*s.NVocab+loraVectorCols)]...)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// untie adds output.weight, a copy of token_embd.weight, to the model file at path.
func untie(t testing.TB, path string) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriterFrom(f)
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	e, _ := f.Tensor("token_embd.weight")
	if err := w.AddTensor("output.weight", e.Type, e.Dims, f.Data(e)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path + ".untied"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".untied", path); err != nil {
		t.Fatal(err)
	}
}

// widenAdapter rewrites every tensor of an adapter file as F32, with the same values.
func widenAdapter(t testing.TB, b []byte) []byte {
	t.Helper()
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriterFrom(f)
	for _, ti := range f.Tensors {
		q, err := quant.Lookup(ti.Type)
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, ti.Elements())
		q.Dequantize(v, f.Data(ti))
		if err := w.AddTensor(ti.Name, dtype.F32, ti.Dims, device.F32Bytes(v)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if _, err := w.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// An F16 adapter and its F32 copy (the same values) merge into the same bits.
func TestLoRAWidened(t *testing.T) {
	_, u16, _ := loraUseWiden(t, "small-llama-q4_k_m", "lora-r16-proj", 1, false)
	_, u32, _ := loraUseWiden(t, "small-llama-q4_k_m", "lora-r16-proj", 1, true)
	toks := loraVectorTokenIDs(1024)
	var rows [2][][]float32
	for i, u := range []lora.Use{u16, u32} {
		m := loadWith(t, "small-llama-q4_k_m", 2, engine.LoadOptions{MaxRows: 16, Context: 32, Adapters: []lora.Use{u}})
		l, err := m.NewSession().Prefill(toks, true)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = l
	}
	for i := range rows[0] {
		sameBits(t, fmt.Sprint("position ", i), rows[0][i], rows[1][i])
	}
}

// An adapter that does not fit is a load error naming the tensor, and nothing is loaded.
func TestLoRALoadErrors(t *testing.T) {
	_, u, _ := loraUse(t, "tiny-qwen3-f32", "lora-r8", 1) // qwen3's adapter on a llama
	f, err := fixtures.Parse("tiny-llama-f32")
	if err != nil {
		t.Fatal(err)
	}
	_, err = engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 8, Context: 16, Adapters: []lora.Use{u}})
	if !errors.Is(err, lora.ErrArchitecture) {
		t.Errorf("qwen3 adapter on a llama: %v", err)
	}
	_, u, _ = loraUse(t, "small-llama-f32", "lora-r8", 1) // the right architecture, other shapes
	_, err = engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 8, Context: 16, Adapters: []lora.Use{u}})
	if !errors.Is(err, lora.ErrShape) || !strings.Contains(err.Error(), "blk.0.") {
		t.Errorf("small adapter on a tiny model: %v", err)
	}
	_, u, _ = loraUse(t, "tiny-llama-f32", "lora-r8", 1)
	_, err = engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 8, Context: 16, Adapters: []lora.Use{u}, LoRA: lora.Options{Memory: 1000}})
	if err == nil || !strings.Contains(err.Error(), "private memory") {
		t.Errorf("over the memory budget: %v", err)
	}
}

// With tied embeddings, an adapted embedding changes the input lookup only: the logits equal
// those of the untied file whose output.weight is the base embedding (what the merge builds),
// and the model reports it.
func TestLoRATiedHead(t *testing.T) {
	_, u, _ := loraUse(t, "tiny-llama-tied-f32", "lora-r4-embd", 1)
	m := loadWith(t, "tiny-llama-tied-f32", 1, engine.LoadOptions{MaxRows: 8, Context: 16, Adapters: []lora.Use{u}})
	if m.LoRA == nil || !m.LoRA.TiedHead || m.LoRA.Tensors != 1 {
		t.Fatalf("LoRA result %+v", m.LoRA)
	}
	head, emb := m.Program().Tensors["output.weight"], m.Program().Tensors["token_embd.weight"]
	if head == nil || emb == nil || bytes.Equal(head.Data, emb.Data) {
		t.Fatal("the head and the embedding should be two tensors, the embedding merged")
	}
	f, _ := fixtures.Parse("tiny-llama-tied-f32")
	e, _ := f.Tensor("token_embd.weight")
	if !bytes.Equal(head.Data, f.Data(e)) {
		t.Error("the head is not the base embedding")
	}
}

// A merged model is the base's Program with other bytes: the same ops, each reading a weight
// of the same type and size, so decoding costs the same (see BenchmarkDecodeWithAdapter).
func TestLoRASameProgram(t *testing.T) {
	_, u, _ := loraUse(t, "small-llama-q4_k_m", "lora-r16-proj", 1)
	base := loadWith(t, "small-llama-q4_k_m", 1, engine.LoadOptions{MaxRows: 8, Context: 16})
	merged := loadWith(t, "small-llama-q4_k_m", 1, engine.LoadOptions{MaxRows: 8, Context: 16, Adapters: []lora.Use{u}})
	bp, mp := base.Program(), merged.Program()
	if len(bp.Ops) != len(mp.Ops) || bp.WeightBytes() != mp.WeightBytes() {
		t.Fatalf("%d ops and %d weight bytes, the base %d and %d", len(mp.Ops), mp.WeightBytes(), len(bp.Ops), bp.WeightBytes())
	}
	changed := 0
	for i, op := range bp.Ops {
		mo := mp.Ops[i]
		if op.Kind != mo.Kind || op.Weight != mo.Weight || op.WeightBytes != mo.WeightBytes || op.BytesPerRow != mo.BytesPerRow {
			t.Fatalf("op %d: %+v, the base's %+v", i, mo, op)
		}
		if op.Weight == "" {
			continue
		}
		bt, mt := bp.Tensors[op.Weight], mp.Tensors[op.Weight]
		if bt.Type != mt.Type || len(bt.Data) != len(mt.Data) {
			t.Fatalf("%s: %s of %d bytes, the base's %s of %d", op.Weight, mt.Type, len(mt.Data), bt.Type, len(bt.Data))
		}
		if !bytes.Equal(bt.Data, mt.Data) {
			changed++
		}
	}
	if want := 7 * 4; changed != want {
		t.Errorf("%d weights changed, want the %d projections", changed, want)
	}
}

var loraBenchModel = flag.String("lora-bench-model", "small-llama-q4_k_m", "the fixture BenchmarkDecodeWithAdapter decodes (with lora-r16-proj merged)")

// BenchmarkDecodeWithAdapter decodes with the base model and with a rank-16 adapter of its
// seven projections merged, on one CPU thread, and reports CPU time per token besides wall
// time (steadier on a shared machine). The model is the fixture cache's file
// (-lora-bench-model llama-1b-q4_k_m for the Llama-3.2-1B shape).
func BenchmarkDecodeWithAdapter(b *testing.B) {
	_, u, _ := loraUse(b, *loraBenchModel, "lora-r16-proj", 1)
	for _, c := range []struct {
		name string
		uses []lora.Use
	}{{"base", nil}, {"lora", []lora.Use{u}}} {
		b.Run(c.name, func(b *testing.B) {
			path, err := fixtures.Path(*loraBenchModel)
			if err != nil {
				b.Fatal(err)
			}
			m, err := engine.Load(path, cpu.New(1), engine.LoadOptions{MaxRows: 8, Context: 64, Adapters: c.uses})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			s := m.NewSession()
			tok := int32(1)
			if _, err := s.Prefill([]int32{tok}, false); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := processCPU()
			for i := range b.N {
				if s.Len() >= m.Context()-1 {
					b.StopTimer()
					s.Close()
					s = m.NewSession()
					if _, err := s.Prefill([]int32{tok}, false); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if _, err := s.Decode(int32(i % 7)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/token")
		})
	}
}
