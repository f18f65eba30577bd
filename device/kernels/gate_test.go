package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/kernels"
)

func TestGatedNorm(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	r := rand.New(rand.NewPCG(21, 1))
	for _, c := range []struct{ rows, heads, d int }{{1, 1, 16}, {3, 4, 128}, {2, 2, 33}, {1, 32, 128}} {
		t.Run(fmt.Sprintf("rows=%d/heads=%d/d=%d", c.rows, c.heads, c.d), func(t *testing.T) {
			n := c.rows * c.heads * c.d
			x, z, w := randF32(r, n, 0.2), randF32(r, n, 2), randF32(r, c.d, 1)
			const eps = 1e-6
			xp, zp := f32Ptr(t, b, x), f32Ptr(t, b, z)
			args := kernels.GatedNormArgs{X: xp, Z: zp, W: f32Ptr(t, b, w), Y: zeros(t, b, n),
				Rows: int32(c.rows), Heads: int32(c.heads), D: int32(c.d), Eps: eps}
			if err := device.Launch(b, kernels.GatedNorm, args); err != nil {
				t.Fatal(err)
			}
			got := readF32(t, b, args.Y, n)
			want := make([]float64, n)
			for g := 0; g < c.rows*c.heads; g++ {
				var ss float64
				for _, v := range x[g*c.d : (g+1)*c.d] {
					ss += float64(v) * float64(v)
				}
				s := 1 / math.Sqrt(ss/float64(c.d)+eps)
				for i := 0; i < c.d; i++ {
					j := g*c.d + i
					want[j] = float64(x[j]) * s * float64(w[i]) * silu64(float64(z[j]))
				}
			}
			if e := relErr(got, want); e > 1e-6 {
				t.Errorf("relative error %.3g", e)
			}
			// in place over X, and over Z, give the same bits
			for _, dst := range []device.Ptr{xp, zp} {
				a := args
				a.Y = dst
				if err := device.Launch(b, kernels.GatedNorm, a); err != nil {
					t.Fatal(err)
				}
				sameBits(t, "in place", readF32(t, b, dst, n), got)
				if err := b.Write(xp, device.F32Bytes(x)); err != nil {
					t.Fatal(err)
				}
				if err := b.Write(zp, device.F32Bytes(z)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	small := zeros(t, b, 4)
	if err := device.Launch(b, kernels.GatedNorm, kernels.GatedNormArgs{X: small, Z: small, W: small, Y: small, Rows: 1, Heads: 2, D: 16}); err == nil {
		t.Error("gated norm on undersized buffers accepted")
	}
}

func TestSplitGate(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	r := rand.New(rand.NewPCG(22, 1))
	rows, heads, d := 3, 4, 16
	x := randF32(r, rows*heads*2*d, 1)
	n := rows * heads * d
	args := kernels.SplitGateArgs{X: f32Ptr(t, b, x), Q: zeros(t, b, n), G: zeros(t, b, n), Rows: int32(rows), Heads: int32(heads), D: int32(d)}
	if err := device.Launch(b, kernels.SplitGate, args); err != nil {
		t.Fatal(err)
	}
	q, g := readF32(t, b, args.Q, n), readF32(t, b, args.G, n)
	var wq, wg []float32
	for i := 0; i < rows*heads; i++ {
		wq = append(wq, x[2*i*d:(2*i+1)*d]...)
		wg = append(wg, x[(2*i+1)*d:(2*i+2)*d]...)
	}
	sameBits(t, "query", q, wq)
	sameBits(t, "gate", g, wg)
	args.Heads = 5
	if err := device.Launch(b, kernels.SplitGate, args); err == nil {
		t.Error("split gate past the end of its buffers accepted")
	}
}

func TestSigmoidMul(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	r := rand.New(rand.NewPCG(23, 1))
	n := 1000
	a, g := randF32(r, n, 1), randF32(r, n, 4)
	args := kernels.BinaryArgs{A: f32Ptr(t, b, a), B: f32Ptr(t, b, g), Y: zeros(t, b, n), N: int32(n)}
	if err := device.Launch(b, kernels.SigmoidMul, args); err != nil {
		t.Fatal(err)
	}
	got := readF32(t, b, args.Y, n)
	for i := range got {
		want := float64(a[i]) * sigmoid64(float64(g[i]))
		if e := math.Abs(float64(got[i])-want) / math.Abs(want); e > 2.5e-7 {
			t.Fatalf("index %d: sigmoid_mul(%g, %g) = %g, want %g (relative error %.3g)", i, a[i], g[i], got[i], want, e)
		}
	}
}
