// attention.cu: kv_store_f32 and attention_f32, the kernels of device/kernels/attention.go.
//
// Cache element types (KType, VType: dtype values): 0 float32, 1 float16, 30 bfloat16. The store
// rounds to nearest even (f32_to_f16, f32_to_bf16; float32 is copied bit for bit); attention
// widens every element exactly (f16_to_f32, bf16_to_f32) before any arithmetic.
//
// kv_store_f32 (KVStoreArgs): one 128-thread block per row, writing the row's key and value
// vectors into cache slot Slots[r], each element rounded to its cache's type; a slot outside
// [0, NSlots) writes nothing (the twin reports it as an error).
//
// attention_f32 (AttentionArgs): a row's key list j = 0 … n−1 (cache slots Keys[KeyOff[r] + j],
// in logical order; with Window > 0 only the last Window of them, att_keys) is cut into chunks
// of ATT_CHUNK = kernels.AttnChunk positions. A 256-thread block computes a chunk's partial
// result for the query heads of one KV head, in the order the twin's doc comment
// (AttentionArgs) states. The grid is one-dimensional: first a block per (row r, KV head, chunk
// c ≥ Shared) — block r + Rows·kvh + Rows·NKV·(Chunks−1−c), the last, shortest chunks first —
// then a block per (group of ATT_GROUP rows, KV head, chunk c < Shared), which computes the
// chunk for every row of the group (the chunks the host promised are the same for all of them,
// kernels.AttentionArgs.Shared; a row whose chunk is not is counted as bad, below):
//   - s_j = float32(dot·Scale), dot = fma(q[d], k_j[d], dot) for d = 0 … HeadDim−1 from +0: a
//     thread per key and a quarter of the pairs, or, for a pass of more than 16 pairs, a tile of
//     2 keys × 4 pairs a thread (att_scores_tiled), sequentially over d, the keys and queries
//     staged in shared memory in slices of 64 dims (the dot's chain continues across slices;
//     rows of 68 floats: 16-byte aligned, and 8 consecutive rows' vectors on distinct banks);
//     with SoftCap > 0, s_j = tanh32(s_j·(1/SoftCap))·SoftCap;
//   - m_c = max32 of the chunk's s_j (each warp's butterfly, then the two warps of the chunk;
//     tiled, each thread's two keys, the warp's 8 key lanes, then the 4 key groups: max32 is
//     a total order's maximum, so the grouping does not change it, and the kernel takes it
//     as the integer maximum of max_key's keys, num.cuh);
//   - e_j = exp32(s_j − m_c); l_c: lane i adds e_j for j = i, i+32 of the chunk in order from +0,
//     then warp_sum (num.WarpSum's butterfly);
//   - o_c[d] = fma(e_j, v_j[d], o_c[d]) over the chunk's keys in order from +0, a thread per
//     dim and a quarter of the pairs, or a tile of 4 pairs × 2 dims (att_values_tiled);
//   - (m_c, l_c, o_c) are written to Part; every block then adds one to its row's counter in
//     Count (an acquire-release atomic at GPU scope, a lane of the first warp a row), and the
//     block that brings it to the row's chunk
//     count merges the chunks in chunk order: M = max32 of the m_c, w_c = exp32(m_c − M),
//     L = fma(l_c, w_c, L), O[d] = fma(o_c[d], w_c, O[d]) for c = 0, 1, … from +0, and
//     out[d] = O[d] / L, rounded to Out's type (OutAct). It resets the counter to zero, so
//     Count is zero again after the launch. Which block merges depends on timing; what it
//     computes does not. With DeferMerge, no block counts or merges, and the grid leaves out
//     the blocks of the launch's last chunk (the first Rows·NKV; one block that returns if that
//     leaves none): the blocks of a bad chunk mark its rows' counters (ATT_BAD), and
//     attention_merge_f32, launched after with the same arguments, computes each row's last
//     chunk and merges the row on a block per (row, KV head) (att_compute, att_merge: the same
//     arithmetic).
// Memory: the block loads the chunk's slots for the rows of its group of 8 (r − r mod 8 …), and
// a row whose chunk holds exactly the same slots as an earlier row of the group (a tree's nodes
// over their shared history, a prefill chunk's rows over the prompt before it) is computed by
// that earlier row's block: its keys and values are read once for every row and query head that
// shares them. Of an unshared chunk the other rows' blocks return: each first compares its
// row's chunk with the group's first row's alone and returns if they are the same (that row
// computes it), before it loads the whole group's slots. A shared chunk has no such blocks.
// Keys and values are staged in shared memory a slice (64 keys × 64 dims) at a time, converted
// to float32, with the next two slices' loads (16-byte vectors where the head's size allows) in
// flight in registers meanwhile.
// A row whose key list is empty or has more than Chunks chunks is left alone; a chunk naming a
// slot outside [0, NSlots), or a shared chunk that is not its group's first row's, marks its
// row, whose output is then not written (the twin reports an error for all three).
#include "num.cuh"
#include "grid.cuh"
#include "cache.cuh"

// kv_store_f32 mirrors kernels.KVStore.
__device__ __forceinline__ void kv_store_f32_body(const Grid &gr, const float *k, const float *v, const int32_t *slots, void *k_cache,
                                                  void *v_cache, int32_t rows, int32_t kv_dim, int32_t n_slots, int32_t k_type,
                                                  int32_t v_type) {
	int32_t r = gr.bx;
	if (r >= rows) return;
	int32_t s = slots[r];
	if (s < 0 || s >= n_slots) return;
	for (int32_t c = gr.tid; c < kv_dim; c += gr.ntid) {
		cache_store(k_cache, k_type, (int64_t)s * kv_dim + c, k[(int64_t)r * kv_dim + c]);
		cache_store(v_cache, v_type, (int64_t)s * kv_dim + c, v[(int64_t)r * kv_dim + c]);
	}
}
ENTRY(kv_store_f32, (const float *k, const float *v, const int32_t *slots, void *k_cache, void *v_cache, int32_t rows,
                     int32_t kv_dim, int32_t n_slots, int32_t k_type, int32_t v_type),
      k, v, slots, k_cache, v_cache, rows, kv_dim, n_slots, k_type, v_type)

#define ATT_CHUNK 64            // kernels.AttnChunk
#define ATT_THREADS 256         // kernels.AttnBlockThreads
#define ATT_DS 64               // dims per staged slice
#define ATT_KS (ATT_DS + 4)     // shared row stride of a staged slice: 16-byte rows, 8 in a row on distinct banks
#define ATT_QS (ATT_DS + 4)     // shared row stride of the pairs' query slice
#define ATT_PS (ATT_CHUNK + 4)  // shared row stride of the pairs' weights e_j
#define ATT_PMAX 32             // (row, query head) pairs per pass over the slices
#define ATT_GROUP 8             // rows whose chunks are compared for sharing
#define ATT_VEC 4               // 16-byte vectors per thread and slice, at most
#define ATT_BAD 0x10000u        // Count: added for a chunk with a bad slot (chunk counts < 2^16)
#define ATT_MERGE_OUT 8         // the merge's sums a thread: ATT_PMAX · ATT_DS / ATT_THREADS
#define ATT_OUT_F16 1           // OutAct: kernels.ActF16
#define ATT_OUT_BF16 2          // OutAct: kernels.ActBF16

