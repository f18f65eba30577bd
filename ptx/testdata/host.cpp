// host runs the device code of ../src on the host, for host_test.go and simt_test.go. The first
// argument selects what it does:
//
//	scalar  stdin: float32 bit patterns; stdout: per input, the bits of 12 results (see below)
//	pair    stdin: pairs of float32 bit patterns; stdout: max32, min32 and the maximum of their
//	        max_key integers (max_unkey) of each pair
//	matvec  stdin: records (format name, NUL, int32 cols, int32 weight bytes, int32 activation
//	        bytes, weight row, activation row); stdout: the float32 result of each row, computed
//	        as matvec.cu's warp does (lane-strided unit steps, then the butterfly's lane 0 sum)
//	launch  runs one kernel (simt.h). stdin: the kernel's name, NUL; grid x y z and block x y z
//	        (uint32); the number of buffers (uint32), then each buffer's base address and length
//	        (uint64) and bytes; the number of parameters (uint32), then each one's kind (uint32:
//	        0 u64, 1 u32, 2 f32) and bits (uint64). A u64 parameter that lies inside a buffer is
//	        passed as a pointer into the host copy of that buffer. stdout: every buffer's bytes
//	        after the launch, in order.
#include "simt.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "act.cu"
#include "argmax.cu"
#include "attention.cu"
#include "elementwise.cu"
#include "embed.cu"
#include "gate.cu"
#include "gdn.cu"
#include "matvec.cu"
#include "moe.cu"
#include "norm.cu"
#include "rope.cu"
#include "routing.cu"

// packed_row_dot is a matvec warp's result for one packed row, lane by lane: lane l folds
// units l, l+32, … with the format's packed apply, then pairs at distance 16, 8, 4, 2, 1 add
// up (lane 0 of the xor butterfly).
template <typename P, typename F> static float packed_row_dot(const uint8_t *w, const uint8_t *x, int32_t cols) {
	PkLayout l = P::layout(cols);
	float acc[32];
	for (int lane = 0; lane < 32; lane++) {
		acc[lane] = 0.0f;
		int32_t k = 0;
		for (int32_t u = lane; u < cols / F::UNIT; u += 32, k++) acc[lane] = P::apply(acc[lane], P::load(w, l, lane, u, k), x, u);
	}
	for (int n = 16; n > 0; n >>= 1)
		for (int l = 0; l < n; l++) acc[l] = __fadd_rn(acc[l], acc[l + n]);
	return acc[0];
}

static bool dot(const std::string &name, const uint8_t *w, const uint8_t *x, int32_t cols, float *out) {
#define FORMAT(n, P, F)                            \
	if (name == n) {                               \
		*out = packed_row_dot<P, F>(w, x, cols);   \
		return true;                               \
	}
	FORMAT("f32", PkF32, FmtF32)
	FORMAT("f16", PkF16, FmtF16)
	FORMAT("bf16", PkBF16, FmtBF16)
	FORMAT("q4_0", PkQ4_0, FmtQ4_0)
	FORMAT("q4_1", PkQ4_1, FmtQ4_1)
	FORMAT("q5_0", PkQ5_0, FmtQ5_0)
	FORMAT("q5_1", PkQ5_1, FmtQ5_1)
	FORMAT("q8_0", PkQ8_0, FmtQ8_0)
	FORMAT("q2_K", PkQ2_K, FmtQ2_K)
	FORMAT("q3_K", PkQ3_K, FmtQ3_K)
	FORMAT("q4_K", PkQ4_K, FmtQ4_K)
	FORMAT("q5_K", PkQ5_K, FmtQ5_K)
	FORMAT("q6_K", PkQ6_K, FmtQ6_K)
	return false;
}

static void put(uint32_t v) { fwrite(&v, 4, 1, stdout); }

struct arg {
	uint32_t kind;
	uint64_t bits;
	void *ptr;
};

template <typename T> static T conv(const arg &a) {
	if constexpr (std::is_pointer_v<T>) {
		return (T)a.ptr;
	} else if constexpr (std::is_same_v<T, float>) {
		uint32_t b = (uint32_t)a.bits;
		float f;
		memcpy(&f, &b, 4);
		return f;
	} else {
		return (T)(int32_t)(uint32_t)a.bits;
	}
}

template <typename T> static bool kind_ok(uint32_t k) {
	if constexpr (std::is_pointer_v<T>) return k == 0;
	if constexpr (std::is_same_v<T, float>) return k == 2;
	return k == 1;
}

