package num

import (
	"math/rand/v2"
	"testing"
)

var benchSink float32

// benchInputs returns 1024 inputs spread over [lo, hi).
func benchInputs(lo, hi float32) []float32 {
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, 1024)
	for i := range x {
		x[i] = lo + (hi-lo)*r.Float32()
	}
	return x
}

func benchUnary(b *testing.B, fn func(float32) float32, lo, hi float32) {
	x := benchInputs(lo, hi)
	var s float32
	for i := 0; b.Loop(); i++ {
		s += fn(x[i&1023])
	}
	benchSink = s
}

func BenchmarkExp32(b *testing.B)      { benchUnary(b, Exp32, -20, 20) }
func BenchmarkLog32(b *testing.B)      { benchUnary(b, Log32, 0, 100) }
func BenchmarkSigmoid32(b *testing.B)  { benchUnary(b, Sigmoid32, -20, 20) }
func BenchmarkSiLU32(b *testing.B)     { benchUnary(b, SiLU32, -20, 20) }
func BenchmarkSoftplus32(b *testing.B) { benchUnary(b, Softplus32, -20, 20) }

func BenchmarkFMA32(b *testing.B) {
	x := benchInputs(-2, 2)
	var s float32
	for i := 0; b.Loop(); i++ {
		s = FMA32(x[i&1023], x[(i+1)&1023], s)
	}
	benchSink = s
}
