package kernels_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/host/quant"
)

func readI32(t testing.TB, b device.Backend, p device.Ptr, n int) []int32 {
	t.Helper()
	out := make([]int32, n)
	if err := b.Read(device.I32Bytes(out), p); err != nil {
		t.Fatal(err)
	}
	return out
}

func route(t *testing.T, b device.Backend, logits []float32, ne, k int) ([]int32, []float32) {
	t.Helper()
	rows := len(logits) / ne
	args := kernels.RouterArgs{Logits: f32Ptr(t, b, logits), Ids: zeros(t, b, rows*k), Weights: zeros(t, b, rows*k),
		Rows: int32(rows), NExpert: int32(ne), K: int32(k)}
	if err := device.Launch(b, kernels.Router, args); err != nil {
		t.Fatal(err)
	}
	return readI32(t, b, args.Ids, rows*k), readF32(t, b, args.Weights, rows*k)
}

func TestRouterAgainstFloat64(t *testing.T) {
	b1, b3 := cpu.New(1), cpu.New(3)
	defer b1.Close()
	defer b3.Close()
	r := rand.New(rand.NewPCG(31, 1))
	for _, c := range []struct{ rows, ne, k int }{{1, 8, 2}, {7, 256, 8}, {3, 33, 1}, {2, 5, 5}, {4, 512, 10}} {
		t.Run(fmt.Sprintf("rows=%d/experts=%d/k=%d", c.rows, c.ne, c.k), func(t *testing.T) {
			logits := randF32(r, c.rows*c.ne, 3)
			ids, w := route(t, b3, logits, c.ne, c.k)
			var maxErr float64
			for row := 0; row < c.rows; row++ {
				l := logits[row*c.ne : (row+1)*c.ne]
				p := make([]float64, c.ne)
				m := math.Inf(-1)
				for _, v := range l {
					m = math.Max(m, float64(v))
				}
				var sum float64
				for i, v := range l {
					p[i] = math.Exp(float64(v) - m)
					sum += p[i]
				}
				order := make([]int, c.ne)
				for i := range order {
					order[i] = i
				}
				sort.SliceStable(order, func(i, j int) bool { return p[order[i]] > p[order[j]] })
				var top float64
				for _, e := range order[:c.k] {
					top += p[e] / sum
				}
				for k, e := range order[:c.k] {
					if got := ids[row*c.k+k]; int(got) != e {
						t.Fatalf("row %d rank %d: expert %d, want %d", row, k, got, e)
					}
					want := p[e] / sum / top
					maxErr = math.Max(maxErr, math.Abs(float64(w[row*c.k+k])-want)/want)
				}
			}
			if maxErr > 1e-6 {
				t.Errorf("weights: relative error %.3g", maxErr)
			}
			ids1, w1 := route(t, b1, logits, c.ne, c.k)
			sameBits(t, "weights with 1 worker", w1, w)
			for i := range ids {
				if ids[i] != ids1[i] {
					t.Fatalf("slot %d: expert %d with 3 workers, %d with 1", i, ids[i], ids1[i])
				}
			}
		})
	}
}

func TestRouterTies(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	// equal logits give equal probabilities: the lower expert index ranks first
	ids, w := route(t, b, []float32{1, 3, 3, 2, 3, -1}, 6, 4)
	if want := []int32{1, 2, 4, 3}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if w[0] != w[1] || w[1] != w[2] || !(w[2] > w[3]) {
		t.Errorf("weights %v: the three tied experts must weigh the same, more than the fourth", w)
	}
	ids, w = route(t, b, []float32{0, 0, 0, 0}, 4, 2)
	if ids[0] != 0 || ids[1] != 1 || w[0] != 0.5 || w[1] != 0.5 {
		t.Errorf("uniform logits: ids %v weights %v, want [0 1] [0.5 0.5]", ids, w)
	}
}

