package reference

import (
	"fmt"

	"verity/device/dtype"
	"verity/host/quant"
)

// matrix is a weight W of y = W·x decoded to float64: rows outputs of cols inputs, row-major
// (row r is w[r·cols : (r+1)·cols], the r-th row of the GGUF tensor with dims [cols, rows]).
type matrix struct {
	name       string
	vecDot     dtype.Type // the type ggml converts the activations to (see vecDotType)
	rows, cols int
	w          []float64
	mins       []float64 // Q4_1 and Q5_1: the offset m of block b of row r at [r·cols/32 + b]
}

func (m *matrix) row(r int) []float64 { return m.w[r*m.cols : (r+1)*m.cols] }

// slice returns the matrix of rows lo … hi−1 (a part of a fused projection).
func (m *matrix) slice(lo, hi int) *matrix {
	s := *m
	s.name = fmt.Sprintf("%s[%d:%d]", m.name, lo, hi)
	s.rows, s.w = hi-lo, m.w[lo*m.cols:hi*m.cols]
	if m.mins != nil {
		nb := m.cols / qk8
		s.mins = m.mins[lo*nb : hi*nb]
	}
	return &s
}

// mul returns W·x. Without actQuant every product and sum is float64, in index order. With
// actQuant, x is first converted as ggml's CPU backend converts it for this weight type.
func (m *matrix) mul(x []float64, actQuant bool) []float64 {
	if len(x) != m.cols {
		panic(fmt.Sprintf("reference: %s: input of %d values for %d columns", m.name, len(x), m.cols))
	}
	y := make([]float64, m.rows)
	if !actQuant {
		for r := range y {
			y[r] = dot(m.row(r), x)
		}
		return y
	}
	a := convert(m.vecDot, x)
	for r := range y {
		y[r] = a.dot(m.row(r))
		if a.sumErr != nil {
			nb := m.cols / qk8
			for b, e := range a.sumErr {
				y[r] += float64(m.mins[r*nb+b] * e)
			}
		}
	}
	return y
}

// dot is Σ a[i]·b[i] in float64, in index order. The explicit conversion keeps the compiler from
// fusing the multiply and add, so that the result does not depend on the target (GOAMD64).
func dot(a, b []float64) float64 {
	var s float64
	for i, v := range a {
		s += float64(v * b[i])
	}
	return s
}

// qk8 is the block size of Q8_0 and Q8_1.
const qk8 = 32

// vecDotType returns the type ggml's CPU backend converts activations to before a dot product
// with weights of type t (the vec_dot_type of ggml-cpu's type traits).
func vecDotType(t dtype.Type) (dtype.Type, error) {
	switch t {
	case dtype.F32, dtype.F16, dtype.BF16:
		return t, nil
	case dtype.Q4_0, dtype.Q5_0, dtype.Q8_0:
		return dtype.Q8_0, nil
	case dtype.Q4_1, dtype.Q5_1:
		return dtype.Q8_1, nil
	case dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K:
		return dtype.Q8_K, nil
	}
	return 0, fmt.Errorf("activation conversion for %s weights: %w", t, ErrUnsupported)
}

// activation is an input vector as ggml's CPU backend hands it to the dot products.
type activation struct {
	f32    []float64    // vecDot F32: the values rounded to float32
	format quant.Format // otherwise: the format of blocks
	blocks []byte
	// sumErr is set for Q8_1: per block, the stored block sum s minus the sum of the decoded
	// values. ggml's Q4_1/Q5_1 dot products use s where the exact product would use the sum.
	sumErr []float64
}

// convert rounds x to float32 and encodes it in the type vt with host/quant's quantiser (which
// is ggml's quantize_row_*_ref, what the CPU backend's generic code uses).
func convert(vt dtype.Type, x []float64) activation {
	x32 := make([]float32, len(x))
	for i, v := range x {
		x32[i] = float32(v)
	}
	if vt == dtype.F32 {
		a := activation{f32: make([]float64, len(x))}
		for i, v := range x32 {
			a.f32[i] = float64(v)
		}
		return a
	}
	blockType := vt
	if vt == dtype.Q8_1 {
		blockType = dtype.Q8_0 // Q8_1's d and q are Q8_0's; s is added below
	}
	a := activation{format: mustFormat(blockType), blocks: encode(blockType, x32)}
	if vt == dtype.Q8_1 {
		a.sumErr = q81SumErr(x32, a.blocks)
	}
	return a
}

// dot returns the float64 product of the decoded activation with the weight row w.
func (a activation) dot(w []float64) float64 {
	if a.format == nil {
		return dot(w, a.f32)
	}
	return a.format.DotRef(a.blocks, w)
}

// q81SumErr returns, for each 32-block of x, s − d·Σq, where d and q are those of the block in
// blocks (Q8_0 layout: fp16 d at offset 0, int8 q[32] at offset 2) and s is what ggml's
// quantize_row_q8_1_ref stores: fp16(float32(Σq · d32)), d32 = amax/127 being the float32
// scale before its rounding to fp16.
func q81SumErr(x []float32, blocks []byte) []float64 {
	const blockBytes = 2 + qk8
	out := make([]float64, len(x)/qk8)
	for b := range out {
		var amax float32
		for _, v := range x[b*qk8 : (b+1)*qk8] {
			amax = max(amax, abs32(v))
		}
		d32 := amax / 127
		blk := blocks[b*blockBytes : (b+1)*blockBytes]
		var sum int32
		for _, q := range blk[2:] {
			sum += int32(int8(q))
		}
		s := roundHalf(float32(float32(sum) * d32))
		out[b] = s - float64(halfAt(blk)*float64(sum))
	}
	return out
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

// encode returns x in type t.
func encode(t dtype.Type, x []float32) []byte {
	n, err := t.RowBytes(int64(len(x)))
	if err != nil {
		panic(fmt.Sprintf("reference: %d values as %s: %v", len(x), t, err))
	}
	b := make([]byte, n)
	mustFormat(t).Quantize(b, x)
	return b
}

// roundHalf returns x rounded to fp16 (nearest even), as a float64.
func roundHalf(x float32) float64 { return halfAt(encode(dtype.F16, []float32{x})) }

// halfAt decodes the little-endian fp16 at b[0:2].
func halfAt(b []byte) float64 {
	var v [1]float32
	mustFormat(dtype.F16).Dequantize(v[:], b[:2])
	return float64(v[0])
}

// mustFormat returns host/quant's format of t; the types used here are always registered.
func mustFormat(t dtype.Type) quant.Format {
	f, err := quant.Lookup(t)
	if err != nil {
		panic("reference: " + err.Error())
	}
	return f
}
