// attention.cu: kv_store_f32 and attention_f32, the kernels of device/kernels/attention.go.
//
// kv_store_f32 (KVStoreArgs): one 128-thread block per row, copying the row's key and value
// vectors, bit for bit, into cache slot Slots[r]; a slot outside [0, NSlots) writes nothing (the
// twin reports it as an error).
//
// attention_f32 (AttentionArgs): one warp (a 32-thread block) per row and KV head, computing
// that KV head's query heads (up to ATT_GROUP of them; a larger group takes several warps),
// grid (Rows, NKV·⌈group/ATT_GROUP⌉). The row's keys are the cache slots Keys[KeyOff[r] : KeyOff[r+1]] in logical
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

// ATT_DIMS is how many output dims a warp accumulates at once (ATT_DIMS/32 per lane);
// ATT_GROUP how many query heads of one KV head a warp computes side by side.
#define ATT_DIMS 256
#define ATT_GROUP 8

// attend_heads computes heads h0 … h0+nh−1 (nh ≤ G), which share KV head kvh, for row r:
// each key and value vector is read once for all of them, and every head's arithmetic is
// exactly the one-head order of the file comment, its chains merely interleaved with the
// other heads'.
template <int G>
__device__ __forceinline__ void attend_heads(const Grid &gr, const float *q, const float *k_cache, const float *v_cache,
                                                    const int32_t *keys, const int32_t *key_off, float *out, int32_t r,
                                                    int32_t n_head, int32_t n_kv, int32_t head_dim, int32_t n_slots,
                                                    float scale, int32_t kvh, int32_t h0, int32_t nh) {
	int lane = gr.tid & 31;
	int32_t hd = head_dim;
	int64_t stride = (int64_t)n_kv * hd; // floats per cache slot
	int64_t base = (int64_t)kvh * hd;
	const float *qh = q + ((int64_t)r * n_head + h0) * hd; // head h0+g at qh + g·hd
	float *oh = out + ((int64_t)r * n_head + h0) * hd;
	const int32_t *ks = keys + key_off[r];
	int32_t nk = key_off[r + 1] - key_off[r];

	bool ok = nk > 0;
	for (int32_t j = lane; j < nk; j += 32) ok = ok && ks[j] >= 0 && ks[j] < n_slots;
	if (!__all_sync(NUM_FULL_MASK, ok)) return;

	// s_j of every head for key vector kp: dot folded over d in order, then times scale.
	float s[G];
	auto scores = [&](const float *kp) {
#pragma unroll
		for (int g = 0; g < G; g++) s[g] = 0.0f;
		for (int32_t d = 0; d < hd; d++) {
			float kd = kp[d];
#pragma unroll
			for (int g = 0; g < G; g++)
				if (g < nh) s[g] = __fmaf_rn(qh[g * hd + d], kd, s[g]);
		}
#pragma unroll
		for (int g = 0; g < G; g++) s[g] = __fmul_rn(s[g], scale);
	};

	// m = max_j s_j
	float m[G];
#pragma unroll
	for (int g = 0; g < G; g++) m[g] = -inf32();
	for (int32_t j = lane; j < nk; j += 32) {
		scores(k_cache + ks[j] * stride + base);
#pragma unroll
		for (int g = 0; g < G; g++) m[g] = max32(m[g], s[g]);
	}
#pragma unroll
	for (int g = 0; g < G; g++) m[g] = warp_max(m[g]);

	float sum[G];
	for (int32_t d0 = 0; d0 < hd; d0 += ATT_DIMS) {
		float o[G][ATT_DIMS / 32];
		float acc[G]; // lane l's share of each head's sum: e_j for j = l, l+32, …
#pragma unroll
		for (int g = 0; g < G; g++) {
			acc[g] = 0.0f;
#pragma unroll
			for (int i = 0; i < ATT_DIMS / 32; i++) o[g][i] = 0.0f;
		}
		for (int32_t j0 = 0; j0 < nk; j0 += 32) {
			int32_t j = j0 + lane;
			float e[G];
#pragma unroll
			for (int g = 0; g < G; g++) e[g] = 0.0f;
			if (j < nk) {
				scores(k_cache + ks[j] * stride + base);
#pragma unroll
				for (int g = 0; g < G; g++) {
					e[g] = exp32(__fsub_rn(s[g], m[g]));
					acc[g] = __fadd_rn(acc[g], e[g]);
				}
			}
			int32_t n = min(32, nk - j0);
			for (int32_t t = 0; t < n; t++) {
				float p[G];
#pragma unroll
				for (int g = 0; g < G; g++) p[g] = __shfl_sync(NUM_FULL_MASK, e[g], t);
				const float *vp = v_cache + ks[j0 + t] * stride + base;
#pragma unroll
				for (int i = 0; i < ATT_DIMS / 32; i++) {
					int32_t d = d0 + lane + 32 * i;
					if (d < hd) {
						float vd = vp[d];
#pragma unroll
						for (int g = 0; g < G; g++) o[g][i] = __fmaf_rn(p[g], vd, o[g][i]);
					}
				}
			}
		}
		if (d0 == 0) {
#pragma unroll
			for (int g = 0; g < G; g++) sum[g] = warp_sum(acc[g]);
		}
#pragma unroll
		for (int g = 0; g < G; g++) {
			if (g >= nh) break;
#pragma unroll
			for (int i = 0; i < ATT_DIMS / 32; i++) {
				int32_t d = d0 + lane + 32 * i;
				if (d < hd) oh[g * hd + d] = __fdiv_rn(o[g][i], sum[g]);
			}
		}
	}
}

