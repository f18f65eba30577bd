// rope.cu: rope_f32, the kernel of device/kernels/rope.go.
//
// Grid (Rows, Heads), NRot/2 threads per block: thread i rotates pair i of its row's head, in
// place, with the host's table entry (cos θ_i, sin θ_i) = CosSin[row][i]. The pair is
// (x[2i], x[2i+1]) in adjacent mode (0) and (x[i], x[i+NRot/2]) in NEOX mode (2), and
// (a, b) becomes (float32(a·c) − float32(b·s), float32(a·s) + float32(b·c)): four rounded
// products, then one rounded difference and one rounded sum, as in the twin (ropeHead). Pairs
// are disjoint, so threads never touch each other's values.
#include "num.cuh"
#include "grid.cuh"
#include "cache.cuh"

#define ROPE_NEOX 2
#define ROPE_AHEAD 2 // columns a thread of rope_kv_store_f32 reads before it stores any

// rope_pairs rotates the pairs tid, tid + ntid, … of one head v: (v[2i], v[2i+1]) adjacent,
// (v[i], v[i+half]) in NEOX mode. The mode is a template parameter so that each form's
// addresses are the lane's first plus constants (the static model, device/perf, follows them).
template <bool NEOX>
static __device__ __forceinline__ void rope_pairs(float *v, const float *tab, int32_t half, int tid, int ntid) {
#pragma unroll 1 // a pair a thread is the common case (NRot/2 threads a block): no unrolled copy
	for (int32_t i = tid; i < half; i += ntid) {
		float c = tab[2 * i], s = tab[2 * i + 1];
		float *pj = NEOX ? v + i : v + 2 * i, *pk = NEOX ? pj + half : pj + 1;
		float a = *pj, b = *pk;
		*pj = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
		*pk = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
	}
}

// rope_f32 mirrors kernels.Rope (ropeHead).
__device__ __forceinline__ void rope_f32_body(const Grid &gr, float *x, const float *cos_sin, int32_t rows, int32_t heads, int32_t head_dim,
                                    int32_t n_rot, int32_t mode) {
	int32_t r = gr.bx, h = gr.by;
	if (r >= rows || h >= heads) return;
	int32_t half = n_rot / 2;
	float *v = x + ((int64_t)r * heads + h) * head_dim;
	const float *tab = cos_sin + (int64_t)r * half * 2;
	if (mode == ROPE_NEOX)
		rope_pairs<true>(v, tab, half, gr.tid, gr.ntid);
	else
		rope_pairs<false>(v, tab, half, gr.tid, gr.ntid);
}
ENTRY(rope_f32, (float *x, const float *cos_sin, int32_t rows, int32_t heads, int32_t head_dim,
                                    int32_t n_rot, int32_t mode), x, cos_sin, rows, heads, head_dim, n_rot, mode)

// rope_kv_store_f32 mirrors kernels.RopeKVStore: rope_f32 of each row's K heads (Heads heads of
// HeadDim) followed by kv_store_f32, one block per row: every element of the rotated K is
// formed exactly as rope_f32 forms it — the first of a pair a·c − b·s, the second a·s + b·c —
// and written straight into the row's cache slot, rounded to the cache's type (attention.cu's
// cache_store); dims past NRot and V are stored as kv_store_f32 stores them.
__device__ __forceinline__ void rope_kv_store_f32_body(const Grid &gr, const float *k, const float *v,
                                                       const float *cos_sin, const int32_t *slots, void *k_cache,
                                                       void *v_cache, int32_t rows, int32_t kv_dim, int32_t n_slots,
                                                       int32_t heads, int32_t head_dim, int32_t n_rot, int32_t mode,
                                                       int32_t k_type, int32_t v_type) {
	int32_t r = gr.bx;
	if (r >= rows) return;
	int32_t half = n_rot / 2;
	const float *kr = k + (int64_t)r * kv_dim;
	const float *tab = cos_sin + (int64_t)r * half * 2;
	// ROPE_AHEAD columns a thread at a time: every input of them read before any store (the
	// compiler may not move a load above a store to the caches, which it cannot tell apart
	// from the inputs), so their loads are in flight together
	for (int32_t c0 = gr.tid; c0 < kv_dim; c0 += ROPE_AHEAD * gr.ntid) {
		float vv[ROPE_AHEAD], a[ROPE_AHEAD], b[ROPE_AHEAD], cs[ROPE_AHEAD], sn[ROPE_AHEAD];
#pragma unroll
		for (int u = 0; u < ROPE_AHEAD; u++) {
			int32_t c = c0 + u * gr.ntid, d = c % head_dim;
			if (c >= kv_dim) break;
			vv[u] = v[(int64_t)r * kv_dim + c];
			if (d >= n_rot) {
				a[u] = kr[c];
				continue;
			}
			int32_t i = mode == ROPE_NEOX ? d % half : d / 2; // the pair
			int32_t j = c - d + (mode == ROPE_NEOX ? i : 2 * i), kk = j + (mode == ROPE_NEOX ? half : 1);
			a[u] = kr[j], b[u] = kr[kk], cs[u] = tab[2 * i], sn[u] = tab[2 * i + 1];
		}
		// the row's slot, asked for after the inputs (so that they are in flight together; the
		// compiler waits for it where it reads it) and before the stores, the only ones that
		// need it: one round trip a pass, not two
		const int32_t s = slots[r];
		if (s < 0 || s >= n_slots) return; // the whole block: s is the row's
		const int64_t at = (int64_t)s * kv_dim;
#pragma unroll
		for (int u = 0; u < ROPE_AHEAD; u++) {
			int32_t c = c0 + u * gr.ntid, d = c % head_dim;
			if (c >= kv_dim) break;
			cache_store(v_cache, v_type, at + c, vv[u]);
			if (d >= n_rot) {
				cache_store(k_cache, k_type, at + c, a[u]);
				continue;
			}
			bool first = mode == ROPE_NEOX ? d < half : (d & 1) == 0; // j of (j, k)
			cache_store(k_cache, k_type, at + c,
			            first ? __fsub_rn(__fmul_rn(a[u], cs[u]), __fmul_rn(b[u], sn[u]))
			                  : __fadd_rn(__fmul_rn(a[u], sn[u]), __fmul_rn(b[u], cs[u])));
		}
	}
}
ENTRY(rope_kv_store_f32,
      (const float *k, const float *v, const float *cos_sin, const int32_t *slots, void *k_cache, void *v_cache,
       int32_t rows, int32_t kv_dim, int32_t n_slots, int32_t heads, int32_t head_dim, int32_t n_rot, int32_t mode,
       int32_t k_type, int32_t v_type),
      k, v, cos_sin, slots, k_cache, v_cache, rows, kv_dim, n_slots, heads, head_dim, n_rot, mode, k_type, v_type)