// ATT_PARAMS(R) is the parameter list of attention_f32 and attention_merge_f32, the fields of
// kernels.AttentionArgs in order (R: RESTRICT on the bodies' read-only inputs), and ATT_ARGS
// its names.
#define ATT_PARAMS(R)                                                                                                      \
	const float *R q, const void *R k_cache, const void *R v_cache, const int32_t *R keys, const int32_t *R key_off, void *out,    \
	float *part, uint32_t *count, int32_t rows, int32_t n_head, int32_t n_kv, int32_t head_dim, int32_t n_slots, int32_t chunks,     \
	int32_t k_type, int32_t v_type, float scale, int32_t window, float soft_cap, int32_t n_shared, int32_t out_act, int32_t defer_merge
#define ATT_ARGS                                                                                                           \
	q, k_cache, v_cache, keys, key_off, out, part, count, rows, n_head, n_kv, head_dim, n_slots, chunks, k_type, v_type, scale, \
	    window, soft_cap, n_shared, out_act, defer_merge

// AttStage is one thread's share of a slice being loaded: up to ATT_VEC 16-byte vectors.
struct AttStage {
	uint4 v[ATT_VEC];
};

// AttSlice says which slice unit u of a pass is: the keys' slices first, then the values'.
struct AttSlice {
	bool val;
	int32_t d0, w; // first dim and width
};

static __device__ __forceinline__ AttSlice att_slice(int32_t u, int32_t ns, int32_t hd) {
	AttSlice s;
	s.val = u >= ns;
	s.d0 = (u % ns) * ATT_DS;
	s.w = min(ATT_DS, hd - s.d0);
	return s;
}

// att_fetch starts the loads of a slice (vector path): vector v of the slice is key v / vpk,
// bytes 16·(v mod vpk) of its slice.
static __device__ __forceinline__ void att_fetch(AttStage &st, const AttSlice &s, const uint8_t *cache, int32_t es,
                                                 const int32_t *sl, int32_t len, int64_t stride, int64_t base, int tid) {
	int32_t vpk = s.w * es / 16;
#pragma unroll
	for (int i = 0; i < ATT_VEC; i++) {
		int32_t v = tid + i * ATT_THREADS;
		if (v < len * vpk) {
			int32_t j = v / vpk;
			st.v[i] = *(const uint4 *)(cache + ((int64_t)sl[j] * stride + base + s.d0) * es + (int64_t)(v % vpk) * 16);
		}
	}
}

// att_put widens a fetched slice into kv (vector path).
static __device__ __forceinline__ void att_put(float *kv, const AttStage &st, const AttSlice &s, int32_t t, int32_t es,
                                               int32_t len, int tid) {
	int32_t vpk = s.w * es / 16, per = 16 / es;
#pragma unroll
	for (int i = 0; i < ATT_VEC; i++) {
		int32_t v = tid + i * ATT_THREADS;
		if (v < len * vpk) {
			float *dst = kv + (v / vpk) * ATT_KS + (v % vpk) * per; // 16-byte aligned (ATT_KS)
			uint32_t w[4] = {st.v[i].x, st.v[i].y, st.v[i].z, st.v[i].w};
			float4 lo4, hi4;
			if (es == 4) {
				lo4.x = __uint_as_float(w[0]), lo4.y = __uint_as_float(w[1]), lo4.z = __uint_as_float(w[2]), lo4.w = __uint_as_float(w[3]);
				*(float4 *)dst = lo4;
			} else {
				float f[8];
#pragma unroll
				for (int e = 0; e < 4; e++) {
					uint16_t lo = (uint16_t)(w[e] & 0xffffu), hi = (uint16_t)(w[e] >> 16);
					f[2 * e] = t == CACHE_F16 ? f16_to_f32(lo) : bf16_to_f32(lo);
					f[2 * e + 1] = t == CACHE_F16 ? f16_to_f32(hi) : bf16_to_f32(hi);
				}
				lo4.x = f[0], lo4.y = f[1], lo4.z = f[2], lo4.w = f[3];
				hi4.x = f[4], hi4.y = f[5], hi4.z = f[6], hi4.w = f[7];
				*(float4 *)dst = lo4;
				*(float4 *)(dst + 4) = hi4;
			}
		}
	}
}

// att_put_scalar loads and widens a slice element by element (head sizes the vectors do not fit).
static __device__ __forceinline__ void att_put_scalar(float *kv, const AttSlice &s, const void *cache, int32_t t,
                                                      const int32_t *sl, int32_t len, int64_t stride, int64_t base, int tid) {
	for (int32_t i = tid; i < len * s.w; i += ATT_THREADS) {
		int32_t j = i / s.w, d = i % s.w;
		kv[j * ATT_KS + d] = cache_load(cache, t, (int64_t)sl[j] * stride + base + s.d0 + d);
	}
}

// att_scores continues thread (key j, pair group pg)'s score chains over the staged slice's w
// dims: acc[i] for pair pg + 4i, i < NI (pairs past the pass's last compute unused values).
template <int NI>
static __device__ __forceinline__ void att_scores(float *acc, const float *kv, const float *qs, int32_t j, int32_t pg, int32_t w) {
	const float *kr = kv + j * ATT_KS;
	int32_t d = 0;
	for (; d + 4 <= w; d += 4) {
		float k0 = kr[d], k1 = kr[d + 1], k2 = kr[d + 2], k3 = kr[d + 3];
#pragma unroll
		for (int i = 0; i < NI; i++) {
			float4 qv = *(const float4 *)(qs + (pg + 4 * i) * ATT_QS + d);
			acc[i] = __fmaf_rn(qv.x, k0, acc[i]);
			acc[i] = __fmaf_rn(qv.y, k1, acc[i]);
			acc[i] = __fmaf_rn(qv.z, k2, acc[i]);
			acc[i] = __fmaf_rn(qv.w, k3, acc[i]);
		}
	}
	for (; d < w; d++) {
		float kd = kr[d];
#pragma unroll
		for (int i = 0; i < NI; i++) acc[i] = __fmaf_rn(qs[(pg + 4 * i) * ATT_QS + d], kd, acc[i]);
	}
}

