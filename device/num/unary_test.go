package num

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Float64 references. math.Exp, math.Log and math.Log1p are accurate to about 1 float64 ulp,
// which is 2^-29 float32 ulps: far below the differences measured here.
func sigmoidRef(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func siluRef(x float64) float64 {
	if math.IsInf(x, -1) {
		return math.Copysign(0, -1)
	}
	return x * sigmoidRef(x)
}

// geluRef is the tanh form of GELU written as x·sigmoid(2·sqrt(2/π)·(x + 0.044715·x³)).
func geluRef(x float64) float64 {
	if math.IsInf(x, 0) {
		return math.Max(x, math.Copysign(0, -1))
	}
	z := 2 * math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)
	return x * sigmoidRef(z)
}

func softplusRef(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}

// unaryCase describes one software routine: its float64 reference, the error bounds it is held
// to (in float32 ulps, for normal and for subnormal results; measured over all 2^32 inputs by
// TestUnaryExhaustive, then rounded up), the range worth sampling densely, and edge inputs.
type unaryCase struct {
	name      string
	fn        func(float32) float32
	ref       func(float64) float64
	maxNormal float64
	maxSub    float64
	lo, hi    float32
	edges     []float32
}

var unaryCases = []unaryCase{
	{"Exp32", Exp32, math.Exp, 0.58, 0.76, -104, 89, []float32{
		88.72283, 88.722839, 88.72284, 88.7229, -87.33654, -87.33655, -103.27893, -103.97207,
		-103.97208, -104, -128, 128, 0.34657359, -0.34657359, 1.0397208, 0x1p-24, -0x1p-25, 0x1p-25,
	}},
	{"Log32", Log32, math.Log, 0.60, 0, 0, math.MaxFloat32, []float32{
		0.6666666, 0.6666667, 0.66666675, 1.3333333, 1.3333334, 1.3333335, 1 - 0x1p-24, 1 + 0x1p-23,
		2, 0.5, math.E, 0x1p-126, 0x1p-127, 0x1p-149, 0x1.fffffcp-127,
	}},
	{"Log1p32", Log1p32, math.Log1p, 0.60, 0, -1, math.MaxFloat32, []float32{
		-1 + 0x1p-24, -0.99999994, -0.5, 0.33333334, 0.33333337, -0.33333334, -0.33333337, 0x1p-24,
		-0x1p-24, 0x1p-126, -0x1p-149, 1, 0x1p24, 0x1p24 + 2, 3e38,
	}},
	{"Sigmoid32", Sigmoid32, sigmoidRef, 0.58, 0.76, -110, 110, []float32{
		-100, 100, -88, 88, -103.97, -104, 16.635532, 16.635534, 17.328679, -0.34657359, 0.34657359,
	}},
	{"SiLU32", SiLU32, siluRef, 0.60, 0.78, -120, 120, []float32{
		-100, 100, -108.5, -109, -110, -87.3, 0x1p-149, -0x1p-149, 0x1p-126, 1e-20, -1e-20,
	}},
	{"Tanh32", Tanh32, math.Tanh, 0.565, 0, -10, 10, []float32{
		0x1p-12, 0x1.fffffep-13, 0.25, 0.24999999, 9.010913, 9.0109, 9.99999, 10, 0.125, 0.5, 2, 5,
	}},
	{"GELU32", GELU32, geluRef, 0.60, 0.78, -12, 10, []float32{
		-4, -4.0000005, -3.9999998, -10.9, -11, -11.5, -12, -11.999999, 9.999999, 10, -0x1p-126, 0x1p-149,
		-5.3, 4.7, 4.75, -4.75, 1e-20, -1e-20,
	}},
	{"Softplus32", Softplus32, softplusRef, 0.62, 0.76, -110, 25, []float32{
		20, 19.999998, 20.000002, -20, 0.33, -1.0986123, -1.0986124, -87.3, -103.97, -104,
	}},
}

