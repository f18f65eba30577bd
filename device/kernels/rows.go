package kernels

import (
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Row runs: where a weight type has a rows form (simd_amd64.go; with AVX-512 VNNI,
// tile_amd64.go), a one-column matvec (a decode step's) computes a run of rows in one call. A
// rows form gives every row exactly its PackedDot's bits (the same unit sums, the same fused
// multiply-adds into the same lanes in the same order, the same fold); it reads the rows in
// order, asks the caches for the bytes a few rows ahead as it goes, and leaves out the one-row
// forms' calls per row.

// rowsFunc computes out[r] for r < len(out): the product of packed row r (w[r·RowStride:]) with
// the activation row x, PackedDot's bits (a NaN the canonical one). With pf, it asks the caches
// for the rows ahead as it goes, w may go on past the last row (the rest of the matrix).
type rowsFunc = func(l *repack.Layout, w, x []byte, out []float32, pf bool)

// rowsPrefetch turns the rows forms' prefetching on or off (tests and benchmarks).
var rowsPrefetch = true

// rowsRun is the most rows a rows form computes in one call when the products are added to
// the output (their buffer is on the stack).
const rowsRun = 256

// matvecRows computes rows [lo, hi) of a one-column matvec of the matrix w with a rows form:
// y[r], stored or (acc) added. A matrix that a core's caches hold from one step to the next
// (tileResident) is not prefetched.
func matvecRows(rf rowsFunc, l *repack.Layout, w, x []byte, lo, hi int, y []float32, acc bool) {
	stride := int(l.RowStride)
	pf := len(w) > tileResident
	if !acc {
		rf(l, w[lo*stride:], x, y[lo:hi], pf)
		return
	}
	var buf [rowsRun]float32
	for r := lo; r < hi; r += rowsRun {
		m := min(rowsRun, hi-r)
		rf(l, w[r*stride:], x, buf[:m], pf)
		for i, v := range buf[:m] {
			y[r+i] = num.Canon(y[r+i] + v) // the GPU's NaN, as the add kernel gives
		}
	}
}

// rowsOverTiles: a one-column matvec of a type with both a rows form and a tile form takes the
// rows form where preferRows says (tests and benchmarks turn it off).
var rowsOverTiles = true

// preferRows reports whether a one-column matvec of type t (rows rows in layout l) takes the
// rows form over the tile form, where both exist: for a matrix larger than tileResident, which
// streams from memory. The tile forms compute somewhat faster (a matrix in the caches) but read
// 16 rows at a time, q6_K's two planes from 32 places at once; the rows forms read one row after
// another with the rows ahead prefetched, which the memory system serves at twice the rate.
func preferRows(t dtype.Type, l *repack.Layout, rows int) bool {
	if vectorTile[t] == nil || rows < tileRows {
		return true
	}
	return rowsOverTiles && int64(rows)*l.RowStride > tileResident
}