// att_values computes thread (dim d, pair group pg)'s weighted value sums over the chunk's len
// keys in order: o[i] for pair pg + 4i, i < NI, from +0.
template <int NI>
static __device__ __forceinline__ void att_values(float *o, const float *kv, const float *ps, int32_t d, int32_t pg, int32_t len) {
#pragma unroll
	for (int i = 0; i < NI; i++) o[i] = 0.0f;
	int32_t j = 0;
	for (; j + 4 <= len; j += 4) {
		float v0 = kv[j * ATT_KS + d], v1 = kv[(j + 1) * ATT_KS + d], v2 = kv[(j + 2) * ATT_KS + d], v3 = kv[(j + 3) * ATT_KS + d];
#pragma unroll
		for (int i = 0; i < NI; i++) {
			float4 e = *(const float4 *)(ps + (pg + 4 * i) * ATT_PS + j);
			o[i] = __fmaf_rn(e.x, v0, o[i]);
			o[i] = __fmaf_rn(e.y, v1, o[i]);
			o[i] = __fmaf_rn(e.z, v2, o[i]);
			o[i] = __fmaf_rn(e.w, v3, o[i]);
		}
	}
	for (; j < len; j++) {
		float vd = kv[j * ATT_KS + d];
#pragma unroll
		for (int i = 0; i < NI; i++) o[i] = __fmaf_rn(ps[(pg + 4 * i) * ATT_PS + j], vd, o[i]);
	}
}

// The tiled forms, for a pass of more than ATT_PMAX / 2 pairs: a thread computes a tile of
// the pass's scores or sums, so that each value it loads from shared memory feeds several
// chains. Every chain keeps its order (a score over d = 0 … HeadDim−1, a sum over the chunk's
// keys in order, each from +0): the tiles change which thread computes a chain, not its bits.
//
// att_scores_tiled continues thread tid's chains of 2 keys × 4 pairs over the staged slice's
// w dims: warp wp takes keys 16·(wp mod 4) … +15 and pairs 16·(wp / 4) … +15; lane l the keys
// 16·(wp mod 4) + l mod 8 + 8u (u < 2) and the pairs 16·(wp / 4) + l / 8 + 4t (t < 4), into
// acc[4u + t]. Each step of 4 dims loads 2 key vectors (8 rows a warp, ATT_KS apart: every bank
// once) and 4 query vectors (4 rows a warp) for 32 FMAs.
static __device__ __forceinline__ void att_scores_tiled(float *acc, const float *kv, const float *qs, int tid, int32_t w) {
	const int wp = tid / 32, lane = tid % 32;
	const float *k0 = kv + (16 * (wp % 4) + lane % 8) * ATT_KS, *k1 = k0 + 8 * ATT_KS;
	const float *q0 = qs + (16 * (wp / 4) + lane / 8) * ATT_QS;
	int32_t d = 0;
#pragma unroll 4
	for (; d + 4 <= w; d += 4) {
		const float4 ka = *(const float4 *)(k0 + d), kb = *(const float4 *)(k1 + d);
#pragma unroll
		for (int t = 0; t < 4; t++) {
			const float4 qv = *(const float4 *)(q0 + 4 * t * ATT_QS + d);
			acc[t] = __fmaf_rn(qv.x, ka.x, acc[t]);
			acc[t] = __fmaf_rn(qv.y, ka.y, acc[t]);
			acc[t] = __fmaf_rn(qv.z, ka.z, acc[t]);
			acc[t] = __fmaf_rn(qv.w, ka.w, acc[t]);
			acc[4 + t] = __fmaf_rn(qv.x, kb.x, acc[4 + t]);
			acc[4 + t] = __fmaf_rn(qv.y, kb.y, acc[4 + t]);
			acc[4 + t] = __fmaf_rn(qv.z, kb.z, acc[4 + t]);
			acc[4 + t] = __fmaf_rn(qv.w, kb.w, acc[4 + t]);
		}
	}
	for (; d < w; d++) {
		const float ka = k0[d], kb = k1[d];
#pragma unroll
		for (int t = 0; t < 4; t++) {
			const float qd = q0[4 * t * ATT_QS + d];
			acc[t] = __fmaf_rn(qd, ka, acc[t]);
			acc[4 + t] = __fmaf_rn(qd, kb, acc[4 + t]);
		}
	}
}

// att_chunk_sum is l_c of a chunk of len keys whose weights e_j are row[j], in the contract's
// order: lane i adds e_i, then e_{i+32}, from +0, then warp_sum. All 32 lanes must call it.
static __device__ __forceinline__ float att_chunk_sum(const float *row, int32_t len, int lane) {
	float a = 0.0f;
	if (lane < len) a = __fadd_rn(a, row[lane]);
	if (lane + 32 < len) a = __fadd_rn(a, row[lane + 32]);
	return warp_sum(a);
}

// att_softmax_tiled finishes the tiled scores (att_scores_tiled's layout) of a pass of np
// pairs over a chunk of len keys: s = float32(dot·scale) (soft-capped), the pairs' maxima
// m_c (each thread's two keys, the warp's 8 key lanes by butterfly, then the 4 key groups'
// through red), e_j = exp32(s_j − m_c) into ps (0 past len) and m_c into mm, and the sums
// l_c in the contract's order (a warp a pair: lane i adds e_i, e_{i+32}, then warp_sum) into
// msum. max32 is a total order's maximum, so how the maxima are grouped does not change m_c.
static __device__ __forceinline__ void att_softmax_tiled(const Grid &gr, float *acc, float *red, float *ps, float *mm, float *msum,
                                                         int tid, int32_t np, int32_t len, float scale, float soft_cap) {
	const int wp = tid / 32, lane = tid % 32, kg = wp % 4;
	const int32_t j0 = 16 * kg + lane % 8, j1 = j0 + 8, pb = 16 * (wp / 4) + lane / 8;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		acc[i] = __fmul_rn(acc[i], scale);
		if (soft_cap > 0.0f) acc[i] = __fmul_rn(tanh32(__fmul_rn(acc[i], __fdiv_rn(1.0f, soft_cap))), soft_cap);
	}
	// the maxima as max_key's integers (red holds the key groups' keys)
#pragma unroll
	for (int t = 0; t < 4; t++) {
		int32_t k = max(max_key(j0 < len ? acc[t] : -inf32()), max_key(j1 < len ? acc[4 + t] : -inf32()));
#pragma unroll
		for (int off = 1; off < 8; off <<= 1) k = max(k, __shfl_xor_sync(NUM_FULL_MASK, k, off));
		if (lane % 8 == 0) red[(pb + 4 * t) * 4 + kg] = __int_as_float(k);
	}
	grid_sync(gr);
#pragma unroll
	for (int t = 0; t < 4; t++) {
		const int32_t p = pb + 4 * t;
		const float m = max_unkey(max(max(__float_as_int(red[p * 4]), __float_as_int(red[p * 4 + 1])),
		                              max(__float_as_int(red[p * 4 + 2]), __float_as_int(red[p * 4 + 3]))));
		ps[p * ATT_PS + j0] = j0 < len ? exp32(__fsub_rn(acc[t], m)) : 0.0f;
		ps[p * ATT_PS + j1] = j1 < len ? exp32(__fsub_rn(acc[4 + t], m)) : 0.0f;
		if (kg == 0 && lane % 8 == 0) mm[p] = m;
	}
	grid_sync(gr);
	for (int32_t pp = wp; pp < np; pp += ATT_THREADS / 32) {
		const float a = att_chunk_sum(ps + pp * ATT_PS, len, lane);
		if (lane == 0) msum[pp] = a;
	}
	grid_sync(gr);
}