using launcher = std::function<bool(const std::vector<arg> &)>;

template <typename... A, size_t... I> static void call(void (*k)(A...), const std::vector<arg> &p, std::index_sequence<I...>) {
	k(conv<A>(p[I])...);
}

template <typename... A> static launcher wrap(void (*k)(A...)) {
	return [k](const std::vector<arg> &p) {
		if (p.size() != sizeof...(A)) return false;
		size_t i = 0;
		bool ok = (kind_ok<A>(p[i++].kind) && ...);
		if (ok) call(k, p, std::index_sequence_for<A...>{});
		return ok;
	};
}

static const std::map<std::string, launcher> &kernels() {
#define K(name) {#name, wrap(name)}
	static const std::map<std::string, launcher> m = {
		K(act_f16), K(act_bf16), K(act_q8_0), K(act_q8_1), K(act_q8_K),
		K(argmax_f32),
		K(kv_store_f32), K(attention_f32),
		K(add_f32), K(swiglu_f32), K(sigmoid_mul_f32), K(geglu_f32), K(scale_f32), K(softcap_f32), K(gather_f32),
		K(embed_f32), K(embed_f16), K(embed_bf16), K(embed_q4_0), K(embed_q4_1), K(embed_q5_0), K(embed_q5_1),
		K(embed_q8_0), K(embed_q2_K), K(embed_q3_K), K(embed_q4_K), K(embed_q5_K), K(embed_q6_K),
		K(gated_rmsnorm_f32), K(split_gate_f32),
		K(gdn_conv_f32), K(gdn_scan_f32),
		K(matvec_f32_f32), K(matvec_f16_f16), K(matvec_bf16_bf16), K(matvec_q4_0_q8_0), K(matvec_q4_1_q8_1),
		K(matvec_q5_0_q8_0), K(matvec_q5_1_q8_1), K(matvec_q8_0_q8_0), K(matvec_q2_K_q8_K), K(matvec_q3_K_q8_K),
		K(matvec_q4_K_q8_K), K(matvec_q5_K_q8_K), K(matvec_q6_K_q8_K),
		K(matvec8_f32_f32), K(matvec8_f16_f16), K(matvec8_bf16_bf16), K(matvec8_q4_0_q8_0),
		K(matvec8_q4_1_q8_1), K(matvec8_q5_0_q8_0), K(matvec8_q5_1_q8_1), K(matvec8_q8_0_q8_0),
		K(matvec8_q2_K_q8_K), K(matvec8_q3_K_q8_K), K(matvec8_q4_K_q8_K), K(matvec8_q5_K_q8_K),
		K(matvec8_q6_K_q8_K),
		K(rmsnorm_f32),
		K(rope_f32),
		K(moe_router_f32), K(moe_combine_f32),
		K(moe_matvec_f32_f32), K(moe_matvec_f16_f16), K(moe_matvec_bf16_bf16), K(moe_matvec_q4_0_q8_0),
		K(moe_matvec_q4_1_q8_1), K(moe_matvec_q5_0_q8_0), K(moe_matvec_q5_1_q8_1), K(moe_matvec_q8_0_q8_0),
		K(moe_matvec_q2_K_q8_K), K(moe_matvec_q3_K_q8_K), K(moe_matvec_q4_K_q8_K), K(moe_matvec_q5_K_q8_K),
		K(moe_matvec_q6_K_q8_K),
		K(moe_gate_up_f32_f32), K(moe_gate_up_f16_f16), K(moe_gate_up_bf16_bf16), K(moe_gate_up_q4_0_q8_0),
		K(moe_gate_up_q4_1_q8_1), K(moe_gate_up_q5_0_q8_0), K(moe_gate_up_q5_1_q8_1), K(moe_gate_up_q8_0_q8_0),
		K(moe_gate_up_q2_K_q8_K), K(moe_gate_up_q3_K_q8_K), K(moe_gate_up_q4_K_q8_K), K(moe_gate_up_q5_K_q8_K),
		K(moe_gate_up_q6_K_q8_K),
		K(moe_down_f32_f32), K(moe_down_f16_f16), K(moe_down_bf16_bf16), K(moe_down_q4_0_q8_0),
		K(moe_down_q4_1_q8_1), K(moe_down_q5_0_q8_0), K(moe_down_q5_1_q8_1), K(moe_down_q8_0_q8_0),
		K(moe_down_q2_K_q8_K), K(moe_down_q3_K_q8_K), K(moe_down_q4_K_q8_K), K(moe_down_q5_K_q8_K),
		K(moe_down_q6_K_q8_K),
	};
	return m;
}

