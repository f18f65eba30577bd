// norm.cuh: the RMS scale shared by norm.cu and gate.cu.
#pragma once

#include "num.cuh"

// rms_scale mirrors kernels' rmsScale for the n values at x, computed by one warp: lane l folds
// x[i]² for i = l, l+32, … into acc = fma(x[i], x[i], acc) from +0; warp_sum; then
// mean = sum / float32(n), and the scale is 1 / sqrt32(mean + eps), each step rounded. Every lane
// returns the same scale. A lane loads its values RMS_BATCH at a time, the next batch's loads
// issued before it folds this one's, so that a row of up to 2048 values is one round trip
// rather than one a batch (the same folds in the same order).
#define RMS_AHEAD 16
#define RMS_BATCH 32
static __device__ __forceinline__ float rms_scale(const float *x, int32_t n, float eps, int lane) {
	float acc = 0.0f, v[RMS_BATCH], nv[RMS_BATCH];
#pragma unroll
	for (int k = 0; k < RMS_BATCH; k++) v[k] = lane + 32 * k < n ? x[lane + 32 * k] : 0.0f;
	for (int32_t i = lane; i < n; i += 32 * RMS_BATCH) {
		const int32_t j = i + 32 * RMS_BATCH; // the next batch
#pragma unroll
		for (int k = 0; k < RMS_BATCH; k++) nv[k] = j + 32 * k < n ? x[j + 32 * k] : 0.0f;
#pragma unroll
		for (int k = 0; k < RMS_BATCH; k++)
			if (i + 32 * k < n) acc = __fmaf_rn(v[k], v[k], acc);
#pragma unroll
		for (int k = 0; k < RMS_BATCH; k++) v[k] = nv[k];
	}
	float mean = __fdiv_rn(warp_sum(acc), __int2float_rn(n));
	return __fdiv_rn(1.0f, sqrt32(__fadd_rn(mean, eps)));
}
