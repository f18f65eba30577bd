package quantize

import (
	"bytes"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/gguf"
)

func fixtureFile(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := fixtures.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Re-quantising the F32 fixture gives the tensors of the fixture generated directly in that
// type (the fixtures quantise with the same reference quantisers, which match llama.cpp).
func TestMatchesDirectlyQuantisedFixture(t *testing.T) {
	src := fixtureFile(t, "tiny-llama-f32")
	for _, c := range []struct {
		fixture string
		t       dtype.Type
	}{{"tiny-llama-q4_0", dtype.Q4_0}, {"tiny-llama-q8_0", dtype.Q8_0}, {"tiny-llama-bf16", dtype.BF16}} {
		var out bytes.Buffer
		var last int64
		plan, err := Write(src, &out, Options{Type: c.t, Workers: 3, Progress: func(done, total int64) { last = done }})
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
				t.Errorf("%s: tensor %s differs from the fixture", c.t, ti.Name)
			}
		}
		if ft, _ := got.Uint32("general.file_type"); ft != must(FileType(c.t)) {
			t.Errorf("%s: file_type %d", c.t, ft)
		}
		converted := 0
		for _, a := range plan {
			if a.To != a.From {
				converted++
			}
			if strings.HasSuffix(a.Name, "_norm.weight") && a.To != dtype.F32 {
				t.Errorf("norm %s converted", a.Name)
			}
		}
		if converted != 2*7+2 {
			t.Errorf("%s: %d tensors converted, want 16 (7 per layer, token_embd, output)", c.t, converted)
		}
		if last == 0 {
			t.Error("no progress reported")
		}
	}
}

func must(v uint32, err error) uint32 {
	if err != nil {
		panic(err)
	}
	return v
}

func TestErrors(t *testing.T) {
	src := fixtureFile(t, "tiny-llama-f32") // rows of 64 and 128 values: no K-quant fits
	if _, err := Plan(src, Options{Type: dtype.Q4_K}); err == nil || !strings.Contains(err.Error(), "not a multiple") {
		t.Errorf("q4_K on 64-wide rows: %v", err)
	}
	plan, err := Plan(src, Options{Type: dtype.Q4_K, AllowFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range plan {
		if a.To != a.From {
			t.Errorf("%s converted despite not fitting", a.Name)
		}
	}
	if _, err := Plan(src, Options{Type: dtype.IQ4_XS}); err == nil {
		t.Error("unsupported target accepted")
	}
	q := fixtureFile(t, "tiny-llama-q4_0")
	if _, err := Plan(q, Options{Type: dtype.Q8_0}); err == nil || !strings.Contains(err.Error(), "allow-requantize") {
		t.Errorf("requantising without the flag: %v", err)
	}
	if _, err := Plan(q, Options{Type: dtype.Q8_0, AllowRequantize: true}); err != nil {
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
		if got := Quantizable(c.name, c.dims); got != c.want {
			t.Errorf("Quantizable(%q, %d) = %v", c.name, c.dims, got)
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
		plan, err := Write(src, &out, Options{Type: dtype.Q8_0})
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
