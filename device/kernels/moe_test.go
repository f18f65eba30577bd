package kernels_test

import (
	"math/rand/v2"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/kernels"
)

// The grouped kernels give the bits of the unfused sequence: two expert matvecs and SwiGLU;
// the per-slot down matvec and the combine, with and without a shared expert.
func TestMoEGroupedEqualsUnfused(t *testing.T) {
	b := cpu.New(3)
	defer b.Close()
	const n, k, ne, ff, emb = 3, 2, 5, 256, 512
	launch := func(k device.Spec, a any) {
		t.Helper()
		if err := b.Launch(k, a); err != nil {
			t.Fatal(err)
		}
	}
	for _, wt := range kernels.WeightTypes() {
		t.Run(wt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(wt), 11))
			gate := newMoECase(t, b, wt, ne, ff, emb, n, k, uint64(wt)+20)
			up := newMoECase(t, b, wt, ne, ff, emb, n, k, uint64(wt)+21)
			up.idsP, up.actW = gate.idsP, gate.actW // the same tokens and choices
			mm, err := kernels.MoEMatVec(wt)
			if err != nil {
				t.Fatal(err)
			}
			g, u, want := zeros(t, b, n*k*ff), zeros(t, b, n*k*ff), zeros(t, b, n*k*ff)
			launch(mm, gate.args(g, false))
			launch(mm, up.args(u, false))
			launch(kernels.SwiGLU, kernels.BinaryArgs{A: g, B: u, Y: want, N: n * k * ff})
			gu, err := kernels.MoEGateUp(wt)
			if err != nil {
				t.Fatal(err)
			}
			got := zeros(t, b, n*k*ff)
			launch(gu, kernels.MoEGateUpArgs{WGate: gate.expertW, WUp: up.expertW, X: gate.actW, Ids: gate.idsP, Y: got,
				N: n, K: k, Out: ff, Cols: emb, NExpert: ne})
			sameBits(t, "gate/up", readF32(t, b, got, n*k*ff), readF32(t, b, want, n*k*ff))

			down := newMoECase(t, b, wt, ne, emb, ff, n, k, uint64(wt)+22)
			down.idsP = gate.idsP
			y := zeros(t, b, n*k*emb)
			launch(mm, down.args(y, true))
			weights := f32Ptr(t, b, randF32(r, n*k, 0.5))
			shared, sgate := f32Ptr(t, b, randF32(r, n*emb, 1)), f32Ptr(t, b, randF32(r, n, 2))
			dk, err := kernels.MoEDown(wt)
			if err != nil {
				t.Fatal(err)
			}
			for _, withShared := range []bool{false, true} {
				ca := kernels.MoECombineArgs{Y: y, Weights: weights, Out: zeros(t, b, n*emb), N: n, K: k, Width: emb}
				da := kernels.MoEDownArgs{W: down.expertW, X: down.actW, Ids: down.idsP, Weights: weights, Out: zeros(t, b, n*emb),
					N: n, K: k, Rows: emb, Cols: ff, NExpert: ne}
				if withShared {
					ca.Shared, ca.Gate, da.Shared, da.Gate = shared, sgate, shared, sgate
				}
				launch(kernels.MoECombine, ca)
				launch(dk, da)
				sameBits(t, "down", readF32(t, b, da.Out, n*emb), readF32(t, b, ca.Out, n*emb))
			}
		})
	}
}
