// norm.cuh: the RMS scale shared by norm.cu and gate.cu.
#pragma once

#include "num.cuh"

// rms_scale mirrors kernels' rmsScale for the n values at x, computed by one warp: lane l folds
// x[i]² for i = l, l+32, … into acc = fma(x[i], x[i], acc) from +0; warp_sum; then
// mean = sum / float32(n), and the scale is 1 / sqrt32(mean + eps), each step rounded. Every lane
// returns the same scale.
static __device__ __forceinline__ float rms_scale(const float *x, int32_t n, float eps, int lane) {
	float acc = 0.0f;
	for (int32_t i = lane; i < n; i += 32) acc = __fmaf_rn(x[i], x[i], acc);
	float mean = __fdiv_rn(warp_sum(acc), __int2float_rn(n));
	return __fdiv_rn(1.0f, sqrt32(__fadd_rn(mean, eps)));
}