// commonEdges are inputs every routine is checked on.
var commonEdges = []float32{
	0, float32(math.Copysign(0, -1)), 0x1p-149, -0x1p-149, 0x1.fffffcp-127, -0x1.fffffcp-127,
	0x1p-126, -0x1p-126, 1, -1, 0.5, -0.5, math.MaxFloat32, -math.MaxFloat32,
	float32(math.Inf(1)), float32(math.Inf(-1)), NaN32(), math.Float32frombits(0x7fc00001),
	math.Float32frombits(0xff800001),
}

// errStats accumulates the error of one routine over many inputs.
type errStats struct {
	n, exact           int
	maxNormal, maxSub  float64
	worstNorm, worstSb float32
}

// add records input x and returns a non-empty message if the output is outright wrong
// (a NaN that is not canonical, a NaN where a number belongs, or the reverse).
func (s *errStats) add(c *unaryCase, x float32) string {
	y := c.fn(x)
	ref := c.ref(float64(x))
	s.n++
	if y != y || ref != ref {
		if y != y && ref != ref && math.Float32bits(y) == NaNBits {
			s.exact++
			return ""
		}
		return "NaN mismatch: " + c.name + "(" + bitsOf(x) + ") = " + bitsOf(y)
	}
	e := ulpErr(y, ref)
	if y == float32(ref) {
		s.exact++
	}
	if math.Abs(ref) < 0x1p-126 {
		if e > s.maxSub {
			s.maxSub, s.worstSb = e, x
		}
	} else if e > s.maxNormal {
		s.maxNormal, s.worstNorm = e, x
	}
	return ""
}

func (s *errStats) merge(o *errStats) {
	s.n += o.n
	s.exact += o.exact
	if o.maxNormal > s.maxNormal {
		s.maxNormal, s.worstNorm = o.maxNormal, o.worstNorm
	}
	if o.maxSub > s.maxSub {
		s.maxSub, s.worstSb = o.maxSub, o.worstSb
	}
}

func (s *errStats) check(t *testing.T, c *unaryCase) {
	t.Helper()
	t.Logf("%s: %d inputs, %.4f%% correctly rounded, max %.4f ulp (normal results, at %s), %.4f ulp (subnormal results, at %s)",
		c.name, s.n, 100*float64(s.exact)/float64(s.n), s.maxNormal, bitsOf(s.worstNorm), s.maxSub, bitsOf(s.worstSb))
	if s.maxNormal > c.maxNormal {
		t.Errorf("%s: max error %.4f ulp at %s exceeds the documented %.2f", c.name, s.maxNormal, bitsOf(s.worstNorm), c.maxNormal)
	}
	if s.maxSub > max(c.maxSub, c.maxNormal) {
		t.Errorf("%s: max error on subnormal results %.4f ulp at %s exceeds the documented %.2f", c.name, s.maxSub, bitsOf(s.worstSb), c.maxSub)
	}
}

// TestUnaryAccuracy samples each routine on 2^20 inputs (half arbitrary bit patterns, half
// spread evenly over the bit patterns of its interesting range) plus the edge inputs.
func TestUnaryAccuracy(t *testing.T) {
	n := 1 << 20
	if testing.Short() {
		n = 1 << 16
	}
	for i := range unaryCases {
		c := &unaryCases[i]
		t.Run(c.name, func(t *testing.T) {
			var s errStats
			fail := func(msg string) {
				if msg != "" {
					t.Fatal(msg)
				}
			}
			for _, x := range append(append([]float32(nil), commonEdges...), c.edges...) {
				for _, v := range []float32{x, math.Nextafter32(x, 0), -x} {
					fail(s.add(c, v))
				}
			}
			r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
			for range n / 2 {
				fail(s.add(c, math.Float32frombits(r.Uint32())))
			}
			// The interesting range as two runs of bit patterns: [0, hi] and [lo, 0) (or [lo, hi]
			// when both bounds are positive).
			type run struct{ a, b uint32 }
			var runs []run
			if c.lo < 0 {
				runs = append(runs, run{0x80000000, math.Float32bits(c.lo)}, run{0, math.Float32bits(c.hi)})
			} else {
				runs = append(runs, run{math.Float32bits(c.lo), math.Float32bits(c.hi)})
			}
			for _, ru := range runs {
				for range n / 2 / len(runs) {
					fail(s.add(c, math.Float32frombits(ru.a+r.Uint32N(ru.b-ru.a+1))))
				}
			}
			s.check(t, c)
		})
	}
}

