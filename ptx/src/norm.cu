// norm.cu: rmsnorm_f32, the kernel of device/kernels/rmsnorm.go.
//
// One 32-thread block (one warp) per group of Width values, Groups blocks. Order, as the twin's
// doc comment states it: lane l accumulates x[i]² for i = l, l+32, … by acc = fma(x, x, acc)
// from +0; the xor butterfly (num.WarpSum); mean = sum / Width; r = 1 / Sqrt32(mean + Eps)
// (each step rounded); then y[i] = float32(x[i]·r)·w[i], lane l writing i = l, l+32, ….
// A lane reads x[i] before it writes y[i], so Y may equal X.
#include "norm.cuh"
#include "grid.cuh"

// rmsnorm_f32 mirrors kernels.RMSNorm (rmsnormRow).
__device__ __forceinline__ void rmsnorm_f32_body(const Grid &gr, const float *x, const float *w, float *y, int32_t groups, int32_t width,
                                       float eps) {
	int32_t g = gr.bx;
	int lane = gr.tid & 31;
	if (g >= groups) return;
	const float *xs = x + (int64_t)g * width;
	float *ys = y + (int64_t)g * width;
	float s = rms_scale(xs, width, eps, lane);
	// RMS_AHEAD values' loads before their stores: Y may be X, so the compiler may not move a
	// load above an earlier store itself (a lane's stores touch only its own values)
	int32_t i = lane;
	for (; i + 32 * (RMS_AHEAD - 1) < width; i += 32 * RMS_AHEAD) {
		float xv[RMS_AHEAD], wv[RMS_AHEAD];
#pragma unroll
		for (int k = 0; k < RMS_AHEAD; k++) {
			xv[k] = xs[i + 32 * k];
			wv[k] = w[i + 32 * k];
		}
#pragma unroll
		for (int k = 0; k < RMS_AHEAD; k++) ys[i + 32 * k] = __fmul_rn(__fmul_rn(xv[k], s), wv[k]);
	}
	for (; i < width; i += 32) ys[i] = __fmul_rn(__fmul_rn(xs[i], s), w[i]);
}
ENTRY(rmsnorm_f32, (const float *x, const float *w, float *y, int32_t groups, int32_t width,
                                       float eps), x, w, y, groups, width, eps)
