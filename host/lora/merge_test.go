package lora

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"

	"verity/device/dtype"
	"verity/host/gguf"
)

var allTypes = []dtype.Type{dtype.F32, dtype.F16, dtype.BF16, dtype.Q8_0, dtype.Q4_0, dtype.Q4_1, dtype.Q5_0, dtype.Q5_1,
	dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K}

// The pairs of an adapter for model m: q and down of every layer, and the embedding.
func fullPairs(m model, rank int64, std float64) []pairSpec {
	var ps []pairSpec
	for l := range m.layers {
		p := "blk." + string(rune('0'+l)) + "."
		ps = append(ps, pairSpec{target: p + "attn_q.weight", in: m.in, out: m.in, rank: rank, std: std},
			pairSpec{target: p + "ffn_down.weight", in: m.ff, out: m.in, rank: rank, std: std})
	}
	return append(ps, pairSpec{target: "token_embd.weight", in: m.in, out: m.vocab, rank: rank, std: std})
}

func mustMerge(t testing.TB, base *gguf.File, uses []Use, o Options) (*gguf.File, *Result) {
	t.Helper()
	v, res, err := Merge(base, uses, o)
	if err != nil {
		t.Fatal(err)
	}
	return v, res
}

// Scale 0 reproduces the file: every targeted tensor's bytes, of every type, and every other
// tensor untouched.
func TestScaleZero(t *testing.T) {
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			m := model{typ: typ, in: 256, ff: 512, vocab: 64, layers: 2, embdType: typ, seed: uint64(typ)}
			base := m.file(t)
			a := adapterFile(t, "llama", 16, fullPairs(m, 4, 0.05), 3)
			v, res := mustMerge(t, base, []Use{{a, 0}}, Options{})
			if res.Tensors != 5 || res.Blocks.Moved+res.Blocks.Refit+res.Blocks.Clamped+res.Blocks.Fresh != 0 || res.Blocks.Copied == 0 {
				t.Errorf("result %+v", res)
			}
			for _, ti := range base.Tensors {
				vi, _ := v.Tensor(ti.Name)
				if vi.Type != ti.Type || !bytes.Equal(v.Data(vi), base.Data(ti)) {
					t.Errorf("%s differs at scale 0", ti.Name)
				}
			}
		})
	}
}

// On F32 the merge is W + Δ with Δ from the definition, to float64 rounding; F16 and BF16
// are its nearest values. Several adapters sum, alpha 0 means the scale as is, and the
// embedding's pair is transposed.
func TestFloatMerge(t *testing.T) {
	for _, typ := range []dtype.Type{dtype.F32, dtype.F16, dtype.BF16} {
		m := model{typ: typ, in: 64, ff: 128, vocab: 48, layers: 2, embdType: typ, seed: 5}
		base := m.file(t)
		a1 := adapterFile(t, "llama", 16, fullPairs(m, 8, 0.1), 11)
		a2 := adapterFile(t, "llama", 0, fullPairs(m, 3, 0.1)[1:3], 12)
		uses := []Use{{a1, 0.7}, {a2, -1.5}}
		v, _ := mustMerge(t, base, uses, Options{Threads: 3})
		for _, ti := range base.Tensors {
			w := decode(t, base, ti.Name)
			got := decode(t, v, ti.Name)
			if len(ti.Dims) < 2 || ti.Name == "output.weight" {
				if !bytes.Equal(v.Data(ti), base.Data(ti)) {
					t.Errorf("%s: untargeted tensor changed", ti.Name)
				}
				continue
			}
			d := refDelta(t, uses, ti.Name, int(ti.Dims[0]), int(ti.Dims[1]))
			for i := range w {
				want := float64(w[i]) + d[i]
				tol := 2e-7 * math.Abs(want) // one float32 rounding (and the sum's order)
				switch typ {
				case dtype.F16:
					tol = 1.0/1024*math.Abs(want) + 1e-7
				case dtype.BF16:
					tol = 1.0/128*math.Abs(want) + 1e-30
				}
				if math.Abs(float64(got[i])-want) > tol {
					t.Fatalf("%s %s[%d]: %g, want %g", typ, ti.Name, i, got[i], want)
				}
			}
		}
	}
}

