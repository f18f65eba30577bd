// norm.cuh: the RMS scale shared by norm.cu and gate.cu.
#pragma once

#include "num.cuh"

// rms_scale mirrors kernels' rmsScale for the n values at x, computed by one warp: lane l folds
// x[i]² for i = l, l+32, … into acc = fma(x[i], x[i], acc) from +0; warp_sum; then
// mean = sum / float32(n), and the scale is 1 / sqrt32(mean + eps), each step rounded. Every lane
// returns the same scale. A lane loads RMS_AHEAD of its values before it folds them, so that a
// row's loads are in flight together rather than one round trip a few values (the same folds in
// the same order).
#define RMS_AHEAD 16
static __device__ __forceinline__ float rms_scale(const float *x, int32_t n, float eps, int lane) {
	float acc = 0.0f;
	int32_t i = lane;
	for (; i + 32 * (RMS_AHEAD - 1) < n; i += 32 * RMS_AHEAD) {
		float v[RMS_AHEAD];
#pragma unroll
		for (int k = 0; k < RMS_AHEAD; k++) v[k] = x[i + 32 * k];
#pragma unroll
		for (int k = 0; k < RMS_AHEAD; k++) acc = __fmaf_rn(v[k], v[k], acc);
	}
	for (; i < n; i += 32) acc = __fmaf_rn(x[i], x[i], acc);
	float mean = __fdiv_rn(warp_sum(acc), __int2float_rn(n));
	return __fdiv_rn(1.0f, sqrt32(__fadd_rn(mean, eps)));
}
