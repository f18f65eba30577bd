// routing.cu: moe_router_f32, moe_matvec_<weight>_<act> and moe_combine_f32, the kernels of
// device/kernels/routing.go. A token n with K selected experts owns the slots n·K + k.
//
// moe_router_f32 (RouterArgs): one warp per row, Rows blocks of 32 threads. m = the lane-strided
// max32 of the logits and num.WarpMax; sum = the lane-strided sum of e_i = exp32(x_i − m) and
// num.WarpSum; p_i = e_i / sum, recomputed (the same bits) wherever it is needed. The K picks are
// made one after another: pick k is the first, in the rank order (a number before a NaN, a larger
// number first, the lower index on equal values or among NaNs), of the experts ranking after
// pick k−1; each lane finds its candidate among experts l, l+32, … and a warp butterfly keeps the
// better of two. Because the order is total, the picks are the twin's scan's. Lane 0 sums
// t = (((+0 + p_0) + p_1) + …) in rank order and writes Weights[r][k] = p_k / t.
//
// moe_matvec_<weight>_<act> (MoEMatVecArgs): grid (ceil(Out/4), N·K), 128 threads; the warp of
// (slot s, row o) computes the dot product of row o of expert Ids[s] with activation row s
// (XPerSlot) or s/K exactly as matvec.cu does, giving MatVec's bits. A slot whose id is outside
// [0, NExpert) writes nothing (the twin reports it as an error).
//
// moe_combine_f32 (MoECombineArgs): grid (ceil(Width/256), N), 256 threads, one value each:
// acc = fma(Weights[n][k], Y[n·K+k][i], acc) for k in order from +0; with a shared expert,
// Out[n][i] = acc + float32(sigmoid32(Gate[n])·Shared[n][i]). A thread reads Shared[n][i] before
// it writes Out[n][i], so Out may equal Shared.
#include "packed.cuh"
#include "grid.cuh"

// ranks_before reports whether router candidate (a, i) comes before (b, j) in the rank order.
static __device__ __forceinline__ bool ranks_before(float a, int32_t i, float b, int32_t j) {
	bool an = is_nan32(a), bn = is_nan32(b);
	if (an != bn) return bn;
	if (an) return i < j;
	return a > b || (a == b && i < j);
}

// moe_router_f32 mirrors kernels.Router (routeRow).
__device__ __forceinline__ void moe_router_f32_body(const Grid &gr, const float *logits, int32_t *ids, float *weights, int32_t rows,
                                          int32_t ne, int32_t k) {
	int32_t r = gr.bx;
	if (r >= rows) return; // the whole warp leaves together
	int lane = gr.tid & 31;
	const float *x = logits + (int64_t)r * ne;
	int32_t mk = max_key(-inf32()); // max32 of the logits as max_key's integers
	for (int32_t i = lane; i < ne; i += 32) mk = max(mk, max_key(x[i]));
	const float m = max_unkey(warp_max_key(mk));
	float sum = 0.0f;
	for (int32_t i = lane; i < ne; i += 32) sum = __fadd_rn(sum, exp32(__fsub_rn(x[i], m)));
	sum = warp_sum(sum);

	int32_t *id = ids + (int64_t)r * k;
	float *w = weights + (int64_t)r * k;
	float pv = 0.0f, t = 0.0f;
	int32_t pi = -1; // the previous pick; -1 before the first
	for (int32_t q = 0; q < k; q++) {
		float bv = 0.0f;
		int32_t bi = -1;
		for (int32_t i = lane; i < ne; i += 32) {
			float p = __fdiv_rn(exp32(__fsub_rn(x[i], m)), sum);
			if ((pi < 0 || ranks_before(pv, pi, p, i)) && (bi < 0 || ranks_before(p, i, bv, bi))) {
				bv = p;
				bi = i;
			}
		}
		for (int off = 16; off > 0; off >>= 1) {
			float ov = __shfl_xor_sync(NUM_FULL_MASK, bv, off);
			int32_t oi = __shfl_xor_sync(NUM_FULL_MASK, bi, off);
			if (oi >= 0 && (bi < 0 || ranks_before(ov, oi, bv, bi))) {
				bv = ov;
				bi = oi;
			}
		}
		pv = bv;
		pi = bi;
		t = __fadd_rn(t, bv);
		if (lane == 0) {
			id[q] = bi;
			w[q] = bv;
		}
	}
	if (lane == 0)
		for (int32_t q = 0; q < k; q++) w[q] = __fdiv_rn(w[q], t);
}
ENTRY(moe_router_f32, (const float *logits, int32_t *ids, float *weights, int32_t rows,
                                          int32_t ne, int32_t k), logits, ids, weights, rows, ne, k)