static void rd(void *p, size_t n) {
	if (n && fread(p, 1, n, stdin) != n) {
		fprintf(stderr, "host: short input\n");
		exit(3);
	}
}

static int launch() {
	std::string name;
	for (int c; (c = getchar()) > 0;) name += (char)c;
	uint32_t geo[6];
	rd(geo, sizeof geo);
	uint32_t nb;
	rd(&nb, 4);
	std::vector<uint64_t> base(nb), len(nb);
	std::vector<uint8_t *> data(nb);
	for (uint32_t i = 0; i < nb; i++) {
		rd(&base[i], 8);
		rd(&len[i], 8);
		data[i] = (uint8_t *)aligned_alloc(256, (len[i] + 255) / 256 * 256 + 256);
		rd(data[i], len[i]);
	}
	uint32_t np;
	rd(&np, 4);
	std::vector<arg> params(np);
	for (auto &p : params) {
		rd(&p.kind, 4);
		rd(&p.bits, 8);
		p.ptr = nullptr;
		for (uint32_t i = 0; i < nb; i++)
			if (p.kind == 0 && p.bits >= base[i] && p.bits <= base[i] + len[i]) p.ptr = data[i] + (p.bits - base[i]);
	}
	auto it = kernels().find(name);
	if (it == kernels().end()) {
		fprintf(stderr, "host launch: no kernel %s\n", name.c_str());
		return 4;
	}
	gridDim = {geo[0], geo[1], geo[2]};
	blockDim = {geo[3], geo[4], geo[5]};
	bool fits = true;
	if (!simt_run([&] { fits = it->second(params) && fits; })) {
		fprintf(stderr, "host launch: %s deadlocked\n", name.c_str());
		return 5;
	}
	if (!fits) {
		fprintf(stderr, "host launch: the parameters do not fit %s\n", name.c_str());
		return 5;
	}
	for (uint32_t i = 0; i < nb; i++) fwrite(data[i], 1, len[i], stdout);
	return 0;
}

int main(int argc, char **argv) {
	if (argc != 2) return 2;
	std::string mode = argv[1];
	if (mode == "launch") return launch();
	if (mode == "scalar") {
		uint32_t b;
		while (fread(&b, 4, 1, stdin) == 1) {
			float x = __uint_as_float(b);
			put(__float_as_uint(exp32(x)));
			put(__float_as_uint(sigmoid32(x)));
			put(__float_as_uint(silu32(x)));
			put(__float_as_uint(log32(x)));
			put(__float_as_uint(log1p32(x)));
			put(__float_as_uint(softplus32(x)));
			put(__float_as_uint(sqrt32(x)));
			put(__float_as_uint(rsqrt32(x)));
			put(f32_to_f16(x));
			put(f32_to_bf16(x));
			put(__float_as_uint(f16_to_f32((uint16_t)b)));
			put((uint32_t)round_away(x));
			put(__float_as_uint(tanh32(x)));
			put(__float_as_uint(gelu32(x)));
		}
		return 0;
	}
	if (mode == "pair") {
		uint32_t b[2];
		while (fread(b, 4, 2, stdin) == 2) {
			float x = __uint_as_float(b[0]), y = __uint_as_float(b[1]);
			put(__float_as_uint(max32(x, y)));
			put(__float_as_uint(min32(x, y)));
			put(__float_as_uint(max_unkey(max(max_key(x), max_key(y)))));
		}
		return 0;
	}
	if (mode == "matvec") {
		for (;;) {
			std::string name;
			int c;
			while ((c = getchar()) > 0) name += (char)c;
			if (c == EOF) return 0;
			int32_t hdr[3];
			if (fread(hdr, 4, 3, stdin) != 3) return 3;
			std::vector<uint8_t> w(hdr[1]), x(hdr[2]);
			if (fread(w.data(), 1, w.size(), stdin) != w.size() || fread(x.data(), 1, x.size(), stdin) != x.size()) return 3;
			float y;
			if (!dot(name, w.data(), x.data(), hdr[0], &y)) {
				fprintf(stderr, "host: unknown format %s\n", name.c_str());
				return 4;
			}
			put(__float_as_uint(y));
		}
	}
	return 2;
}