// A tied model keeps its head: the merged file gains output.weight, the base embedding.
func TestTiedHead(t *testing.T) {
	m := model{typ: dtype.Q8_0, in: 64, ff: 128, vocab: 48, layers: 1, tied: true, embdType: dtype.Q8_0, seed: 9}
	base := m.file(t)
	a := adapterFile(t, "llama", 8, fullPairs(m, 4, 0.2), 2)
	v, res := mustMerge(t, base, []Use{{a, 1}}, Options{})
	if !res.TiedHead {
		t.Error("TiedHead not set")
	}
	out, ok := v.Tensor("output.weight")
	e, _ := base.Tensor("token_embd.weight")
	if !ok || out.Type != e.Type || !bytes.Equal(v.Data(out), base.Data(e)) {
		t.Fatalf("output.weight %+v is not the base embedding", out)
	}
	ve, _ := v.Tensor("token_embd.weight")
	if bytes.Equal(v.Data(ve), base.Data(e)) {
		t.Error("the embedding was not merged")
	}
	// Untied: no tensor is added.
	m.tied = false
	v, res = mustMerge(t, m.file(t), []Use{{a, 1}}, Options{})
	if res.TiedHead || len(v.Tensors) != len(m.specs()) {
		t.Errorf("untied: TiedHead %v, %d tensors", res.TiedHead, len(v.Tensors))
	}
}

// The merge does not depend on the number of workers, and two runs agree.
func TestDeterministic(t *testing.T) {
	m := model{typ: dtype.Q4_K, in: 256, ff: 512, vocab: 64, layers: 2, embdType: dtype.Q6_K, seed: 4}
	base := m.file(t)
	a := adapterFile(t, "llama", 16, fullPairs(m, 8, 0.05), 5)
	v1, _ := mustMerge(t, base, []Use{{a, 1}}, Options{Threads: 1})
	v2, _ := mustMerge(t, base, []Use{{a, 1}}, Options{Threads: 5})
	for _, ti := range v1.Tensors {
		t2, _ := v2.Tensor(ti.Name)
		if !bytes.Equal(v1.Data(ti), v2.Data(t2)) {
			t.Errorf("%s differs between 1 and 5 workers", ti.Name)
		}
	}
}

// The merged buffers are owned and 64-byte aligned.
func TestAligned(t *testing.T) {
	for n := int64(1); n < 300; n += 37 {
		b := aligned(n)
		if len(b) != int(n) || uintptrOf(b)%64 != 0 {
			t.Fatalf("aligned(%d): len %d at %#x", n, len(b), uintptrOf(b))
		}
	}
}

// A merge type writes every target in that type.
func TestMergeType(t *testing.T) {
	m := model{typ: dtype.Q4_K, in: 256, ff: 512, vocab: 64, layers: 1, embdType: dtype.Q4_K, seed: 6}
	base := m.file(t)
	a := adapterFile(t, "llama", 16, fullPairs(m, 8, 0.1), 5)
	uses := []Use{{a, 1}}
	for _, mt := range []struct {
		name string
		typ  dtype.Type
		tol  float64 // relative to the largest |W + Δ| of the tensor
	}{{"f32", dtype.F32, 1e-6}, {"f16", dtype.F16, 1e-3}, {"bf16", dtype.BF16, 8e-3}, {"q8_0", dtype.Q8_0, 2e-2}} {
		v, res := mustMerge(t, base, uses, Options{MergeType: mt.name})
		if res.Blocks.Fresh == 0 || res.Blocks.Copied != 0 {
			t.Errorf("%s: %+v", mt.name, res.Blocks)
		}
		for _, tg := range []string{"blk.0.attn_q.weight", "token_embd.weight"} {
			ti, _ := v.Tensor(tg)
			if ti.Type != mt.typ {
				t.Errorf("%s: %s is %s", mt.name, tg, ti.Type)
			}
			w, got := decode(t, base, tg), decode(t, v, tg)
			bt, _ := base.Tensor(tg)
			d := refDelta(t, uses, tg, int(bt.Dims[0]), int(bt.Dims[1]))
			var amax, emax float64
			for i := range w {
				want := float64(w[i]) + d[i]
				amax = math.Max(amax, math.Abs(want))
				emax = math.Max(emax, math.Abs(float64(got[i])-want))
			}
			if emax > mt.tol*amax {
				t.Errorf("%s: %s: max error %g of %g", mt.name, tg, emax, amax)
			}
		}
	}
	if _, _, err := Merge(base, uses, Options{MergeType: "q4_k"}); err == nil || !strings.Contains(err.Error(), "f16") {
		t.Errorf("merge type q4_k: %v", err)
	}
}

