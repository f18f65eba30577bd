package num

import (
	"math"
	"math/rand/v2"
	"testing"
)

// butterflyLane0 is WarpSum's contract written as a recursion instead of rounds: the value lane l
// holds after the round with offset off is the value it held before plus lane l^off's value.
func butterflyLane0(v *[32]float32, l, off int, op func(a, b float32) float32) float32 {
	if off == 32 {
		return v[l]
	}
	return op(butterflyLane0(v, l, off*2, op), butterflyLane0(v, l^off, off*2, op))
}

func add32(a, b float32) float32 { return a + b }

func randWarp(r *rand.Rand) (v [32]float32) {
	scale := float32(math.Ldexp(1, r.IntN(40)-20))
	for l := range v {
		v[l] = float32(r.NormFloat64()) * scale
		if r.IntN(4) == 0 {
			v[l] *= 1 << 20 // wide dynamic range makes the order visible
		}
	}
	return v
}

func TestWarpSum(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	orderMatters := 0
	for i := range 20000 {
		v := randWarp(r)
		in := v
		want := butterflyLane0(&in, 0, 1, add32)
		got := WarpSum(&v)
		if !sameBits(got, want) {
			t.Fatalf("case %d: WarpSum = %s, want %s", i, bitsOf(got), bitsOf(want))
		}
		for l := range v {
			if !sameBits(v[l], got) {
				t.Fatalf("case %d: lane %d holds %s, lane 0 %s", i, l, bitsOf(v[l]), bitsOf(got))
			}
		}
		var seq float32
		for _, x := range in {
			seq += x
		}
		if seq != got {
			orderMatters++
		}
	}
	if orderMatters == 0 {
		t.Error("no case where the butterfly differs from a sequential sum: the test inputs are too tame")
	}
}

func TestWarpSumOrder(t *testing.T) {
	// Lane 0 pairs with 16 first: 1e8 + 1 loses the 1, and the remaining lanes cancel exactly.
	var v [32]float32
	v[0], v[16], v[1] = 1e8, 1, -1e8
	if got := WarpSum(&v); got != 0 {
		t.Errorf("WarpSum = %g, want 0 ((1e8+1) rounds to 1e8 before meeting -1e8)", got)
	}
	v = [32]float32{}
	v[0], v[16], v[1] = 1e8, -1e8, 1 // a sequential sum gives 0 here; the butterfly cancels first
	if got := WarpSum(&v); got != 1 {
		t.Errorf("WarpSum = %g, want 1 (lanes 0 and 16 cancel before lane 1's 1 arrives)", got)
	}
}

func TestWarpMax(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for i := range 5000 {
		v := randWarp(r)
		if r.IntN(3) == 0 {
			v[r.IntN(32)] = NaN32()
		}
		if r.IntN(3) == 0 {
			v[r.IntN(32)] = float32(math.Copysign(0, -1))
		}
		in := v
		want := butterflyLane0(&in, 0, 1, Max32)
		got := WarpMax(&v)
		if !sameBits(got, want) {
			t.Fatalf("case %d: WarpMax = %s, want %s", i, bitsOf(got), bitsOf(want))
		}
		m := float32(math.Inf(-1))
		for _, x := range in {
			m = Max32(m, x)
		}
		if !sameBits(got, m) {
			t.Fatalf("case %d: WarpMax = %s, sequential Max32 gives %s", i, bitsOf(got), bitsOf(m))
		}
		for l := range v {
			if !sameBits(v[l], got) {
				t.Fatalf("case %d: lane %d holds %s, lane 0 %s", i, l, bitsOf(v[l]), bitsOf(got))
			}
		}
	}
	var all [32]float32
	for l := range all {
		all[l] = math.Float32frombits(0x7fc00000 | uint32(l))
	}
	if got := WarpMax(&all); math.Float32bits(got) != NaNBits {
		t.Errorf("WarpMax of NaNs = %s, want the canonical NaN", bitsOf(got))
	}
}

func TestStrided(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{0, 1, 31, 32, 33, 64, 100, 1000, 4097} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64()) * float32(math.Ldexp(1, r.IntN(30)))
		}
		var lanes [32]float32
		for l := range 32 {
			var acc float32 // +0
			for i := l; i < n; i += 32 {
				acc = acc + x[i]
			}
			lanes[l] = acc
		}
		if got := LaneSums(x); got != lanes {
			t.Fatalf("n=%d: LaneSums differs from the per-lane loops", n)
		}
		want := WarpSum(&lanes)
		if got := StridedSum(x); !sameBits(got, want) {
			t.Errorf("n=%d: StridedSum = %s, want %s", n, bitsOf(got), bitsOf(want))
		}
		m := float32(math.Inf(-1))
		for _, v := range x {
			m = Max32(m, v)
		}
		if got := StridedMax(x); !sameBits(got, m) {
			t.Errorf("n=%d: StridedMax = %s, want %s", n, bitsOf(got), bitsOf(m))
		}
	}
	if got := StridedSum([]float32{float32(math.Copysign(0, -1))}); math.Float32bits(got) != 0 {
		t.Errorf("StridedSum([-0]) = %s, want +0 (lanes start from +0)", bitsOf(got))
	}
}

func TestWarpTotalEqualsWarpSum(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 20000; i++ {
		var v [32]float32
		for l := range v {
			v[l] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-6)))
		}
		w := v
		if got, want := WarpTotal(&v), WarpSum(&w); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("case %d: WarpTotal %g != WarpSum %g", i, got, want)
		}
	}
}
