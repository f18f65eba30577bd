package bench

import (
	"bytes"
	"math"
	"testing"

	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/gguf"
)

func TestRun(t *testing.T) {
	s, _ := fixtures.Lookup("tiny-llama-q8_0")
	var buf bytes.Buffer
	if _, err := fixtures.WriteTo(&buf, s, nil); err != nil {
		t.Fatal(err)
	}
	f, _ := gguf.Parse(buf.Bytes())
	m, err := engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 16, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := Run(m.Engine, s.Name, 1e9, Options{Prompt: 20, Decode: 4, Trees: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.PrefillTPS <= 0 || r.DecodeTPS <= 0 || r.VerifyMS <= 0 || r.BytesPerToken <= 0 || r.Fraction <= 0 {
		t.Errorf("result has empty measurements: %+v", r)
	}
	if r.Repetitions != 3 || len(r.PrefillSamples) != 3 || len(r.DecodeSamples) != 3 || len(r.VerifySamples) != 3 {
		t.Errorf("3 repetitions by default, got %d with samples %v %v %v", r.Repetitions, r.PrefillSamples, r.DecodeSamples, r.VerifySamples)
	}
	if r.Host.Go == "" || r.Host.Time == "" || r.Host.Device != r.Backend {
		t.Errorf("provenance %+v", r.Host)
	}
	// a decoded token reads every weight but the embedding table once, plus its KV history
	if min := float64(m.Program().WeightBytes()) - float64(len(m.Program().Tensors["token_embd.weight"].Data)); r.BytesPerToken < min {
		t.Errorf("bytes per token %.0f below the weight bytes %.0f", r.BytesPerToken, min)
	}
	if _, err := Run(m.Engine, s.Name, 1e9, Options{Prompt: 60, Decode: 10}); err == nil {
		t.Error("run past the context accepted")
	}
	r, err = Run(m.Engine, s.Name, 1e9, Options{Prompt: 8, Decode: 2, Trees: 2, Widths: []int{1, 3, 16}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Curve) != 3 || r.Curve[2].Nodes != 16 || r.Curve[1].MS <= 0 || r.Curve[1].MSPerNode != r.Curve[1].MS/3 {
		t.Errorf("verify curve %+v", r.Curve)
	}
	if _, err := Run(m.Engine, s.Name, 1e9, Options{Prompt: 8, Decode: 2, Widths: []int{17}}); err == nil {
		t.Error("a curve point past the step size accepted")
	}

	// The op profile: every op of a decode step, once per token, shares summing to 1, and the
	// cost model's bytes per token (at the mean context) in total.
	r, err = Run(m.Engine, s.Name, 1e9, Options{Prompt: 8, Decode: 2, Trees: 1, Repetitions: 1, Ops: 4})
	if err != nil {
		t.Fatal(err)
	}
	var share, calls, mb float64
	for _, o := range r.Ops {
		share, calls, mb = share+o.Share, calls+o.Calls, mb+o.MB
		if o.MS <= 0 || o.Calls <= 0 {
			t.Errorf("op %+v", o)
		}
	}
	// the steps attend to 9, 10, 11 and 12 keys: 10.5 on average
	want := float64(StepBytes(m.Program(), 1, 10)+StepBytes(m.Program(), 1, 11)) / 2
	if math.Abs(share-1) > 1e-9 || int(calls) != len(m.Program().Ops) || math.Abs(mb*1e6-want) > 1 {
		t.Errorf("profile: shares %v, %v calls for %d ops, %v MB vs %v bytes: %+v", share, calls, len(m.Program().Ops), mb, want, r.Ops)
	}
	if _, err := Run(m.Engine, s.Name, 1e9, Options{Prompt: 60, Decode: 1, Ops: 10}); err == nil {
		t.Error("a profile past the context accepted")
	}
}

func TestBandwidth(t *testing.T) {
	if bw := Bandwidth(1<<20, 2, 2); bw <= 0 {
		t.Errorf("bandwidth %g", bw)
	}
}

// Speculation with synthetic drafts generates decoding's tokens (Speculate checks), and its
// counts follow the acceptance profile: every draft right accepts whole chains, none right
// accepts nothing, a profile in between something in between.
func TestSpeculate(t *testing.T) {
	f, err := fixtures.Parse("tiny-qwen3-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 8, Context: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	const n = 41 // 40 after the prefill's
	for _, tc := range []struct {
		rates        []float64
		rounds       int
		accLo, accHi float64
	}{
		{[]float64{1, 1, 1, 1}, 8, 4, 4},    // 5 tokens a round
		{[]float64{0, 0, 0}, 40, 0, 0},      // 1 token a round
		{[]float64{1, 0.5, 0.5}, 0, 1, 2.9}, // between
	} {
		st, err := Speculate(m.Engine, prompt, n, tc.rates, 1)
		if err != nil {
			t.Fatal(err)
		}
		if (tc.rounds > 0 && st.Rounds != tc.rounds) || st.MeanAccepted < tc.accLo || st.MeanAccepted > tc.accHi ||
			st.TPS <= 0 || st.PlainTPS <= 0 || st.Drafted < st.Rounds {
			t.Errorf("rates %v: %+v", tc.rates, st)
		}
	}
	for _, bad := range [][]float64{nil, {1.5}, make([]float64, 8)} {
		if _, err := Speculate(m.Engine, prompt, n, bad, 1); err == nil {
			t.Errorf("rates %v accepted", bad)
		}
	}
	if _, err := Speculate(m.Engine, prompt, 90, []float64{1}, 1); err == nil {
		t.Error("a run past the context accepted")
	}
}

// Batched decoding runs every session's row in one step, and refuses more sessions than a
// step holds or the engine has room for.
func TestDecodeBatch(t *testing.T) {
	f, err := fixtures.Parse("tiny-llama-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.FromFile(f, cpu.New(1), engine.LoadOptions{MaxRows: 8, Context: 40, Sessions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompts := [][]int32{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}}
	bt, err := DecodeBatch(m.Engine, prompts, 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	if bt.Sessions != 4 || bt.Steps != 10 || bt.TPS <= 0 || bt.StepMS <= 0 || bt.Scaling != bt.TPS/100 || bt.PerSess != bt.TPS/4 {
		t.Errorf("%+v", bt)
	}
	if m.FreeSlots() != 4*40+8 {
		t.Errorf("%d slots free after the run, want all %d", m.FreeSlots(), 4*40+8)
	}
	for _, bad := range [][][]int32{nil, make([][]int32, 9), {make([]int32, 35)}} {
		if _, err := DecodeBatch(m.Engine, bad, 10, 0); err == nil {
			t.Errorf("%d sessions accepted", len(bad))
		}
	}
}
