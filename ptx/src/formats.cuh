// formats.cuh: the weight formats of device/kernels (one struct per kernels.Format) as GGUF
// stores them: the bytes of a weight row and of an activation row, the matvec unit size, and
// value(w_row, i), value i of a weight row as the format's Go Decode gives it (for embed.cu),
// computed on its own with the Decode's float steps and roundings. The comment of each struct
// also states its matvec unit step — the per-unit float steps of the format's Go Dot (f32.go …
// q6_k.go), which packed.cuh implements over the repacked layout the matvec kernels read:
// integer sums of quant products are exact, so their order is free; every float step is the
// twin's, rounding for rounding. Also the q8_K activation accessors both use.
//
// Blocks are read with byte loads and 2-byte (fp16, int16) and 4-byte (float) loads at their
// natural alignment.
#pragma once

#include "num.cuh"

#define FMT_FN static __device__ __forceinline__

FMT_FN float f16_at(const uint8_t *p) { return f16_to_f32(*(const uint16_t *)p); }
FMT_FN int32_t i8_at(const uint8_t *p) { return (int32_t)(int8_t)*p; }

// --- q8_K activations (kquant.go): [0:4] d float32, [4:260] 256 int8 quants, [260:292] 16 int16 sums

#define Q8K_BYTES 292
FMT_FN float q8k_d(const uint8_t *y) { return *(const float *)y; }
FMT_FN const uint8_t *q8k_qs(const uint8_t *y, int s) { return y + 4 + 32 * s; } // unit s's 32 quants
FMT_FN int32_t q8k_sum(const uint8_t *y, int j) { return (int32_t) * (const int16_t *)(y + 260 + 2 * j); }

// scale_min_k4 mirrors kernels' scaleMinK4: 6-bit scale and min of sub-block j of q4_K / q5_K.
FMT_FN void scale_min_k4(int j, const uint8_t *q, int32_t *sc, int32_t *m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// F32 (f32.go): unit 4 values; acc = fma(w[i], x[i], acc) for its values in order.
struct FmtF32 {
	static const int UNIT = 4;
	FMT_FN int64_t row_bytes(int32_t cols) { return 4 * (int64_t)cols; }
	FMT_FN int64_t act_bytes(int32_t cols) { return 4 * (int64_t)cols; }
	FMT_FN float value(const uint8_t *w, int32_t i) { return __uint_as_float(((const uint32_t *)w)[i]); }
};

// F16 (f16.go): unit 8 values, f16 activations; acc = fma(w_j, x_j, acc) (products exact).
struct FmtF16 {
	static const int UNIT = 8;
	FMT_FN int64_t row_bytes(int32_t cols) { return 2 * (int64_t)cols; }
	FMT_FN int64_t act_bytes(int32_t cols) { return 2 * (int64_t)cols; }
	FMT_FN float value(const uint8_t *w, int32_t i) { return f16_to_f32(((const uint16_t *)w)[i]); }
};

// BF16 (bf16.go): unit 8 values, bf16 activations; acc = fma(w_j, x_j, acc) (products exact).
struct FmtBF16 {
	static const int UNIT = 8;
	FMT_FN int64_t row_bytes(int32_t cols) { return 2 * (int64_t)cols; }
	FMT_FN int64_t act_bytes(int32_t cols) { return 2 * (int64_t)cols; }
	FMT_FN float value(const uint8_t *w, int32_t i) { return bf16_to_f32(((const uint16_t *)w)[i]); }
};

// Q8_0 (q8_0.go), q8_0 activations, unit one 34-byte block:
// S = Σ q_j·a_j (exact); acc = fma(float32(S), d·d_x, acc).
struct FmtQ8_0 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 34; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 34; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 34 * (int64_t)(i / 32);
		return __fmul_rn(__int2float_rn(i8_at(b + 2 + i % 32)), f16_at(b));
	}
};

// Q4_0 (q4_0.go), q8_0 activations, unit one 18-byte block:
// S = Σ (q_j − 8)·a_j (exact); acc = fma(float32(S), d·d_x, acc).
struct FmtQ4_0 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 18; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 34; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 18 * (int64_t)(i / 32);
		int j = i % 32;
		int32_t q = j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4;
		return __fmul_rn(__int2float_rn(q - 8), f16_at(b));
	}
};

// Q4_1 (q4_1.go), q8_1 activations, unit one 20-byte block: S = Σ q_j·a_j (exact);
// t = fma(float32(S), d·d_x, m·s_x); acc = acc + t.
struct FmtQ4_1 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 20; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 36; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 20 * (int64_t)(i / 32);
		int j = i % 32;
		int32_t q = j < 16 ? b[4 + j] & 15 : b[4 + j - 16] >> 4;
		return __fadd_rn(__fmul_rn(__int2float_rn(q), f16_at(b)), f16_at(b + 2));
	}
};

// Q5_0 (q5_0.go), q8_0 activations, unit one 22-byte block (qh at [2:6], 2-byte aligned):
// S = Σ (q_j − 16)·a_j (exact); acc = fma(float32(S), d·d_x, acc).
struct FmtQ5_0 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 22; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 34; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 22 * (int64_t)(i / 32);
		int j = i % 32;
		uint32_t qh = (uint32_t) * (const uint16_t *)(b + 2) | (uint32_t) * (const uint16_t *)(b + 4) << 16;
		int32_t q = (j < 16 ? b[6 + j] & 15 : b[6 + j - 16] >> 4) | (int32_t)((qh >> j) & 1) << 4;
		return __fmul_rn(__int2float_rn(q - 16), f16_at(b));
	}
};

