package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

func samples(r *rand.Rand, n int, mean, sd float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mean + sd*r.NormFloat64()
	}
	return out
}

// Compare pairs tests by model, backend and settings, and tells a real change from noise:
// a 20 % faster decode over 8 samples of 2 % noise is significant, two draws of the same
// distribution are not; tree verification getting faster is an improvement. Records of
// earlier versions (rates, no times) read as their tests.
func TestCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	row := func(decode, verify float64) Result {
		res := Result{Model: "m", Backend: "cpu", Prompt: 128, Decoded: 32, TreeNodes: 8,
			PrefillSamples: samples(r, 8, 300, 6), DecodeSamples: samples(r, 8, decode, decode*0.02),
			VerifySamples: samples(r, 8, verify, verify*0.02)}
		res.PrefillTPS, res.PrefillSD = meanSD(res.PrefillSamples)
		res.DecodeTPS, res.DecodeTPSSD = meanSD(res.DecodeSamples)
		res.VerifyMS, res.VerifySD = meanSD(res.VerifySamples)
		return res
	}
	// an earlier version's records, through JSON and JSON lines
	base := []Result{row(100, 30), {Model: "other", Prompt: 1, PrefillSamples: []float64{1}}}
	var js, jl bytes.Buffer
	json.NewEncoder(&js).Encode(base)
	enc := json.NewEncoder(&jl)
	for _, b := range base {
		enc.Encode(b)
	}
	var baseTests []Test
	for _, buf := range []*bytes.Buffer{&js, &jl} {
		got, err := ReadTests(buf)
		if err != nil || len(got) != 4 || got[1].Name() != "tg32 @ d128" || math.Abs(got[1].AvgTS-base[0].DecodeTPS) > 1e-6*base[0].DecodeTPS {
			t.Fatalf("read back %d tests, %v: %+v", len(got), err, got)
		}
		baseTests = got
	}
	cs := Compare(baseTests, Tests(row(120, 25).withTimes(), TestOptions{Model: ModelInfo{Filename: "m"}}))
	if len(cs) != 3 {
		t.Fatalf("%d comparisons, want 3", len(cs))
	}
	byName := map[string]Comparison{}
	for _, c := range cs {
		byName[c.Metric] = c
	}
	if d := byName["tg32 @ d128 t/s"]; !d.Significant(0.01, 0.05) || !d.Better || math.Abs(d.Change-0.2) > 0.05 {
		t.Errorf("decode +20 %%: %+v", d)
	}
	if v := byName["tv8 @ d160 t/s"]; !v.Significant(0.01, 0.05) || !v.Better {
		t.Errorf("verify −17 %% in time: %+v", v)
	}
	if p := byName["pp128 t/s"]; p.Significant(0.01, 0.02) {
		t.Errorf("prefill, the same distribution twice, called significant: %+v", p)
	}
	if !math.IsNaN(welch([]float64{1}, []float64{1, 2})) || welch([]float64{1, 1}, []float64{1, 1}) != 1 {
		t.Error("welch edge cases")
	}
	for _, bad := range []string{"{not json", `[{"model": "m"}]`} {
		if _, err := ReadTests(bytes.NewBufferString(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
