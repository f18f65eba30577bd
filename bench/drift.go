package bench

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"
)

// Drift measures how far two logits matrices of the same shape ([Rows][Vocab] float32: two
// builds, two backends, Verity and llama.cpp) are apart: in bits, for regressions that must be
// exact, and as distributions, for intentional numeric changes.
type Drift struct {
	Rows      int   `json:"rows"`
	Vocab     int   `json:"vocab"`
	Identical int   `json:"identical_rows"`   // rows with every bit equal
	Differing int64 `json:"differing_values"` // values whose bits differ
	// FirstRow and FirstCol locate the first value that differs (−1 when none does).
	FirstRow int `json:"first_row"`
	FirstCol int `json:"first_col"`
	// MaxULP is the largest distance in units in the last place between finite values of
	// the same sign class (the float32 encodings ordered as integers); ULPHist counts values
	// by distance (ULPBuckets), the last bucket for differing values where either is a NaN or
	// an infinity. NMSE is +Inf when there is such a pair; identical non-finite values count
	// as equal and stay out of it.
	MaxULP  uint64  `json:"max_ulp"`
	ULPHist []int64 `json:"ulp_histogram"`
	MaxAbs  float64 `json:"max_abs_diff"`
	// NMSE is Σ(a−b)² / Σa² over the finite values.
	NMSE float64 `json:"nmse"`
	// Top1 counts rows whose argmax (first index of the maximum) agrees.
	Top1 int `json:"top1_agree"`
	// KL divergence of b's softmax from a's, per row in float64 (nats): mean, 99th
	// percentile and maximum; and the largest change of the probability of a's top token.
	KLDMean   float64 `json:"kld_mean"`
	KLDP99    float64 `json:"kld_p99"`
	KLDMax    float64 `json:"kld_max"`
	DeltaPMax float64 `json:"delta_p_max"`
}

// ULPBuckets are the upper bounds of ULPHist's buckets (distances 0, 1, 2–3, 4–15, 16–255,
// 256–65535, more); one more bucket follows for non-finite mismatches.
var ULPBuckets = []uint64{0, 1, 3, 15, 255, 65535, math.MaxUint64}

// ULPBucketNames label ULPHist's buckets.
var ULPBucketNames = []string{"0", "1", "2-3", "4-15", "16-255", "256-65535", ">65535", "non-finite"}

// ordered maps a float32's bits to an integer that increases with the value (−0 and +0
// adjacent, one apart).
func ordered(f float32) int64 {
	b := math.Float32bits(f)
	if b&0x80000000 != 0 {
		return -int64(b & 0x7FFFFFFF)
	}
	return int64(b) + 1
}

func ulps(a, b float32) uint64 {
	d := ordered(a) - ordered(b)
	if d < 0 {
		d = -d
	}
	return uint64(d)
}

// CompareLogits measures the drift of b from a, both [rows][vocab].
func CompareLogits(a, b []float32, vocab int) (Drift, error) {
	if vocab <= 0 {
		return Drift{}, fmt.Errorf("drift: vocabulary of %d", vocab)
	}
	if len(a) != len(b) {
		return Drift{}, fmt.Errorf("drift: %d values against %d", len(a), len(b))
	}
	if len(a) == 0 || len(a)%vocab != 0 {
		return Drift{}, fmt.Errorf("drift: %d values are not whole rows of %d", len(a), vocab)
	}
	d := Drift{Rows: len(a) / vocab, Vocab: vocab, FirstRow: -1, FirstCol: -1, ULPHist: make([]int64, len(ULPBuckets)+1)}
	var num, den float64
	klds := make([]float64, 0, d.Rows)
	pa, pb := make([]float64, vocab), make([]float64, vocab)
	for r := 0; r < d.Rows; r++ {
		ra, rb := a[r*vocab:(r+1)*vocab], b[r*vocab:(r+1)*vocab]
		same := true
		for i := range ra {
			x, y := ra[i], rb[i]
			if math.Float32bits(x) == math.Float32bits(y) {
				d.ULPHist[0]++
				if f := float64(x); !math.IsNaN(f) && !math.IsInf(f, 0) {
					den += f * f
				}
				continue
			}
			same = false
			d.Differing++
			if d.FirstRow < 0 {
				d.FirstRow, d.FirstCol = r, i
			}
			fx, fy := float64(x), float64(y)
			if math.IsNaN(fx) || math.IsNaN(fy) || math.IsInf(fx, 0) || math.IsInf(fy, 0) {
				d.ULPHist[len(ULPBuckets)]++ // different bits, one side (or both) not finite
				num = math.Inf(1)
				continue
			}
			u := ulps(x, y)
			d.MaxULP = max(d.MaxULP, u)
			d.ULPHist[sort.Search(len(ULPBuckets), func(k int) bool { return u <= ULPBuckets[k] })]++
			d.MaxAbs = max(d.MaxAbs, math.Abs(fx-fy))
			num += (fx - fy) * (fx - fy)
			den += fx * fx
		}
		if same {
			d.Identical++
		}
		ta, tb := argmax(ra), argmax(rb)
		if ta == tb {
			d.Top1++
		}
		logSoftmax(pa, ra)
		logSoftmax(pb, rb)
		kl := 0.0
		for i := range pa {
			if p := math.Exp(pa[i]); p > 0 {
				kl += p * (pa[i] - pb[i])
			}
		}
		klds = append(klds, kl)
		d.DeltaPMax = max(d.DeltaPMax, math.Abs(math.Exp(pa[ta])-math.Exp(pb[ta])))
	}
	if den > 0 {
		d.NMSE = num / den
	} else if num > 0 {
		d.NMSE = math.Inf(1)
	}
	d.KLDMean = stat.Mean(klds, nil)
	sort.Float64s(klds)
	d.KLDP99 = stat.Quantile(0.99, stat.Empirical, klds, nil)
	d.KLDMax = klds[len(klds)-1]
	return d, nil
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// logSoftmax writes log(softmax(x)) in float64 into dst.
func logSoftmax(dst []float64, x []float32) {
	for i, v := range x {
		dst[i] = float64(v)
	}
	m := floats.Max(dst)
	floats.AddConst(-m, dst)
	lse := floats.LogSumExp(dst)
	floats.AddConst(-lse, dst)
}
