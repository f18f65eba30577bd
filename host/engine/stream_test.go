package engine_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/exec"
	"verity/host/gguf"
)

// openFixture opens a catalogue fixture's cached file (mapped, so that loads use a packed file).
func openFixture(t testing.TB, name string) *gguf.File {
	t.Helper()
	path, err := fixtures.Path(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// run prefills prompt and decodes n greedy tokens, returning every logits row.
func runGreedy(t testing.TB, m *engine.Model, prompt []int32, n int) [][]float32 {
	t.Helper()
	s := m.NewSession()
	defer s.Close()
	rows, err := s.Prefill(prompt, true)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		last := rows[len(rows)-1]
		tok := int32(0)
		for i, v := range last {
			if v > last[tok] {
				tok = int32(i)
			}
		}
		l, err := s.Decode(tok)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, l)
	}
	return rows
}

// A model computed from its packed file — mapped, read ahead and dropped behind by the
// prefetcher or not — gives the bits of one packed in memory.
func TestPackedWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, name := range []string{"tiny-llama-q8_0", "tiny-qwen3moe-q8_0", "tiny-q35moe-q4_0", "small-llama-q4_k_m", "tiny-llama-tied-f32"} {
		t.Run(name, func(t *testing.T) {
			ref := loadWith(t, name, 2, engine.LoadOptions{MaxRows: 8, Context: 48})
			if ref.Weights.Packed != "" {
				t.Fatalf("a parsed fixture used a packed file: %+v", ref.Weights)
			}
			prompt := randTokens(r, 11, ref.Program().Config.NVocab)
			want := runGreedy(t, ref, prompt, 6)
			for _, o := range []engine.LoadOptions{
				{MaxRows: 8, Context: 48},
				{MaxRows: 8, Context: 48, Prefetch: engine.PrefetchOn},
				{MaxRows: 8, Context: 48, Prefetch: engine.PrefetchOn, KeepBehind: true},
				{MaxRows: 8, Context: 48, Budget: 1 << 20}, // streams: the weights exceed the budget
				{MaxRows: 8, Context: 48, InMemory: true},
			} {
				f := openFixture(t, name)
				m, err := engine.FromFile(f, cpu.New(2), o)
				if err != nil {
					var me *engine.MemoryError
					if o.Budget > 0 && errors.As(err, &me) {
						continue // the private memory alone exceeds the tiny budget
					}
					t.Fatal(err)
				}
				got := runGreedy(t, m, prompt, 6)
				w := m.Weights
				m.Close()
				if (w.Packed != "") == o.InMemory {
					t.Errorf("%+v: packed file %q", o, w.Packed)
				}
				if w.Prefetching != (o.Prefetch == engine.PrefetchOn || o.Budget > 0 && w.Streaming) {
					t.Errorf("%+v: prefetching %v (streaming %v)", o, w.Prefetching, w.Streaming)
				}
				for i := range want {
					sameBits(t, name, got[i], want[i])
				}
			}
		})
	}
}

// A load that does not fit is refused before anything is allocated, with the numbers.
func TestMemoryRefused(t *testing.T) {
	f := openFixture(t, "small-llama-q4_k_m")
	defer f.Close()
	for _, o := range []engine.LoadOptions{
		{MaxRows: 8, Context: 100_000_000, Sessions: 1},
		{MaxRows: 8, Context: 1000, Sessions: 1 << 20},
		{MaxRows: 8, Context: 512, Budget: 1 << 20},
	} {
		_, err := engine.FromFile(f, cpu.New(1), o)
		var me *engine.MemoryError
		if !errors.As(err, &me) || !errors.Is(err, engine.ErrMemory) {
			t.Fatalf("%+v: %v, want a MemoryError", o, err)
		}
		if me.Need <= me.Have || me.Parts[0].Bytes <= 0 || !strings.Contains(err.Error(), "K/V cache") {
			t.Errorf("%+v: %v", o, err)
		}
		if me.MaxContext > 0 && o.Budget > 0 {
			// the largest context it names does fit
			o.Context = me.MaxContext
			m, err := engine.FromFile(f, cpu.New(1), o)
			if err != nil {
				t.Fatalf("the context the error names, %d: %v", me.MaxContext, err)
			}
			m.Engine.Executor().Close()
		}
		t.Log(err)
	}
}

// The footprint's parts add up to what the executor allocates.
func TestFootprint(t *testing.T) {
	for _, name := range []string{"tiny-llama-q8_0", "tiny-q35moe-q4_0", "tiny-llama-tied-f32"} {
		f, err := fixtures.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 8, Context: 40, Sessions: 2})
		if err != nil {
			t.Fatal(err)
		}
		fp := m.Weights.Footprint
		c := m.Engine.Executor().(*exec.Executor).Backend().(*cpu.Backend)
		if fp.Private() != fp.Total() || fp.Mapped() != 0 {
			t.Errorf("%s in memory: %+v", name, fp)
		}
		if got := c.Allocated(); got < fp.KV+fp.States+fp.Scratch {
			t.Errorf("%s: allocated %d < K/V %d + states %d + scratch %d", name, got, fp.KV, fp.States, fp.Scratch)
		}
		if fp.KVPerSlot*int64(2*40+8) != fp.KV {
			t.Errorf("%s: K/V %d, %d per slot", name, fp.KV, fp.KVPerSlot)
		}
		m.Close()
	}
}