// The merged copies must fit the memory budget; the error gives the numbers.
func TestMemoryBudget(t *testing.T) {
	m := model{typ: dtype.F32, in: 64, ff: 128, vocab: 48, layers: 2, seed: 1}
	base := m.file(t)
	a := adapterFile(t, "llama", 16, fullPairs(m, 4, 0.1), 5)
	p, err := NewPlan(base, []Use{{a, 1}}, Options{Memory: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(4 * (2*(64*64+128*64) + 64*48))
	if p.Bytes != want {
		t.Errorf("plan: %d bytes, want %d", p.Bytes, want)
	}
	_, err = NewPlan(base, []Use{{a, 1}}, Options{Memory: want - 1})
	if err == nil || !strings.Contains(err.Error(), "0.1 MiB of private memory") || !strings.Contains(err.Error(), "5 merged tensors") {
		t.Errorf("over budget: %v", err)
	}
	if _, err := NewPlan(base, []Use{{a, 1}}, Options{Memory: want}); err != nil {
		t.Errorf("at budget: %v", err)
	}
	if n, ok := availableMemory(); ok && n <= 0 {
		t.Errorf("available memory %d", n)
	}
}

// Adapters that cannot be merged are refused with an error naming what is wrong.
func TestBadAdapters(t *testing.T) {
	m := model{typ: dtype.Q4_K, in: 256, ff: 512, vocab: 64, layers: 1, embdType: dtype.F16, seed: 2,
		extra: []tensorSpec{{name: "blk.0.ffn_gate_exps.weight", typ: dtype.Q8_0, dims: []int64{256, 32, 4}}}}
	base := m.file(t)
	good := fullPairs(m, 4, 0.05)
	kv := adapterKV("llama", 16)
	with := func(k string, v gguf.Value) map[string]gguf.Value {
		out := map[string]gguf.Value{k: v}
		for kk, vv := range kv {
			if kk != k {
				out[kk] = vv
			}
		}
		return out
	}
	pairsPlus := func(extra ...tensorSpec) []tensorSpec { return append(pairTensors(good), extra...) }
	cases := []struct {
		name    string
		kv      map[string]gguf.Value
		tensors []tensorSpec
		err     error
		mention string
	}{
		{"not an adapter (a model)", map[string]gguf.Value{"general.architecture": gguf.Str("llama")}, pairTensors(good), ErrNotAdapter, "general.type"},
		{"general.type model", with("general.type", gguf.Str("model")), pairTensors(good), ErrNotAdapter, `"model"`},
		{"adapter.type control vector", with("adapter.type", gguf.Str("control_vector")), pairTensors(good), ErrNotAdapter, "control_vector"},
		{"activated lora", with("adapter.alora.invocation_tokens", gguf.ArrUint32s([]uint32{1, 2})), pairTensors(good), ErrNotAdapter, "invocation"},
		{"no tensors", kv, nil, ErrNotAdapter, "no lora_a"},
		{"wrong architecture", with("general.architecture", gguf.Str("qwen3")), pairTensors(good), ErrArchitecture, `"qwen3"`},
		{"missing lora_b", kv, pairTensors(good)[:len(pairTensors(good))-1], ErrPair, "token_embd.weight.lora_b"},
		{"unexpected tensor", kv, pairsPlus(tensorSpec{name: "blk.0.attn_norm.weight", typ: dtype.F32, dims: []int64{256}}), ErrPair, "blk.0.attn_norm.weight"},
		{"target missing", kv, pairsPlus(pairTensors([]pairSpec{{target: "blk.0.attn_k.weight", in: 256, out: 64, rank: 4}})...), ErrTarget, "blk.0.attn_k.weight"},
		{"n_in wrong", kv, pairsPlus(pairTensors([]pairSpec{{target: "output.weight", in: 128, out: 64, rank: 4}})...), ErrShape, "output.weight"},
		{"n_out wrong", kv, pairsPlus(pairTensors([]pairSpec{{target: "output.weight", in: 256, out: 32, rank: 4}})...), ErrShape, "output.weight"},
		{"ranks differ", kv, pairsPlus(
			tensorSpec{name: "output.weight.lora_a", typ: dtype.F32, dims: []int64{256, 4}},
			tensorSpec{name: "output.weight.lora_b", typ: dtype.F32, dims: []int64{5, 64}}), ErrShape, "output.weight"},
		{"embedding not transposed", kv, pairsPlus(
			tensorSpec{name: "token_embd.weight.lora_a", typ: dtype.F32, dims: []int64{256, 4}},
			tensorSpec{name: "token_embd.weight.lora_b", typ: dtype.F32, dims: []int64{4, 64}}), ErrShape, "token_embd.weight"},
		{"3-D lora tensor", kv, pairsPlus(
			tensorSpec{name: "output.weight.lora_a", typ: dtype.F32, dims: []int64{256, 4, 1}},
			tensorSpec{name: "output.weight.lora_b", typ: dtype.F32, dims: []int64{4, 64}}), ErrShape, "output.weight.lora_a"},
		{"expert tensor", kv, pairsPlus(pairTensors([]pairSpec{{target: "blk.0.ffn_gate_exps.weight", in: 256, out: 32, rank: 4}})...), ErrNotWritable, "blk.0.ffn_gate_exps.weight"},
		{"1-D target", kv, pairsPlus(pairTensors([]pairSpec{{target: "blk.0.attn_norm.weight", in: 256, out: 1, rank: 4}})...), ErrShape, "blk.0.attn_norm.weight"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := writeFile(t, c.kv, dedupe(c.tensors), 3)
			a, err := Read(f)
			if err == nil {
				_, _, err = Merge(base, []Use{{a, 1}}, Options{})
			}
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("got %v, want %v naming %s", err, c.err, c.mention)
			}
		})
	}
	// Base types the merge cannot write are refused by name: one Verity does not read (q8_1),
	// and one it reads without a code grid (q8_K), which a merge type can write.
	odd := model{typ: dtype.F32, in: 256, ff: 512, vocab: 48, layers: 1, seed: 3,
		extra: []tensorSpec{{name: "blk.0.ffn_up.weight", typ: dtype.Q8_K, dims: []int64{256, 64}},
			{name: "blk.0.ffn_gate.weight", typ: dtype.Q8_1, dims: []int64{256, 64}, raw: true}}}
	ob := odd.file(t)
	for _, tg := range []string{"blk.0.ffn_up.weight", "blk.0.ffn_gate.weight"} {
		a := adapterFile(t, "llama", 16, []pairSpec{{target: tg, in: 256, out: 64, rank: 4}}, 1)
		if _, _, err := Merge(ob, []Use{{a, 1}}, Options{}); !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), tg) {
			t.Errorf("%s: %v", tg, err)
		}
		_, _, err := Merge(ob, []Use{{a, 1}}, Options{MergeType: "f16"})
		if wantErr := tg == "blk.0.ffn_gate.weight"; (err != nil) != wantErr {
			t.Errorf("%s as f16: %v", tg, err)
		}
	}
	// A non-finite adapter value.
	nan := writeFile(t, kv, []tensorSpec{{name: "output.weight.lora_a", typ: dtype.F32, dims: []int64{256, 4}, std: math.Inf(1)},
		{name: "output.weight.lora_b", typ: dtype.F32, dims: []int64{4, 64}}}, 1)
	a, err := Read(nan)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Merge(base, []Use{{a, 1}}, Options{}); err == nil || !strings.Contains(err.Error(), "output.weight.lora_a") {
		t.Errorf("non-finite adapter: %v", err)
	}
	// A non-finite scale.
	a = adapterFile(t, "llama", 16, good, 1)
	if _, _, err := Merge(base, []Use{{a, math.NaN()}}, Options{}); err == nil {
		t.Error("NaN scale accepted")
	}
}

// dedupe keeps the last of tensors with the same name (a case overriding a good pair).
func dedupe(ts []tensorSpec) []tensorSpec {
	idx := map[string]int{}
	var out []tensorSpec
	for _, s := range ts {
		if i, ok := idx[s.name]; ok {
			out[i] = s
			continue
		}
		idx[s.name] = len(out)
		out = append(out, s)
	}
	return out
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
