// act.cu: act_f16, act_bf16, act_q8_0, act_q8_1, act_q8_K, the kernels of device/kernels/act.go:
// each converts the N float32 activation rows of Cols values in X into a matvec's activation
// format (ConvertRow), value for value and block for block.
//
// Layout: the rows of a format are whole blocks, so the output of all N rows is one run of
// N·Cols/B blocks of B values (B = 1 for f16 and bf16, 32 for q8_0 and q8_1, 256 for q8_K), and
// block b holds values B·b … B·b+B−1 of the N·Cols input values. The spec launches Cols/256·N
// blocks of 256 threads: one thread per value (f16, bf16), one warp per 32-value block (q8_0,
// q8_1), one thread block per 256-value block (q8_K). Every kernel strides over the blocks by
// the grid's size, so any grid covers the whole input.
//
// Every block is computed from its own values only, and every reduction in it is exact (a
// maximum, or an integer sum), so the bits do not depend on the order of its steps.
#include "num.cuh"
#include "norm.cuh"
#include "grid.cuh"

// act_f16 mirrors ConvertRow(ActF16): num.F32ToF16 of every value.
__device__ __forceinline__ void act_f16_body(const Grid &gr, const float *x, uint16_t *out, int32_t cols, int32_t n) {
	int64_t total = (int64_t)cols * n;
	for (int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid; i < total; i += (int64_t)gr.nbx * gr.ntid)
		out[i] = f32_to_f16(x[i]);
}
ENTRY(act_f16, (const float *x, uint16_t *out, int32_t cols, int32_t n), x, out, cols, n)

// act_bf16 mirrors ConvertRow(ActBF16): num.F32ToBF16 of every value.
__device__ __forceinline__ void act_bf16_body(const Grid &gr, const float *x, uint16_t *out, int32_t cols, int32_t n) {
	int64_t total = (int64_t)cols * n;
	for (int64_t i = (int64_t)gr.bx * gr.ntid + gr.tid; i < total; i += (int64_t)gr.nbx * gr.ntid)
		out[i] = f32_to_bf16(x[i]);
}
ENTRY(act_bf16, (const float *x, uint16_t *out, int32_t cols, int32_t n), x, out, cols, n)

// round_away mirrors int32(math.Round(float64(f))) for |f| < 2^31: nearest integer, halves away
// from zero. t = trunc(f) and f − t are exact, and so is t ± 1 (|t| < 2^24 whenever f − t ≠ 0).
// A NaN gives 0 (PTX's cvt.rzi of a NaN; the twin tests for it, see q8_block).
static __device__ __forceinline__ int32_t round_away(float f) {
	float t = truncf(f);
	if (fabsf(__fsub_rn(f, t)) >= 0.5f) t = __fadd_rn(t, copysignf(1.0f, f));
	return __float2int_rz(t);
}

// q8_block mirrors kernels' q8Block for the warp's 32 values (lane j holds x_j): amax = the
// largest |x_j| that is not NaN (+0 if none); d = amax/127; id = 1/d, or 0 if d = 0;
// q_j = round_away(x_j·id); d as f16 at [0:2]; with sums (block_q8_1) s = f16(float32(Σq)·d)
// at [2:4], quants at [4:36], otherwise quants at [2:34].
//
// A NaN product x_j·id (a NaN input, or an infinite one, which makes id = 0) gives the quant 0,
// counted as 0 in s, in the twin as here; s = 0·Inf is the canonical NaN in both.
static __device__ __forceinline__ void q8_block(const float *x, uint8_t *out, bool sums, int lane) {
	float v = x[lane];
	float a = fabsf(v);
	float amax = warp_max(a > 0.0f ? a : 0.0f);
	float d = __fdiv_rn(amax, 127.0f);
	float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
	int32_t q = round_away(__fmul_rn(v, id));
	uint8_t *qs = out + (sums ? 4 : 2);
	qs[lane] = (uint8_t)(int8_t)q;
	int32_t s = warp_sum_i32(q);
	if (lane == 0) {
		uint16_t *h = (uint16_t *)out;
		h[0] = f32_to_f16(d);
		if (sums) h[1] = f32_to_f16(__fmul_rn(__int2float_rn(s), d));
	}
}

// act_q8_0 mirrors ConvertRow(ActQ8_0): block_q8_0 (34 bytes per 32 values).
__device__ __forceinline__ void act_q8_0_body(const Grid &gr, const float *x, uint8_t *out, int32_t cols, int32_t n) {
	int64_t blocks = (int64_t)cols / 32 * n;
	int64_t warps = (int64_t)gr.nbx * (gr.ntid / 32);
	for (int64_t b = (int64_t)gr.bx * (gr.ntid / 32) + gr.tid / 32; b < blocks; b += warps)
		q8_block(x + 32 * b, out + 34 * b, false, gr.tid & 31);
}
ENTRY(act_q8_0, (const float *x, uint8_t *out, int32_t cols, int32_t n), x, out, cols, n)

