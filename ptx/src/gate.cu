// gate.cu: gated_rmsnorm_f32 and split_gate_f32, the kernels of device/kernels/gate.go.
//
// gated_rmsnorm_f32 (GatedNormArgs): one 32-thread block (one warp) per head, grid (Rows, Heads).
// Order, as the twin's doc comment states it: r = the rmsnorm scale of the head's D values x
// (lane-strided fma of squares, num.WarpSum, mean = sum/D, r = 1/Sqrt32(mean + Eps)); then
// y_i = float32(float32(float32(x_i·r)·w_i)·SiLU32(z_i)), lane l writing i = l, l+32, …. A lane
// reads x_i and z_i before it writes y_i, so Y may equal X or Z.
//
// split_gate_f32 (SplitGateArgs): one 128-thread block per head, grid (Rows, Heads), copying the
// head's [q | gate] halves bit for bit.
#include "norm.cuh"
#include "grid.cuh"

// gated_rmsnorm_f32 mirrors kernels.GatedNorm (twinGatedNorm).
__device__ __forceinline__ void gated_rmsnorm_f32_body(const Grid &gr, const float *x, const float *z, const float *w, float *y, int32_t rows,
                                             int32_t heads, int32_t d, float eps) {
	if ((int32_t)gr.bx >= rows || (int32_t)gr.by >= heads) return;
	int64_t g = (int64_t)gr.bx * heads + gr.by;
	int lane = gr.tid & 31;
	const float *xs = x + g * d;
	const float *zs = z + g * d;
	float *ys = y + g * d;
	float s = rms_scale(xs, d, eps, lane);
	for (int32_t i = lane; i < d; i += 32) {
		float n = __fmul_rn(__fmul_rn(xs[i], s), w[i]);
		ys[i] = __fmul_rn(n, silu32(zs[i]));
	}
}
ENTRY(gated_rmsnorm_f32, (const float *x, const float *z, const float *w, float *y, int32_t rows,
                                             int32_t heads, int32_t d, float eps), x, z, w, y, rows, heads, d, eps)

// split_gate_f32 mirrors kernels.SplitGate (twinSplitGate).
__device__ __forceinline__ void split_gate_f32_body(const Grid &gr, const uint32_t *x, uint32_t *q, uint32_t *g, int32_t rows, int32_t heads,
                                          int32_t d) {
	if ((int32_t)gr.bx >= rows || (int32_t)gr.by >= heads) return;
	int64_t i = (int64_t)gr.bx * heads + gr.by;
	const uint32_t *src = x + 2 * i * d;
	for (int32_t c = gr.tid; c < d; c += gr.ntid) {
		q[i * d + c] = src[c];
		g[i * d + c] = src[d + c];
	}
}
ENTRY(split_gate_f32, (const uint32_t *x, uint32_t *q, uint32_t *g, int32_t rows, int32_t heads,
                                          int32_t d), x, q, g, rows, heads, d)
