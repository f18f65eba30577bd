package kernels

import (
	"verity/device/dtype"
	"verity/repack"
)

// PortablePackedDot is f's Go PackedDot: the vector form's reference where one is in use.
func PortablePackedDot(f *Format) func(l *repack.Layout, row, x []byte) float32 {
	if f.portableDot != nil {
		return f.portableDot
	}
	return f.PackedDot
}

// HasVectorDot reports whether f's PackedDot is a vector form (simd.go).
func HasVectorDot(f *Format) bool { return f.portableDot != nil }

// LaneSum is the matvec's lane fold (num.WarpTotal's bits).
func LaneSum(acc *[32]float32) float32 { return laneSum(acc) }

// Prefetch is the matvec's cache hint.
func Prefetch(b []byte) { prefetch(b) }

// AttendHead is the attention twin for one head; vector selects its vector forms (where the
// CPU has them) or the portable Go.
func AttendHead(out, q, kc, vc []float32, offs []int64, scale float32, vector bool) {
	attendHead(out, q, kc, vc, offs, make([]float32, len(offs)), scale, 0, vector)
}

// Scores4 computes four query heads' attention scores over one chunk's keys (the heads'
// queries side by side in q) with the vector form, and returns how many keys it scored (0
// where the CPU lacks it).
func Scores4(e *[4 * AttnChunk]float32, q, kc []float32, offs []int64, scale float32) int {
	return vectorScores4(e, q, kc, offs, scale)
}

// Widen16 widens 16-bit cache elements as the attention twin does (bf selects bfloat16), with
// its vector form where the CPU has it, or in portable Go.
func Widen16(dst []float32, src []uint16, bf, vector bool) {
	switch {
	case bf && vector:
		widenBF16(dst, src)
	case bf:
		widenBF16Go(dst, src)
	case vector:
		widenF16(dst, src)
	default:
		widenF16Go(dst, src)
	}
}

// MergeChunks is the attention twin's merge of one head's chunk partials, with its vector
// forms (where the CPU has them) or in portable Go.
var MergeChunks = mergeChunks

// ExpShift sets e[j] = num.Exp32(e[j] − m) with the attention twin's vector form where the
// CPU has it, and returns how many values it set.
func ExpShift(e []float32, m float32) int { return vectorExpShift(e, m, true) }

// SwiGLURow sets y[i] = Canon(SiLU32(a[i])·b[i]) with the vector form (where the CPU has it)
// or the portable Go.
func SwiGLURow(y, a, b []float32, vector bool) {
	op := swigluOp
	if !vector {
		op.vector = nil
	}
	op.apply(y, a, b)
}

// SigmoidMulRow is SigmoidMul's element-wise op over a row, with its vector form (where the
// CPU has it) or in portable Go.
func SigmoidMulRow(y, a, b []float32, vector bool) {
	op := sigmoidMulOp
	if !vector {
		op.vector = nil
	}
	op.apply(y, a, b)
}

// RowDots is the matvec twin's products of one packed weight row with len(out) activation
// rows xs[c·xb:].
func RowDots(f *Format, l *repack.Layout, row, xs []byte, xb int, out []float32) {
	d := newRowDot(f, l)
	d.load(row)
	d.dots(xs, xb, out)
}

// MultiDots runs t's several-column vector form, with VNNI or without, and reports whether
// there is one (and, for vnni, whether the CPU has it).
func MultiDots(t dtype.Type, l *repack.Layout, row, xs []byte, xb int, out []float32, vnni bool) bool {
	form := multiForms[t]
	if form == nil || !vectorCPU || vnni && !vectorVNNI {
		return false
	}
	form(formOf(vnni))(l, row, xs, xb, out)
	return true
}

// MultiDotsTransposed runs t's several-column form over transposed activations (transposeQ8K
// of xs), and reports whether there is one on this CPU.
func MultiDotsTransposed(t dtype.Type, l *repack.Layout, row, xs []byte, xb int, out []float32) bool {
	form := vectorMultiT[t]
	if form == nil {
		return false
	}
	xt := make([]byte, len(out)*xb)
	transposeQ8K(xt, xs, xb, len(out), int(l.Blocks))
	form(l, row, xt, xb, out)
	return true
}