// act_q8_1 mirrors ConvertRow(ActQ8_1): block_q8_1 (36 bytes per 32 values).
__device__ __forceinline__ void act_q8_1_body(const Grid &gr, const float *x, uint8_t *out, int32_t cols, int32_t n) {
	int64_t blocks = (int64_t)cols / 32 * n;
	int64_t warps = (int64_t)gr.nbx * (gr.ntid / 32);
	for (int64_t b = (int64_t)gr.bx * (gr.ntid / 32) + gr.tid / 32; b < blocks; b += warps)
		q8_block(x + 32 * b, out + 36 * b, true, gr.tid & 31);
}
ENTRY(act_q8_1, (const float *x, uint8_t *out, int32_t cols, int32_t n), x, out, cols, n)

#define Q8K_VALUES 256
#define Q8K_BYTES 292

// q8k_better reports whether candidate (a, i) beats (ba, bi): larger magnitude, then lower index.
static __device__ __forceinline__ bool q8k_better(float a, int32_t i, float ba, int32_t bi) {
	return a > ba || (a == ba && i < bi);
}

// q8k_convert_block converts the 256 values at xb into the block_q8_K at ob, thread t of a
// 256-thread block holding x_t (kernels' q8KBlock). The value of largest magnitude (the first
// such, NaN never chosen) is max = x_k; if its magnitude is 0 the block is all zero bytes.
// Otherwise iscale = −127/max; q_t = the low mantissa bits of float32(iscale·x_t) + 12582912
// less 0x400000 (round to nearest even), capped at 127 (an infinite max makes iscale ±0 and the
// infinite inputs' products the canonical NaN, whose bits give 127); d = 1/iscale as float32
// bits at [0:4]; quants at [4:260]; the 16 exact sums of 16 quants as int16 at [260:292]. It
// ends with a barrier: its shared values (sh) may then be rewritten.
struct Q8KShared {
	float sa[Q8K_VALUES / 32]; // each warp's best magnitude, and its index
	int32_t si[Q8K_VALUES / 32];
	float smax;
	bool szero;
};

__device__ __forceinline__ void q8k_convert_block(const Grid &gr, Q8KShared &sh, const float *xb, uint8_t *ob) {
	float *sa = sh.sa;
	int32_t *si = sh.si;
	float &smax = sh.smax;
	bool &szero = sh.szero;
	int t = gr.tid, lane = t & 31, warp = t >> 5;
	float v = xb[t];
	float a = fabsf(v);
	float ba = a > 0.0f ? a : 0.0f; // NaN and zero are never chosen
	int32_t bi = t;
	warp_arg_best<q8k_better>(ba, bi);
	if (lane == 0) {
		sa[warp] = ba;
		si[warp] = bi;
	}
	grid_sync(gr);
	if (t == 0) {
		for (int w = 1; w < Q8K_VALUES / 32; w++) {
			if (q8k_better(sa[w], si[w], ba, bi)) {
				ba = sa[w];
				bi = si[w];
			}
		}
		szero = !(ba > 0.0f);
		smax = xb[bi];
	}
	grid_sync(gr);
	if (szero) {
		for (int i = t; i < Q8K_BYTES; i += Q8K_VALUES) ob[i] = 0;
	} else {
		float iscale = __fdiv_rn(-127.0f, smax);
		float f = __fmul_rn(iscale, v);
		int32_t q = (int32_t)(__float_as_uint(__fadd_rn(f, 12582912.0f)) & 0x007fffffu) - 0x00400000;
		if (q > 127) q = 127;
		ob[4 + t] = (uint8_t)(int8_t)q;
		int32_t s = (int8_t)q; // the stored quant, summed over threads 16g … 16g+15 (exact)
		for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(NUM_FULL_MASK, s, off);
		if ((t & 15) == 0) ((int16_t *)(ob + 260))[t >> 4] = (int16_t)s;
		if (t == 0) *(uint32_t *)ob = __float_as_uint(__fdiv_rn(1.0f, iscale));
	}
	grid_sync(gr); // the shared values are rewritten for the next block
}

// act_q8_K mirrors ConvertRow(ActQ8_K) (kernels' q8KBlock), one 256-thread block per 256-value
// block (q8k_convert_block).
__device__ __forceinline__ void act_q8_K_body(const Grid &gr, const float *x, uint8_t *out, int32_t cols, int32_t n) {
	int64_t blocks = (int64_t)cols / Q8K_VALUES * n;
	Q8KShared &sh = grid_shared<Q8KShared>(gr);
	for (int64_t b = gr.bx; b < blocks; b += gr.nbx) q8k_convert_block(gr, sh, x + Q8K_VALUES * b, out + Q8K_BYTES * b);
}
ENTRY_SHARED(act_q8_K, Q8KShared, (const float *x, uint8_t *out, int32_t cols, int32_t n), x, out, cols, n)

