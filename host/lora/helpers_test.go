package lora

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"verity/device/dtype"
	"verity/host/gguf"
	"verity/host/quant"
)

// tensorSpec is a tensor of a test file: values N(0, std²) (std 0: 1/√ne0), stored as typ.
type tensorSpec struct {
	name string
	typ  dtype.Type
	dims []int64
	std  float64
	raw  bool // zero bytes (for types Verity does not encode)
}

// writeFile writes a GGUF of the given metadata and tensors (seeded values) and parses it.
func writeFile(t testing.TB, kv map[string]gguf.Value, ts []tensorSpec, seed uint64) *gguf.File {
	t.Helper()
	return parse(t, fileBytes(t, kv, ts, seed))
}

func fileBytes(t testing.TB, kv map[string]gguf.Value, ts []tensorSpec, seed uint64) []byte {
	t.Helper()
	w := gguf.NewWriter()
	for _, k := range sortedKeys(kv) {
		w.Set(k, kv[k])
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for _, s := range ts {
		n := int64(1)
		for _, d := range s.dims {
			n *= d
		}
		if s.raw {
			size, err := s.typ.TensorBytes(s.dims)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.AddTensor(s.name, s.typ, s.dims, make([]byte, size)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		std := s.std
		if std == 0 {
			std = 1 / math.Sqrt(float64(s.dims[0]))
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * std)
		}
		if err := w.AddTensor(s.name, s.typ, s.dims, encode(t, s.typ, v)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func parse(t testing.TB, b []byte) *gguf.File {
	t.Helper()
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func encode(t testing.TB, typ dtype.Type, v []float32) []byte {
	t.Helper()
	f, err := quant.Lookup(typ)
	if err != nil {
		t.Fatal(err)
	}
	n, err := typ.RowBytes(int64(len(v)))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	f.Quantize(b, v)
	return b
}

func decode(t testing.TB, f *gguf.File, name string) []float32 {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %q", name)
	}
	q, err := quant.Lookup(ti.Type)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, ti.Elements())
	q.Dequantize(out, f.Data(ti))
	return out
}

func sortedKeys(m map[string]gguf.Value) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// model is a small llama-like base: token_embd [in, vocab] and per layer q [in, in] and
// down [ff, in], all of type typ, with output.weight unless tied.
type model struct {
	typ           dtype.Type
	in, ff, vocab int64
	layers        int
	tied          bool
	embdType      dtype.Type // F32 unless set
	extra         []tensorSpec
	arch          string // "llama" unless set
	seed          uint64
}

func (m model) specs() []tensorSpec {
	et := m.embdType
	ts := []tensorSpec{{name: "token_embd.weight", typ: et, dims: []int64{m.in, m.vocab}, std: 1}}
	for l := range m.layers {
		p := "blk." + string(rune('0'+l)) + "."
		ts = append(ts,
			tensorSpec{name: p + "attn_norm.weight", typ: dtype.F32, dims: []int64{m.in}},
			tensorSpec{name: p + "attn_q.weight", typ: m.typ, dims: []int64{m.in, m.in}},
			tensorSpec{name: p + "ffn_down.weight", typ: m.typ, dims: []int64{m.ff, m.in}})
	}
	if !m.tied {
		ts = append(ts, tensorSpec{name: "output.weight", typ: m.typ, dims: []int64{m.in, m.vocab}})
	}
	return append(ts, m.extra...)
}

func (m model) file(t testing.TB) *gguf.File {
	arch := "llama"
	if m.arch != "" {
		arch = m.arch
	}
	return writeFile(t, map[string]gguf.Value{"general.architecture": gguf.Str(arch)}, m.specs(), m.seed+1)
}

// pairSpec is one pair of a test adapter: the target's ne and a rank; embedding pairs are
// written transposed.
type pairSpec struct {
	target  string
	in, out int64
	rank    int64
	std     float64
	typ     dtype.Type
}

func adapterKV(arch string, alpha float64) map[string]gguf.Value {
	return map[string]gguf.Value{
		"general.architecture": gguf.Str(arch),
		"general.type":         gguf.Str("adapter"),
		"adapter.type":         gguf.Str("lora"),
		"adapter.lora.alpha":   gguf.F32(float32(alpha)),
	}
}

func pairTensors(ps []pairSpec) []tensorSpec {
	var ts []tensorSpec
	for _, p := range ps {
		std := p.std
		if std == 0 {
			std = 0.05
		}
		typ := p.typ
		a, b := []int64{p.in, p.rank}, []int64{p.rank, p.out}
		if p.target == "token_embd.weight" {
			a, b = []int64{p.rank, p.out}, []int64{p.rank, p.in}
		}
		ts = append(ts, tensorSpec{name: p.target + ".lora_a", typ: typ, dims: a, std: std},
			tensorSpec{name: p.target + ".lora_b", typ: typ, dims: b, std: std})
	}
	return ts
}

func adapterFile(t testing.TB, arch string, alpha float64, ps []pairSpec, seed uint64) *Adapter {
	t.Helper()
	a, err := Read(writeFile(t, adapterKV(arch, alpha), pairTensors(ps), seed))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// refDelta is Δ of target for the uses, straight from the definition in float64:
// Δ[o][j] = Σ_uses factor · Σ_k B[o][k]·A[k][j] (the embedding transposed).
func refDelta(t testing.TB, uses []Use, target string, in, out int) []float64 {
	d := make([]float64, in*out)
	for _, u := range uses {
		for _, p := range u.Adapter.Pairs {
			if p.Target != target {
				continue
			}
			f := u.Adapter.Factor(p, u.Scale)
			av, bv := decodeInfo(t, u.Adapter.file, p.A), decodeInfo(t, u.Adapter.file, p.B)
			r := p.Rank
			for o := range out {
				for j := range in {
					var s float64
					for k := range r {
						if p.Embedding {
							s += float64(av[o*r+k]) * float64(bv[j*r+k])
						} else {
							s += float64(bv[o*r+k]) * float64(av[k*in+j])
						}
					}
					d[o*in+j] += f * s
				}
			}
		}
	}
	return d
}

func decodeInfo(t testing.TB, f *gguf.File, ti gguf.TensorInfo) []float32 {
	q, err := quant.Lookup(ti.Type)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, ti.Elements())
	q.Dequantize(out, f.Data(ti))
	return out
}
