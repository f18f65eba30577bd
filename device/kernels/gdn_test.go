package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/kernels"
	"verity/device/num"
)

// sameBits fails the test at the first value whose bits differ.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: index %d: %#08x (%g) != %#08x (%g)", what, i,
				math.Float32bits(got[i]), got[i], math.Float32bits(want[i]), want[i])
		}
	}
}

func i32Ptr(t testing.TB, b device.Backend, v []int32) device.Ptr {
	return upload(t, b, device.I32Bytes(v))
}

func f32Ptr(t testing.TB, b device.Backend, v []float32) device.Ptr {
	return upload(t, b, device.F32Bytes(v))
}

func zeros(t testing.TB, b device.Backend, n int) device.Ptr {
	t.Helper()
	p, err := b.Alloc(int64(4 * n))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
func silu64(x float64) float64    { return x * sigmoid64(x) }
func softplus64(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// recurrent is a kernel with per-slot state (the GDN conv or scan) over a fixed set of input
// rows: launch runs it over the chosen input rows with the given slot lists, starting from the
// given state buffer contents, and returns the outputs and the state buffer afterwards.
type recurrent struct {
	name      string
	slotSize  int // float32 values per state slot
	nInputs   int // input rows available
	outWidth  int
	randState func(r *rand.Rand, n int) []float32
	launch    func(t *testing.T, b device.Backend, rows []int, src, dst []int32, state []float32) (out, st []float32)
}

// convCase is a GDN conv problem: nIn input rows of c channels, kernel k.
type convCase struct {
	c, k int
	x, w []float32
}

func newConvCase(r *rand.Rand, c, k, nIn int) *convCase {
	return &convCase{c: c, k: k, x: randF32(r, nIn*c, 1), w: randF32(r, c*k, 0.5)}
}

func (cc *convCase) run(t *testing.T, b device.Backend, rows []int, src, dst []int32, state []float32) (out, st []float32) {
	t.Helper()
	x := make([]float32, 0, len(rows)*cc.c)
	for _, r := range rows {
		x = append(x, cc.x[r*cc.c:(r+1)*cc.c]...)
	}
	sp := f32Ptr(t, b, state)
	yp := zeros(t, b, len(rows)*cc.c)
	args := kernels.GDNConvArgs{X: f32Ptr(t, b, x), W: f32Ptr(t, b, cc.w), State: sp, Src: i32Ptr(t, b, src), Dst: i32Ptr(t, b, dst), Y: yp,
		Rows: int32(len(rows)), C: int32(cc.c), K: int32(cc.k), NStates: int32(len(state) / ((cc.k - 1) * cc.c))}
	if err := device.Launch(b, kernels.GDNConv, args); err != nil {
		t.Fatal(err)
	}
	return readF32(t, b, yp, len(rows)*cc.c), readF32(t, b, sp, len(state))
}

func (cc *convCase) recurrent(nIn int) recurrent {
	return recurrent{name: fmt.Sprintf("conv/c=%d/k=%d", cc.c, cc.k), slotSize: (cc.k - 1) * cc.c, nInputs: nIn, outWidth: cc.c,
		randState: func(r *rand.Rand, n int) []float32 { return randF32(r, n, 1) }, launch: cc.run}
}

// convRef is the conv of rows 0 … n−1 from a zero history, in float64.
func (cc *convCase) ref(n int) []float64 {
	out := make([]float64, n*cc.c)
	for t := 0; t < n; t++ {
		for ch := 0; ch < cc.c; ch++ {
			var s float64
			for j := 0; j < cc.k; j++ {
				if tt := t - (cc.k - 1) + j; tt >= 0 {
					s += float64(cc.w[ch*cc.k+j]) * float64(cc.x[tt*cc.c+ch])
				}
			}
			out[t*cc.c+ch] = silu64(s)
		}
	}
	return out
}

// scanCase is a GDN scan problem over nIn input rows.
type scanCase struct {
	nk, nv, d        int
	eps              float32
	qkv, beta, alpha []float32 // per input row
	ssmA, dtBias     []float32 // per v-head
	width            int       // (2·nk + nv)·d
}

func newScanCase(r *rand.Rand, nk, nv, d, nIn int) *scanCase {
	w := (2*nk + nv) * d
	sc := &scanCase{nk: nk, nv: nv, d: d, eps: 1e-6, width: w,
		qkv: randF32(r, nIn*w, 1), beta: randF32(r, nIn*nv, 1.5), alpha: randF32(r, nIn*nv, 1.5),
		ssmA: make([]float32, nv), dtBias: randF32(r, nv, 0.5)}
	for h := range sc.ssmA {
		sc.ssmA[h] = float32(-math.Exp(r.NormFloat64() * 0.5))
	}
	return sc
}

func (sc *scanCase) args(t *testing.T, b device.Backend, rows []int, src, dst []int32, sp, op device.Ptr, nStates int) kernels.GDNScanArgs {
	var qkv, beta, alpha []float32
	for _, r := range rows {
		qkv = append(qkv, sc.qkv[r*sc.width:(r+1)*sc.width]...)
		beta = append(beta, sc.beta[r*sc.nv:(r+1)*sc.nv]...)
		alpha = append(alpha, sc.alpha[r*sc.nv:(r+1)*sc.nv]...)
	}
	return kernels.GDNScanArgs{QKV: f32Ptr(t, b, qkv), Beta: f32Ptr(t, b, beta), Alpha: f32Ptr(t, b, alpha),
		A: f32Ptr(t, b, sc.ssmA), DtBias: f32Ptr(t, b, sc.dtBias), State: sp, Src: i32Ptr(t, b, src), Dst: i32Ptr(t, b, dst), Out: op,
		Rows: int32(len(rows)), NK: int32(sc.nk), NV: int32(sc.nv), D: int32(sc.d), NStates: int32(nStates), Eps: sc.eps}
}

func (sc *scanCase) run(t *testing.T, b device.Backend, rows []int, src, dst []int32, state []float32) (out, st []float32) {
	t.Helper()
	sp := f32Ptr(t, b, state)
	n := len(rows) * sc.nv * sc.d
	op := zeros(t, b, n)
	if err := device.Launch(b, kernels.GDNScan, sc.args(t, b, rows, src, dst, sp, op, len(state)/(sc.nv*sc.d*sc.d))); err != nil {
		t.Fatal(err)
	}
	return readF32(t, b, op, n), readF32(t, b, sp, len(state))
}

func (sc *scanCase) recurrent(nIn int) recurrent {
	return recurrent{name: fmt.Sprintf("scan/nk=%d/nv=%d/d=%d", sc.nk, sc.nv, sc.d), slotSize: sc.nv * sc.d * sc.d, nInputs: nIn,
		outWidth: sc.nv * sc.d, randState: func(r *rand.Rand, n int) []float32 { return randF32(r, n, 0.3) }, launch: sc.run}
}

// ref runs the delta rule in float64 over input rows 0 … n−1 from a zero state, v-head h
// reading key head keyHead(h); it returns the outputs and the final state.
func (sc *scanCase) ref(n int, keyHead func(h int) int) (out, state []float64) {
	d, nk, nv := sc.d, sc.nk, sc.nv
	state = make([]float64, nv*d*d)
	out = make([]float64, n*nv*d)
	l2 := func(x []float32) []float64 {
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		s := 1 / math.Max(math.Sqrt(ss), float64(sc.eps))
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(v) * s
		}
		return y
	}
	for r := 0; r < n; r++ {
		row := sc.qkv[r*sc.width : (r+1)*sc.width]
		for h := 0; h < nv; h++ {
			ik := keyHead(h)
			q, k := l2(row[ik*d:(ik+1)*d]), l2(row[(nk+ik)*d:(nk+ik+1)*d])
			v := row[(2*nk+h)*d : (2*nk+h+1)*d]
			beta := sigmoid64(float64(sc.beta[r*nv+h]))
			e := math.Exp(float64(sc.ssmA[h]) * softplus64(float64(sc.alpha[r*nv+h])+float64(sc.dtBias[h])))
			s := state[h*d*d : (h+1)*d*d]
			for i := range s {
				s[i] *= e
			}
			for j := 0; j < d; j++ {
				var u float64
				for i := 0; i < d; i++ {
					u += s[i*d+j] * k[i]
				}
				delta := (float64(v[j]) - u) * beta
				var o float64
				for i := 0; i < d; i++ {
					s[i*d+j] += k[i] * delta
					o += s[i*d+j] * q[i] / math.Sqrt(float64(d))
				}
				out[(r*nv+h)*d+j] = o
			}
		}
	}
	return out, state
}

func TestGDNConvAgainstFloat64(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	r := rand.New(rand.NewPCG(11, 1))
	for _, c := range []struct{ c, k, rows int }{{1, 4, 6}, {31, 4, 3}, {33, 2, 5}, {300, 4, 9}, {64, 3, 1}, {8192, 4, 5}} {
		t.Run(fmt.Sprintf("c=%d/k=%d/rows=%d", c.c, c.k, c.rows), func(t *testing.T) {
			cc := newConvCase(r, c.c, c.k, c.rows)
			rows := make([]int, c.rows)
			slots := make([]int32, c.rows)
			for i := range rows {
				rows[i] = i
			}
			got, st := cc.run(t, b, rows, slots, slots, make([]float32, (c.k-1)*c.c))
			e := relErr(got, cc.ref(c.rows))
			if e > 1e-6 {
				t.Errorf("relative error %.3g", e)
			}
			t.Logf("relative error %.3g", e)
			// the state holds the last K−1 inputs, oldest first
			for j := 0; j < c.k-1; j++ {
				want := make([]float32, c.c)
				if src := c.rows - (c.k - 1) + j; src >= 0 {
					want = cc.x[src*c.c : (src+1)*c.c]
				}
				sameBits(t, fmt.Sprintf("state row %d", j), st[j*c.c:(j+1)*c.c], want)
			}
		})
	}
}

func TestGDNScanAgainstFloat64(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	r := rand.New(rand.NewPCG(12, 1))
	for _, c := range []struct{ nk, nv, d, rows int }{{1, 1, 16, 6}, {2, 4, 16, 8}, {2, 2, 33, 5}, {1, 2, 64, 4}, {2, 6, 32, 3}, {16, 32, 128, 3}} {
		t.Run(fmt.Sprintf("nk=%d/nv=%d/d=%d", c.nk, c.nv, c.d), func(t *testing.T) {
			sc := newScanCase(r, c.nk, c.nv, c.d, c.rows)
			if c.nk == 2 && c.nv == 4 {
				// an all-zero first row: the L2 norms fall back to eps and give zero q and k
				clear(sc.qkv[:sc.width])
			}
			rows := make([]int, c.rows)
			slots := make([]int32, c.rows)
			for i := range rows {
				rows[i] = i
			}
			got, st := sc.run(t, b, rows, slots, slots, make([]float32, c.nv*c.d*c.d))
			want, wantState := sc.ref(c.rows, func(h int) int { return h % c.nk })
			eo, es := relErr(got, want), relErr(st, wantState)
			if eo > 2e-6 || es > 2e-6 {
				t.Errorf("relative error: output %.3g, state %.3g", eo, es)
			}
			t.Logf("relative error: output %.3g, state %.3g", eo, es)
			// V-head h reads key head h mod NK ("tiled"), not h / (NV/NK): where the two
			// mappings differ, the results must differ grossly.
			if c.nk > 1 && c.nv > c.nk {
				wrong, _ := sc.ref(c.rows, func(h int) int { return h / (c.nv / c.nk) })
				e := relErr(got, wrong)
				if e < 0.05 {
					t.Errorf("output is within %.3g of the h/(NV/NK) head mapping", e)
				}
				t.Logf("relative difference from the h/(NV/NK) head mapping: %.3g", e)
			}
		})
	}
}

func recurrentCases() []recurrent {
	r := rand.New(rand.NewPCG(13, 1))
	const n = 6
	return []recurrent{
		newConvCase(r, 40, 4, n).recurrent(n),
		newConvCase(r, 300, 2, n).recurrent(n),
		newScanCase(r, 2, 4, 16, n).recurrent(n),
		newScanCase(r, 1, 3, 33, n).recurrent(n),
	}
}

// A prefill (rows chained through one slot in one launch) equals launching the rows one at a
// time, bit for bit — with any worker count — and leaves other slots untouched.
func TestGDNChainedEqualsStepwise(t *testing.T) {
	b1, b3 := cpu.New(1), cpu.New(3)
	defer b1.Close()
	defer b3.Close()
	for _, rc := range recurrentCases() {
		t.Run(rc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(14, 1))
			state := rc.randState(r, 3*rc.slotSize) // slot 0 committed, 1 the prefill's, 2 bystander
			rows := make([]int, rc.nInputs)
			src, dst := make([]int32, rc.nInputs), make([]int32, rc.nInputs)
			for i := range rows {
				rows[i], src[i], dst[i] = i, 1, 1
			}
			src[0] = 0
			out, st := rc.launch(t, b3, rows, src, dst, state)
			sameBits(t, "slot 0", st[:rc.slotSize], state[:rc.slotSize])
			sameBits(t, "slot 2", st[2*rc.slotSize:], state[2*rc.slotSize:])
			cur := append([]float32(nil), state...)
			for i := range rows {
				var o []float32
				o, cur = rc.launch(t, b1, rows[i:i+1], src[i:i+1], dst[i:i+1], cur)
				sameBits(t, fmt.Sprintf("row %d", i), out[i*rc.outWidth:(i+1)*rc.outWidth], o)
			}
			sameBits(t, "final state", st, cur)
		})
	}
}

