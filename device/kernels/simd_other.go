//go:build !amd64 || purego

package kernels

import (
	"verity/device/dtype"
	"verity/device/num"
)

// vectorSupported: no vector forms here.
func vectorSupported() bool { return false }

// vectorForms: no vector forms on this platform or build; every PackedDot is portable Go.
func vectorForms() (map[dtype.Type]dotFunc, string) { return nil, "" }

// vectorWarpTotal is never called where vectorCPU is false.
func vectorWarpTotal(v *[32]float32) float32 { return num.WarpTotal(v) }

// prefetch is a no-op here.
func prefetch([]byte) {}

// vectorScores: none here.
func vectorScores(e, q, kc []float32, offs []int64, scale float32, vec bool) int { return 0 }

// vectorScores4: none here.
func vectorScores4(e *[4 * AttnChunk]float32, q, kc []float32, offs []int64, scale float32) int {
	return 0
}

// vectorPV2: none here.
func vectorPV2(out []float32, os, hd int, e []float32, es int, vc []float32, offs []int64) bool {
	return false
}

// vectorPV: none here.
func vectorPV(out, e, vc []float32, offs []int64, vec bool) bool { return false }

// vectorExpShift: none here.
func vectorExpShift(e []float32, m float32, vec bool) int { return 0 }

// vectorSwiGLU: none here.
func vectorSwiGLU(y, a, b []float32) int { return 0 }

// vectorSigmoidMul: none here.
func vectorSigmoidMul(y, a, b []float32) int { return 0 }

// vectorMultiForms: none here.
func vectorMultiForms() map[dtype.Type]multiDotFunc { return nil }

// vectorMaxOf: none here.
func vectorMaxOf(e []float32) (float32, bool) { return 0, false }

// vectorLaneSum: none here.
func vectorLaneSum(e []float32) (float32, bool) { return 0, false }

// vectorTransposeQ8K: none here.
func vectorTransposeQ8K(dst, src []byte, blocks int) bool { return false }

// vectorMultiTInto: none here.
var vectorMultiTInto map[dtype.Type]multiIntoFunc

// vectorMultiTForms: none here.
func vectorMultiTForms() map[dtype.Type]multiDotFunc { return nil }

// multiForms: none here.
var multiForms = map[dtype.Type]func(form multiForm) multiDotFunc{}

// vectorVNNI: never here.
const vectorVNNI = false

// vectorDeltaRule: none here.
func vectorDeltaRule(o, s, q, k, v []float32, e, b float32) bool { return false }

// vectorRows: none here.
var vectorRows map[dtype.Type]rowsFunc

// rowsVariants: none here.
func rowsVariants(dtype.Type) map[string]rowsFunc { return nil }

// rowsISA: no rows forms here.
func rowsISA() string { return "" }
