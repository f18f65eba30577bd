package ptxvm_test

import (
	"testing"

	"verity/device"
	"verity/device/ptxvm"
	"verity/fixtures"
)

// The megakernel's PTX, interpreted, reproduces the goldens of dense and qwen35moe fixtures
// bit for bit: every step — prefill, tree verify, decode — one launch of the
// persistent kernel, its SMs waiting on each other's completion counters.
func TestMegakernelGoldens(t *testing.T) {
	want, err := fixtures.Goldens()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fixture string
		sms     int
	}{{"tiny-llama-q8_0", 3}, {"tiny-q35moe-q4_0", 2}, {"small-llama-q4_k_m", 2}} { // the last: q8_K activations, a body that has its block to itself
		t.Run(c.fixture, func(t *testing.T) {
			file, err := fixtures.Bytes(c.fixture)
			if err != nil {
				t.Fatal(err)
			}
			b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: c.sms, NoRaceCheck: true}})
			defer b.Close()
			g, err := fixtures.ComputeGoldenSplit(file, []device.Backend{b}, nil, fixtures.GoldenOptions{Megakernel: true, SMs: c.sms})
			if err != nil {
				t.Fatal(err)
			}
			if d := g.Diff(want[c.fixture]); len(d) > 0 {
				t.Errorf("%v differ from the golden", d)
			}
			// one launch of sms blocks per step (18 steps), where op-by-op launches run thousands
			st := b.Stats()
			t.Logf("%d blocks, %d warp instructions", st.Blocks, st.WarpInstructions)
			if st.Blocks != int64(18*c.sms) {
				t.Errorf("%d blocks ran, want 18 steps × %d SMs", st.Blocks, c.sms)
			}
		})
	}
}
