// embed.cu: embed_<type>, the kernels of device/kernels/embed.go, one per weight format:
// Out[r] = Decode(Table[Tokens[r]]), Cols values per row.
//
// Launch (the spec's Shape): one 256-thread block per row r; thread t writes values t, t+256, …
// of the row (EMBED_BATCH of them loaded at a time), each one the format's value (formats.cuh),
// the bits of the twin's Decode. A block
// whose token is outside [0, Vocab) writes nothing (the twin reports it as an error).
#include "formats.cuh"
#include "grid.cuh"

#define EMBED_BATCH 8 // values a thread loads before it stores them

// embed mirrors kernels' newEmbed twin with the format's Decode.
template <typename F>
static __device__ __forceinline__ void embed(const Grid &gr, const uint8_t *table, const int32_t *tokens, float *out, int32_t rows,
                                             int32_t cols, int32_t vocab) {
	int32_t r = gr.bx;
	if (r >= rows) return;
	int32_t t = tokens[r];
	if (t < 0 || t >= vocab) return;
	const uint8_t *w = table + (int64_t)t * F::row_bytes(cols);
	float *y = out + (int64_t)r * cols;
	// EMBED_BATCH of a thread's values at a time, every load before any store: the compiler
	// cannot move a load of the table above a store to out (they might overlap), so one value at
	// a time waited for a DRAM round trip each; a batch waits for one
	for (int32_t i0 = gr.tid; i0 < cols; i0 += EMBED_BATCH * gr.ntid) {
		float v[EMBED_BATCH];
#pragma unroll
		for (int k = 0; k < EMBED_BATCH; k++) {
			const int32_t i = i0 + k * gr.ntid;
			if (i < cols) v[k] = F::value(w, i);
		}
#pragma unroll
		for (int k = 0; k < EMBED_BATCH; k++) {
			const int32_t i = i0 + k * gr.ntid;
			if (i < cols) y[i] = v[k];
		}
	}
}

#define EMBED(name, F)                                                                                       \
	__device__ __forceinline__ void name##_body(const Grid &gr, const uint8_t *table, const int32_t *tokens, \
	                                                   float *out, int32_t rows, int32_t cols, int32_t vocab) {   \
		embed<F>(gr, table, tokens, out, rows, cols, vocab);                                                  \
	}                                                                                                        \
	ENTRY(name, (const uint8_t *table, const int32_t *tokens, float *out, int32_t rows, int32_t cols, int32_t vocab), \
	      table, tokens, out, rows, cols, vocab)

EMBED(embed_f32, FmtF32)
EMBED(embed_f16, FmtF16)
EMBED(embed_bf16, FmtBF16)
EMBED(embed_q4_0, FmtQ4_0)
EMBED(embed_q4_1, FmtQ4_1)
EMBED(embed_q5_0, FmtQ5_0)
EMBED(embed_q5_1, FmtQ5_1)
EMBED(embed_q8_0, FmtQ8_0)
EMBED(embed_q2_K, FmtQ2_K)
EMBED(embed_q3_K, FmtQ3_K)
EMBED(embed_q4_K, FmtQ4_K)
EMBED(embed_q5_K, FmtQ5_K)
EMBED(embed_q6_K, FmtQ6_K)