func TestUnarySpecials(t *testing.T) {
	inf, ninf := float32(math.Inf(1)), float32(math.Inf(-1))
	negz := float32(math.Copysign(0, -1))
	tests := []struct {
		name string
		fn   func(float32) float32
		x    float32
		want uint32
	}{
		{"Exp32(0)", Exp32, 0, 0x3f800000},
		{"Exp32(-0)", Exp32, negz, 0x3f800000},
		{"Exp32(+Inf)", Exp32, inf, 0x7f800000},
		{"Exp32(-Inf)", Exp32, ninf, 0},
		{"Exp32(NaN)", Exp32, math.Float32frombits(0xffc01234), NaNBits},
		{"Exp32(89)", Exp32, 89, 0x7f800000},
		{"Exp32(88.72284)", Exp32, 88.72284, 0x7f800000},
		{"Exp32(88.72283)", Exp32, 88.72283, 0x7f7fff84},
		{"Exp32(-103.97208)", Exp32, -103.97208, 1}, // 0.5000003 · 2^-149
		{"Exp32(-103.97209)", Exp32, -103.97209, 0}, // 0.4999928 · 2^-149
		{"Exp32(-1e-30)", Exp32, -1e-30, 0x3f800000},
		{"Exp32(-0x1p-25)", Exp32, -0x1p-25, 0x3f800000}, // 1 - 2^-25 + 2^-51 rounds up to 1
		{"Exp32(-0x1.000002p-25)", Exp32, -0x1.000002p-25, 0x3f7fffff},
		{"Log32(1)", Log32, 1, 0},
		{"Log32(+0)", Log32, 0, 0xff800000},
		{"Log32(-0)", Log32, negz, 0xff800000},
		{"Log32(-1)", Log32, -1, NaNBits},
		{"Log32(-Inf)", Log32, ninf, NaNBits},
		{"Log32(+Inf)", Log32, inf, 0x7f800000},
		{"Log32(NaN)", Log32, math.Float32frombits(0x7f800001), NaNBits},
		{"Log32(2)", Log32, 2, 0x3f317218},
		{"Log32(0x1p-149)", Log32, 0x1p-149, 0xc2ce8ed0},
		{"Log1p32(-0)", Log1p32, negz, 0x80000000},
		{"Log1p32(+0)", Log1p32, 0, 0},
		{"Log1p32(-1)", Log1p32, -1, 0xff800000},
		{"Log1p32(-2)", Log1p32, -2, NaNBits},
		{"Log1p32(+Inf)", Log1p32, inf, 0x7f800000},
		{"Log1p32(0x1p-149)", Log1p32, 0x1p-149, 1},
		{"Log1p32(1e-30)", Log1p32, 1e-30, math.Float32bits(1e-30)},
		{"Log1p32(1)", Log1p32, 1, 0x3f317218},
		{"Sigmoid32(0)", Sigmoid32, 0, 0x3f000000},
		{"Sigmoid32(-0)", Sigmoid32, negz, 0x3f000000},
		{"Sigmoid32(100)", Sigmoid32, 100, 0x3f800000},
		{"Sigmoid32(+Inf)", Sigmoid32, inf, 0x3f800000},
		{"Sigmoid32(-Inf)", Sigmoid32, ninf, 0},
		{"Sigmoid32(-200)", Sigmoid32, -200, 0},
		{"Sigmoid32(-100)", Sigmoid32, -100, 27}, // e^-100 = 26.55 · 2^-149
		{"Sigmoid32(NaN)", Sigmoid32, NaN32(), NaNBits},
		{"SiLU32(0)", SiLU32, 0, 0},
		{"SiLU32(-0)", SiLU32, negz, 0x80000000},
		{"SiLU32(+Inf)", SiLU32, inf, 0x7f800000},
		{"SiLU32(-Inf)", SiLU32, ninf, 0x80000000},
		{"SiLU32(MaxFloat32)", SiLU32, math.MaxFloat32, 0x7f7fffff},
		{"SiLU32(-MaxFloat32)", SiLU32, -math.MaxFloat32, 0x80000000},
		{"SiLU32(-100)", SiLU32, -100, 0x80000a5f}, // -100·e^-100 = -2654.6 · 2^-149
		{"SiLU32(NaN)", SiLU32, NaN32(), NaNBits},
		{"Tanh32(0)", Tanh32, 0, 0},
		{"Tanh32(-0)", Tanh32, negz, 0x80000000},
		{"Tanh32(+Inf)", Tanh32, inf, 0x3f800000},
		{"Tanh32(-Inf)", Tanh32, ninf, 0xbf800000},
		{"Tanh32(9)", Tanh32, 9, 0x3f7fffff},
		{"Tanh32(9.1)", Tanh32, 9.1, 0x3f800000},
		{"Tanh32(NaN)", Tanh32, NaN32(), NaNBits},
		{"GELU32(0)", GELU32, 0, 0},
		{"GELU32(-0)", GELU32, negz, 0x80000000},
		{"GELU32(+Inf)", GELU32, inf, 0x7f800000},
		{"GELU32(-Inf)", GELU32, ninf, 0x80000000},
		{"GELU32(1)", GELU32, 1, math.Float32bits(float32(geluRef(1)))},
		{"GELU32(NaN)", GELU32, NaN32(), NaNBits},
		{"Softplus32(0)", Softplus32, 0, 0x3f317218},
		{"Softplus32(20.000002)", Softplus32, 20.000002, math.Float32bits(20.000002)},
		{"Softplus32(+Inf)", Softplus32, inf, 0x7f800000},
		{"Softplus32(-Inf)", Softplus32, ninf, 0},
		{"Softplus32(-100)", Softplus32, -100, 27},
		{"Softplus32(NaN)", Softplus32, NaN32(), NaNBits},
	}
	for _, tt := range tests {
		if got := tt.fn(tt.x); math.Float32bits(got) != tt.want {
			t.Errorf("%s = %s, want %#08x", tt.name, bitsOf(got), tt.want)
		}
	}
}

// TestSigmoidMonotone checks that Sigmoid32 and Softplus32 never decrease along a dense sweep
// of increasing inputs, and that sigmoid stays in [0, 1].
func TestSigmoidMonotone(t *testing.T) {
	for _, fn := range []struct {
		name string
		f    func(float32) float32
	}{{"Sigmoid32", Sigmoid32}, {"Softplus32", Softplus32}, {"Exp32", Exp32}} {
		prev := fn.f(-130)
		for x := float32(-130); x < 130; x = math.Nextafter32(x+max(abs32(x)*0x1p-14, 0x1p-20), 200) {
			y := fn.f(x)
			if y < prev {
				t.Fatalf("%s not monotone: f(%s) = %s < previous %s", fn.name, bitsOf(x), bitsOf(y), bitsOf(prev))
			}
			if fn.name == "Sigmoid32" && (y < 0 || y > 1) {
				t.Fatalf("Sigmoid32(%s) = %s outside [0, 1]", bitsOf(x), bitsOf(y))
			}
			prev = y
		}
	}
}
