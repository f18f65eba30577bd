package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Comparison is one test of one benchmark row measured twice (a base and a new run).
type Comparison struct {
	Model, Backend string
	Metric         string  // the test and its unit: "pp128 t/s", "tg32 @ d128 t/s", "tv8 @ d160 t/s"
	Base, New      float64 // means
	BaseSD, NewSD  float64
	Change         float64 // relative change of the mean, new/base − 1
	Better         bool    // the change is an improvement (more tokens or tree nodes per second)
	// P is the two-sided p-value of Welch's t-test on the repetitions' samples (NaN with
	// fewer than two samples on a side): how likely a difference this large is by chance.
	P float64
}

// Significant reports whether the change is real at level alpha and at least minChange in
// size (a relative change, e.g. 0.02).
func (c Comparison) Significant(alpha, minChange float64) bool {
	return c.P < alpha && math.Abs(c.Change) >= minChange
}

// Compare matches the tests of new with those of base run on the same model, backend, thread
// count and settings, and compares their rates (t/s: tokens, for tv tree nodes, per second).
func Compare(base, new []Test) []Comparison {
	key := func(t Test) string {
		return fmt.Sprintf("%s|%s|%s|%d|%s|%s|%s|%t", t.Model, t.Backends, t.Backend, t.NThreads, t.Name(), t.TypeK, t.TypeV, t.Megakernel)
	}
	old := map[string]Test{}
	for _, t := range base {
		old[key(t)] = t
	}
	var out []Comparison
	for _, n := range new {
		b, ok := old[key(n)]
		if !ok {
			continue
		}
		backend := n.Backend
		if backend == "" {
			backend = n.Backends
		}
		c := Comparison{Model: n.Model, Backend: backend, Metric: n.Name() + " t/s", Base: b.AvgTS, New: n.AvgTS,
			BaseSD: b.StddevTS, NewSD: n.StddevTS, P: welch(b.SamplesTS, n.SamplesTS)}
		if b.AvgTS != 0 {
			c.Change = n.AvgTS/b.AvgTS - 1
		}
		c.Better = c.Change > 0
		out = append(out, c)
	}
	return out
}

// welch is the two-sided p-value of Welch's t-test for a difference between the means of a
// and b (NaN with fewer than two samples on either side; 0 or 1 when both are constant).
func welch(a, b []float64) float64 {
	if len(a) < 2 || len(b) < 2 {
		return math.NaN()
	}
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	sa, sb := va/float64(len(a)), vb/float64(len(b))
	if sa+sb == 0 {
		if ma == mb {
			return 1
		}
		return 0
	}
	t := (ma - mb) / math.Sqrt(sa+sb)
	df := (sa + sb) * (sa + sb) / (sa*sa/float64(len(a)-1) + sb*sb/float64(len(b)-1))
	return 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.CDF(-math.Abs(t))
}

// ReadTests reads benchmark rows: llama-bench's and verity bench's -o json (an array) or
// jsonl (one row per line), and the result records of verity bench --json-out and of earlier
// versions' --format json and jsonl (each record's pp, tg and tv tests). A llama-bench row's
// model is its file's base name.
func ReadTests(r io.Reader) ([]Test, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	text := strings.TrimSpace(string(data))
	var raws []json.RawMessage
	if strings.HasPrefix(text, "[") {
		if err := json.Unmarshal([]byte(text), &raws); err != nil {
			return nil, fmt.Errorf("bench: results: %w", err)
		}
	} else {
		dec := json.NewDecoder(strings.NewReader(text))
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, fmt.Errorf("bench: results, row %d: %w", len(raws)+1, err)
			}
			raws = append(raws, raw)
		}
	}
	var out []Test
	for i, raw := range raws {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(raw, &keys); err != nil {
			return nil, fmt.Errorf("bench: results, row %d: %w", i+1, err)
		}
		if _, ok := keys["n_prompt"]; ok {
			var t Test
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, fmt.Errorf("bench: results, row %d: %w", i+1, err)
			}
			if t.Model == "" {
				t.Model = filepath.Base(t.ModelFilename)
			}
			if t.Kind == "" {
				t.Kind = map[bool]string{true: "pp", false: "tg"}[t.NGen == 0]
				if t.NPrompt > 0 && t.NGen > 0 {
					t.Kind = "pg"
				}
			}
			out = append(out, t)
			continue
		}
		if _, ok := keys["prefill_tok_s"]; !ok {
			return nil, fmt.Errorf("bench: results, row %d: neither a test row (n_prompt) nor a result record (prefill_tok_s)", i+1)
		}
		var res Result
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("bench: results, row %d: %w", i+1, err)
		}
		for _, t := range Tests(res.withTimes(), TestOptions{Model: ModelInfo{Filename: res.Model}}) {
			t.CPUInfo = res.Host.CPU // the record's machine, not this one
			out = append(out, t)
		}
	}
	return out, nil
}

// withTimes fills in the nanosecond samples of a record written before it carried them, from
// its rates.
func (r Result) withTimes() Result {
	ns := func(xs []float64, f func(float64) float64) []int64 {
		out := make([]int64, 0, len(xs))
		for _, x := range xs {
			if x > 0 {
				out = append(out, int64(f(x)))
			}
		}
		return out
	}
	if len(r.PrefillNS) == 0 && r.Prompt > 0 {
		r.PrefillNS = ns(r.PrefillSamples, func(tps float64) float64 { return 1e9 * float64(r.Prompt) / tps })
	}
	if len(r.DecodeNS) == 0 && r.Decoded > 0 {
		r.DecodeNS = ns(r.DecodeSamples, func(tps float64) float64 { return 1e9 * float64(r.Decoded) / tps })
	}
	if len(r.VerifyNS) == 0 {
		r.VerifyNS = ns(r.VerifySamples, func(ms float64) float64 { return 1e6 * ms })
	}
	if r.TreeNodes == 0 {
		r.TreeNodes = 8
	}
	return r
}
