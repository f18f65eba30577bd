package bench

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCompareLogits(t *testing.T) {
	const vocab, rows = 50, 4
	rng := rand.New(rand.NewPCG(3, 4))
	a := make([]float32, vocab*rows)
	for i := range a {
		a[i] = float32(rng.NormFloat64() * 3)
	}
	same, err := CompareLogits(a, append([]float32(nil), a...), vocab)
	if err != nil {
		t.Fatal(err)
	}
	if same.Identical != rows || same.Differing != 0 || same.FirstRow != -1 || same.MaxULP != 0 || same.NMSE != 0 ||
		same.Top1 != rows || same.KLDMax != 0 || same.ULPHist[0] != vocab*rows {
		t.Errorf("identical inputs: %+v", same)
	}

	b := append([]float32(nil), a...)
	b[vocab+7] = math.Nextafter32(b[vocab+7], float32(math.Inf(1)))         // 1 ulp
	b[2*vocab+3] = math.Float32frombits(math.Float32bits(b[2*vocab+3]) + 9) // 9 ulps
	b[3*vocab] = float32(math.NaN())
	d, err := CompareLogits(a, b, vocab)
	if err != nil {
		t.Fatal(err)
	}
	if d.Identical != 1 || d.Differing != 3 || d.FirstRow != 1 || d.FirstCol != 7 || d.MaxULP != 9 {
		t.Errorf("drift: %+v", d)
	}
	if d.ULPHist[1] != 1 || d.ULPHist[3] != 1 || d.ULPHist[len(d.ULPHist)-1] != 1 || !math.IsInf(d.NMSE, 1) {
		t.Errorf("histogram %v, nmse %v", d.ULPHist, d.NMSE)
	}
	if ulps(0, float32(math.Copysign(0, -1))) != 1 {
		t.Error("+0 and −0 are not one apart")
	}

	// KL divergence and Δp against a direct float64 computation.
	c := make([]float32, vocab)
	e := make([]float32, vocab)
	for i := range c {
		c[i] = float32(rng.NormFloat64())
		e[i] = c[i] + float32(0.1*rng.NormFloat64())
	}
	e[0] = c[0] + 5 // moves mass
	d, err = CompareLogits(c, e, vocab)
	if err != nil {
		t.Fatal(err)
	}
	p, q := softmax64(c), softmax64(e)
	kl := 0.0
	for i := range p {
		kl += p[i] * math.Log(p[i]/q[i])
	}
	top := argmax(c)
	if math.Abs(d.KLDMean-kl) > 1e-12*math.Max(1, kl) || d.KLDMax != d.KLDMean || math.Abs(d.DeltaPMax-math.Abs(p[top]-q[top])) > 1e-12 {
		t.Errorf("kld %v (want %v), Δp %v (want %v)", d.KLDMean, kl, d.DeltaPMax, math.Abs(p[top]-q[top]))
	}
	want := 0
	if argmax(e) == top {
		want = 1
	}
	if d.Top1 != want {
		t.Errorf("top-1 agreement %d, argmaxes %d %d", d.Top1, top, argmax(e))
	}

	for _, bad := range []struct {
		a, b  []float32
		vocab int
		want  string
	}{
		{a, b[:10], vocab, "values against"},
		{a, b, 0, "vocabulary"},
		{a[:7], b[:7], vocab, "whole rows"},
		{nil, nil, vocab, "whole rows"},
	} {
		if _, err := CompareLogits(bad.a, bad.b, bad.vocab); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("error %v, want %q", err, bad.want)
		}
	}
}

func softmax64(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	out := make([]float64, len(x))
	s := 0.0
	for i, v := range x {
		out[i] = math.Exp(float64(v) - m)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}