// att_values_tiled computes thread tid's weighted value sums of 4 pairs × 2 dims over the
// chunk's len keys in order, each from +0: warp wp takes dims 8·wp … +7; lane l the dims
// 8·wp + 2·(l mod 4) + e (e < 2) and the pairs l / 4 + 8t (t < 4), into o[2t + e]. Each step of
// 4 keys loads 4 weight vectors (8 rows a warp, ATT_PS apart: every bank once) and 4 value
// pairs (4 a warp) for 32 FMAs. Dims past the slice's width compute unused values.
static __device__ __forceinline__ void att_values_tiled(float *o, const float *kv, const float *ps, int tid, int32_t len) {
	const int wp = tid / 32, lane = tid % 32;
	const float *vv = kv + 8 * wp + 2 * (lane % 4), *e0 = ps + (lane / 4) * ATT_PS;
#pragma unroll
	for (int i = 0; i < 8; i++) o[i] = 0.0f;
	int32_t j = 0;
#pragma unroll 2
	for (; j + 4 <= len; j += 4) {
		float2 v[4];
#pragma unroll
		for (int jj = 0; jj < 4; jj++) v[jj] = *(const float2 *)(vv + (j + jj) * ATT_KS);
#pragma unroll
		for (int t = 0; t < 4; t++) {
			const float4 e = *(const float4 *)(e0 + 8 * t * ATT_PS + j);
			o[2 * t] = __fmaf_rn(e.x, v[0].x, o[2 * t]);
			o[2 * t + 1] = __fmaf_rn(e.x, v[0].y, o[2 * t + 1]);
			o[2 * t] = __fmaf_rn(e.y, v[1].x, o[2 * t]);
			o[2 * t + 1] = __fmaf_rn(e.y, v[1].y, o[2 * t + 1]);
			o[2 * t] = __fmaf_rn(e.z, v[2].x, o[2 * t]);
			o[2 * t + 1] = __fmaf_rn(e.z, v[2].y, o[2 * t + 1]);
			o[2 * t] = __fmaf_rn(e.w, v[3].x, o[2 * t]);
			o[2 * t + 1] = __fmaf_rn(e.w, v[3].y, o[2 * t + 1]);
		}
	}
	for (; j < len; j++) {
		const float2 v = *(const float2 *)(vv + j * ATT_KS);
#pragma unroll
		for (int t = 0; t < 4; t++) {
			const float e = e0[8 * t * ATT_PS + j];
			o[2 * t] = __fmaf_rn(e, v.x, o[2 * t]);
			o[2 * t + 1] = __fmaf_rn(e, v.y, o[2 * t + 1]);
		}
	}
}

// att_keys gives row x's key list under window w (0: all): the index in keys of its first key
// and its length — the last w keys of the row's list, or all of them when it is shorter.
static __device__ __forceinline__ void att_keys(const int32_t *key_off, int32_t x, int32_t w, int32_t *o, int32_t *n) {
	int32_t a = key_off[x], m = key_off[x + 1] - a;
	if (w > 0 && m > w) {
		a += m - w;
		m = w;
	}
	*o = a;
	*n = m;
}

// att_count_add adds v to a chunk counter and returns what it held: an acquire-release atomic
// at GPU scope, which publishes the block's partial results (ordered before it by the
// barrier) and, for the block that brings the count to its end, sees every other block's.
static __device__ __forceinline__ uint32_t att_count_add(uint32_t *p, uint32_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
	uint32_t old;
	asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
	return old;
#else
	__threadfence();
	uint32_t old = atomicAdd(p, v);
	__threadfence();
	return old;
#endif
}

// att_prefetch_l1 asks the L1 for the line holding p (a hint; host builds have none).
static __device__ __forceinline__ void att_prefetch_l1(const float *p) {
#ifdef __CUDA_ARCH__
	asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
#endif
}

// att_out writes element i of the output, of type act (kernels.AttentionArgs.OutAct: float32,
// or rounded to nearest even as the act kernels round it — as the cache's store rounds it).
static __device__ __forceinline__ void att_out(void *out, int32_t act, int64_t i, float v) {
	cache_store(out, act == ATT_OUT_F16 ? CACHE_F16 : act == ATT_OUT_BF16 ? CACHE_BF16 : 0, i, v);
}

// AttShared is attention_f32's shared memory (grid_shared).
struct AttShared {
	float kv[ATT_CHUNK * ATT_KS];     // the staged slice: [key][dim]
	float qs[ATT_PMAX * ATT_QS];      // the pairs' query slice; the merge's sums
	float ps[ATT_PMAX * ATT_PS];      // e_j per pair; the merge's weights
	int32_t sl[ATT_GROUP * ATT_CHUNK]; // the group's chunk slots
	int32_t slen[ATT_GROUP], snc[ATT_GROUP], lead[ATT_GROUP], sbad[ATT_GROUP]; // chunk c's length, the chunk count
	int32_t mem[ATT_GROUP], nmem, last, orph;
	float red[ATT_PMAX * 4], mm[ATT_PMAX], msum[ATT_PMAX];
	int32_t lrow[ATT_GROUP], lnc[ATT_GROUP], nlast, mx[ATT_PMAX], mh[ATT_PMAX], mnc[ATT_PMAX]; // the merge's rows (and their chunk counts) and pairs
};

