package num

import "math"

// WarpSum is the warp-level sum every kernel uses, and its order is part of the contract:
// an xor butterfly over the 32 lanes with offsets 16, 8, 4, 2, 1. In each round every lane l
// replaces its value by v[l] + v[l^off], all lanes at once (the CUDA form is
// v += __shfl_xor_sync(0xffffffff, v, off) with __fadd_rn). WarpSum performs the rounds in place
// and returns lane 0's value. Because IEEE addition is commutative, lanes l and l^off compute
// the same sum each round, so on return all 32 lanes hold the same bits; a NaN sum is the
// canonical NaN, as the GPU gives it.
// Lane 0's result is (((((v0+v16)+(v8+v24))+((v4+v20)+(v12+v28)))+…): pairs at distance 16
// first, then 8, 4, 2, 1.
func WarpSum(v *[32]float32) float32 {
	for off := 16; off > 0; off >>= 1 {
		var next [32]float32
		for l := range v {
			next[l] = v[l] + v[l^off]
		}
		*v = next
	}
	for l := range v { // a NaN sum is the GPU's canonical NaN, whatever Go's addition gave
		v[l] = Canon(v[l])
	}
	return v[0]
}

// WarpTotal returns the value WarpSum returns, computing only the 31 additions lane 0's result
// depends on (the pairs at distance 16, then 8, 4, 2, 1, as a tree); v is left unchanged.
// Twins use it where the other lanes' copies are not needed.
func WarpTotal(v *[32]float32) float32 {
	var t [16]float32
	for l := 0; l < 16; l++ {
		t[l] = v[l] + v[l+16]
	}
	for n := 8; n > 0; n >>= 1 {
		for l := 0; l < n; l++ {
			t[l] = t[l] + t[l+n]
		}
	}
	return Canon(t[0])
}

// WarpMax is WarpSum's butterfly with Max32 in place of addition (PTX max.f32 NaN and signed
// zero rules); it too leaves every lane holding the result.
func WarpMax(v *[32]float32) float32 {
	for off := 16; off > 0; off >>= 1 {
		var next [32]float32
		for l := range v {
			next[l] = Max32(v[l], v[l^off])
		}
		*v = next
	}
	return v[0]
}

// LaneSums returns the lane-strided partial sums of x: lane l starts from +0 and adds
// x[l], x[l+32], x[l+64], … in increasing index order (acc = acc + x[i], one rounding each), as
// a warp does with float acc = 0.f; for (i = lane; i < n; i += 32) acc = __fadd_rn(acc, x[i]).
func LaneSums(x []float32) (acc [32]float32) {
	for i, v := range x {
		acc[i&31] += v
	}
	for l := range acc {
		acc[l] = Canon(acc[l])
	}
	return acc
}

// StridedSum returns the warp sum of x in the standard order: LaneSums, then WarpSum.
func StridedSum(x []float32) float32 {
	acc := LaneSums(x)
	return WarpSum(&acc)
}

// StridedMax returns the warp maximum of x in the standard order: lane l starts from -Inf and
// takes Max32 with x[l], x[l+32], …; then WarpMax. An empty x gives -Inf.
func StridedMax(x []float32) float32 {
	var acc [32]float32
	for l := range acc {
		acc[l] = float32(math.Inf(-1))
	}
	for i, v := range x {
		acc[i&31] = Max32(acc[i&31], v)
	}
	return WarpMax(&acc)
}
