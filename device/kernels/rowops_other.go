//go:build !amd64 || purego

package kernels

// vectorSumSquares: none here.
func vectorSumSquares([]float32, *[32]float32) int { return 0 }

// vectorQ8KBlock: none here.
func vectorQ8KBlock([]byte, []float32) bool { return false }

// vectorScaleMul: none here.
func vectorScaleMul(y, x, w []float32, s float32) int { return 0 }