// att_merge_sums adds window cw's chunks to the merge's sums (sh.qs, sh.msum): thread tid's
// outputs o = tid + ATT_THREADS·k (k < K; nb·hd is at most K·ATT_THREADS) and, below nb, pair
// tid's L, each chain in chunk order — the chunks every chain of the thread has, STEP at a time
// with all their loads made before the step's first FMA, then each chain's rest one by one. The
// partial results are in the L2 (other blocks wrote them): a step is one trip.
template <int K, int STEP>
static __device__ __forceinline__ void att_merge_sums(AttShared &sh, const float *part, int tid, int32_t nb, int32_t hd, int32_t wn,
                                                      int32_t cw, int32_t chunks, int32_t n_head, int32_t pw) {
	float O[K];
	const float *po[K]; // output k's partial result in the window's next chunk
	int32_t pe[K];      // its pair's weights in sh.ps
	int32_t cn[K];
	int32_t cmin = wn;
	auto row = [&](int32_t pi) { return part + ((int64_t)sh.mx[pi] * n_head + sh.mh[pi]) * chunks * pw + (int64_t)cw * pw; };
#pragma unroll
	for (int k = 0; k < K; k++) {
		const int32_t o = tid + k * ATT_THREADS;
		const bool ok = o < nb * hd;
		const int32_t pi = ok ? o / hd : 0, d = ok ? o % hd : 0;
		cn[k] = ok ? min(wn, sh.mnc[pi] - cw) : 0;
		if (ok) cmin = min(cmin, cn[k]);
		po[k] = row(pi) + 2 + d;
		pe[k] = pi * wn;
		O[k] = ok ? sh.qs[o] : 0.0f;
	}
	// L's chain (pair tid's); a thread without one loads its first output's pair's l_c, unused
	const bool lrow = tid < nb;
	const int32_t cl = lrow ? min(wn, sh.mnc[tid] - cw) : 0;
	const float *pl = row(lrow ? tid : (tid < nb * hd ? tid / hd : 0)) + 1;
	float L = lrow ? sh.msum[tid] : 0.0f;
	if (lrow) cmin = min(cmin, cl);
	if (tid >= nb * hd && !lrow) cmin = 0; // no chain here: no loads either
	int32_t c0 = 0;
	for (; c0 + STEP <= cmin; c0 += STEP) {
		float v[K][STEP], vl[STEP];
#pragma unroll
		for (int u = 0; u < STEP; u++) {
#pragma unroll
			for (int k = 0; k < K; k++) v[k][u] = __ldcg(po[k] + u * pw);
			vl[u] = __ldcg(pl + u * pw);
		}
#pragma unroll
		for (int u = 0; u < STEP; u++) {
#pragma unroll
			for (int k = 0; k < K; k++)
				if (k * ATT_THREADS + tid < nb * hd) O[k] = __fmaf_rn(v[k][u], sh.ps[pe[k] + c0 + u], O[k]);
			if (lrow) L = __fmaf_rn(vl[u], sh.ps[tid * wn + c0 + u], L);
		}
#pragma unroll
		for (int k = 0; k < K; k++) po[k] += STEP * pw;
		pl += STEP * pw;
	}
#pragma unroll
	for (int k = 0; k < K; k++)
		for (int32_t cc = c0; cc < cn[k]; cc++) O[k] = __fmaf_rn(__ldcg(po[k] + (cc - c0) * pw), sh.ps[pe[k] + cc], O[k]);
	for (int32_t cc = c0; cc < cl; cc++) L = __fmaf_rn(__ldcg(pl + (cc - c0) * pw), sh.ps[tid * wn + cc], L);
#pragma unroll
	for (int k = 0; k < K; k++)
		if (tid + k * ATT_THREADS < nb * hd) sh.qs[tid + k * ATT_THREADS] = O[k];
	if (lrow) sh.msum[tid] = L;
}

// att_merge merges the (row, query head) pairs of the rows sh.lrow[0 … sh.nlast−1] (their
// chunk counts in sh.lnc) for KV head kvh's query heads, hb at a time — each pair's M by a
// warp, its weights in ps (hb × wn chunks at a time), its sums O in qs — and writes their
// outputs. The partial results are in the L2 (other blocks wrote them): every pass issues a
// step's loads before it uses any, so that a pass waits for one L2 trip a step, not one a chunk.
static __device__ void att_merge(const Grid &gr, AttShared &sh, const float *part, void *out, int32_t out_act, int32_t n_head,
                                 int32_t kvh, int32_t G, int32_t hd, int32_t chunks) {
	float *qs = sh.qs, *ps = sh.ps, *mm = sh.mm, *msum = sh.msum;
	const int tid = gr.tid;
	const int32_t pw = hd + 2;
	const int32_t npm = sh.nlast * G;
	const int32_t hb = max(1, min(ATT_PMAX, (ATT_PMAX * ATT_DS) / hd)), wn = (ATT_PMAX * ATT_CHUNK) / hb;
	for (int32_t b0 = 0; b0 < npm; b0 += hb) {
		const int32_t nb = min(hb, npm - b0);
		if (tid < nb) {
			int32_t x = sh.lrow[(b0 + tid) / G];
			sh.mx[tid] = x;
			sh.mh[tid] = kvh * G + (b0 + tid) % G;
			sh.mnc[tid] = sh.lnc[(b0 + tid) / G];
		}
		for (int32_t o = tid; o < nb * hd; o += ATT_THREADS) qs[o] = 0.0f;
		if (tid < nb) msum[tid] = 0.0f;
		grid_sync(gr);
		int32_t ncmax = 0;
		for (int32_t pi = 0; pi < nb; pi++) ncmax = max(ncmax, sh.mnc[pi]);
		// the chunks' maxima m_c kept in ps for the weights' pass when one window holds them all
		const bool keep = ncmax <= wn;
		{ // M per pair: warp w takes pairs w, w+8, …; a lane its chunks lane, lane + 32, …
			int w = tid / 32, lane = tid % 32;
			for (int32_t pi = w; pi < nb; pi += ATT_THREADS / 32) {
				const float *pr = part + ((int64_t)sh.mx[pi] * n_head + sh.mh[pi]) * chunks * pw;
				const int32_t nc = sh.mnc[pi];
				int32_t k = max_key(-inf32());
				for (int32_t c0 = lane; c0 < nc; c0 += 4 * 32) {
					float v[4];
#pragma unroll
					for (int u = 0; u < 4; u++) v[u] = c0 + 32 * u < nc ? __ldcg(pr + (int64_t)(c0 + 32 * u) * pw) : -inf32();
#pragma unroll
					for (int u = 0; u < 4; u++) {
						k = max(k, max_key(v[u]));
						if (keep && c0 + 32 * u < nc) ps[pi * wn + c0 + 32 * u] = v[u];
					}
				}
				const float m = max_unkey(warp_max_key(k));
				if (lane == 0) mm[pi] = m;
			}
		}
		grid_sync(gr);
		for (int32_t cw = 0; cw < ncmax; cw += wn) {
			for (int32_t o = tid; o < nb * wn; o += ATT_THREADS) {
				int32_t pi = o / wn, cc = o % wn;
				if (cw + cc < sh.mnc[pi]) {
					const float *pr = part + ((int64_t)sh.mx[pi] * n_head + sh.mh[pi]) * chunks * pw;
					ps[o] = exp32(__fsub_rn(keep ? ps[o] : __ldcg(pr + (int64_t)(cw + cc) * pw), mm[pi]));
				}
			}
			grid_sync(gr);
			// the sums: K = ⌈nb·hd / ATT_THREADS⌉ outputs a thread, the more chunks at once the fewer
			const int32_t no = (nb * hd + ATT_THREADS - 1) / ATT_THREADS;
			if (no <= 1)
				att_merge_sums<1, 16>(sh, part, tid, nb, hd, wn, cw, chunks, n_head, pw);
			else if (no <= 4)
				att_merge_sums<4, 8>(sh, part, tid, nb, hd, wn, cw, chunks, n_head, pw);
			else
				att_merge_sums<ATT_MERGE_OUT, 4>(sh, part, tid, nb, hd, wn, cw, chunks, n_head, pw);
			grid_sync(gr);
		}
		for (int32_t o = tid; o < nb * hd; o += ATT_THREADS) {
			int32_t pi = o / hd, d = o % hd;
			att_out(out, out_act, ((int64_t)sh.mx[pi] * n_head + sh.mh[pi]) * hd + d, __fdiv_rn(qs[o], msum[pi]));
		}
		grid_sync(gr);
	}
}

