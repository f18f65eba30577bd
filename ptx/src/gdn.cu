// gdn.cu: gdn_conv_f32 and gdn_scan_f32, the kernels of device/kernels/gdn.go (the Gated
// DeltaNet mixer). Both walk the rows in order, so a row sees the state slot an earlier row of
// the launch wrote.
//
// gdn_conv_f32 (GDNConvArgs): ceil(C/256) blocks of 256 threads, one thread per channel c. Per
// row: acc = fma(W[c][k], window[k], acc) for k = 0 … K−1 from +0 (the K−1 saved inputs of slot
// Src[r], oldest first, then X[r][c]); Y[r][c] = silu32(acc); slot Dst[r] receives window[1 …].
// The thread reads X[r][c] before it writes Y[r][c] (Y may equal X), and shifts the window into
// Dst in increasing k, each saved value read before its own place is written (Src may equal Dst).
//
// gdn_scan_f32 (GDNScanArgs): one block per v-head h, ceil(D/32)·32 threads, thread j owning
// column j of the head's state. Per row: every warp computes both L2 norms itself (lane-strided
// fma of squares, num.WarpSum, n = 1/max32(sqrt32(ssq), Eps)), and thread i < D puts
// k̂_i = k_i·n_k and q̂_i = (q_i·n_q)·(1/sqrt32(D)) into shared memory; β, g and e = exp32(g) as
// the twin. Thread j < D then runs the twin's column j: d_i = e·S[i][j] for i in order, written
// to slot Dst[r] (the column's scratch), u = fma(d_i, k̂_i, u); δ = (v_j − u)·β; then, i in
// order, S'[i][j] = fma(k̂_i, δ, d_i) over Dst's d_i and o = fma(S'[i][j], q̂_i, o). A thread
// touches only its own column of Src and Dst, so Src may equal Dst.
#include "num.cuh"
#include "grid.cuh"

#define GDN_MAX_D 1024
// GDN_AHEAD is how many state values a thread of gdn_scan_f32 loads before it folds them: 16
// in the kernel; 1 in the megakernel, whose registers every body shares (more there spills
// in other bodies' loops).
#ifdef MEGAKERNEL
#define GDN_AHEAD 1
#else
#define GDN_AHEAD 16
#endif

// gdn_conv_f32 mirrors kernels.GDNConv (twinGDNConv).
__device__ __forceinline__ void gdn_conv_f32_body(const Grid &gr, const float *x, const float *w, float *state, const int32_t *src,
                                        const int32_t *dst, float *y, int32_t rows, int32_t c, int32_t k,
                                        int32_t nstates) {
	int64_t ch = (int64_t)gr.bx * gr.ntid + gr.tid;
	if (ch >= c) return;
	int64_t slot = (int64_t)(k - 1) * c;
	const float *wc = w + ch * k;
	for (int32_t r = 0; r < rows; r++) {
		int32_t si = src[r], di = dst[r];
		if (si < 0 || si >= nstates || di < 0 || di >= nstates) return; // the twin rejects the launch
		const float *s = state + si * slot + ch;
		float *d = state + di * slot + ch;
		float xv = x[(int64_t)r * c + ch];
		float acc = 0.0f;
		for (int32_t j = 0; j < k - 1; j++) acc = __fmaf_rn(wc[j], s[(int64_t)j * c], acc);
		acc = __fmaf_rn(wc[k - 1], xv, acc);
		for (int32_t j = 0; j + 1 < k - 1; j++) d[(int64_t)j * c] = s[(int64_t)(j + 1) * c];
		if (k > 1) d[(int64_t)(k - 2) * c] = xv;
		y[(int64_t)r * c + ch] = silu32(acc);
	}
}
ENTRY(gdn_conv_f32, (const float *x, const float *w, float *state, const int32_t *src,
                                        const int32_t *dst, float *y, int32_t rows, int32_t c, int32_t k,
                                        int32_t nstates), x, w, state, src, dst, y, rows, c, k, nstates)

// l2_scale returns 1 / max32(sqrt32(Σ x_i²), eps) in the twin's order (l2Normalize); every lane
// of the warp gets it.
static __device__ __forceinline__ float l2_scale(const float *x, int32_t d, float eps, int lane) {
	float acc = 0.0f;
	for (int32_t i = lane; i < d; i += 32) acc = __fmaf_rn(x[i], x[i], acc);
	return __fdiv_rn(1.0f, max32(sqrt32(warp_sum(acc)), eps));
}

