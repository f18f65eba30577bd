// elementwise.cu: the kernels of device/kernels/elementwise.go and gather.go.
//
// add_f32, swiglu_f32, sigmoid_mul_f32, geglu_f32 (BinaryArgs): one thread per value,
// Y[i] = op(A[i], B[i]), launched as ceil(N/256) blocks of 256 threads. Each thread reads its A[i]
// and B[i] before it writes Y[i], so Y may equal A or B.
//
// scale_f32, softcap_f32 (UnaryArgs): one thread per value, Y[i] = op(X[i], C), launched alike;
// Y may equal X.
//
// add_bias_f32 (BiasArgs): block (bx, by) adds Bias[i] to values i = bx·256 + tid of row by,
// launched as ceil(Width/256) × Rows blocks of 256 threads; Y may equal X.
//
// gather_f32 (GatherArgs): block r copies row Idx[r] of X to row r of Out, bit for bit; a block
// whose index is outside [0, SrcRows) writes nothing (the twin reports it as an error).
#include "num.cuh"
#include "grid.cuh"

// add_f32 mirrors kernels.Add: Y = A + B, rounded once.
__device__ __forceinline__ void add_f32_body(const Grid &gr, const float *a, const float *b, float *y, int32_t n) {
	int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid;
	if (i < n) y[i] = __fadd_rn(a[i], b[i]);
}
ENTRY(add_f32, (const float *a, const float *b, float *y, int32_t n), a, b, y, n)

// swiglu_f32 mirrors kernels.SwiGLU: Y = SiLU32(A) · B.
__device__ __forceinline__ void swiglu_f32_body(const Grid &gr, const float *a, const float *b, float *y, int32_t n) {
	int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid;
	if (i < n) y[i] = __fmul_rn(silu32(a[i]), b[i]);
}
ENTRY(swiglu_f32, (const float *a, const float *b, float *y, int32_t n), a, b, y, n)

// sigmoid_mul_f32 mirrors kernels.SigmoidMul: Y = A · Sigmoid32(B).
__device__ __forceinline__ void sigmoid_mul_f32_body(const Grid &gr, const float *a, const float *b, float *y, int32_t n) {
	int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid;
	if (i < n) y[i] = __fmul_rn(a[i], sigmoid32(b[i]));
}
ENTRY(sigmoid_mul_f32, (const float *a, const float *b, float *y, int32_t n), a, b, y, n)

// geglu_f32 mirrors kernels.GeGLU: Y = GELU32(A) · B.
__device__ __forceinline__ void geglu_f32_body(const Grid &gr, const float *a, const float *b, float *y, int32_t n) {
	int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid;
	if (i < n) y[i] = __fmul_rn(gelu32(a[i]), b[i]);
}
ENTRY(geglu_f32, (const float *a, const float *b, float *y, int32_t n), a, b, y, n)

// scale_f32 mirrors kernels.Scale: Y = X · C.
__device__ __forceinline__ void scale_f32_body(const Grid &gr, const float *x, float *y, int32_t n, float c) {
	int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid;
	if (i < n) y[i] = __fmul_rn(x[i], c);
}
ENTRY(scale_f32, (const float *x, float *y, int32_t n, float c), x, y, n, c)

// softcap_f32 mirrors kernels.SoftCap: Y = tanh32(X · (1/C)) · C.
__device__ __forceinline__ void softcap_f32_body(const Grid &gr, const float *x, float *y, int32_t n, float c) {
	int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid;
	if (i < n) y[i] = __fmul_rn(tanh32(__fmul_rn(x[i], __fdiv_rn(1.0f, c))), c);
}
ENTRY(softcap_f32, (const float *x, float *y, int32_t n, float c), x, y, n, c)

// add_bias_f32 mirrors kernels.AddBias: Y[r][i] = X[r][i] + Bias[i], rounded once.
__device__ __forceinline__ void add_bias_f32_body(const Grid &gr, const float *x, const float *bias, float *y, int32_t rows,
                                                  int32_t width) {
	int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid;
	int32_t r = gr.by;
	if (r < rows && i < width) y[(int64_t)r * width + i] = __fadd_rn(x[(int64_t)r * width + i], bias[i]);
}
ENTRY(add_bias_f32, (const float *x, const float *bias, float *y, int32_t rows, int32_t width), x, bias, y, rows, width)

#define GATHER_BATCH 8 // values a thread of gather_f32 loads before it stores them

// gather_f32 mirrors kernels.Gather: Out[r] = X[Idx[r]], rows of Width values.
__device__ __forceinline__ void gather_f32_body(const Grid &gr, const uint32_t *x, const int32_t *idx, uint32_t *out, int32_t rows,
                                      int32_t width, int32_t src_rows) {
	int32_t r = gr.bx;
	if (r >= rows) return;
	int32_t i = idx[r];
	if (i < 0 || i >= src_rows) return;
	const uint32_t *src = x + (int64_t)i * width;
	uint32_t *dst = out + (int64_t)r * width;
	// GATHER_BATCH of a thread's values at a time, every load before any store (src and dst
	// might overlap for the compiler): a batch waits for one round trip, not one a value
	for (int32_t c0 = gr.tid; c0 < width; c0 += GATHER_BATCH * gr.ntid) {
		uint32_t v[GATHER_BATCH];
#pragma unroll
		for (int k = 0; k < GATHER_BATCH; k++) {
			const int32_t c = c0 + k * gr.ntid;
			if (c < width) v[k] = src[c];
		}
#pragma unroll
		for (int k = 0; k < GATHER_BATCH; k++) {
			const int32_t c = c0 + k * gr.ntid;
			if (c < width) dst[c] = v[k];
		}
	}
}
ENTRY(gather_f32, (const uint32_t *x, const int32_t *idx, uint32_t *out, int32_t rows,
                                      int32_t width, int32_t src_rows), x, idx, out, rows, width, src_rows)