// att_compute computes chunk c of KV head kvh for the rows g0 + sh.mem[i] (i < nm; their
// query heads: P = nm·G pairs), whose slots are ksl[0 … len−1], writing each pair's partial
// result (m_c, l_c, o_c) to part. A shared chunk's block (sblk) also asks the L2 for the next
// KV head's rows.
static __device__ __forceinline__ void att_compute(const Grid &gr, AttShared &sh, const float *RESTRICT q, const void *RESTRICT k_cache,
                                                   const void *RESTRICT v_cache, float *part, int32_t n_head, int32_t n_kv, int32_t hd,
                                                   int32_t chunks, int32_t k_type, int32_t v_type, float scale, float soft_cap, int32_t kvh,
                                                   int32_t c, int32_t g0, int32_t nm, int32_t len, const int32_t *ksl, bool sblk) {
	float *kv = sh.kv, *qs = sh.qs, *ps = sh.ps, *red = sh.red, *mm = sh.mm, *msum = sh.msum;
	const int32_t *mem = sh.mem;
	const int tid = gr.tid;
	const int32_t G = n_head / n_kv, P = nm * G, pw = hd + 2;
	const int64_t stride = (int64_t)n_kv * hd, base = (int64_t)kvh * hd; // elements per slot; the head's offset
	const int32_t kes = cache_bytes(k_type), ves = cache_bytes(v_type);
	const bool kvec = (hd * kes) % 16 == 0, vvec = (hd * ves) % 16 == 0;
	const int32_t ns = (hd + ATT_DS - 1) / ATT_DS, nu = 2 * ns;
	const int32_t np_all = (P + ATT_PMAX - 1) / ATT_PMAX, total = np_all * nu;
	const int32_t j = tid % ATT_CHUNK, pg = tid / ATT_CHUNK; // key (or dim) and pair group of this thread
	AttStage sa, sb;
	auto fetch = [&](AttStage &st, int32_t k) {
		AttSlice s = att_slice(k % nu, ns, hd);
		if (s.val ? vvec : kvec)
			att_fetch(st, s, (const uint8_t *)(s.val ? v_cache : k_cache), s.val ? ves : kes, ksl, len, stride, base, tid);
	};
	auto put = [&](const AttStage &st, int32_t k) {
		AttSlice s = att_slice(k % nu, ns, hd);
		int32_t t = s.val ? v_type : k_type;
		if (s.val ? vvec : kvec)
			att_put(kv, st, s, t, s.val ? ves : kes, len, tid);
		else
			att_put_scalar(kv, s, s.val ? v_cache : k_cache, t, ksl, len, stride, base, tid);
	};
	float acc[ATT_PMAX / 4];
	// step k of the pass sequence: put slice k (fetched earlier into st), start fetching
	// slice k+2 into st, compute on slice k
	auto step = [&](AttStage &st, int32_t k) {
		const int32_t p0 = (k / nu) * ATT_PMAX, np = min(ATT_PMAX, P - p0), u = k % nu;
		const AttSlice s = att_slice(u, ns, hd);
		const int32_t ni = (np - pg + 3) / 4; // this thread's pairs: p0 + pg + 4i, i < ni (untiled)
		const bool tiled = np > ATT_PMAX / 2;  // the same for the whole block
		// the pairs' query slice: its lines asked of the L1 before the slice's widening
		// waits for its loads, so that the two round trips overlap, and read after it
		auto query = [&](int32_t i) {
			int32_t pp = p0 + i / s.w;
			int32_t x = g0 + mem[pp / G], h = kvh * G + pp % G;
			return q + ((int64_t)x * n_head + h) * hd + s.d0 + i % s.w;
		};
		if (!s.val)
			for (int32_t i = tid; i < np * s.w; i += ATT_THREADS) att_prefetch_l1(query(i));
		put(st, k);
		if (!s.val)
			for (int32_t i = tid; i < np * s.w; i += ATT_THREADS) qs[(i / s.w) * ATT_QS + i % s.w] = *query(i);
		if (k + 2 < total) fetch(st, k + 2);
		grid_sync(gr);
		if (!s.val) {
			if (u == 0)
#pragma unroll
				for (int i = 0; i < ATT_PMAX / 4; i++) acc[i] = 0.0f;
			if (tiled)
				att_scores_tiled(acc, kv, qs, tid, s.w);
			else if (ni == 1)
				att_scores<1>(acc, kv, qs, j, pg, s.w);
			else if (ni == 2)
				att_scores<2>(acc, kv, qs, j, pg, s.w);
			else if (ni <= 4)
				att_scores<4>(acc, kv, qs, j, pg, s.w);
			else if (ni > 0)
				att_scores<8>(acc, kv, qs, j, pg, s.w);
			if (u == ns - 1) { // the scores are complete: softmax of the chunk
				if (tiled) {
					att_softmax_tiled(gr, acc, red, ps, mm, msum, tid, np, len, scale, soft_cap);
				} else {
					int lane = tid % 32, half = (tid / 32) % 2;
#pragma unroll
					for (int i = 0; i < ATT_PMAX / 4; i++) {
						if (i < ni) {
							acc[i] = __fmul_rn(acc[i], scale);
							if (soft_cap > 0.0f) acc[i] = __fmul_rn(tanh32(__fmul_rn(acc[i], __fdiv_rn(1.0f, soft_cap))), soft_cap);
							float m = warp_max(j < len ? acc[i] : -inf32());
							if (lane == 0) red[(pg + 4 * i) * 2 + half] = m;
						}
					}
					grid_sync(gr);
#pragma unroll
					for (int i = 0; i < ATT_PMAX / 4; i++) {
						if (i < ni) {
							int32_t pp = pg + 4 * i;
							float m = max32(red[pp * 2], red[pp * 2 + 1]);
							ps[pp * ATT_PS + j] = j < len ? exp32(__fsub_rn(acc[i], m)) : 0.0f;
							if (j == 0) mm[pp] = m;
						}
					}
					grid_sync(gr);
					if (half == 0)
#pragma unroll
						for (int i = 0; i < ATT_PMAX / 4; i++) {
							if (i < ni) {
								int32_t pp = pg + 4 * i;
								const float a = att_chunk_sum(ps + pp * ATT_PS, len, lane);
								if (lane == 0) msum[pp] = a;
							}
						}
					grid_sync(gr);
				}
				if (tid < np) {
					int32_t pp = p0 + tid;
					int32_t x = g0 + mem[pp / G], h = kvh * G + pp % G;
					float *pt = part + (((int64_t)x * n_head + h) * chunks + c) * pw;
					pt[0] = mm[tid];
					pt[1] = msum[tid];
				}
			}
		} else if (tiled) {
			float o[8];
			att_values_tiled(o, kv, ps, tid, len);
			const int32_t d = 8 * (tid / 32) + 2 * (tid % 4);
#pragma unroll
			for (int t = 0; t < 4; t++) {
				const int32_t pp = tid % 32 / 4 + 8 * t;
				if (pp < np) {
					int32_t x = g0 + mem[(p0 + pp) / G], h = kvh * G + (p0 + pp) % G;
					float *po = part + (((int64_t)x * n_head + h) * chunks + c) * pw + 2 + s.d0 + d;
					if (d < s.w) po[0] = o[2 * t];
					if (d + 1 < s.w) po[1] = o[2 * t + 1];
				}
			}
		} else if (j < s.w) {
			float o[ATT_PMAX / 4];
			if (ni == 1)
				att_values<1>(o, kv, ps, j, pg, len);
			else if (ni == 2)
				att_values<2>(o, kv, ps, j, pg, len);
			else if (ni <= 4)
				att_values<4>(o, kv, ps, j, pg, len);
			else if (ni > 0)
				att_values<8>(o, kv, ps, j, pg, len);
#pragma unroll
			for (int i = 0; i < ATT_PMAX / 4; i++) {
				if (i < ni) {
					int32_t pp = p0 + pg + 4 * i;
					int32_t x = g0 + mem[pp / G], h = kvh * G + pp % G;
					part[(((int64_t)x * n_head + h) * chunks + c) * pw + 2 + s.d0 + j] = o[i];
				}
			}
		}
		grid_sync(gr);
	};
	fetch(sa, 0);
	if (total > 1) fetch(sb, 1);
	// the next block, if it computes the same shared chunk for the next KV head (the same
	// slots, the head's dims after this one's): its keys' and values' lines asked of the
	// L2 after this block's own first loads, so that a queue of the megakernel that runs
	// it next finds them there (a grid's block running beside it on another SM finds them
	// sooner, or asks for them too)
	if (sblk && kvh + 1 < n_kv) {
		const int32_t kl = (hd * kes + 127) / 128, vl = (hd * ves + 127) / 128; // a line-aligned row's lines
		for (int32_t i = tid; i < len * (kl + vl); i += ATT_THREADS) {
			const int32_t jj = i / (kl + vl), l = i % (kl + vl);
			const int64_t e = (int64_t)ksl[jj] * stride + base + hd; // the next head's first element
			if (l < kl)
				l2_prefetch((const uint8_t *)k_cache + e * kes + (int64_t)l * 128);
			else
				l2_prefetch((const uint8_t *)v_cache + e * ves + (int64_t)(l - kl) * 128);
		}
	}
	for (int32_t k = 0; k < total; k += 2) {
		step(sa, k);
		if (k + 1 < total) step(sb, k + 1);
	}
}

