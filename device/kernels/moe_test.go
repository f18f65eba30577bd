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
	testMoEGrouped(t, 3, 2, 5, 256, 512, 512, 256)
}

// The same for one token (a decode step: its slots go to distinct experts, which the per-slot
// path takes, a run of each slot's rows at a time).
func TestMoEDecodeEqualsUnfused(t *testing.T) {
	testMoEGrouped(t, 1, 2, 5, 40, 512, 56, 256)
	testMoEGrouped(t, 1, 4, 6, 300, 256, 260, 256)
}

// The same with row counts that end in part of a tile (the grouped twins' tile forms take
// whole tiles of 16 rows) and experts shared by several slots.
func TestMoEGroupedPartialTiles(t *testing.T) {
	testMoEGrouped(t, 7, 2, 3, 40, 256, 56, 256)
}

// testMoEGrouped checks the grouped kernels for n tokens, k of ne experts, gate/up matrices of
// ff rows and emb columns, a down matrix of rows rows and cols columns.
func testMoEGrouped(t *testing.T, n, k, ne, ff, emb, rows, cols int) {
	b := cpu.New(3)
	defer b.Close()
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
			launch(kernels.SwiGLU, kernels.BinaryArgs{A: g, B: u, Y: want, N: int32(n * k * ff)})
			gu, err := kernels.MoEGateUp(wt)
			if err != nil {
				t.Fatal(err)
			}
			got := zeros(t, b, n*k*ff)
			launch(gu, kernels.MoEGateUpArgs{WGate: gate.expertW, WUp: up.expertW, X: gate.actW, Ids: gate.idsP, Y: got,
				N: int32(n), K: int32(k), Out: int32(ff), Cols: int32(emb), NExpert: int32(ne)})
			sameBits(t, "gate/up", readF32(t, b, got, n*k*ff), readF32(t, b, want, n*k*ff))

			down := newMoECase(t, b, wt, ne, rows, cols, n, k, uint64(wt)+22)
			down.idsP = gate.idsP
			y := zeros(t, b, n*k*rows)
			launch(mm, down.args(y, true))
			weights := f32Ptr(t, b, randF32(r, n*k, 0.5))
			shared, sgate := f32Ptr(t, b, randF32(r, n*rows, 1)), f32Ptr(t, b, randF32(r, n, 2))
			dk, err := kernels.MoEDown(wt)
			if err != nil {
				t.Fatal(err)
			}
			for _, withShared := range []bool{false, true} {
				ca := kernels.MoECombineArgs{Y: y, Weights: weights, Out: zeros(t, b, n*rows), N: int32(n), K: int32(k), Width: int32(rows)}
				da := kernels.MoEDownArgs{W: down.expertW, X: down.actW, Ids: down.idsP, Weights: weights, Out: zeros(t, b, n*rows),
					N: int32(n), K: int32(k), Rows: int32(rows), Cols: int32(cols), NExpert: int32(ne)}
				if withShared {
					ca.Shared, ca.Gate, da.Shared, da.Gate = shared, sgate, shared, sgate
				}
				launch(kernels.MoECombine, ca)
				launch(dk, da)
				sameBits(t, "down", readF32(t, b, da.Out, n*rows), readF32(t, b, ca.Out, n*rows))
			}
		})
	}
}