func TestRouterBadArguments(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	logits := f32Ptr(t, b, make([]float32, 16))
	out := zeros(t, b, 16)
	for _, c := range []struct {
		name string
		a    kernels.RouterArgs
	}{
		{"k above the expert count", kernels.RouterArgs{Logits: logits, Ids: out, Weights: out, Rows: 2, NExpert: 8, K: 9}},
		{"zero k", kernels.RouterArgs{Logits: logits, Ids: out, Weights: out, Rows: 2, NExpert: 8, K: 0}},
		{"short logits", kernels.RouterArgs{Logits: logits, Ids: out, Weights: out, Rows: 3, NExpert: 8, K: 2}},
		{"short ids", kernels.RouterArgs{Logits: logits, Ids: zeros(t, b, 1), Weights: out, Rows: 2, NExpert: 8, K: 2}},
	} {
		if err := device.Launch(b, kernels.Router, c.a); err == nil {
			t.Errorf("%s accepted", c.name)
		}
	}
}

// moeCase is a quantised expert tensor with activations already converted to the weight
// type's activation format.
type moeCase struct {
	f                   *kernels.Format
	ne, out, cols, n, k int
	rb, xb, stride      int    // stride: bytes per packed expert matrix
	w, x                []byte // ne·out weight rows; n·k activation rows
	ids                 []int32
	xVals               []float32
	expertW, actW, idsP device.Ptr
}

func newMoECase(t *testing.T, b device.Backend, wt dtype.Type, ne, out, cols, n, k int, seed uint64) *moeCase {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	f, err := kernels.Lookup(wt)
	if err != nil {
		t.Fatal(err)
	}
	qf, err := quant.Lookup(wt)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := wt.RowBytes(int64(cols))
	c := &moeCase{f: f, ne: ne, out: out, cols: cols, n: n, k: k, rb: int(rb), xb: f.Act.RowBytes(cols)}
	c.w = make([]byte, ne*out*c.rb)
	for i := 0; i < ne*out; i++ {
		qf.Quantize(c.w[i*c.rb:(i+1)*c.rb], randF32(r, cols, 1/math.Sqrt(float64(cols))))
	}
	c.xVals = randF32(r, n*k*cols, 1)
	c.x = make([]byte, n*k*c.xb)
	for i := 0; i < n*k; i++ {
		kernels.ConvertRow(f.Act, c.x[i*c.xb:(i+1)*c.xb], c.xVals[i*cols:(i+1)*cols])
	}
	c.ids = make([]int32, n*k)
	for tok := 0; tok < n; tok++ {
		perm := r.Perm(ne)
		for j := 0; j < k; j++ {
			c.ids[tok*k+j] = int32(perm[j])
		}
	}
	c.expertW, c.actW, c.idsP = upload(t, b, packed(t, wt, c.w, int64(cols), int64(out), int64(ne))), upload(t, b, c.x), i32Ptr(t, b, c.ids)
	l, err := kernels.WeightLayout(wt, int64(cols), int64(out), int64(ne))
	if err != nil {
		t.Fatal(err)
	}
	c.stride = int(l.ExpertStride)
	return c
}

func (c *moeCase) args(y device.Ptr, perSlot bool) kernels.MoEMatVecArgs {
	a := kernels.MoEMatVecArgs{W: c.expertW, X: c.actW, Ids: c.idsP, Y: y,
		N: int32(c.n), K: int32(c.k), Out: int32(c.out), Cols: int32(c.cols), NExpert: int32(c.ne)}
	if perSlot {
		a.XPerSlot = 1
	}
	return a
}

func (c *moeCase) run(t *testing.T, b device.Backend, perSlot bool) []float32 {
	t.Helper()
	k, err := kernels.MoEMatVec(c.f.Type)
	if err != nil {
		t.Fatal(err)
	}
	y := zeros(t, b, c.n*c.k*c.out)
	if err := device.Launch(b, k, c.args(y, perSlot)); err != nil {
		t.Fatal(err)
	}
	return readF32(t, b, y, c.n*c.k*c.out)
}

