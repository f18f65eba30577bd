package model_test

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/gguf"
	"verity/host/model"
)

// fixtureFile returns a tiny fixture as a writer, so tests can damage it.
func fixtureWriter(t *testing.T, name string) *gguf.Writer {
	t.Helper()
	s, err := fixtures.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := fixtures.WriteTo(&buf, s, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriterFrom(f)
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func build(t *testing.T, w *gguf.Writer) (*model.Program, error) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return model.Build(f)
}

func TestBuildFixtures(t *testing.T) {
	for _, name := range []string{"tiny-llama-f32", "tiny-llama-tied-f32", "tiny-qwen3-f32", "small-llama-q4_k_m"} {
		p, err := build(t, fixtureWriter(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, _ := fixtures.Lookup(name)
		c := p.Config
		if c.NLayer != s.NLayer || c.NEmbd != s.NEmbd || c.NHead != s.NHead || c.NHeadKV != s.NHeadKV || c.HeadDim != s.HeadDim || c.NVocab != s.NVocab || c.Tied != s.Tied {
			t.Errorf("%s: config %+v does not match the spec", name, c)
		}
		// one attention cache per layer; every op named; weights counted once
		if p.CacheLayers != s.NLayer {
			t.Errorf("%s: %d cache layers", name, p.CacheLayers)
		}
		var wb int64
		for _, op := range p.Ops {
			if op.Name == "" {
				t.Errorf("%s: op %s without a name", name, op.Kind)
			}
			wb += op.WeightBytes
		}
		// every weight is read once per step, except the embedding table (a row per token);
		// a tied head reads it whole
		emb := int64(len(p.Tensors["token_embd.weight"].Data))
		if want := p.WeightBytes() - emb; c.Tied && wb != p.WeightBytes() || !c.Tied && wb != want {
			t.Errorf("%s: ops read %d weight bytes, program holds %d", name, wb, p.WeightBytes())
		}
		if p.Buffers[p.Logits].Width != s.NVocab {
			t.Errorf("%s: logits width %d", name, p.Buffers[p.Logits].Width)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	cases := []struct {
		name   string
		damage func(w *gguf.Writer)
		want   string
	}{
		{"no architecture", func(w *gguf.Writer) { w.Delete("general.architecture") }, `"general.architecture"`},
		{"unknown architecture", func(w *gguf.Writer) { w.Set("general.architecture", gguf.Str("gpt5")) }, `"gpt5" is not supported`},
		{"missing block count", func(w *gguf.Writer) { w.Delete("llama.block_count") }, `"llama.block_count"`},
		{"block count of wrong type", func(w *gguf.Writer) { w.Set("llama.block_count", gguf.Str("two")) }, `"llama.block_count"`},
		{"heads not dividing", func(w *gguf.Writer) { w.Set("llama.attention.head_count_kv", gguf.U32(3)) }, "cannot share 3 KV heads"},
		{"zero heads", func(w *gguf.Writer) { w.Set("llama.attention.head_count", gguf.U32(0)) }, "out of range"},
		{"odd rope dims", func(w *gguf.Writer) { w.Set("llama.rope.dimension_count", gguf.U32(7)) }, "rope.dimension_count"},
		{"bad eps", func(w *gguf.Writer) { w.Set("llama.attention.layer_norm_rms_epsilon", gguf.F32(-1)) }, "layer_norm_rms_epsilon"},
		{"too many layers", func(w *gguf.Writer) { w.Set("llama.block_count", gguf.U32(3)) }, `"blk.2.attn_norm.weight" is missing`},
		{"wrong vocab size", func(w *gguf.Writer) { w.Set("llama.vocab_size", gguf.U32(7)) }, "vocab_size"},
		{"unsupported rope scaling", func(w *gguf.Writer) { w.Set("llama.rope.scaling.type", gguf.Str("yarn")) }, `"yarn"`},
		{"experts without their tensors", func(w *gguf.Writer) {
			w.Set("llama.expert_count", gguf.U32(4))
			w.Set("llama.expert_used_count", gguf.U32(2))
		}, `"blk.0.ffn_gate_inp.weight" is missing`},
		{"experts without a count used", func(w *gguf.Writer) { w.Set("llama.expert_count", gguf.U32(4)) }, `"llama.expert_used_count"`},
		{"more experts used than exist", func(w *gguf.Writer) {
			w.Set("llama.expert_count", gguf.U32(2))
			w.Set("llama.expert_used_count", gguf.U32(3))
		}, "expert_used_count 3 exceeds expert_count 2"},
		{"scaled expert weights", func(w *gguf.Writer) {
			w.Set("llama.expert_count", gguf.U32(4))
			w.Set("llama.expert_used_count", gguf.U32(2))
			w.Set("llama.expert_weights_scale", gguf.F32(2.5))
		}, "scaled expert weights"},
	}
	// expert_count = 0 is a dense model, as llama.cpp reads it
	w := fixtureWriter(t, "tiny-llama-f32")
	w.Set("llama.expert_count", gguf.U32(0))
	if _, err := build(t, w); err != nil {
		t.Errorf("expert_count 0: %v", err)
	}
	for _, c := range cases {
		w := fixtureWriter(t, "tiny-llama-f32")
		c.damage(w)
		_, err := build(t, w)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %s", c.name, err, c.want)
		}
	}
}

// Tensor binding errors name the tensor: missing, wrong shape, wrong type, unsupported type,
// and tensors the architecture would silently ignore.
func TestBindErrors(t *testing.T) {
	base := fixtureWriter(t, "tiny-llama-f32")
	var names []string
	dims := map[string][]int64{}
	types := map[string]dtype.Type{}
	ts, _ := base.Tensors()
	for _, ti := range ts {
		names = append(names, ti.Name)
		dims[ti.Name] = ti.Dims
		types[ti.Name] = ti.Type
	}
	rebuild := func(skip string, change func(name string) (dtype.Type, []int64, []byte, bool), extra func(w *gguf.Writer)) error {
		s, _ := fixtures.Lookup("tiny-llama-f32")
		var buf bytes.Buffer
		fixtures.WriteTo(&buf, s, nil)
		f, _ := gguf.Parse(buf.Bytes())
		w := gguf.NewWriterFrom(f)
		for _, ti := range f.Tensors {
			if ti.Name == skip {
				continue
			}
			ty, d, data := ti.Type, ti.Dims, f.Data(ti)
			if change != nil {
				if t2, d2, b2, ok := change(ti.Name); ok {
					ty, d, data = t2, d2, b2
				}
			}
			if err := w.AddTensor(ti.Name, ty, d, data); err != nil {
				t.Fatal(err)
			}
		}
		if extra != nil {
			extra(w)
		}
		_, err := build(t, w)
		return err
	}
	expect := func(what string, err error, want string) {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one mentioning %s", what, err, want)
		}
	}
	expect("missing tensor", rebuild("blk.1.ffn_down.weight", nil, nil), `"blk.1.ffn_down.weight" is missing`)
	expect("wrong shape", rebuild("", func(n string) (dtype.Type, []int64, []byte, bool) {
		if n != "blk.0.attn_q.weight" {
			return 0, nil, nil, false
		}
		return dtype.F32, []int64{32, 32}, make([]byte, 32*32*4), true
	}, nil), `"blk.0.attn_q.weight" has dims [32 32]`)
	expect("1-D weight not f32", rebuild("", func(n string) (dtype.Type, []int64, []byte, bool) {
		if n != "blk.0.attn_norm.weight" {
			return 0, nil, nil, false
		}
		return dtype.F16, dims[n], make([]byte, 2*dims[n][0]), true
	}, nil), "1-D weights must be f32")
	expect("unsupported type", rebuild("", func(n string) (dtype.Type, []int64, []byte, bool) {
		if n != "blk.0.ffn_up.weight" {
			return 0, nil, nil, false
		}
		b, _ := dtype.IQ4_NL.TensorBytes(dims[n])
		return dtype.IQ4_NL, dims[n], make([]byte, b), true
	}, nil), `"blk.0.ffn_up.weight"`)
	expect("unused tensor", rebuild("", nil, func(w *gguf.Writer) {
		w.AddTensor("blk.0.ffn_up.bias", dtype.F32, []int64{64}, make([]byte, 256))
	}), "blk.0.ffn_up.bias")
}

// Residual adds fold into the matvec whose output they add (Op.Acc): llama keeps no add at
// all, qwen35moe keeps only the one after its MoE block (not a matvec's output), and every
// fused matvec writes the residual stream its add wrote; norms convert their own output. The
// goldens check the bits.
func TestResidualAddsFuse(t *testing.T) {
	for _, c := range []struct {
		fixture string
		adds    int // per layer, left
	}{{"tiny-llama-q8_0", 0}, {"tiny-qwen3-q8_0", 0}, {"tiny-q35moe-q8_0", 1}} {
		f, err := fixtures.Parse(c.fixture)
		if err != nil {
			t.Fatal(err)
		}
		p, err := model.Build(f)
		if err != nil {
			t.Fatal(err)
		}
		adds, accs := 0, 0
		for _, op := range p.Ops {
			switch {
			case op.Kind == model.OpAdd:
				adds++
			case op.Kind == model.OpMatVec && op.Acc:
				accs++
				if p.Buffers[op.Out].Name != "x" {
					t.Errorf("%s: fused matvec %s writes %s, not the residual stream", c.fixture, op.Name, p.Buffers[op.Out].Name)
				}
			}
		}
		if adds != c.adds*p.Config.NLayer || accs != (2-c.adds)*p.Config.NLayer {
			t.Errorf("%s: %d adds and %d fused matvecs over %d layers", c.fixture, adds, accs, p.Config.NLayer)
		}
		// and every whole-row norm whose output only a conversion reads converts it itself
		// (fuseNormConvert)
		normOut, reads := map[model.Buf]bool{}, map[model.Buf]int{}
		for _, op := range p.Ops {
			for _, b := range op.In {
				reads[b]++
			}
		}
		for _, op := range p.Ops {
			if op.Kind == model.OpRMSNorm && op.Groups == 1 {
				normOut[op.Out] = true
			}
			if op.Kind == model.OpConvert && normOut[op.In[0]] && reads[op.In[0]] == 1 {
				t.Errorf("%s: %s converts a norm's output that nothing else reads", c.fixture, op.Name)
			}
		}
	}
}

// The Gemma families' Programs: the embedding scale, a window on the local layers only, the
// local layers' own RoPE table, soft caps where the family has them; and their errors.
func TestBuildGemma(t *testing.T) {
	for _, c := range []struct {
		name      string
		windows   []int
		caps      float32 // attention soft cap
		finalCap  float32
		ropes     int
		postNorms bool
	}{
		{"tiny-gemma-f32", []int{0, 0}, 0, 0, 1, false},
		{"tiny-gemma2-f32", []int{24, 0}, 50, 30, 1, true},
		{"tiny-gemma3-f32", []int{20, 20, 0}, 0, 0, 2, true},
		{"small-gemma3-q6_k", []int{40, 40, 40, 40, 40, 0}, 0, 0, 2, true},
	} {
		p, err := build(t, fixtureWriter(t, c.name))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var windows []int
		var scale, finalCap float32
		geglus, postNorms := 0, 0
		for _, op := range p.Ops {
			switch op.Kind {
			case model.OpAttention:
				windows = append(windows, op.Window)
				if op.SoftCap != c.caps {
					t.Errorf("%s: %s soft cap %g, want %g", c.name, op.Name, op.SoftCap, c.caps)
				}
			case model.OpScale:
				scale = op.Scale
			case model.OpSoftCap:
				finalCap = op.SoftCap
			case model.OpGeGLU:
				geglus++
			case model.OpRMSNorm:
				if strings.Contains(op.Name, "post_") {
					postNorms++
				}
			}
		}
		wantScale := float32(math.Sqrt(float64(p.Config.NEmbd)))
		if !slices.Equal(windows, c.windows) || scale != wantScale || finalCap != c.finalCap || geglus != p.Config.NLayer ||
			len(p.Ropes) != c.ropes || (postNorms == 2*p.Config.NLayer) != c.postNorms {
			t.Errorf("%s: windows %v, scale %g, final cap %g, %d geglu, %d rope tables, %d post norms", c.name, windows, scale, finalCap, geglus, len(p.Ropes), postNorms)
		}
	}
	for _, c := range []struct {
		name, fixture string
		damage        func(w *gguf.Writer)
		want          string
	}{
		{"gemma2 with an output head", "tiny-gemma2-f32", func(w *gguf.Writer) {
			if err := w.AddTensor("output.weight", dtype.F32, []int64{64, 320}, make([]byte, 4*64*320)); err != nil {
				t.Fatal(err)
			}
		}, "has no output.weight"},
		{"negative soft cap", "tiny-gemma2-f32", func(w *gguf.Writer) { w.Set("gemma2.attn_logit_softcapping", gguf.F32(-1)) }, "soft cap"},
		{"zero window pattern", "tiny-gemma3-f32", func(w *gguf.Writer) { w.Set("gemma3.attention.sliding_window_pattern", gguf.U32(0)) }, "sliding_window_pattern"},
		{"bad local RoPE base", "tiny-gemma3-f32", func(w *gguf.Writer) { w.Set("gemma3.rope.freq_base_swa", gguf.F32(0.5)) }, "freq_base_swa"},
		{"partial RoPE", "tiny-gemma3-f32", func(w *gguf.Writer) { w.Set("gemma3.rope.dimension_count", gguf.U32(16)) }, "rope.dimension_count"},
	} {
		w := fixtureWriter(t, c.fixture)
		c.damage(w)
		if _, err := build(t, w); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %s", c.name, err, c.want)
		}
	}
}
