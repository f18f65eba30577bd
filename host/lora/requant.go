package lora

import (
	"encoding/binary"
	"fmt"
	"math"

	"verity/device/dtype"
	"verity/host/quant"
)

// rowMerger writes one merged row of a target: the base row dequantised, plus its Δ row,
// re-encoded in the target's merged type (see the package comment).
type rowMerger struct {
	from, to quant.Format
	same     bool  // the merged type is the base's
	g        *grid // the merged type's grid (nil for float types)
	bs, bb   int   // the merged type's values and bytes per block
	hash     uint64
	rounding Rounding
	lo, hi   int64 // the grid's code range
}

// worker holds one goroutine's scratch rows and counts.
type worker struct {
	w      []float32 // the base row
	d      []float64 // its Δ
	t      []float32 // W + Δ, rounded to float32
	q, q2  []int32
	st, s2 []float32
	v      []float32
	blk    []byte
	blocks Blocks
}

func newRowMerger(t Target, r Rounding) (*rowMerger, error) {
	from, err := quant.Lookup(t.Base.Type)
	if err != nil {
		return nil, fmt.Errorf("lora: tensor %q: %w", t.Name, err)
	}
	to, err := quant.Lookup(t.Type)
	if err != nil {
		return nil, fmt.Errorf("lora: tensor %q: %w", t.Name, err)
	}
	m := &rowMerger{from: from, to: to, same: t.Type == t.Base.Type, g: grids[t.Type],
		bs: t.Type.BlockSize(), bb: t.Type.BlockBytes(), hash: nameHash(t.Name), rounding: r}
	if isFloat(t.Type) {
		m.g = nil
	} else if m.g == nil {
		return nil, fmt.Errorf("lora: tensor %q: %w: %s has no code grid", t.Name, ErrNotWritable, t.Type)
	} else {
		m.lo, m.hi = int64(m.g.lo), int64(m.g.hi)
	}
	return m, nil
}

func (m *rowMerger) scratch(in int) *worker {
	return &worker{w: make([]float32, in), d: make([]float64, in), t: make([]float32, in),
		q: make([]int32, m.bs), q2: make([]int32, m.bs), st: make([]float32, m.bs), s2: make([]float32, m.bs),
		v: make([]float32, m.bs), blk: make([]byte, m.bb)}
}

// row merges row o: src in the base type, dst in the merged type; w.d holds the row's Δ.
func (m *rowMerger) row(w *worker, o int, src, dst []byte) {
	m.from.Dequantize(w.w, src)
	for j, x := range w.w {
		w.t[j] = float32(float64(x) + w.d[j])
	}
	if m.g == nil {
		m.floatRow(w, src, dst)
		return
	}
	for b := 0; b < len(w.w)/m.bs; b++ {
		lo, hi := b*m.bs, (b+1)*m.bs
		out := dst[b*m.bb : (b+1)*m.bb]
		if !m.same {
			m.fresh(w, o, lo, out)
			w.blocks.Fresh++
			continue
		}
		in := src[b*m.bb : (b+1)*m.bb]
		if allZero(w.d[lo:hi]) {
			copy(out, in)
			w.blocks.Copied++
			continue
		}
		clamped, loss, noise := m.move(w, o, lo, in, out)
		if !clamped {
			w.blocks.Moved++
			continue
		}
		if loss <= refitThreshold*noise {
			w.blocks.Clamped++
			continue
		}
		// Codes would have left their range and lost more than rounding costs the rest: a
		// fresh quantisation of the block may do better.
		m.fresh(w, o, lo, w.blk)
		if m.sqErr(w, lo, w.blk) < m.sqErr(w, lo, out) {
			copy(out, w.blk)
			w.blocks.Refit++
		} else {
			w.blocks.Clamped++
		}
	}
}