// Q5_1 (q5_1.go), q8_1 activations, unit one 24-byte block: S = Σ q_j·a_j (exact);
// t = fma(float32(S), d·d_x, m·s_x); acc = acc + t.
struct FmtQ5_1 {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 32 * 24; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 32 * 36; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 24 * (int64_t)(i / 32);
		int j = i % 32;
		uint32_t qh = *(const uint32_t *)(b + 4);
		int32_t q = (j < 16 ? b[8 + j] & 15 : b[8 + j - 16] >> 4) | (int32_t)((qh >> j) & 1) << 4;
		return __fadd_rn(__fmul_rn(__int2float_rn(q), f16_at(b)), f16_at(b + 2));
	}
};

// The K-quants: unit u is sub-block s = u mod 8 of super-block i = u / 8, with the q8_K block
// y = x_row + 292·i; D = float32(d·d_x) and Dmin = float32(dmin·d_x) are recomputed by every
// lane (the same bits each time).

// Q2_K (q2_k.go), 84-byte super-blocks: S = sc_2s·Σ_{l<16} q_l·a_l + sc_2s+1·Σ_{l≥16} q_l·a_l,
// M = m_2s·bsums[2s] + m_2s+1·bsums[2s+1] (exact); acc = fma(D, S, acc); acc = fma(−Dmin, M, acc).
struct FmtQ2_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 84; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 84 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32;
		int32_t sc = b[2 * s + l / 16];
		float dl = __fmul_rn(f16_at(b + 80), __int2float_rn(sc & 0xf));
		float ml = __fmul_rn(f16_at(b + 82), __int2float_rn(sc >> 4));
		int32_t q = (b[16 + 32 * (s / 4) + l] >> (2 * (s % 4))) & 3;
		return __fsub_rn(__fmul_rn(dl, __int2float_rn(q)), ml);
	}
};

// q3k_scale mirrors kernels' q3KScale: the 6-bit scale of group g, less 32.
FMT_FN int32_t q3k_scale(const uint8_t *sc, int g) {
	int32_t lo = (sc[g % 8] >> (4 * (g / 8))) & 0xf;
	int32_t hi = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
	return (lo | hi << 4) - 32;
}

// Q3_K (q3_k.go), 110-byte super-blocks: with u_l = r_l | hbit_l<<2 (q = u − 4),
// S = scale_2s·(Σ_{l<16} u_l·a_l − 4·bsums[2s]) + scale_2s+1·(Σ_{l≥16} u_l·a_l − 4·bsums[2s+1])
// (exact); acc = fma(D, S, acc).
struct FmtQ3_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 110; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 110 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32;
		float dl = __fmul_rn(f16_at(b + 108), __int2float_rn(q3k_scale(b + 96, 2 * s + l / 16)));
		int32_t q = ((b[32 + 32 * (s / 4) + l] >> (2 * (s % 4))) & 3) - 4 + 4 * ((b[l] >> s) & 1);
		return __fmul_rn(dl, __int2float_rn(q));
	}
};

// Q4_K (q4_k.go), 144-byte super-blocks: S = sc_s·Σ_l q_l·a_l, M = m_s·(bsums[2s] + bsums[2s+1])
// (exact); acc = fma(D, S, acc); acc = fma(−Dmin, M, acc).
struct FmtQ4_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 144; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 144 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32;
		int32_t sc, m;
		scale_min_k4(s, b + 4, &sc, &m);
		float dl = __fmul_rn(f16_at(b), __int2float_rn(sc)), ml = __fmul_rn(f16_at(b + 2), __int2float_rn(m));
		int32_t q = (b[16 + 32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf;
		return __fsub_rn(__fmul_rn(dl, __int2float_rn(q)), ml);
	}
};

// Q5_K (q5_k.go), 176-byte super-blocks: q_l = low bits | qh bit s << 4;
// S = sc_s·Σ_l q_l·a_l, M = m_s·(bsums[2s] + bsums[2s+1]) (exact); acc = fma(D, S, acc);
// acc = fma(−Dmin, M, acc).
struct FmtQ5_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 176; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 176 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32;
		int32_t sc, m;
		scale_min_k4(s, b + 4, &sc, &m);
		float dl = __fmul_rn(f16_at(b), __int2float_rn(sc)), ml = __fmul_rn(f16_at(b + 2), __int2float_rn(m));
		int32_t q = ((b[48 + 32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf) | ((b[16 + l] >> s) & 1) << 4;
		return __fsub_rn(__fmul_rn(dl, __int2float_rn(q)), ml);
	}
};

// Q6_K (q6_k.go), 210-byte super-blocks: S = sc_2s·(Σ_{l<16} q_l·a_l − 32·bsums[2s])
// + sc_2s+1·(Σ_{l≥16} q_l·a_l − 32·bsums[2s+1]) (exact, sc signed); acc = fma(D, S, acc).
struct FmtQ6_K {
	static const int UNIT = 32;
	FMT_FN int64_t row_bytes(int32_t cols) { return (int64_t)cols / 256 * 210; }
	FMT_FN int64_t act_bytes(int32_t cols) { return (int64_t)cols / 256 * Q8K_BYTES; }
	FMT_FN float value(const uint8_t *w, int32_t i) {
		const uint8_t *b = w + 210 * (int64_t)(i / 256);
		int s = (i % 256) / 32, l = i % 32, h = s / 4, k = s % 4;
		float dl = __fmul_rn(f16_at(b + 208), __int2float_rn(i8_at(b + 192 + 2 * s + l / 16)));
		int32_t q = (((b[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xf) | ((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4) - 32;
		return __fmul_rn(dl, __int2float_rn(q));
	}
};