// Every slot's rows have exactly the bits of the plain matvec of the slot's expert matrix with
// the slot's activation row; the worker count does not matter.
func TestMoEMatVecEqualsMatVec(t *testing.T) {
	b1, b3 := cpu.New(1), cpu.New(3)
	defer b1.Close()
	defer b3.Close()
	for _, wt := range kernels.WeightTypes() {
		t.Run("type="+wt.String(), func(t *testing.T) {
			c := newMoECase(t, b3, wt, 6, 9, 256, 3, 2, uint64(wt)+1)
			c1 := newMoECase(t, b1, wt, 6, 9, 256, 3, 2, uint64(wt)+1) // the same case on another backend
			mv, err := kernels.MatVec(wt)
			if err != nil {
				t.Fatal(err)
			}
			for _, perSlot := range []bool{false, true} {
				got := c.run(t, b3, perSlot)
				sameBits(t, "1 worker", c1.run(t, b1, perSlot), got)
				for s, e := range c.ids {
					xr := s / c.k
					if perSlot {
						xr = s
					}
					y := zeros(t, b3, c.out)
					a := kernels.MatVecArgs{W: c.expertW + device.Ptr(int(e)*c.stride), X: c.actW + device.Ptr(xr*c.xb), Y: y,
						Rows: int32(c.out), Cols: int32(c.cols), N: 1}
					if err := device.Launch(b3, mv, a); err != nil {
						t.Fatal(err)
					}
					sameBits(t, fmt.Sprintf("per-slot=%v slot %d (expert %d)", perSlot, s, e), got[s*c.out:(s+1)*c.out], readF32(t, b3, y, c.out))
				}
			}
		})
	}
}

func TestMoEMatVecAgainstFloat64(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	c := newMoECase(t, b, dtype.F32, 8, 16, 512, 2, 3, 5)
	got := c.run(t, b, false)
	want := make([]float64, len(got))
	wv := device.AsF32(c.w)
	for s, e := range c.ids {
		x := c.xVals[(s/c.k)*c.cols:]
		for o := 0; o < c.out; o++ {
			row := wv[(int(e)*c.out+o)*c.cols:]
			for i := 0; i < c.cols; i++ {
				want[s*c.out+o] += float64(row[i]) * float64(x[i])
			}
		}
	}
	if e := relErr(got, want); e > 2e-6 {
		t.Errorf("relative error %.3g", e)
	}
}

func TestMoEMatVecEveryWeightType(t *testing.T) {
	entries := map[string]bool{}
	for _, k := range device.Kernels() {
		entries[k.Entry()] = true
	}
	for _, wt := range kernels.WeightTypes() {
		k, err := kernels.MoEMatVec(wt)
		if err != nil {
			t.Errorf("%s: %v", wt, err)
			continue
		}
		if !entries[k.Entry()] {
			t.Errorf("%s: %s is not registered", wt, k.Entry())
		}
	}
	if _, err := kernels.MoEMatVec(dtype.Q8_K); !errors.Is(err, device.ErrUnsupported) {
		t.Errorf("q8_K weights: got %v, want ErrUnsupported", err)
	}
}

