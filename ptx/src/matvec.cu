// matvec.cu: matvec_<weight>_<act> and matvec8_<weight>_<act>, the kernels of
// device/kernels/matvec.go, two per weight format: Y[c][r] = Σ_i W[r][i]·X[c][i] for r < Rows, c < N, with W in repack's device layout
// (packed.cuh) and X already converted to the format's activation layout by an act.cu kernel.
//
// Launch (the spec's Shape): ceil(Rows/4) blocks of 128 threads, one warp per weight row.
// Order, the contract of the package doc of device/kernels: the row is cut into units (each
// format's own); lane l folds units l, l+32, l+64, … in increasing order into its float32
// accumulator, starting at +0, with the format's unit step; then the xor butterfly
// 16, 8, 4, 2, 1 (num.WarpSum) combines the 32 accumulators and lane 0 writes the result.
// With add_y (MatVecArgs.Acc) lane 0 adds the result to y's value instead of storing it.
// Columns go in passes of C: a lane loads each of its weight units once per pass and folds it
// into the accumulator of every column of the pass, each with the one-column arithmetic, so a
// launch with N columns gives each column the bits of a one-column launch while reading the
// weights ceil(N / C) times. matvec8 has C = 8 (kernels.MaxColumns: a tree verify's nodes);
// matvec has C = 1, for decoding, where the eight accumulators and the unrolled column loop
// would only cost registers (and so occupancy); its unit loop is unrolled twice to keep two
// weight loads in flight per lane.
#include "packed.cuh"
#include "grid.cuh"

template <typename P, typename F, int C>
static __device__ __forceinline__ void matvec(const Grid &gr, const uint8_t *RESTRICT w, const uint8_t *RESTRICT x,
                                              float *RESTRICT y, int32_t rows, int32_t cols, int32_t n,
                                              int32_t add_y) {
	int32_t r = gr.bx * (gr.ntid / 32) + gr.tid / 32;
	int lane = gr.tid & 31;
	if (r >= rows) return; // the whole warp leaves together
	PkLayout l = P::layout(cols);
	int64_t xb = F::act_bytes(cols);
	int32_t units = cols / F::UNIT;
	const uint8_t *wr = w + r * l.stride;
	for (int32_t c0 = 0; c0 < n; c0 += C) {
		int32_t nc = min(n - c0, C); // the same in every lane
		const uint8_t *xc = x + c0 * xb;
		float acc[C];
#pragma unroll
		for (int j = 0; j < C; j++) acc[j] = 0.0f;
		int32_t k = 0;
#pragma unroll(C == 1 ? 2 : 1)
		for (int32_t u = lane; u < units; u += 32, k++) {
			typename P::W wu = P::load(wr, l, lane, u, k);
#pragma unroll
			for (int j = 0; j < C; j++)
				if (j < nc) acc[j] = P::apply(acc[j], wu, xc + j * xb, u);
		}
#pragma unroll
		for (int j = 0; j < C; j++) {
			if (j < nc) {
				float v = warp_sum(acc[j]);
				if (lane == 0) {
					float *yp = y + (int64_t)(c0 + j) * rows + r;
					*yp = add_y ? __fadd_rn(*yp, v) : v; // the residual add, fused (Acc)
				}
			}
		}
	}
}

#define MATVEC(suffix, P, F)                                                                                    \
	__device__ __forceinline__ void matvec_##suffix##_body(const Grid &gr, const uint8_t *RESTRICT w,   \
	                                                              const uint8_t *RESTRICT x,                  \
	                                                              float *RESTRICT y, int32_t rows,            \
	                                                              int32_t cols, int32_t n, int32_t add_y) {       \
		matvec<P, F, 1>(gr, w, x, y, rows, cols, n, add_y);                                                             \
	}                                                                                                           \
	__device__ __forceinline__ void matvec8_##suffix##_body(const Grid &gr, const uint8_t *RESTRICT w,  \
	                                                               const uint8_t *RESTRICT x,                 \
	                                                               float *RESTRICT y, int32_t rows,           \
	                                                               int32_t cols, int32_t n, int32_t add_y) {      \
		matvec<P, F, 8>(gr, w, x, y, rows, cols, n, add_y);                                                             \
	}                                                                                                           \
	ENTRY(matvec_##suffix,                                                                                      \
	      (const uint8_t *RESTRICT w, const uint8_t *RESTRICT x, float *RESTRICT y, int32_t rows,   \
	       int32_t cols, int32_t n, int32_t add_y),                                                               \
	      w, x, y, rows, cols, n, add_y)                                                                               \
	ENTRY(matvec8_##suffix,                                                                                     \
	      (const uint8_t *RESTRICT w, const uint8_t *RESTRICT x, float *RESTRICT y, int32_t rows,   \
	       int32_t cols, int32_t n, int32_t add_y),                                                               \
	      w, x, y, rows, cols, n, add_y)

MATVEC(f32_f32, PkF32, FmtF32)
MATVEC(f16_f16, PkF16, FmtF16)
MATVEC(bf16_bf16, PkBF16, FmtBF16)
MATVEC(q4_0_q8_0, PkQ4_0, FmtQ4_0)
MATVEC(q4_1_q8_1, PkQ4_1, FmtQ4_1)
MATVEC(q5_0_q8_0, PkQ5_0, FmtQ5_0)
MATVEC(q5_1_q8_1, PkQ5_1, FmtQ5_1)
MATVEC(q8_0_q8_0, PkQ8_0, FmtQ8_0)
MATVEC(q2_K_q8_K, PkQ2_K, FmtQ2_K)
MATVEC(q3_K_q8_K, PkQ3_K, FmtQ3_K)
MATVEC(q4_K_q8_K, PkQ4_K, FmtQ4_K)
MATVEC(q5_K_q8_K, PkQ5_K, FmtQ5_K)
MATVEC(q6_K_q8_K, PkQ6_K, FmtQ6_K)
