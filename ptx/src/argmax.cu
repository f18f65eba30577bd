// argmax.cu: argmax_f32, the kernel of device/kernels/argmax.go.
//
// One block per row (Rows blocks of 256 threads). The result is the index of the largest value
// of the row, the lowest such index on ties (+0 and -0 tie), NaN never chosen (a row of NaNs
// gives 0): the same index the twin's left-to-right scan (ArgmaxRow) finds, because it is
// defined by the set of (value, index) pairs alone and not by the order they are compared in.
// Thread t scans columns t, t+256, …; the 256 candidates are then combined by a warp butterfly
// and across the 8 warps through shared memory, each step keeping the better candidate of two.
#include "num.cuh"
#include "grid.cuh"

#define ARGMAX_MAX_WARPS 32 // blocks of up to 1024 threads

// better reports whether candidate (v, i) beats (bv, bi); an index of -1 is no candidate.
static __device__ __forceinline__ bool better(float v, int32_t i, float bv, int32_t bi) {
	if (i < 0) return false;
	if (bi < 0) return true;
	return v > bv || (v == bv && i < bi);
}

// ArgmaxShared holds each warp's best candidate.
struct ArgmaxShared {
	float sv[ARGMAX_MAX_WARPS];
	int32_t si[ARGMAX_MAX_WARPS];
};

// argmax_f32 mirrors kernels.Argmax (ArgmaxRow).
__device__ __forceinline__ void argmax_f32_body(const Grid &gr, const float *x, int32_t *out, int32_t rows, int32_t cols) {
	ArgmaxShared &sh = grid_shared<ArgmaxShared>(gr);
	float *sv = sh.sv;
	int32_t *si = sh.si;
	int32_t r = gr.bx;
	if (r >= rows) return;
	const float *row = x + (int64_t)r * cols;
	int t = gr.tid, lane = t & 31, warp = t >> 5, nwarps = (gr.ntid + 31) >> 5;

	float bv = 0.0f;
	int32_t bi = -1;
	for (int32_t c = t; c < cols; c += gr.ntid) {
		float v = row[c];
		if (!is_nan32(v) && better(v, c, bv, bi)) {
			bv = v;
			bi = c;
		}
	}
	warp_arg_best<better>(bv, bi);
	if (lane == 0) {
		sv[warp] = bv;
		si[warp] = bi;
	}
	grid_sync(gr);
	if (t == 0) {
		for (int w = 1; w < nwarps; w++) {
			if (better(sv[w], si[w], bv, bi)) {
				bv = sv[w];
				bi = si[w];
			}
		}
		out[r] = bi < 0 ? 0 : bi;
	}
}
ENTRY_SHARED(argmax_f32, ArgmaxShared, (const float *x, int32_t *out, int32_t rows, int32_t cols), x, out, rows, cols)