func TestMoEMatVecBadArguments(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	c := newMoECase(t, b, dtype.Q8_0, 4, 4, 64, 2, 2, 9)
	k, _ := kernels.MoEMatVec(dtype.Q8_0)
	y := zeros(t, b, 2*2*4)
	if err := device.Launch(b, k, c.args(y, false)); err != nil {
		t.Fatalf("good arguments rejected: %v", err)
	}
	small := zeros(t, b, 4)
	for _, cs := range []struct {
		name string
		edit func(a *kernels.MoEMatVecArgs)
	}{
		{"expert id past the end", func(a *kernels.MoEMatVecArgs) { a.Ids = i32Ptr(t, b, []int32{0, 1, 4, 2}) }},
		{"negative expert id", func(a *kernels.MoEMatVecArgs) { a.Ids = i32Ptr(t, b, []int32{0, -1, 3, 2}) }},
		{"k above the expert count", func(a *kernels.MoEMatVecArgs) { a.K, a.N = 5, 1 }},
		{"short expert tensor", func(a *kernels.MoEMatVecArgs) { a.NExpert = 5 }},
		{"short activations", func(a *kernels.MoEMatVecArgs) { a.XPerSlot = 1; a.X = c.actW + device.Ptr(c.xb) }},
		{"short output", func(a *kernels.MoEMatVecArgs) { a.Y = small }},
		{"row not whole blocks", func(a *kernels.MoEMatVecArgs) { a.Cols = 48 }},
	} {
		a := c.args(y, false)
		cs.edit(&a)
		if err := device.Launch(b, k, a); err == nil {
			t.Errorf("%s accepted", cs.name)
		} else {
			t.Logf("%s: %v", cs.name, err)
		}
	}
}

func TestMoECombine(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	r := rand.New(rand.NewPCG(41, 1))
	for _, c := range []struct{ n, k, width int }{{1, 2, 64}, {3, 8, 300}, {2, 1, 33}} {
		for _, withShared := range []bool{false, true} {
			t.Run(fmt.Sprintf("n=%d/k=%d/width=%d/shared=%v", c.n, c.k, c.width, withShared), func(t *testing.T) {
				y, w := randF32(r, c.n*c.k*c.width, 1), randF32(r, c.n*c.k, 0.5)
				sh, g := randF32(r, c.n*c.width, 1), randF32(r, c.n, 2)
				args := kernels.MoECombineArgs{Y: f32Ptr(t, b, y), Weights: f32Ptr(t, b, w), Out: zeros(t, b, c.n*c.width),
					N: int32(c.n), K: int32(c.k), Width: int32(c.width)}
				if withShared {
					args.Shared, args.Gate = f32Ptr(t, b, sh), f32Ptr(t, b, g)
				}
				if err := device.Launch(b, kernels.MoECombine, args); err != nil {
					t.Fatal(err)
				}
				got := readF32(t, b, args.Out, c.n*c.width)
				want := make([]float64, len(got))
				for tok := 0; tok < c.n; tok++ {
					for i := 0; i < c.width; i++ {
						var s float64
						for e := 0; e < c.k; e++ {
							s += float64(w[tok*c.k+e]) * float64(y[(tok*c.k+e)*c.width+i])
						}
						if withShared {
							s += sigmoid64(float64(g[tok])) * float64(sh[tok*c.width+i])
						}
						want[tok*c.width+i] = s
					}
				}
				if e := relErr(got, want); e > 1e-6 {
					t.Errorf("relative error %.3g", e)
				}
				if withShared {
					// the output may overwrite the shared expert's row
					a := args
					a.Out = a.Shared
					if err := device.Launch(b, kernels.MoECombine, a); err != nil {
						t.Fatal(err)
					}
					sameBits(t, "in place over the shared expert", readF32(t, b, a.Out, c.n*c.width), got)
				}
			})
		}
	}
	buf := zeros(t, b, 64)
	for _, c := range []struct {
		name string
		a    kernels.MoECombineArgs
	}{
		{"shared expert without a gate", kernels.MoECombineArgs{Y: buf, Weights: buf, Shared: buf, Out: buf, N: 1, K: 1, Width: 4}},
		{"short expert outputs", kernels.MoECombineArgs{Y: buf, Weights: buf, Out: buf, N: 2, K: 8, Width: 8}},
		{"zero width", kernels.MoECombineArgs{Y: buf, Weights: buf, Out: buf, N: 1, K: 1}},
	} {
		if err := device.Launch(b, kernels.MoECombine, c.a); err == nil {
			t.Errorf("%s accepted", c.name)
		}
	}
}