// floatRow writes an F32, F16 or BF16 row: W + Δ to nearest, and where Δ is 0 (with the
// same type) the base's bytes.
func (m *rowMerger) floatRow(w *worker, src, dst []byte) {
	if m.to.Type() == dtype.F32 {
		for j := range w.t { // float32(W + Δ) exactly as computed, without a second rounding
			putF32(dst[4*j:], w.t[j])
		}
	} else {
		m.to.Quantize(dst, w.t)
	}
	if !m.same {
		w.blocks.Fresh += int64(len(w.t))
		return
	}
	n := m.bb // bytes per element
	for j, d := range w.d {
		if d == 0 {
			copy(dst[j*n:(j+1)*n], src[j*n:(j+1)*n])
			w.blocks.Copied++
		} else {
			w.blocks.Moved++
		}
	}
}

// move writes block in with each code moved by Δ/step (rounded with the element's draw) into
// out, and reports whether some code had to be clamped to its range (or could not move: a
// step of 0), the squared error those codes lose, and the squared rounding error of the
// others.
func (m *rowMerger) move(w *worker, o, lo int, in, out []byte) (clamped bool, loss, noise float64) {
	copy(out, in)
	m.g.decode(in, w.q, w.st)
	for i := range m.bs {
		d := w.d[lo+i]
		if d == 0 {
			continue
		}
		st := float64(w.st[i])
		if st == 0 {
			clamped = true
			loss += float64(d * d)
			continue
		}
		x := d / st
		mv := round(x, uniform(m.hash, o, lo+i), m.rounding)
		c := int64(w.q[i]) + mv
		if c < m.lo || c > m.hi {
			c, clamped = max(m.lo, min(m.hi, c)), true
			e := (float64(c-int64(w.q[i])) - x) * st
			loss += float64(e * e)
		} else {
			e := (float64(mv) - x) * st
			noise += float64(e * e)
		}
		w.q[i] = int32(c)
	}
	m.g.encode(out, w.q)
	return clamped, loss, noise
}

// refitThreshold decides when a block whose codes would leave their range is also tried as a
// fresh quantisation: when the squared error the clamped codes lose exceeds this many times
// that of the rounding of the block's other moves. Below it a fresh grid cannot do much
// better — its own rounding costs about as much — and trying it on every block with a code at
// the edge of its range (most K-quant blocks have one) would cost ggml's scale search each
// time and, by snapping to the new grid, keep less of a small delta (measured in
// TestRefitThreshold). A variable so that the test can compare.
var refitThreshold = 1.0

// fresh writes into out a fresh quantisation of W + Δ for the block at lo: ggml's reference
// quantiser chooses the scales, and each code is then placed on that grid with the element's
// draw (stochastic rounding keeps the block unbiased; with Nearest the quantiser's own codes
// stay).
func (m *rowMerger) fresh(w *worker, o, lo int, out []byte) {
	m.to.Quantize(out, w.t[lo:lo+m.bs])
	if m.rounding == Nearest {
		return
	}
	m.g.decode(out, w.q2, w.s2)
	m.to.Dequantize(w.v, out)
	for i := range m.bs {
		st := float64(w.s2[i])
		if st == 0 {
			continue
		}
		base := float64(w.v[i]) - float64(st*float64(w.q2[i])) // the value of code 0 (no FMA)
		target := float64(w.w[lo+i]) + w.d[lo+i]
		c := round((target-base)/st, uniform(m.hash, o, lo+i), m.rounding)
		w.q2[i] = int32(max(m.lo, min(m.hi, c)))
	}
	m.g.encode(out, w.q2)
}

// sqErr is the squared error of a block against W + Δ.
func (m *rowMerger) sqErr(w *worker, lo int, blk []byte) float64 {
	m.to.Dequantize(w.v, blk)
	var e float64
	for i, v := range w.v {
		x := float64(v) - (float64(w.w[lo+i]) + w.d[lo+i])
		e += float64(x * x) // no FMA: the choice must not depend on GOAMD64
	}
	return e
}

func allZero(d []float64) bool {
	for _, x := range d {
		if x != 0 {
			return false
		}
	}
	return true
}

func putF32(b []byte, x float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(x)) }