// ROW_ACT_MAX is the widest row the fused kernels below take (kernels.MaxRowActWidth).
#define ROW_ACT_MAX 8192

// ROW_ACT_SEG is the piece of a row one block of a fused kernel forms and converts: one q8_K
// block, eight q8_0/q8_1 blocks, a value a thread. A row is the grid's y, its pieces the grid's
// x (kernels.rowActShape), so the pieces of one decoded row run on as many SMs as it has pieces.
#define ROW_ACT_SEG 256

enum { NA_F16, NA_BF16, NA_Q8_0, NA_Q8_1, NA_Q8_K };

// RowActShared is the shared memory of every fused producer-and-conversion kernel: the piece
// it stages its values in, rmsnorm's scale, and the q8_K conversion's own.
struct RowActShared {
	float ys[ROW_ACT_SEG];
	float scale;
	Q8KShared q8k;
};

// convert_staged converts the n values staged at ys, values at0 … at0+n−1 of row r (width
// values), into out, in format fmt, as the act kernel converts a row in memory (the same
// values, so the same bytes): at0 and n are whole numbers of the format's blocks. Then the
// block meets, so that ys may be rewritten.
__device__ __forceinline__ void convert_staged(const Grid &gr, int fmt, RowActShared &sh, uint8_t *out, int32_t r,
                                               int32_t width, int32_t at0, int32_t n) {
	const float *ys = sh.ys;
	int t = gr.tid, lane = t & 31, warp = t >> 5, warps = gr.ntid >> 5;
	switch (fmt) {
	case NA_F16:
	case NA_BF16: {
		uint16_t *o = (uint16_t *)out + (int64_t)r * width + at0;
		for (int32_t i = t; i < n; i += gr.ntid) o[i] = fmt == NA_F16 ? f32_to_f16(ys[i]) : f32_to_bf16(ys[i]);
		break;
	}
	case NA_Q8_0:
	case NA_Q8_1: {
		int bytes = fmt == NA_Q8_0 ? 34 : 36;
		uint8_t *o = out + ((int64_t)r * (width / 32) + at0 / 32) * bytes;
		for (int32_t b = warp; b < n / 32; b += warps) q8_block(ys + 32 * b, o + bytes * b, fmt == NA_Q8_1, lane);
		break;
	}
	default:
		q8k_convert_block(gr, sh.q8k, ys, out + ((int64_t)r * (width / Q8K_VALUES) + at0 / Q8K_VALUES) * Q8K_BYTES);
	}
	grid_sync(gr);
}

// row_piece gives the block's row r and its piece: values at0 … at0+n−1. False for a block past
// the rows or the row (the whole block leaves together).
__device__ __forceinline__ bool row_piece(const Grid &gr, int32_t rows, int32_t width, int32_t &r, int32_t &at0,
                                          int32_t &n) {
	r = gr.by;
	at0 = gr.bx * ROW_ACT_SEG;
	n = min(ROW_ACT_SEG, width - at0);
	return r < rows && at0 < width && width <= ROW_ACT_MAX;
}

// rmsnorm_act_<fmt> mirrors kernels.RMSNormAct: rmsnorm_f32 of a row followed by act_<fmt> of
// the result, one 256-thread block per piece of a row. The first warp of every piece's block
// computes the row's RMS scale (rms_scale, the rmsnorm warp's order: the same bits in each);
// every thread then forms y_i = float32(x_i·s)·w_i of the piece into the staged values, which
// the block converts: no float32 row written and read back.
__device__ __forceinline__ void rmsnorm_act(const Grid &gr, int fmt, const float *x, const float *w, uint8_t *out,
                                            int32_t rows, int32_t width, float eps) {
	RowActShared &sh = grid_shared<RowActShared>(gr);
	float &scale = sh.scale;
	float *ys = sh.ys;
	int32_t r, at0, n;
	if (!row_piece(gr, rows, width, r, at0, n)) return;
	const float *xs = x + (int64_t)r * width;
	int t = gr.tid, lane = t & 31, warp = t >> 5;
	// a thread's first value of the piece and its weight, asked for before the scale's wait, so
	// that the two round trips overlap (the piece is at most a value a thread: ROW_ACT_SEG)
	const float xv = t < n ? xs[at0 + t] : 0.0f, wv = t < n ? w[at0 + t] : 0.0f;
	if (warp == 0) {
		float s = rms_scale(xs, width, eps, lane);
		if (lane == 0) scale = s;
	}
	grid_sync(gr);
	float s = scale;
	if (t < n) ys[t] = __fmul_rn(__fmul_rn(xv, s), wv);
	for (int32_t i = t + gr.ntid; i < n; i += gr.ntid) ys[i] = __fmul_rn(__fmul_rn(xs[at0 + i], s), w[at0 + i]);
	grid_sync(gr);
	convert_staged(gr, fmt, sh, out, r, width, at0, n); // ends with a barrier: scale and ys are free again
}