// A tree launch (every node reads its parent's slot and writes its own) equals decoding each
// root-to-node path sequentially in one slot.
func TestGDNTreeEqualsPaths(t *testing.T) {
	b1, b3 := cpu.New(1), cpu.New(3)
	defer b1.Close()
	defer b3.Close()
	parent := []int{-1, 0, 0, 2, -1, 3} // node i uses input row i; -1 is the committed state
	for _, rc := range recurrentCases() {
		t.Run(rc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(15, 1))
			n := len(parent)
			state := rc.randState(r, (n+1)*rc.slotSize) // slot 0 committed, node i writes slot i+1
			rows := make([]int, n)
			src, dst := make([]int32, n), make([]int32, n)
			for i, p := range parent {
				rows[i], src[i], dst[i] = i, int32(p+1), int32(i+1)
			}
			out, st := rc.launch(t, b3, rows, src, dst, state)
			for i := range parent {
				var path []int
				for j := i; j >= 0; j = parent[j] {
					path = append([]int{j}, path...)
				}
				cur := append([]float32(nil), state[:rc.slotSize]...)
				var o []float32
				for _, j := range path {
					o, cur = rc.launch(t, b1, []int{j}, []int32{0}, []int32{0}, cur)
				}
				sameBits(t, fmt.Sprintf("node %d output", i), out[i*rc.outWidth:(i+1)*rc.outWidth], o)
				sameBits(t, fmt.Sprintf("node %d state", i), st[(i+1)*rc.slotSize:(i+2)*rc.slotSize], cur)
			}
		})
	}
}

