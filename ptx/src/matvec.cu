// matvec.cu: matvec_<weight>_<act>, the kernels of device/kernels/matvec.go, one per weight
// format: Y[c][r] = Σ_i W[r][i]·X[c][i] for r < Rows, c < N (X already converted to the
// format's activation layout by an act.cu kernel).
//
// Launch (the spec's Shape): ceil(Rows/4) blocks of 128 threads, one warp per weight row.
// Order, the contract of the package doc of device/kernels: the row is cut into units (each
// format's own, see formats.cuh); lane l folds units l, l+32, l+64, … in increasing order into
// its float32 accumulator, starting at +0, with the format's unit step (the per-unit float
// steps of the format's Go Dot); then the xor butterfly 16, 8, 4, 2, 1 (num.WarpSum) combines
// the 32 accumulators and lane 0 writes the result. Every column c is computed this way on its
// own, so a launch with N columns gives each column the bits of a one-column launch.
#include "formats.cuh"

// matvec mirrors kernels' matvecTwin with the format's Dot.
template <typename F>
static __device__ __forceinline__ void matvec(const uint8_t *w, const uint8_t *x, float *y, int32_t rows,
                                              int32_t cols, int32_t n) {
	int32_t r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x & 31;
	if (r >= rows) return; // the whole warp leaves together
	int64_t wb = F::row_bytes(cols), xb = F::act_bytes(cols);
	int32_t units = cols / F::UNIT;
	const uint8_t *wr = w + r * wb;
	for (int32_t c = 0; c < n; c++) {
		const uint8_t *xr = x + c * xb;
		float acc = 0.0f;
		for (int32_t u = lane; u < units; u += 32) acc = F::step(acc, wr, xr, u);
		acc = warp_sum(acc);
		if (lane == 0) y[(int64_t)c * rows + r] = acc;
	}
}

#define MATVEC(name, F)                                                                                      \
	extern "C" __global__ void name(const uint8_t *w, const uint8_t *x, float *y, int32_t rows, int32_t cols, \
	                                int32_t n) {                                                             \
		matvec<F>(w, x, y, rows, cols, n);                                                                   \
	}

MATVEC(matvec_f32_f32, FmtF32)
MATVEC(matvec_f16_f16, FmtF16)
MATVEC(matvec_bf16_bf16, FmtBF16)
MATVEC(matvec_q4_0_q8_0, FmtQ4_0)
MATVEC(matvec_q4_1_q8_1, FmtQ4_1)
MATVEC(matvec_q5_0_q8_0, FmtQ5_0)
MATVEC(matvec_q5_1_q8_1, FmtQ5_1)
MATVEC(matvec_q8_0_q8_0, FmtQ8_0)
MATVEC(matvec_q2_K_q8_K, FmtQ2_K)
MATVEC(matvec_q3_K_q8_K, FmtQ3_K)
MATVEC(matvec_q4_K_q8_K, FmtQ4_K)
MATVEC(matvec_q5_K_q8_K, FmtQ5_K)
MATVEC(matvec_q6_K_q8_K, FmtQ6_K)