#define RMSNORM_ACT(suffix, FMT)                                                                                    \
	__device__ __forceinline__ void rmsnorm_act_##suffix##_body(const Grid &gr, const float *x, const float *w,      \
	                                                            uint8_t *out, int32_t rows, int32_t width, float eps) { \
		rmsnorm_act(gr, FMT, x, w, out, rows, width, eps);                                                           \
	}                                                                                                                \
	ENTRY_SHARED(rmsnorm_act_##suffix, RowActShared, (const float *x, const float *w, uint8_t *out, int32_t rows, int32_t width, float eps), \
	      x, w, out, rows, width, eps)

RMSNORM_ACT(f16, NA_F16)
RMSNORM_ACT(bf16, NA_BF16)
RMSNORM_ACT(q8_0, NA_Q8_0)
RMSNORM_ACT(q8_1, NA_Q8_1)
RMSNORM_ACT(q8_K, NA_Q8_K)

enum { BA_SWIGLU, BA_SIGMOID_MUL, BA_GEGLU };

// swiglu_act_<fmt>, sigmoid_mul_act_<fmt> and geglu_act_<fmt> mirror kernels.SwiGLUAct,
// SigmoidMulAct and GeGLUAct: the elementwise kernel of elementwise.cu over a row
// (y_i = silu32(a_i)·b_i, a_i·sigmoid32(b_i), or gelu32(a_i)·b_i)
// followed by act_<fmt> of the result, one 256-thread block per piece of a row, y staged in
// shared memory.
__device__ __forceinline__ void binary_act(const Grid &gr, int op, int fmt, const float *a, const float *b,
                                           uint8_t *out, int32_t rows, int32_t width) {
	RowActShared &sh = grid_shared<RowActShared>(gr);
	float *ys = sh.ys;
	int32_t r, at0, n;
	if (!row_piece(gr, rows, width, r, at0, n)) return;
	const float *ar = a + (int64_t)r * width + at0, *br = b + (int64_t)r * width + at0;
	for (int32_t i = gr.tid; i < n; i += gr.ntid) {
		const float av = ar[i], bv = br[i]; // both loads in flight before either is used
		ys[i] = op == BA_SWIGLU   ? __fmul_rn(silu32(av), bv)
		        : op == BA_GEGLU ? __fmul_rn(gelu32(av), bv)
		                         : __fmul_rn(av, sigmoid32(bv));
	}
	grid_sync(gr);
	convert_staged(gr, fmt, sh, out, r, width, at0, n);
}

#define BINARY_ACT(name, OP, suffix, FMT)                                                                      \
	__device__ __forceinline__ void name##_act_##suffix##_body(const Grid &gr, const float *a, const float *b, \
	                                                           uint8_t *out, int32_t rows, int32_t width) {    \
		binary_act(gr, OP, FMT, a, b, out, rows, width);                                                       \
	}                                                                                                          \
	ENTRY_SHARED(name##_act_##suffix, RowActShared, (const float *a, const float *b, uint8_t *out, int32_t rows, int32_t width), a, b, \
	      out, rows, width)

BINARY_ACT(swiglu, BA_SWIGLU, f16, NA_F16)
BINARY_ACT(swiglu, BA_SWIGLU, bf16, NA_BF16)
BINARY_ACT(swiglu, BA_SWIGLU, q8_0, NA_Q8_0)
BINARY_ACT(swiglu, BA_SWIGLU, q8_1, NA_Q8_1)
BINARY_ACT(swiglu, BA_SWIGLU, q8_K, NA_Q8_K)
BINARY_ACT(sigmoid_mul, BA_SIGMOID_MUL, f16, NA_F16)
BINARY_ACT(sigmoid_mul, BA_SIGMOID_MUL, bf16, NA_BF16)
BINARY_ACT(sigmoid_mul, BA_SIGMOID_MUL, q8_0, NA_Q8_0)
BINARY_ACT(sigmoid_mul, BA_SIGMOID_MUL, q8_1, NA_Q8_1)
BINARY_ACT(sigmoid_mul, BA_SIGMOID_MUL, q8_K, NA_Q8_K)
BINARY_ACT(geglu, BA_GEGLU, f16, NA_F16)
BINARY_ACT(geglu, BA_GEGLU, bf16, NA_BF16)
BINARY_ACT(geglu, BA_GEGLU, q8_0, NA_Q8_0)
BINARY_ACT(geglu, BA_GEGLU, q8_1, NA_Q8_1)
BINARY_ACT(geglu, BA_GEGLU, q8_K, NA_Q8_K)