func TestGDNBadArguments(t *testing.T) {
	b := cpu.New(1)
	defer b.Close()
	r := rand.New(rand.NewPCG(16, 1))
	sc := newScanCase(r, 2, 4, 8, 2)
	slotSize := sc.nv * sc.d * sc.d
	state := randF32(r, 2*slotSize, 1)
	sp := f32Ptr(t, b, state)
	op := zeros(t, b, 2*sc.nv*sc.d)
	good := sc.args(t, b, []int{0, 1}, []int32{0, 0}, []int32{0, 1}, sp, op, 2)
	small := zeros(t, b, 4)
	for _, c := range []struct {
		name string
		edit func(a *kernels.GDNScanArgs)
	}{
		{"source slot past the end", func(a *kernels.GDNScanArgs) { a.Src = i32Ptr(t, b, []int32{0, 2}) }},
		{"negative destination slot", func(a *kernels.GDNScanArgs) { a.Dst = i32Ptr(t, b, []int32{0, -1}) }},
		{"short qkv", func(a *kernels.GDNScanArgs) { a.QKV = small }},
		{"short state", func(a *kernels.GDNScanArgs) { a.NStates = 3 }},
		{"short output", func(a *kernels.GDNScanArgs) { a.Out = small }},
		{"v-heads not a multiple of k-heads", func(a *kernels.GDNScanArgs) { a.NK = 3 }},
		{"zero rows", func(a *kernels.GDNScanArgs) { a.Rows = 0 }},
	} {
		a := good
		c.edit(&a)
		if err := device.Launch(b, kernels.GDNScan, a); err == nil {
			t.Errorf("scan: %s accepted", c.name)
		} else {
			t.Logf("scan: %s: %v", c.name, err)
		}
	}
	// a rejected slot list is caught before any state is written
	sameBits(t, "state after rejected launches", readF32(t, b, sp, len(state)), state)

	cc := newConvCase(r, 8, 4, 2)
	cs := randF32(r, 2*3*8, 1)
	csp := f32Ptr(t, b, cs)
	conv := kernels.GDNConvArgs{X: f32Ptr(t, b, cc.x), W: f32Ptr(t, b, cc.w), State: csp, Src: i32Ptr(t, b, []int32{0, 1}), Dst: i32Ptr(t, b, []int32{1, 1}),
		Y: zeros(t, b, 16), Rows: 2, C: 8, K: 4, NStates: 2}
	if err := device.Launch(b, kernels.GDNConv, conv); err != nil {
		t.Fatalf("good conv arguments rejected: %v", err)
	}
	cs = readF32(t, b, csp, len(cs))
	for _, c := range []struct {
		name string
		edit func(a *kernels.GDNConvArgs)
	}{
		{"source slot past the end", func(a *kernels.GDNConvArgs) { a.Src = i32Ptr(t, b, []int32{0, 2}) }},
		{"negative destination slot", func(a *kernels.GDNConvArgs) { a.Dst = i32Ptr(t, b, []int32{-1, 0}) }},
		{"short input", func(a *kernels.GDNConvArgs) { a.X = small }},
		{"short weights", func(a *kernels.GDNConvArgs) { a.K = 5 }},
		{"zero kernel", func(a *kernels.GDNConvArgs) { a.K = 0 }},
		{"more rows than buffers", func(a *kernels.GDNConvArgs) { a.Rows = 3 }},
	} {
		a := conv
		c.edit(&a)
		if err := device.Launch(b, kernels.GDNConv, a); err == nil {
			t.Errorf("conv: %s accepted", c.name)
		} else {
			t.Logf("conv: %s: %v", c.name, err)
		}
	}
	sameBits(t, "conv state after rejected launches", readF32(t, b, csp, len(cs)), cs)
}

// siluOp (SwiGLU's vector form with b = 1) has SiLU32's bits on special and random values.
func TestSiLUOp(t *testing.T) {
	in := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 128, 129, -128, -129, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc00000), math.SmallestNonzeroFloat32, -math.MaxFloat32}
	r := rand.New(rand.NewPCG(8, 9))
	for range 1000 {
		in = append(in, math.Float32frombits(r.Uint32()))
	}
	ones := make([]float32, len(in))
	for i := range ones {
		ones[i] = 1
	}
	y := make([]float32, len(in))
	kernels.SiLUApply(y, in, ones)
	for i, x := range in {
		if want := num.SiLU32(x); math.Float32bits(y[i]) != math.Float32bits(want) {
			t.Errorf("SiLU(%x) = %x, want %x", math.Float32bits(x), math.Float32bits(y[i]), math.Float32bits(want))
		}
	}
}
