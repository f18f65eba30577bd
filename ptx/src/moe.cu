// moe.cu: moe_gate_up_<weight>_<act> and moe_down_<weight>_<act>, the grouped MoE kernels of
// device/kernels/moe.go: a token's routed experts in two launches, with the bits of the unfused
// moe_matvec, swiglu_f32 and moe_combine_f32 sequence.
//
// moe_gate_up (MoEGateUpArgs): grid (ceil(Out/4), N·K), 128 threads; the warp of (slot s, row o)
// folds row o of expert Ids[s]'s gate and up matrices against the token's activation row, one
// unit at a time (two accumulators per lane, each with the matvec contract's order), reduces
// each with the xor butterfly, and lane 0 writes SiLU32(g)·u rounded once.
//
// moe_down (MoEDownArgs): grid (ceil(Rows/4), N), 128 threads; the warp of (token n, row o)
// computes, for k = 0 … K−1 in order, the dot product y_k of row o of expert Ids[n·K+k] with slot
// n·K+k's activation row (the butterfly leaves the same total in every lane) and accumulates
// acc = fma(Weights[n][k], y_k, acc) from +0; with a shared expert, lane 0 writes
// acc + float32(sigmoid32(Gate[n])·Shared[n][o]).
//
// A slot whose id is outside [0, NExpert) makes its warp write nothing (the twin reports it).
#include "packed.cuh"
#include "grid.cuh"

template <typename P, typename F>
static __device__ __forceinline__ void moe_gate_up(const Grid &gr, const uint8_t *wg, const uint8_t *wu, const uint8_t *x,
                                                   const int32_t *ids, float *y, int32_t n, int32_t k, int32_t out,
                                                   int32_t cols, int32_t ne) {
	int32_t o = gr.bx * (gr.ntid / 32) + gr.tid / 32;
	int32_t s = gr.by;
	int lane = gr.tid & 31;
	if (o >= out || s >= n * k) return; // the whole warp leaves together
	int32_t e = ids[s];
	if (e < 0 || e >= ne) return;
	PkLayout l = P::layout(cols);
	int64_t off = ((int64_t)e * out + o) * l.stride;
	const uint8_t *xr = x + (int64_t)(s / k) * F::act_bytes(cols), *rg = wg + off, *ru = wu + off;
	int32_t units = cols / F::UNIT;
	// the two rows' units and the activations' through ROW_AHEAD buffers taken in turn (row_fold)
	const int AH = ROW_AHEAD;
	typename P::W bg[AH] = {}, bu[AH] = {};
	typename P::X bx[AH] = {};
#pragma unroll
	for (int d = 0; d < AH; d++) {
		int32_t u = lane + 32 * d;
		if (u < units) {
			bg[d] = P::load(rg, l, lane, u, d);
			bu[d] = P::load(ru, l, lane, u, d);
			bx[d] = P::xload(bg[d], xr, u);
		}
	}
	float g = 0.0f, v = 0.0f;
#pragma unroll 1
	for (int32_t j = 0; lane + 32 * j < units; j += AH) {
#pragma unroll
		for (int d = 0; d < AH; d++) {
			int32_t u = lane + 32 * (j + d);
			if (u < units) {
				g = P::apply(g, bg[d], bx[d]);
				v = P::apply(v, bu[d], bx[d]);
				int32_t un = u + 32 * AH;
				if (un < units) {
					bg[d] = P::load(rg, l, lane, un, j + d + AH);
					bu[d] = P::load(ru, l, lane, un, j + d + AH);
					bx[d] = P::xload(bg[d], xr, un);
				}
			}
		}
	}
	g = warp_sum(g);
	v = warp_sum(v);
	if (lane == 0) y[(int64_t)s * out + o] = __fmul_rn(silu32(g), v);
}

