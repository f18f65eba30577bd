package kernels

import (
	"fmt"
	"strings"
	"sync"

	"verity/device/dtype"
	"verity/repack"
)

// dotFunc is the type of Format.PackedDot.
type dotFunc = func(l *repack.Layout, row, x []byte) float32

// multiDotFunc computes a packed row's products with len(out) ≤ maxMultiColumns activation
// rows x[c·xb:] at once, each with the bits of the format's PackedDot.
type multiDotFunc = func(l *repack.Layout, row, x []byte, xb int, out []float32)

// maxMultiColumns is the most columns a multiDotFunc takes in one call.
const maxMultiColumns = 8

// maxIntoColumns is the most columns a multiIntoFunc takes in one call.
const maxIntoColumns = 32

// intoColumns is how many columns a pass of a multiIntoFunc form over a row of the given
// super-blocks takes: as many as keep their activations (292 bytes a super-block) within
// about half a core's L1 data cache, 8 to maxIntoColumns. More columns a pass spread a row's
// unpacking over more of them; past the L1 the activations come from L2 (measured:
// BenchmarkPrefillSmall and BenchmarkPrefillWide).
func intoColumns(blocks int64) int {
	return int(min(maxIntoColumns, max(maxMultiColumns, 16<<10/(max(blocks, 1)*q8KBytes))))
}

// multiAcc is a several-column form's lane accumulators, column c at [c].
type multiAcc = [maxIntoColumns][32]float32

// multiIntoFunc is a several-column form that puts a packed row's products with the n ≤
// maxIntoColumns activation rows x[c·xb:] straight into a matvec's output: PackedDot's bits
// stored at y[c·stride] or, with add, added to the value there (a NaN the canonical one, as
// the add kernel gives). acc is zeroed scratch, left zeroed.
type multiIntoFunc = func(l *repack.Layout, row, x []byte, xb, n int, acc *multiAcc, y []float32, stride int, add bool)

// multiAccs recycles zeroed lane accumulators for the multiIntoFunc forms.
var multiAccs = sync.Pool{New: func() any { return new(multiAcc) }}

// multiForm is how a several-column form's assembly gathers each unit's sum into its own lane
// (q45KDotNAVX2's comment): horizontal adds, VNNI's dot products with them, or over transposed
// activations with none.
type multiForm uint8

const (
	formPlain multiForm = iota
	formVNNI
	formTransposed
)

// formOf is the plain form's, or VNNI's with vnni.
func formOf(vnni bool) multiForm {
	if vnni {
		return formVNNI
	}
	return formPlain
}

// vectorMulti holds the several-column vector forms by weight type.
var vectorMulti = vectorMultiForms()

// vectorMultiT holds, by weight type, several-column vector forms that read their activation
// rows transposeQ8K laid out (transposed once a launch, read by every weight row); where a
// type has one, the matvec twin uses it instead of its vectorMulti form.
var vectorMultiT = vectorMultiTForms()

// transposeQ8K writes into dst the n q8_K activation rows src[c·xb:] with each super-block's
// 256 quants laid out as an 8 × 8 matrix of 4-byte groups transposed: the group holding quants
// 4k … 4k+3 of unit u (the super-block's 32 quants from 32u) moves to bytes 32k + 4u, so that
// the 32 bytes at 32k hold group k of every unit. The scale and the block sums stay where
// they are.
func transposeQ8K(dst, src []byte, xb, n, blocks int) {
	copy(dst[:n*xb], src[:n*xb])
	for c := 0; c < n; c++ {
		if !vectorTransposeQ8K(dst[c*xb:], src[c*xb:], blocks) {
			transposeQ8KRow(dst[c*xb:], src[c*xb:], blocks)
		}
	}
}

// transposeQ8KGo is transposeQ8K in portable Go (tests).
func transposeQ8KGo(dst, src []byte, xb, n, blocks int) {
	copy(dst[:n*xb], src[:n*xb])
	for c := 0; c < n; c++ {
		transposeQ8KRow(dst[c*xb:], src[c*xb:], blocks)
	}
}

// transposeQ8KRow moves the quants of one activation row's super-blocks as transposeQ8K does.
func transposeQ8KRow(dst, src []byte, blocks int) {
	for i := 0; i < blocks; i++ {
		q := i*q8KBytes + 4
		in, out := src[q:q+256], dst[q:q+256]
		for u := 0; u < 8; u++ {
			for k := 0; k < 8; k++ {
				copy(out[32*k+4*u:32*k+4*u+4], in[32*u+4*k:32*u+4*k+4])
			}
		}
	}
}

// vectorDots holds, by weight type, a faster form of the format's PackedDot with the same
// bits (simd_amd64.go provides them where the CPU allows); registerFormat installs it and
// keeps the portable Go function as Format.portableDot. vectorISA names their instruction
// set ("" for none). Initialised with the package's variables, before any registration.
var vectorDots, vectorISA = vectorForms()

// vectorCPU: the CPU runs the vector forms (and laneSum uses its vector form).
var vectorCPU = vectorSupported()

// VectorISA reports the instruction set the twin's matvec uses beyond portable Go, or "" when
// every dot product is the portable Go one (other CPUs, or the purego build tag).
func VectorISA() string { return vectorISA }

// VectorTypes lists the weight types whose twin dot product uses the vector forms, in id
// order (none where VectorISA is "").
func VectorTypes() []dtype.Type {
	var out []dtype.Type
	for _, t := range WeightTypes() {
		if formats[t].portableDot != nil {
			out = append(out, t)
		}
	}
	return out
}

// TwinPath describes the twin's matvec arithmetic path: the vector instruction set and the
// weight types it covers, those with row-tile forms (tile.go) and those with rows forms for
// one column (rows.go), or "portable Go".
func TwinPath() string {
	if vectorISA == "" {
		return "portable Go"
	}
	names := make([]string, 0, 8)
	for _, t := range VectorTypes() {
		names = append(names, t.String())
	}
	path := vectorISA + " (" + strings.Join(names, " ") + ")"
	var tiles []string
	for _, t := range WeightTypes() {
		if vectorTile[t] != nil {
			tiles = append(tiles, t.String())
		}
	}
	if len(tiles) > 0 {
		path += fmt.Sprintf("; AVX-512 VNNI %d-row tiles (%s)", tileRows, strings.Join(tiles, " "))
	}
	var runs []string
	for _, t := range WeightTypes() {
		if vectorRows[t] != nil {
			runs = append(runs, t.String())
		}
	}
	if len(runs) > 0 {
		path += "; " + rowsISA() + " one-column row runs (" + strings.Join(runs, " ") + ")"
	}
	return path
}
