package lora

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
	"verity/host/quant"
)

// Every grid reads the codes and steps the dequantiser uses: re-encoding the decoded codes
// gives the same bytes, and moving a code by one changes that element's value by its step
// and no other element's.
func TestGrids(t *testing.T) {
	want := []dtype.Type{dtype.Q4_0, dtype.Q4_1, dtype.Q5_0, dtype.Q5_1, dtype.Q8_0, dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K}
	if len(grids) != len(want) {
		t.Errorf("%d grids, want %d", len(grids), len(want))
	}
	for _, typ := range want {
		t.Run(typ.String(), func(t *testing.T) {
			g := grids[typ]
			if g == nil {
				t.Fatal("no grid")
			}
			f, _ := quant.Lookup(typ)
			bs, bb := typ.BlockSize(), typ.BlockBytes()
			r := rand.New(rand.NewPCG(uint64(typ), 1))
			q, st := make([]int32, bs), make([]float32, bs)
			v0, v1 := make([]float32, bs), make([]float32, bs)
			for trial := range 50 {
				x := make([]float32, bs)
				for i := range x {
					x[i] = float32(r.NormFloat64() * (1 + float64(trial)))
				}
				blk := make([]byte, bb)
				f.Quantize(blk, x)
				g.decode(blk, q, st)
				again := bytes.Clone(blk)
				g.encode(again, q)
				if !bytes.Equal(again, blk) {
					t.Fatalf("trial %d: re-encoding the decoded codes changed the block", trial)
				}
				f.Dequantize(v0, blk)
				for i := range bs {
					if q[i] < g.lo || q[i] > g.hi {
						t.Fatalf("code %d = %d outside %d…%d", i, q[i], g.lo, g.hi)
					}
					moved := slicesClone(q)
					dir := int32(1)
					if q[i] == g.hi {
						dir = -1
					}
					moved[i] += dir
					blk2 := bytes.Clone(blk)
					g.encode(blk2, moved)
					f.Dequantize(v1, blk2)
					for j := range bs {
						got := float64(v1[j]) - float64(v0[j])
						want := 0.0
						if j == i {
							want = float64(dir) * float64(st[i])
						}
						if tol := 1e-6 * (math.Abs(float64(v0[j])) + math.Abs(float64(st[i]))); math.Abs(got-want) > tol {
							t.Fatalf("trial %d: moving code %d by %d changed value %d by %g, want %g", trial, i, dir, j, got, want)
						}
					}
				}
			}
		})
	}
}

func slicesClone(q []int32) []int32 { return append([]int32(nil), q...) }

// The draws are uniform in [0, 1) and differ between tensors, rows and columns.
func TestUniform(t *testing.T) {
	h1, h2 := nameHash("blk.0.attn_q.weight"), nameHash("blk.0.attn_k.weight")
	var sum, sum2 float64
	n := 0
	same := 0
	for row := range 100 {
		for col := range 100 {
			u := uniform(h1, row, col)
			if u < 0 || u >= 1 {
				t.Fatalf("draw %g", u)
			}
			sum += u
			sum2 += u * u
			n++
			if u == uniform(h2, row, col) || u == uniform(h1, col, row) && row != col {
				same++
			}
		}
	}
	mean := sum / float64(n)
	if math.Abs(mean-0.5) > 0.01 || math.Abs(sum2/float64(n)-1.0/3) > 0.01 {
		t.Errorf("mean %g, second moment %g", mean, sum2/float64(n))
	}
	if same > 0 {
		t.Errorf("%d draws repeat across tensors or transposed positions", same)
	}
}

// Stochastic rounding is unbiased; nearest rounding rounds.
func TestRound(t *testing.T) {
	for _, x := range []float64{0.1, -0.1, 2.3, -7.75, 0} {
		var s float64
		const n = 20000
		for i := range n {
			s += float64(round(x, uniform(1, i, 0), Stochastic))
		}
		if m := s / n; math.Abs(m-x) > 0.02 {
			t.Errorf("stochastic mean of %g: %g", x, m)
		}
		if r := round(x, 0.3, Nearest); float64(r) != math.Round(x) {
			t.Errorf("nearest %g: %d", x, r)
		}
	}
	if r := round(1e300, 0, Stochastic); r != maxMove {
		t.Errorf("huge move %d", r)
	}
}
