package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

// Every supported type, as the issue lists them.
var wantTypes = []dtype.Type{dtype.F32, dtype.F16, dtype.Q4_0, dtype.Q4_1, dtype.Q5_0, dtype.Q5_1,
	dtype.Q8_0, dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K, dtype.Q8_K, dtype.BF16}

func TestRegistry(t *testing.T) {
	for _, ty := range wantTypes {
		f, err := Lookup(ty)
		if err != nil {
			t.Errorf("%s: %v", ty, err)
			continue
		}
		if f.Type() != ty {
			t.Errorf("Lookup(%s).Type() = %s", ty, f.Type())
		}
	}
	if len(Types()) != len(wantTypes) {
		t.Errorf("Types() = %v", Types())
	}
	if _, err := Lookup(dtype.IQ4_XS); err == nil {
		t.Error("iq4_xs must be unsupported")
	}
	if _, err := Lookup(dtype.Type(99)); err == nil {
		t.Error("unknown id accepted")
	}
	if err := Check(dtype.Q4_K, 256, 144); err != nil {
		t.Error(err)
	}
	for _, c := range [][2]int{{256, 143}, {250, 144}, {-256, 144}} {
		if err := Check(dtype.Q4_K, c[0], c[1]); err == nil {
			t.Errorf("Check(q4_K, %d, %d) accepted", c[0], c[1])
		}
	}
}

// maxRelRMS bounds the round-trip error of each type on Gaussian rows: the RMS of
// dequant(quant(x)) − x relative to the RMS of x.
var maxRelRMS = map[dtype.Type]float64{
	dtype.F32: 0, dtype.F16: 5e-4, dtype.BF16: 4e-3, dtype.Q8_0: 7e-3, dtype.Q8_K: 9e-3,
	dtype.Q6_K: 2.2e-2, dtype.Q5_0: 5.5e-2, dtype.Q5_1: 5e-2, dtype.Q5_K: 4.5e-2, dtype.Q4_0: 1.1e-1,
	dtype.Q4_1: 1e-1, dtype.Q4_K: 9e-2, dtype.Q3_K: 1.8e-1, dtype.Q2_K: 3.5e-1,
}

// Generic properties every format has: round-trip error within its budget, DotRef equal to
// the float64 dot of the dequantised values, quantisation deterministic and idempotent on its
// own output (re-quantising dequantised values gives values no worse).
func TestFormatsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 1))
	for _, ty := range Types() {
		f, _ := Lookup(ty)
		t.Run("type="+ty.String(), func(t *testing.T) {
			n := 4 * 256
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			rb, _ := ty.RowBytes(int64(n))
			q := make([]byte, rb)
			f.Quantize(q, x)
			q2 := make([]byte, rb)
			f.Quantize(q2, x)
			if string(q) != string(q2) {
				t.Fatal("quantisation is not deterministic")
			}
			y := make([]float32, n)
			f.Dequantize(y, q)
			var se, sx float64
			for i := range x {
				d := float64(y[i]) - float64(x[i])
				se += d * d
				sx += float64(x[i]) * float64(x[i])
			}
			rel := math.Sqrt(se / sx)
			t.Logf("relative RMS error %.4g", rel)
			if rel > maxRelRMS[ty] {
				t.Errorf("relative RMS error %.4g > %g", rel, maxRelRMS[ty])
			}
			xs := make([]float64, n)
			var want float64
			for i := range xs {
				xs[i] = r.NormFloat64()
				want += float64(y[i]) * xs[i]
			}
			// DotRef uses the exact stored values; Dequantize rounds d·q (+ m) to float32 once
			var norm float64
			for i := range xs {
				norm += math.Abs(float64(y[i]) * xs[i])
			}
			if got := f.DotRef(q, xs); math.Abs(got-want) > 1e-7*norm {
				t.Errorf("DotRef = %v, dot of dequantised values = %v", got, want)
			}
		})
	}
}

// Shape mistakes are programmer errors and panic with a message naming them.
func TestFormatsPanicOnBadShapes(t *testing.T) {
	for _, ty := range Types() {
		f, _ := Lookup(ty)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Dequantize with a short block slice did not panic", ty)
				}
			}()
			f.Dequantize(make([]float32, 256), make([]byte, 1))
		}()
	}
}

// BenchmarkDequantize reports GB/s of quantised input decoded, per type.
func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, ty := range Types() {
		f, _ := Lookup(ty)
		rb, _ := ty.RowBytes(n)
		q := make([]byte, rb)
		f.Quantize(q, x)
		y := make([]float32, n)
		b.Run(fmt.Sprintf("type=%s", ty), func(b *testing.B) {
			b.SetBytes(rb)
			for b.Loop() {
				f.Dequantize(y, q)
			}
		})
	}
}

// BenchmarkQuantize reports GB/s of float32 input encoded, per type.
func BenchmarkQuantize(b *testing.B) {
	const n = 1 << 16
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, ty := range Types() {
		f, _ := Lookup(ty)
		rb, _ := ty.RowBytes(n)
		q := make([]byte, rb)
		b.Run(fmt.Sprintf("type=%s", ty), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				f.Quantize(q, x)
			}
		})
	}
}