// attention_f32 mirrors kernels.Attention (attentionTwin, attendChunk, mergeChunks).
__device__ __forceinline__ void attention_f32_body(const Grid &gr, ATT_PARAMS(RESTRICT)) {
	AttShared &sh = grid_shared<AttShared>(gr);
	int32_t *sl = sh.sl, *slen = sh.slen, *snc = sh.snc, *lead = sh.lead, *sbad = sh.sbad, *mem = sh.mem;
	int32_t &nmem = sh.nmem, &last = sh.last;

	const int tid = gr.tid;
	// the block's row (its group's first, for a shared chunk), KV head and chunk: the unshared
	// chunks' blocks first, (row, KV head) along and the last chunks first, then the shared
	// chunks', (group, KV head) along; a deferred merge's launch leaves out the blocks of the
	// last chunk (attention_merge_f32 computes it)
	const int32_t rk = rows * n_kv, gk = (rows + ATT_GROUP - 1) / ATT_GROUP * n_kv;
	const int32_t unshared = rk * (chunks - n_shared), b = gr.bx + (defer_merge && n_shared < chunks ? rk : 0);
	if (b >= unshared + gk * n_shared) return; // a deferred merge's launch of no chunks: its one block
	const bool sblk = b >= unshared; // a shared chunk: computed for every row of the group here
	const int32_t x0 = sblk ? (b - unshared) % gk : b % rk, gs = gk / n_kv;
	const int32_t r = sblk ? (x0 % gs) * ATT_GROUP : x0 % rows, kvh = sblk ? x0 / gs : x0 / rows;
	const int32_t c = sblk ? n_shared - 1 - (b - unshared) / gk : chunks - 1 - b / rk;
	const int32_t hd = head_dim, G = n_head / n_kv, c0 = c * ATT_CHUNK;
	const int32_t g0 = r - r % ATT_GROUP, gn = min(ATT_GROUP, rows - g0);

	// an unshared chunk's row; and, for a row after the group's first, whether its chunk holds
	// exactly the first row's slots, which the first row's block then computes (lead below:
	// the first row of the group with the same slots is the first row itself) — so that the
	// blocks of rows over a history the host did not promise as shared (Shared) return after
	// one comparison
	if (!sblk) {
		int32_t o, n, o0 = 0, n0 = 0;
		att_keys(key_off, r, window, &o, &n);
		if (r != g0) att_keys(key_off, g0, window, &o0, &n0);
		if (n <= 0 || (n + ATT_CHUNK - 1) / ATT_CHUNK > chunks || c0 >= n) return;
		if (r != g0) {
			const int32_t len = min(ATT_CHUNK, n - c0);
			const bool ok0 = n0 > 0 && (n0 + ATT_CHUNK - 1) / ATT_CHUNK <= chunks && c0 < n0;
			bool same = ok0 && min(ATT_CHUNK, n0 - c0) == len; // the same for every thread
			if (same) { // every warp compares the whole chunk and votes: all reach one answer
				bool eq = true;
				for (int32_t j = tid % 32; j < len; j += 32) eq = eq && keys[o0 + c0 + j] == keys[o + c0 + j];
				same = __all_sync(NUM_FULL_MASK, eq);
			}
			if (same) return;
		}
	}
	// rows of the group: their chunk c's slots (−1 past its end), length and validity
	for (int32_t i = tid; i < gn * ATT_CHUNK; i += ATT_THREADS) {
		int32_t x = g0 + i / ATT_CHUNK, jj = i % ATT_CHUNK;
		int32_t o, n;
		att_keys(key_off, x, window, &o, &n);
		bool ok = n > 0 && (n + ATT_CHUNK - 1) / ATT_CHUNK <= chunks && c0 + jj < n;
		sl[i] = ok ? keys[o + c0 + jj] : -1;
	}
	if (tid < gn) {
		int32_t o, n;
		att_keys(key_off, g0 + tid, window, &o, &n);
		bool ok = n > 0 && (n + ATT_CHUNK - 1) / ATT_CHUNK <= chunks && c0 < n;
		slen[tid] = ok ? min(ATT_CHUNK, n - c0) : 0;
		snc[tid] = (n + ATT_CHUNK - 1) / ATT_CHUNK;
	}
	grid_sync(gr);
	// lead[x]: the first row of the group whose chunk holds the same slots as row x's (warp x)
	{
		int w = tid / 32, lane = tid % 32;
		if (w < gn) {
			int32_t len = slen[w], a = sl[w * ATT_CHUNK + lane], b = sl[w * ATT_CHUNK + lane + 32];
			bool bad = (lane < len && (a < 0 || a >= n_slots)) || (lane + 32 < len && (b < 0 || b >= n_slots));
			int32_t ld = len > 0 ? w : -1;
			for (int y = 0; y < w && len > 0; y++) {
				bool same = slen[y] == len && sl[y * ATT_CHUNK + lane] == a && sl[y * ATT_CHUNK + lane + 32] == b;
				if (__all_sync(NUM_FULL_MASK, same)) {
					ld = y;
					break;
				}
			}
			bad = __any_sync(NUM_FULL_MASK, bad);
			if (lane == 0) {
				lead[w] = ld;
				sbad[w] = bad;
			}
		}
	}
	grid_sync(gr);
	const int32_t me = r - g0;
	if (!sblk && lead[me] != me) return; // an earlier row's block computes this one
	// the rows computed here; and, of a shared chunk, the rows whose chunk broke the promise
	// (not the first row's slots): no block computes them, so each is counted as a bad chunk
	if (tid == 0) {
		int32_t k = 0, o = 0;
		for (int32_t x = 0; x < gn; x++)
			if (lead[x] == me)
				mem[k++] = x;
			else if (sblk && slen[x] > 0)
				o |= 1 << x;
		nmem = k;
		sh.orph = o;
	}
	grid_sync(gr);
	const int32_t len = slen[me], nm = nmem;
	const int32_t *ksl = sl + me * ATT_CHUNK;
	const bool bad = sbad[me] != 0;

	if (!bad && nm > 0)
		att_compute(gr, sh, q, k_cache, v_cache, part, n_head, n_kv, hd, chunks, k_type, v_type, scale, soft_cap, kvh, c, g0, nm, len, ksl,
		            sblk);

	// a deferred merge (attention_merge_f32): only the rows with a bad chunk are marked, the
	// rows computed here and those of a broken promise, without waiting for the atomics
	if (defer_merge) {
		if (tid < 32) {
			const int lane = tid;
			int32_t x = -1;
			if (lane < nm && bad)
				x = mem[lane];
			else if (lane >= ATT_GROUP && lane < ATT_GROUP + gn && ((sh.orph >> (lane - ATT_GROUP)) & 1))
				x = lane - ATT_GROUP;
			if (x >= 0) atomicOr(count + (int64_t)(g0 + x) * n_kv + kvh, ATT_BAD);
		}
		return;
	}
	// count the chunk for each row computed here (and, as a bad one, for each row of a broken
	// promise), a lane of the first warp a row, side by side: one round trip to the L2 for all
	// of them; the row's last chunk merges it
	if (tid < 32) {
		const int lane = tid;
		int32_t x = -1;
		bool xbad = bad;
		if (lane < nm)
			x = mem[lane];
		else if (lane >= ATT_GROUP && lane < ATT_GROUP + gn && ((sh.orph >> (lane - ATT_GROUP)) & 1))
			x = lane - ATT_GROUP, xbad = true;
		bool merge = false;
		if (x >= 0) {
			uint32_t add = xbad ? ATT_BAD + 1u : 1u, *cn = count + (int64_t)(g0 + x) * n_kv + kvh;
			uint32_t now = att_count_add(cn, add) + add;
			if ((now & (ATT_BAD - 1)) == (uint32_t)snc[x]) {
				atomicExch(cn, 0u);
				merge = now < ATT_BAD && lane < nm; // no chunk of the row named a bad slot
			}
		}
		uint32_t l = __ballot_sync(NUM_FULL_MASK, merge);
		if (lane == 0) last = (int32_t)l;
	}
	grid_sync(gr);
	const int32_t lastm = last;
	if (lastm == 0) return;

	// the rows whose last chunk this was
	if (tid == 0) {
		int32_t k = 0;
		for (int32_t i = 0; i < nm; i++)
			if ((lastm >> i) & 1) {
				sh.lrow[k] = g0 + mem[i];
				sh.lnc[k++] = snc[mem[i]];
			}
		sh.nlast = k;
	}
	grid_sync(gr);
	att_merge(gr, sh, part, out, out_act, n_head, kvh, G, hd, chunks);
}