// DeltaRule is the Gated DeltaNet state update, with its vector form (where the CPU has it) or
// in portable Go; it reports whether the vector form ran.
func DeltaRule(o, s, q, k, v []float32, e, b float32, vector bool) bool {
	if vector {
		return vectorDeltaRule(o, s, q, k, v, e, b)
	}
	portableDeltaRule(o, s, q, k, v, e, b)
	return false
}

// SiLUApply is the Gated DeltaNet convolution's SiLU pass: y = SiLU32(a) where b is all ones.
var SiLUApply = siluOp.apply

// TileDots runs t's tile form on the 16 packed rows at w (a whole tile) and n activation rows
// xs[c·xb:], and reports whether there is one: out[c][r] is row r's product with column c.
func TileDots(t dtype.Type, l *repack.Layout, w, xs []byte, xb, n int) (out [tileCols][tileRows]float32, ok bool) {
	tf := vectorTile[t]
	if tf == nil {
		return out, false
	}
	var s tileScratch
	tf(l, w, xs, nil, xb, n, &s)
	return s.out, true
}

// TileRows is the number of rows a tile form computes together, TileCols the most columns.
const TileRows, TileCols = tileRows, tileCols

// UseTiles turns the tile forms on or off (where the CPU has them) and returns a function
// restoring the previous setting.
func UseTiles(on bool) func() {
	old := vectorTile
	vectorTile = tileForms(on && tileCPU)
	return func() { vectorTile = old }
}

// SetTilePrefetch sets whether matvecTiles prefetches the next tile.
func SetTilePrefetch(on bool) { tilePrefetch = on }

// RMSScale is the rmsnorm scale 1/sqrt(mean(x²) + eps), with its vector form (where the CPU
// has it) or in portable Go.
func RMSScale(x []float32, eps float32, vector bool) float32 {
	return rmsScaleFrom(x, eps, vector)
}

// Q8KBlock converts 256 values into a q8_K block with the vector form (where the CPU has it)
// or in portable Go.
func Q8KBlock(dst []byte, x []float32, vector bool) {
	if !vector || !vectorQ8KBlock(dst, x) {
		q8KBlock(dst, x)
	}
}

// RMSNormRow is the rmsnorm of one row, with its vector forms (where the CPU has them) or in
// portable Go.
func RMSNormRow(y, x, w []float32, eps float32, vector bool) { rmsnormRowFrom(y, x, w, eps, vector) }

// RowsDots runs each of t's rows forms the CPU has (by instruction set) on the n packed rows at
// w (w may go on past them) and one activation row x: out[form][r] is row r's product.
func RowsDots(t dtype.Type, l *repack.Layout, w, x []byte, n int) map[string][]float32 {
	res := map[string][]float32{}
	for name, rf := range rowsVariants(t) {
		out := make([]float32, n)
		rf(l, w, x, out, true)
		res[name] = out
	}
	return res
}

// UseRows sets whether one-column matvecs take the rows forms over the tile forms (where the
// CPU has both) and returns a function restoring the previous setting.
func UseRows(on bool) func() {
	old := rowsOverTiles
	rowsOverTiles = on
	return func() { rowsOverTiles = old }
}

// SetRowsPrefetch sets whether the rows forms prefetch the rows ahead.
func SetRowsPrefetch(on bool) { rowsPrefetch = on }

// TransposeQ8K lays out n q8_K activation rows as the transposed several-column forms read
// them, with the vector form (where the CPU has it) or in portable Go.
func TransposeQ8K(dst, src []byte, xb, n, blocks int, vector bool) {
	if vector {
		transposeQ8K(dst, src, xb, n, blocks)
		return
	}
	transposeQ8KGo(dst, src, xb, n, blocks)
}

// MaxOf is attention's chunk maximum (maxOf), with its vector form where the CPU has it and
// it settles the result.
func MaxOf(e []float32, vector bool) float32 {
	if vector {
		if m, ok := vectorMaxOf(e); ok {
			return m
		}
	}
	return maxOf(e)
}
