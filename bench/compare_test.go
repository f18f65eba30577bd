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

// Compare pairs rows by model, backend and workload, and tells a real change from noise:
// a 20 % faster decode over 8 samples of 2 % noise is significant, two draws of the same
// distribution are not; verify time going down is an improvement.
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
	base := []Result{row(100, 30), {Model: "other"}}
	cs := Compare(base, []Result{row(120, 25)})
	if len(cs) != 3 {
		t.Fatalf("%d comparisons, want 3", len(cs))
	}
	byName := map[string]Comparison{}
	for _, c := range cs {
		byName[c.Metric] = c
	}
	if d := byName["decode tok/s"]; !d.Significant(0.01, 0.05) || !d.Better || math.Abs(d.Change-0.2) > 0.05 {
		t.Errorf("decode +20 %%: %+v", d)
	}
	if v := byName["verify ms/tree"]; !v.Significant(0.01, 0.05) || !v.Better {
		t.Errorf("verify −17 %%: %+v", v)
	}
	if p := byName["prefill tok/s"]; p.Significant(0.01, 0.02) {
		t.Errorf("prefill, the same distribution twice, called significant: %+v", p)
	}
	if !math.IsNaN(welch([]float64{1}, []float64{1, 2})) || welch([]float64{1, 1}, []float64{1, 1}) != 1 {
		t.Error("welch edge cases")
	}

	// results round-trip through both formats
	var js, jl bytes.Buffer
	json.NewEncoder(&js).Encode(base)
	enc := json.NewEncoder(&jl)
	for _, b := range base {
		enc.Encode(b)
	}
	for _, buf := range []*bytes.Buffer{&js, &jl} {
		got, err := ReadResults(buf)
		if err != nil || len(got) != 2 || got[0].DecodeTPS != base[0].DecodeTPS {
			t.Errorf("read back %d rows, %v", len(got), err)
		}
	}
	if _, err := ReadResults(bytes.NewBufferString("{not json")); err == nil {
		t.Error("bad results accepted")
	}
}