// moe_matvec mirrors kernels' twinMoEMatVec: one column of matvec.cu's arithmetic over row o
// of expert e's matrix in the packed expert tensor (matrix e at e·Out·RowStride).
template <typename P, typename F>
static __device__ __forceinline__ void moe_matvec(const Grid &gr, const uint8_t *w, const uint8_t *x, const int32_t *ids, float *y,
                                                  int32_t n, int32_t k, int32_t out, int32_t cols, int32_t ne,
                                                  int32_t per_slot) {
	int32_t o = gr.bx * (gr.ntid / 32) + gr.tid / 32;
	int32_t s = gr.by;
	int lane = gr.tid & 31;
	if (o >= out || s >= n * k) return; // the whole warp leaves together
	int32_t e = ids[s];
	if (e < 0 || e >= ne) return;
	PkLayout l = P::layout(cols);
	int64_t xb = F::act_bytes(cols);
	const uint8_t *wr = w + ((int64_t)e * out + o) * l.stride;
	const uint8_t *xr = x + (int64_t)(per_slot ? s : s / k) * xb;
	float acc = row_dot<P>(wr, l, xr, cols / F::UNIT, lane);
	if (lane == 0) y[(int64_t)s * out + o] = acc;
}

#define MOE_MATVEC(name, P, F)                                                                                \
	__device__ __forceinline__ void name##_body(const Grid &gr, const uint8_t *w, const uint8_t *x,         \
	                                                   const int32_t *ids, float *y, int32_t n, int32_t k,        \
	                                                   int32_t out, int32_t cols, int32_t ne, int32_t per_slot) { \
		moe_matvec<P, F>(gr, w, x, ids, y, n, k, out, cols, ne, per_slot);                                     \
	}                                                                                                         \
	ENTRY(name,                                                                                               \
	      (const uint8_t *w, const uint8_t *x, const int32_t *ids, float *y, int32_t n, int32_t k, int32_t out, \
	       int32_t cols, int32_t ne, int32_t per_slot),                                                       \
	      w, x, ids, y, n, k, out, cols, ne, per_slot)

MOE_MATVEC(moe_matvec_f32_f32, PkF32, FmtF32)
MOE_MATVEC(moe_matvec_f16_f16, PkF16, FmtF16)
MOE_MATVEC(moe_matvec_bf16_bf16, PkBF16, FmtBF16)
MOE_MATVEC(moe_matvec_q4_0_q8_0, PkQ4_0, FmtQ4_0)
MOE_MATVEC(moe_matvec_q4_1_q8_1, PkQ4_1, FmtQ4_1)
MOE_MATVEC(moe_matvec_q5_0_q8_0, PkQ5_0, FmtQ5_0)
MOE_MATVEC(moe_matvec_q5_1_q8_1, PkQ5_1, FmtQ5_1)
MOE_MATVEC(moe_matvec_q8_0_q8_0, PkQ8_0, FmtQ8_0)
MOE_MATVEC(moe_matvec_q2_K_q8_K, PkQ2_K, FmtQ2_K)
MOE_MATVEC(moe_matvec_q3_K_q8_K, PkQ3_K, FmtQ3_K)
MOE_MATVEC(moe_matvec_q4_K_q8_K, PkQ4_K, FmtQ4_K)
MOE_MATVEC(moe_matvec_q5_K_q8_K, PkQ5_K, FmtQ5_K)
MOE_MATVEC(moe_matvec_q6_K_q8_K, PkQ6_K, FmtQ6_K)

// moe_combine_f32 mirrors kernels.MoECombine.
__device__ __forceinline__ void moe_combine_f32_body(const Grid &gr, const float *y, const float *weights, const float *shared,
                                           const float *gate, float *out, int32_t n, int32_t k, int32_t width) {
	int32_t t = gr.by;
	int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid;
	if (t >= n || i >= width) return;
	float acc = 0.0f;
	for (int32_t e = 0; e < k; e++)
		acc = __fmaf_rn(weights[(int64_t)t * k + e], y[((int64_t)t * k + e) * width + i], acc);
	int64_t j = (int64_t)t * width + i;
	if (shared != nullptr) acc = __fadd_rn(acc, __fmul_rn(sigmoid32(gate[t]), shared[j]));
	out[j] = acc;
}
ENTRY(moe_combine_f32, (const float *y, const float *weights, const float *shared,
                                           const float *gate, float *out, int32_t n, int32_t k, int32_t width), y, weights, shared, gate, out, n, k, width)
