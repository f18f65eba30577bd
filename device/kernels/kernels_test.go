package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/host/quant"
	"verity/repack"
)

// upload copies host data into a fresh backend allocation.
func upload(t testing.TB, b device.Backend, data []byte) device.Ptr {
	t.Helper()
	p, err := b.Alloc(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(p, data); err != nil {
		t.Fatal(err)
	}
	return p
}

func readF32(t testing.TB, b device.Backend, p device.Ptr, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := b.Read(device.F32Bytes(out), p); err != nil {
		t.Fatal(err)
	}
	return out
}

func randF32(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

// relErr is max|a−b| / max|b|.
func relErr(a []float32, b []float64) float64 {
	var num, den float64
	for i := range b {
		num = math.Max(num, math.Abs(float64(a[i])-b[i]))
		den = math.Max(den, math.Abs(b[i]))
	}
	return num / den
}

// matvecCase quantises a random weight matrix and activations, runs the matvec twin with n
// columns and returns the device result and a float64 reference over the exact stored values.
func matvecCase(t *testing.T, b *cpu.Backend, wt dtype.Type, rows, cols, n int, seed uint64) ([]float32, []float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	f, err := kernels.Lookup(wt)
	if err != nil {
		t.Fatal(err)
	}
	qf, err := quant.Lookup(wt)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := wt.RowBytes(int64(cols))
	w := make([]byte, rows*int(rb))
	wvals := make([]float32, cols)
	for i := 0; i < rows; i++ {
		qf.Quantize(w[i*int(rb):(i+1)*int(rb)], randF32(r, cols, 1/math.Sqrt(float64(cols))))
	}
	x := randF32(r, n*cols, 1)
	xb := f.Act.RowBytes(cols)
	xa := make([]byte, n*xb)
	for c := 0; c < n; c++ {
		kernels.ConvertRow(f.Act, xa[c*xb:(c+1)*xb], x[c*cols:(c+1)*cols])
	}
	wp, xp := upload(t, b, packed(t, wt, w, int64(cols), int64(rows))), upload(t, b, xa)
	yp, _ := b.Alloc(int64(4 * n * rows))
	k, err := kernels.MatVec(wt)
	if err != nil {
		t.Fatal(err)
	}
	if err := device.Launch(b, k, kernels.MatVecArgs{W: wp, X: xp, Y: yp, Rows: int32(rows), Cols: int32(cols), N: int32(n)}); err != nil {
		t.Fatal(err)
	}
	got := readF32(t, b, yp, n*rows)
	// reference: decode the stored weights and the converted activations exactly, sum in float64
	want := make([]float64, n*rows)
	xd := make([]float32, cols)
	for c := 0; c < n; c++ {
		decodeAct(t, f.Act, xd, xa[c*xb:(c+1)*xb])
		for i := 0; i < rows; i++ {
			qf.Dequantize(wvals, w[i*int(rb):(i+1)*int(rb)])
			var s float64
			for j := range wvals {
				s += float64(wvals[j]) * float64(xd[j])
			}
			if f.Act == kernels.ActQ8_1 {
				s += q81Shift(w[i*int(rb):(i+1)*int(rb)], xa[c*xb:(c+1)*xb], wt.BlockBytes())
			}
			want[c*rows+i] = s
		}
	}
	return got, want
}

// decodeAct decodes a converted activation row to its exact values.
func decodeAct(t *testing.T, a kernels.Act, dst []float32, src []byte) {
	var tt dtype.Type
	switch a {
	case kernels.ActF32:
		copy(dst, device.AsF32(src))
		return
	case kernels.ActF16:
		tt = dtype.F16
	case kernels.ActBF16:
		tt = dtype.BF16
	case kernels.ActQ8_0:
		tt = dtype.Q8_0
	case kernels.ActQ8_K:
		tt = dtype.Q8_K
	case kernels.ActQ8_1:
		// block_q8_1: f16 d, f16 s, 32 int8 — values are d·q
		for b := 0; b < len(dst)/32; b++ {
			blk := src[36*b:]
			d := float32FromF16(uint16(blk[0]) | uint16(blk[1])<<8)
			for j := 0; j < 32; j++ {
				dst[32*b+j] = d * float32(int8(blk[4+j]))
			}
		}
		return
	}
	f, err := quant.Lookup(tt)
	if err != nil {
		t.Fatal(err)
	}
	f.Dequantize(dst, src)
}

func float32FromF16(h uint16) float32 {
	f, _ := quant.Lookup(dtype.F16)
	out := make([]float32, 1)
	f.Dequantize(out, []byte{byte(h), byte(h >> 8)})
	return out[0]
}

func TestMatVecAgainstFloat64(t *testing.T) {
	b := cpu.New(2)
	defer b.Close()
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		colsList := []int{256, 512, 2048 + 256}
		if wt.BlockSize() < 256 {
			colsList = append(colsList, 32, 96)
		}
		for _, cols := range colsList {
			if cols%f.Unit != 0 || cols%wt.BlockSize() != 0 {
				continue
			}
			t.Run(fmt.Sprintf("type=%s/cols=%d", wt, cols), func(t *testing.T) {
				got, want := matvecCase(t, b, wt, 37, cols, 3, uint64(cols))
				// float32 accumulation over cols terms of a unit-variance sum
				if e := relErr(got, want); e > 2e-6 {
					t.Errorf("relative error %.3g against the float64 sum of the exact stored values", e)
				}
			})
		}
	}
}

// Width invariance and thread invariance: one column at a time, eight at once, and any
// number of workers give identical bits.
func TestMatVecWidthAndThreadInvariance(t *testing.T) {
	for _, wt := range kernels.WeightTypes() {
		t.Run("type="+wt.String(), func(t *testing.T) {
			cols := 512
			b1, b3 := cpu.New(1), cpu.New(3)
			defer b1.Close()
			defer b3.Close()
			all, _ := matvecCase(t, b3, wt, 33, cols, 8, 99)
			one, _ := matvecCase(t, b1, wt, 33, cols, 8, 99)
			for i := range all {
				if math.Float32bits(all[i]) != math.Float32bits(one[i]) {
					t.Fatalf("index %d: %v (3 workers) != %v (1 worker)", i, all[i], one[i])
				}
			}
		})
	}
}

func TestConvertMatchesReferenceQuantisers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		act kernels.Act
		t   dtype.Type
	}{{kernels.ActQ8_0, dtype.Q8_0}, {kernels.ActQ8_K, dtype.Q8_K}, {kernels.ActF16, dtype.F16}, {kernels.ActBF16, dtype.BF16}} {
		q, err := quant.Lookup(c.t)
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 50; trial++ {
			x := randF32(r, 512, math.Pow(10, float64(trial%9-4)))
			if trial == 0 {
				clear(x[:256])
			}
			want := make([]byte, c.act.RowBytes(512))
			got := make([]byte, len(want))
			q.Quantize(want, x)
			kernels.ConvertRow(c.act, got, x)
			if string(got) != string(want) {
				t.Fatalf("%s: conversion differs from host/quant's %s on trial %d", c.act, c.t, trial)
			}
		}
	}
}

// packed returns the device layout (repack) of a GGUF tensor of type wt and dims.
func packed(t *testing.T, wt dtype.Type, data []byte, dims ...int64) []byte {
	t.Helper()
	p, err := repack.Pack(wt, dims, data)
	if err != nil {
		t.Fatal(err)
	}
	return p.Data
}
