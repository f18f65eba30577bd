package ptxvm_test

import (
	"math"
	"testing"
	"time"

	"verity/device"
	"verity/device/cpu"
	"verity/device/ptxvm"
	"verity/fixtures"
	"verity/host/engine"
)

// load builds a catalogue fixture in memory and an engine over it on backend b.
func load(tb testing.TB, name string, b device.Backend) *engine.Model {
	tb.Helper()
	f, err := fixtures.Parse(name)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := engine.FromFile(f, b, engine.LoadOptions{MaxRows: 8, Context: 32})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

var prompt = []int32{1, 5, 9, 100, 200, 7, 3, 42}

// A whole forward pass through the interpreted kernels — every op a PTX launch, no twin
// fallback — gives the CPU backend's logits bit for bit, for dense, quantised and hybrid
// recurrent/MoE models.
func TestForwardMatchesTwin(t *testing.T) {
	for _, c := range []struct {
		name   string
		tokens int
	}{{"tiny-llama-f32", 8}, {"tiny-qwen3-f32", 8}, {"tiny-llama-q8_0", 4}, {"tiny-q35moe-f32", 4}, {"tiny-q35moe-q4_0", 3}, {"small-llama-q4_k_m", 2}, {"tiny-gemma3-f32", 8}} {
		t.Run("model="+c.name, func(t *testing.T) {
			vm := ptxvm.New(ptxvm.Options{})
			got, err := load(t, c.name, vm).NewSession().Prefill(prompt[:c.tokens], true)
			if err != nil {
				t.Fatal(err)
			}
			want, err := load(t, c.name, cpu.New(1)).NewSession().Prefill(prompt[:c.tokens], true)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("position %d logit %d: %g, want %g", i, j, got[i][j], want[i][j])
					}
				}
			}
			st := vm.Stats()
			t.Logf("%d blocks, %d warp instructions, %d thread instructions", st.Blocks, st.WarpInstructions, st.ThreadInstructions)
			if tw := vm.TwinRuns(); len(tw) != 0 {
				t.Errorf("ops ran as twins, not PTX: %v", tw)
			}
		})
	}
}

// BenchmarkForward: one 8-token prefill of a tiny model through the interpreter; reports
// interpreted thread instructions per second.
func BenchmarkForward(b *testing.B) {
	for _, name := range []string{"tiny-llama-f32", "tiny-qwen3-f32"} {
		b.Run("model="+name, func(b *testing.B) {
			vm := ptxvm.New(ptxvm.Options{})
			m := load(b, name, vm)
			before := vm.Stats()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				s := m.NewSession()
				if _, err := s.Prefill(prompt, false); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			el := time.Since(start).Seconds()
			st := vm.Stats()
			b.ReportMetric(float64(st.ThreadInstructions-before.ThreadInstructions)/el/1e6, "Mthreadinstr/s")
			b.ReportMetric(float64(st.WarpInstructions-before.WarpInstructions)/el/1e6, "Mwarpinstr/s")
		})
	}
}