// GDNScanShared holds the current row's normalised key and query of the head.
struct GDNScanShared {
	float kh[GDN_MAX_D], qh[GDN_MAX_D];
};

// gdn_scan_f32 mirrors kernels.GDNScan (twinGDNScan, l2Normalize, deltaRule).
__device__ __forceinline__ void gdn_scan_f32_body(const Grid &gr, const float *qkv, const float *beta, const float *alpha, const float *a,
                                        const float *dt_bias, float *state, const int32_t *src, const int32_t *dst,
                                        float *out, int32_t rows, int32_t nk, int32_t nv, int32_t d, int32_t nstates,
                                        float eps) {
	GDNScanShared &sh = grid_shared<GDNScanShared>(gr);
	float *kh = sh.kh, *qh = sh.qh;
	int32_t h = gr.bx;
	if (h >= nv || d > GDN_MAX_D) return; // the whole block leaves together
	int32_t j = gr.tid;
	int lane = j & 31;
	int32_t ik = h % nk;
	int64_t width = (int64_t)(2 * nk + nv) * d, hs = (int64_t)d * d, slot = nv * hs;
	float qscale = __fdiv_rn(1.0f, sqrt32(__int2float_rn(d)));
	for (int32_t r = 0; r < rows; r++) {
		int32_t si = src[r], di = dst[r];
		if (si < 0 || si >= nstates || di < 0 || di >= nstates) return; // the twin rejects the launch
		const float *row = qkv + r * width;
		const float *q = row + (int64_t)ik * d, *kk = row + (int64_t)(nk + ik) * d, *v = row + (int64_t)(2 * nk + h) * d;
		float nkk = l2_scale(kk, d, eps, lane), nq = l2_scale(q, d, eps, lane);
		if (j < d) {
			kh[j] = __fmul_rn(kk[j], nkk);
			qh[j] = __fmul_rn(__fmul_rn(q[j], nq), qscale);
		}
		grid_sync(gr);
		float b = sigmoid32(beta[(int64_t)r * nv + h]);
		float g = __fmul_rn(a[h], softplus32(__fadd_rn(alpha[(int64_t)r * nv + h], dt_bias[h])));
		float e = exp32(g);
		if (j < d) {
			// each pass loads GDN_AHEAD of the column's values before it uses or stores any (a
			// store may overwrite what it reads, Src being Dst, so the compiler would keep one
			// load in flight a store; the thread's values are its own, read before written)
			const float *s = state + si * slot + h * hs + j;
			float *sd = state + di * slot + h * hs + j;
			float u = 0.0f, in[GDN_AHEAD];
			for (int32_t i0 = 0; i0 < d; i0 += GDN_AHEAD) {
#pragma unroll
				for (int k = 0; k < GDN_AHEAD; k++)
					if (i0 + k < d) in[k] = s[(int64_t)(i0 + k) * d];
#pragma unroll
				for (int k = 0; k < GDN_AHEAD; k++)
					if (i0 + k < d) {
						float dv = __fmul_rn(e, in[k]);
						sd[(int64_t)(i0 + k) * d] = dv;
						u = __fmaf_rn(dv, kh[i0 + k], u);
					}
			}
			float delta = __fmul_rn(__fsub_rn(v[j], u), b);
			float o = 0.0f;
			for (int32_t i0 = 0; i0 < d; i0 += GDN_AHEAD) {
#pragma unroll
				for (int k = 0; k < GDN_AHEAD; k++)
					if (i0 + k < d) in[k] = sd[(int64_t)(i0 + k) * d];
#pragma unroll
				for (int k = 0; k < GDN_AHEAD; k++)
					if (i0 + k < d) {
						float sv = __fmaf_rn(kh[i0 + k], delta, in[k]);
						sd[(int64_t)(i0 + k) * d] = sv;
						o = __fmaf_rn(sv, qh[i0 + k], o);
					}
			}
			out[((int64_t)r * nv + h) * d + j] = o;
		}
		grid_sync(gr); // kh and qh are rewritten by the next row
	}
}
ENTRY_SHARED(gdn_scan_f32, GDNScanShared, (const float *qkv, const float *beta, const float *alpha, const float *a,
                                        const float *dt_bias, float *state, const int32_t *src, const int32_t *dst,
                                        float *out, int32_t rows, int32_t nk, int32_t nv, int32_t d, int32_t nstates,
                                        float eps), qkv, beta, alpha, a, dt_bias, state, src, dst, out, rows, nk, nv, d, nstates, eps)