// The eager entry has launch bounds for two blocks per SM (128 registers), so
// that a decode's 256 blocks (8 KV heads × 32 chunks at 2048 positions) are all resident at once
// on a 132-SM GPU.
ENTRY_SHARED_BOUNDS(attention_f32, AttShared, __launch_bounds__(ATT_THREADS, 2), (ATT_PARAMS()), ATT_ARGS)

// attention_merge_f32 mirrors kernels.AttentionMerge: what an attention_f32 launch with
// DeferMerge left, a block per (row, KV head) — block r·NKV + kvh — for the head's query heads:
// the launch's last chunk (Chunks−1) of the row, if it has one and the chunk is not a shared one,
// computed for this row alone (att_compute), then the merge of all its chunks (att_merge). The
// row's counter holds only the attention launch's mark of a bad chunk: such a row's output is
// not written, nor is one whose last chunk names a bad slot, and the counter is zero again after.
__device__ __forceinline__ void attention_merge_f32_body(const Grid &gr, ATT_PARAMS(RESTRICT)) {
	AttShared &sh = grid_shared<AttShared>(gr);
	const int tid = gr.tid;
	const int32_t b = gr.bx;
	if (b >= rows * n_kv) return;
	const int32_t r = b / n_kv, kvh = b % n_kv, c = chunks - 1;
	int32_t o, n;
	att_keys(key_off, r, window, &o, &n);
	const int32_t nc = (n + ATT_CHUNK - 1) / ATT_CHUNK;
	const bool ok = n > 0 && nc <= chunks, own = ok && nc == chunks && n_shared < chunks;
	const int32_t len = own ? min(ATT_CHUNK, n - c * ATT_CHUNK) : 0;
	if (tid < 32) { // the chunk's slots, and whether one is bad; the counter's mark, asked for with them
		uint32_t *cn = count + (int64_t)r * n_kv + kvh;
		const uint32_t mark = tid == 0 ? __ldcg(cn) : 0u;
		bool bd = false;
		for (int32_t jj = tid; jj < len; jj += 32) {
			const int32_t sv = keys[o + c * ATT_CHUNK + jj];
			sh.sl[jj] = sv;
			bd = bd || sv < 0 || sv >= n_slots;
		}
		bd = __any_sync(NUM_FULL_MASK, bd);
		if (tid == 0) {
			if (mark != 0) *cn = 0u;
			sh.mem[0] = 0;
			sh.lrow[0] = r;
			sh.lnc[0] = nc;
			sh.nlast = ok && mark == 0 && !bd ? 1 : 0;
		}
	}
	grid_sync(gr);
	if (sh.nlast == 0) return;
	if (own) {
		att_compute(gr, sh, q, k_cache, v_cache, part, n_head, n_kv, head_dim, chunks, k_type, v_type, scale, soft_cap, kvh, c, r, 1, len,
		            sh.sl, false);
		grid_sync(gr);
	}
	att_merge(gr, sh, part, out, out_act, n_head, kvh, n_head / n_kv, head_dim, chunks);
}
ENTRY_SHARED(attention_merge_f32, AttShared, (ATT_PARAMS()), ATT_ARGS)