template <typename P, typename F>
static __device__ __forceinline__ void moe_down(const Grid &gr, const uint8_t *w, const uint8_t *x, const int32_t *ids,
                                                const float *weights, const float *shared, const float *gate,
                                                float *out, int32_t n, int32_t k, int32_t rows, int32_t cols,
                                                int32_t ne) {
	int32_t o = gr.bx * (gr.ntid / 32) + gr.tid / 32;
	int32_t t = gr.by;
	int lane = gr.tid & 31;
	if (o >= rows || t >= n) return; // the whole warp leaves together
	PkLayout l = P::layout(cols);
	int64_t xb = F::act_bytes(cols);
	int32_t units = cols / F::UNIT;
	float acc = 0.0f;
	for (int32_t q = 0; q < k; q++) {
		int64_t s = (int64_t)t * k + q;
		int32_t e = ids[s];
		if (e < 0 || e >= ne) return;
		float yk = warp_sum(row_fold<P, ROW_AHEAD>(w + ((int64_t)e * rows + o) * l.stride, l, x + s * xb, units, lane));
		acc = __fmaf_rn(weights[s], yk, acc);
	}
	int64_t j = (int64_t)t * rows + o;
	if (shared != nullptr) acc = __fadd_rn(acc, __fmul_rn(sigmoid32(gate[t]), shared[j]));
	if (lane == 0) out[j] = acc;
}

#define MOE(suffix, P, F)                                                                                          \
	__device__ __forceinline__ void moe_gate_up_##suffix##_body(                                             \
	    const Grid &gr, const uint8_t *wg, const uint8_t *wu, const uint8_t *x, const int32_t *ids, float *y,         \
	    int32_t n, int32_t k, int32_t out, int32_t cols, int32_t ne) {                                               \
		moe_gate_up<P, F>(gr, wg, wu, x, ids, y, n, k, out, cols, ne);                                              \
	}                                                                                                              \
	__device__ __forceinline__ void moe_down_##suffix##_body(                                                \
	    const Grid &gr, const uint8_t *w, const uint8_t *x, const int32_t *ids, const float *weights,                 \
	    const float *shared, const float *gate, float *out, int32_t n, int32_t k, int32_t rows, int32_t cols,        \
	    int32_t ne) {                                                                                                \
		moe_down<P, F>(gr, w, x, ids, weights, shared, gate, out, n, k, rows, cols, ne);                            \
	}                                                                                                              \
	ENTRY(moe_gate_up_##suffix,                                                                                    \
	      (const uint8_t *wg, const uint8_t *wu, const uint8_t *x, const int32_t *ids, float *y, int32_t n,          \
	       int32_t k, int32_t out, int32_t cols, int32_t ne),                                                      \
	      wg, wu, x, ids, y, n, k, out, cols, ne)                                                                  \
	ENTRY(moe_down_##suffix,                                                                                       \
	      (const uint8_t *w, const uint8_t *x, const int32_t *ids, const float *weights, const float *shared,       \
	       const float *gate, float *out, int32_t n, int32_t k, int32_t rows, int32_t cols, int32_t ne),           \
	      w, x, ids, weights, shared, gate, out, n, k, rows, cols, ne)

MOE(f32_f32, PkF32, FmtF32)
MOE(f16_f16, PkF16, FmtF16)
MOE(bf16_bf16, PkBF16, FmtBF16)
MOE(q4_0_q8_0, PkQ4_0, FmtQ4_0)
MOE(q4_1_q8_1, PkQ4_1, FmtQ4_1)
MOE(q5_0_q8_0, PkQ5_0, FmtQ5_0)
MOE(q5_1_q8_1, PkQ5_1, FmtQ5_1)
MOE(q8_0_q8_0, PkQ8_0, FmtQ8_0)
MOE(q2_K_q8_K, PkQ2_K, FmtQ2_K)
MOE(q3_K_q8_K, PkQ3_K, FmtQ3_K)
MOE(q4_K_q8_K, PkQ4_K, FmtQ4_K)
MOE(q5_K_q8_K, PkQ5_K, FmtQ5_K)
MOE(q6_K_q8_K, PkQ6_K, FmtQ6_K)