// attention_f32 mirrors kernels.Attention (attentionTwin, attendHead). A warp computes up to
// ATT_GROUP query heads that share a KV head (grid y: the KV head and which ATT_GROUP-sized
// chunk of its group), instantiated for the chunk's size rounded up to 1, 2, 4 or 8 heads.
__device__ __forceinline__ void attention_f32_body(const Grid &gr, const float *q, const float *k_cache, const float *v_cache,
                                         const int32_t *keys, const int32_t *key_off, float *out, int32_t rows,
                                         int32_t n_head, int32_t n_kv, int32_t head_dim, int32_t n_slots,
                                         float scale) {
	int32_t group = n_head / n_kv, chunks = (group + ATT_GROUP - 1) / ATT_GROUP;
	int32_t r = gr.bx;
	if (r >= rows || (int32_t)gr.by >= n_kv * chunks) return;
	int32_t kvh = gr.by / chunks, h0 = kvh * group + (gr.by % chunks) * ATT_GROUP;
	int32_t nh = min(ATT_GROUP, (kvh + 1) * group - h0); // heads h0 … h0+nh−1
	if (nh == 1)
		attend_heads<1>(gr, q, k_cache, v_cache, keys, key_off, out, r, n_head, n_kv, head_dim, n_slots, scale, kvh, h0, nh);
	else if (nh == 2)
		attend_heads<2>(gr, q, k_cache, v_cache, keys, key_off, out, r, n_head, n_kv, head_dim, n_slots, scale, kvh, h0, nh);
	else if (nh <= 4)
		attend_heads<4>(gr, q, k_cache, v_cache, keys, key_off, out, r, n_head, n_kv, head_dim, n_slots, scale, kvh, h0, nh);
	else
		attend_heads<ATT_GROUP>(gr, q, k_cache, v_cache, keys, key_off, out, r, n_head, n_kv, head_dim, n_slots, scale, kvh, h0, nh);
}

ENTRY(attention_f32, (const float *q, const float *k_cache, const float *v_cache,
                                         const int32_t *keys, const int32_t *key_off, float *out, int32_t rows,
                                         int32_t n_head, int32_t n_kv, int32_t head_dim, int32_t n_slots,
                                         float scale), q, k_cache, v_cache, keys, key_off, out, rows, n_head, n_kv, head_dim, n_slots, scale)
