package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Comparison is one metric of one benchmark row measured twice (a base and a new run).
type Comparison struct {
	Model, Backend string
	Metric         string  // "prefill tok/s", "decode tok/s" or "verify ms/tree"
	Base, New      float64 // means
	BaseSD, NewSD  float64
	Change         float64 // relative change of the mean, new/base − 1
	Better         bool    // the change is an improvement (more tokens per second, fewer ms)
	// P is the two-sided p-value of Welch's t-test on the repetitions' samples (NaN with
	// fewer than two samples on a side): how likely a difference this large is by chance.
	P float64
}

// Significant reports whether the change is real at level alpha and at least minChange in
// size (a relative change, e.g. 0.02).
func (c Comparison) Significant(alpha, minChange float64) bool {
	return c.P < alpha && math.Abs(c.Change) >= minChange
}

// Compare matches the rows of new with those of base measured on the same model, backend
// and workload, and compares their prefill, decode and verify measurements.
func Compare(base, new []Result) []Comparison {
	key := func(r Result) string {
		return fmt.Sprintf("%s|%s|%d|%d|%d", r.Model, r.Backend, r.Prompt, r.Decoded, r.TreeNodes)
	}
	old := map[string]Result{}
	for _, r := range base {
		old[key(r)] = r
	}
	var out []Comparison
	for _, n := range new {
		b, ok := old[key(n)]
		if !ok {
			continue
		}
		for _, m := range []struct {
			name         string
			base, new    float64
			bsd, nsd     float64
			bs, ns       []float64
			higherBetter bool
		}{
			{"prefill tok/s", b.PrefillTPS, n.PrefillTPS, b.PrefillSD, n.PrefillSD, b.PrefillSamples, n.PrefillSamples, true},
			{"decode tok/s", b.DecodeTPS, n.DecodeTPS, b.DecodeTPSSD, n.DecodeTPSSD, b.DecodeSamples, n.DecodeSamples, true},
			{"verify ms/tree", b.VerifyMS, n.VerifyMS, b.VerifySD, n.VerifySD, b.VerifySamples, n.VerifySamples, false},
		} {
			c := Comparison{Model: n.Model, Backend: n.Backend, Metric: m.name, Base: m.base, New: m.new,
				BaseSD: m.bsd, NewSD: m.nsd, P: welch(m.bs, m.ns)}
			if m.base != 0 {
				c.Change = m.new/m.base - 1
			}
			c.Better = (c.Change > 0) == m.higherBetter
			out = append(out, c)
		}
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

// ReadResults reads benchmark rows written by verity bench --format json (an array) or
// --format jsonl (one row per line).
func ReadResults(r io.Reader) ([]Result, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	text := strings.TrimSpace(string(data))
	if strings.HasPrefix(text, "[") {
		var rows []Result
		if err := json.Unmarshal([]byte(text), &rows); err != nil {
			return nil, fmt.Errorf("bench: results: %w", err)
		}
		return rows, nil
	}
	var rows []Result
	dec := json.NewDecoder(strings.NewReader(text))
	for dec.More() {
		var row Result
		if err := dec.Decode(&row); err != nil {
			return nil, fmt.Errorf("bench: results, row %d: %w", len(rows)+1, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}
