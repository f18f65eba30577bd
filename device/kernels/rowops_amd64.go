//go:build amd64 && !purego

package kernels

//go:noescape
func sumSquaresAVX2(x *float32, blocks int, acc *[32]float32)

// vectorSumSquares folds x's whole 32-value blocks into rmsScale's lane accumulators and
// returns how many values it folded (0 without the vector forms).
func vectorSumSquares(x []float32, acc *[32]float32) int {
	blocks := len(x) / 32
	if !vectorCPU || blocks == 0 {
		return 0
	}
	sumSquaresAVX2(&x[0], blocks, acc)
	return 32 * blocks
}

//go:noescape
func q8KBlockAVX2(dst *byte, x *float32)

// vectorQ8KBlock is q8KBlock with its vector form; false (nothing written) without one.
func vectorQ8KBlock(dst []byte, x []float32) bool {
	if !vectorCPU {
		return false
	}
	_, _ = dst[:q8KBytes], x[:256]
	q8KBlockAVX2(&dst[0], &x[0])
	return true
}

//go:noescape
func scaleMulAVX2(y, x, w *float32, n int, s float32)

// vectorScaleMul sets y[i] = Canon(float32(x[i]·s)·w[i]) for the first values, 8 at a time,
// and returns how many it set (0 without the vector forms).
func vectorScaleMul(y, x, w []float32, s float32) int {
	n := min(len(y), len(x), len(w)) &^ 7
	if !vectorCPU || n == 0 {
		return 0
	}
	scaleMulAVX2(&y[0], &x[0], &w[0], n, s)
	return n
}
