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

#define ROPE_NEOX 2

// rope_f32 mirrors kernels.Rope (ropeHead).
__device__ __forceinline__ void rope_f32_body(const Grid &gr, float *x, const float *cos_sin, int32_t rows, int32_t heads, int32_t head_dim,
                                    int32_t n_rot, int32_t mode) {
	int32_t r = gr.bx, h = gr.by;
	if (r >= rows || h >= heads) return;
	int32_t half = n_rot / 2;
	float *v = x + ((int64_t)r * heads + h) * head_dim;
	const float *tab = cos_sin + (int64_t)r * half * 2;
	for (int32_t i = gr.tid; i < half; i += gr.ntid) {
		float c = tab[2 * i], s = tab[2 * i + 1];
		int32_t j = 2 * i, k = 2 * i + 1;
		if (mode == ROPE_NEOX) {
			j = i;
			k = i + half;
		}
		float a = v[j], b = v[k];
		v[j] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
		v[k] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
	}
}
ENTRY(rope_f32, (float *x, const float *cos_sin, int32_t rows, int32_t heads, int32_t head_dim,
                                    int32_t n_rot, int32_t mode), x, cos_sin, rows, heads, head_dim, n_rot, mode)
