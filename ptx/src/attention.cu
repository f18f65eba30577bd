// attention.cu: kv_store_f32 and attention_f32, the kernels of device/kernels/attention.go.
//
// kv_store_f32 (KVStoreArgs): one 128-thread block per row, copying the row's key and value
// vectors, bit for bit, into cache slot Slots[r]; a slot outside [0, NSlots) writes nothing (the
// twin reports it as an error).
//
// attention_f32 (AttentionArgs): one warp (a 32-thread block) per (row, query head), grid
// (Rows, NHead). The row's keys are the cache slots Keys[KeyOff[r] : KeyOff[r+1]] in logical
// order, j = 0 … nk−1; query head h reads KV head h / (NHead/NKV). Order, as the twin's doc
// comment (attendHead) states it:
//   - s_j = float32(dot·Scale), dot = fma(q[d], k_j[d], dot) for d = 0 … HeadDim−1 from +0: one
//     lane computes a whole score, sequentially over d;
//   - m = max_j s_j from −Inf with num.Max32 (lane l takes j = l, l+32, …, then the butterfly;
//     the maximum of a set does not depend on the order);
//   - e_j = Exp32(s_j − m); lane l adds e_j for j = l, l+32, … in order from +0, then the xor
//     butterfly (num.WarpSum) gives the sum;
//   - o_d = fma(e_j, v_j[d], o_d) over j = 0 … nk−1 in order from +0, lane l owning the dims
//     d = l, l+32, … (up to 256 dims at a time, in registers), with e_j broadcast from the lane
//     that computed it; out[d] = o_d / sum.
// Scores are recomputed (with identical bits) instead of stored: a first pass finds m, a second
// forms e_j, the sum and o together. A row whose key list is empty or names a slot outside
// [0, NSlots) writes nothing (the twin reports an error).
#include "num.cuh"
#include "grid.cuh"

// kv_store_f32 mirrors kernels.KVStore.
__device__ __forceinline__ void kv_store_f32_body(const Grid &gr, const uint32_t *k, const uint32_t *v, const int32_t *slots, uint32_t *k_cache,
                                        uint32_t *v_cache, int32_t rows, int32_t kv_dim, int32_t n_slots) {
	int32_t r = gr.bx;
	if (r >= rows) return;
	int32_t s = slots[r];
	if (s < 0 || s >= n_slots) return;
	for (int32_t c = gr.tid; c < kv_dim; c += gr.ntid) {
		k_cache[(int64_t)s * kv_dim + c] = k[(int64_t)r * kv_dim + c];
		v_cache[(int64_t)s * kv_dim + c] = v[(int64_t)r * kv_dim + c];
	}
}
ENTRY(kv_store_f32, (const uint32_t *k, const uint32_t *v, const int32_t *slots, uint32_t *k_cache,
                                        uint32_t *v_cache, int32_t rows, int32_t kv_dim, int32_t n_slots), k, v, slots, k_cache, v_cache, rows, kv_dim, n_slots)

// ATT_DIMS is how many output dims a warp accumulates at once (ATT_DIMS/32 per lane).
#define ATT_DIMS 256

// score returns s_j for the key vector kp: float32(dot·scale), dot folded over d in order.
static __device__ __forceinline__ float score(const float *q, const float *kp, int32_t hd, float scale) {
	float dot = 0.0f;
	for (int32_t d = 0; d < hd; d++) dot = __fmaf_rn(q[d], kp[d], dot);
	return __fmul_rn(dot, scale);
}

// attention_f32 mirrors kernels.Attention (attentionTwin, attendHead).
__device__ __forceinline__ void attention_f32_body(const Grid &gr, const float *q, const float *k_cache, const float *v_cache,
                                         const int32_t *keys, const int32_t *key_off, float *out, int32_t rows,
                                         int32_t n_head, int32_t n_kv, int32_t head_dim, int32_t n_slots,
                                         float scale) {
	int32_t r = gr.bx, h = gr.by;
	if (r >= rows || h >= n_head) return;
	int lane = gr.tid & 31;
	int32_t hd = head_dim;
	int64_t stride = (int64_t)n_kv * hd; // floats per cache slot
	int64_t base = (int64_t)(h / (n_head / n_kv)) * hd;
	const float *qh = q + ((int64_t)r * n_head + h) * hd;
	float *oh = out + ((int64_t)r * n_head + h) * hd;
	const int32_t *ks = keys + key_off[r];
	int32_t nk = key_off[r + 1] - key_off[r];

	bool ok = nk > 0;
	for (int32_t j = lane; j < nk; j += 32) ok = ok && ks[j] >= 0 && ks[j] < n_slots;
	if (!__all_sync(NUM_FULL_MASK, ok)) return;

	// m = max_j s_j
	float m = -inf32();
	for (int32_t j = lane; j < nk; j += 32) m = max32(m, score(qh, k_cache + ks[j] * stride + base, hd, scale));
	m = warp_max(m);

	float sum = 0.0f;
	for (int32_t d0 = 0; d0 < hd; d0 += ATT_DIMS) {
		float o[ATT_DIMS / 32];
#pragma unroll
		for (int i = 0; i < ATT_DIMS / 32; i++) o[i] = 0.0f;
		float acc = 0.0f; // lane l's share of the sum: e_j for j = l, l+32, …
		for (int32_t j0 = 0; j0 < nk; j0 += 32) {
			int32_t j = j0 + lane;
			float e = 0.0f;
			if (j < nk) {
				e = exp32(__fsub_rn(score(qh, k_cache + ks[j] * stride + base, hd, scale), m));
				acc = __fadd_rn(acc, e);
			}
			int32_t n = min(32, nk - j0);
			for (int32_t t = 0; t < n; t++) {
				float p = __shfl_sync(NUM_FULL_MASK, e, t);
				const float *vp = v_cache + ks[j0 + t] * stride + base;
#pragma unroll
				for (int i = 0; i < ATT_DIMS / 32; i++) {
					int32_t d = d0 + lane + 32 * i;
					if (d < hd) o[i] = __fmaf_rn(p, vp[d], o[i]);
				}
			}
		}
		if (d0 == 0) sum = warp_sum(acc);
#pragma unroll
		for (int i = 0; i < ATT_DIMS / 32; i++) {
			int32_t d = d0 + lane + 32 * i;
			if (d < hd) oh[d] = __fdiv_rn(o[i], sum);
		}
	}
}
ENTRY(attention_f32, (const float *q, const float *k_cache, const float *v_cache,
                                         const int32_t *keys, const int32_t *key_off, float *out, int32_t rows,
                                         int32_t n_head, int32_t n_kv, int32_t head_dim, int32_t n_slots,
                                         float scale), q, k_cache, v_cache, keys, key_off, out, rows, n_head, n_kv, head_dim, n_slots, scale)
