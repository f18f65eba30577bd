// intrinsics.cu: CUDA intrinsics whose PTX the interpreter must accept, compiled by nvcc into
// intrinsics.ptx (see intrinsics_test.go for the command). Thread i reads the float32 inputs
// a[i], b[i], c[i] and the int32 input n[i], and writes NOUT 32-bit results to out[NOUT·i …].
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#define NOUT 64

__constant__ float ctab[4] = {0.5f, 1.5f, -2.5f, 3.5f};
__device__ int gtab[4] = {7, -7, 100, -100};

static __device__ __forceinline__ uint32_t fb(float x) { return __float_as_uint(x); }

extern "C" __global__ void intrinsics(const float *a, const float *b, const float *c, const int32_t *n,
                                      uint32_t *out, uint32_t *counters) {
	extern __shared__ int32_t dyn[];
	__shared__ float red[256];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	float x = a[i], y = b[i], z = c[i];
	int32_t k = n[i];
	uint32_t *o = out + NOUT * i;
	// directed rounding
	o[0] = fb(__fadd_rz(x, y));
	o[1] = fb(__fadd_rd(x, y));
	o[2] = fb(__fadd_ru(x, y));
	o[3] = fb(__fmul_rz(x, y));
	o[4] = fb(__fmul_rd(x, y));
	o[5] = fb(__fmul_ru(x, y));
	o[6] = fb(__fmaf_rz(x, y, z));
	o[7] = fb(__fmaf_rd(x, y, z));
	o[8] = fb(__fmaf_ru(x, y, z));
	o[9] = fb(__fdiv_rz(x, y));
	o[10] = fb(__fdiv_rn(x, y));
	o[11] = fb(__fsqrt_rd(fabsf(x)));
	o[12] = fb(__frcp_rn(y));
	o[13] = fb(__fsub_rn(x, y));
	o[14] = fb(__fmaf_rn(x, y, z));
	// conversions
	o[15] = (uint32_t)__float2int_rn(x);
	o[16] = (uint32_t)__float2int_rz(x);
	o[17] = (uint32_t)__float2int_rd(x);
	o[18] = (uint32_t)__float2int_ru(x);
	o[19] = __float2uint_rz(x);
	o[20] = (uint32_t)__float2ll_rn(x);
	o[21] = fb(__int2float_rz(k));
	o[22] = fb(__uint2float_rd((uint32_t)k));
	o[23] = fb(__ll2float_ru((long long)k * 12345677LL));
	o[24] = __half_as_ushort(__float2half_rn(x));
	o[25] = __half_as_ushort(__float2half_rz(x));
	o[26] = fb(__half2float(__ushort_as_half((unsigned short)k)));
	o[27] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
	o[28] = fb(__bfloat162float(__ushort_as_bfloat16((unsigned short)k)));
	o[29] = fb(__double2float_rz((double)x * (double)y));
	o[30] = fb((float)__dadd_rd((double)x, (double)z * 1e-10));
	o[31] = fb((float)sqrt((double)fabsf(x)));
	o[32] = fb(fminf(x, y));
	o[33] = fb(fmaxf(x, y));
	o[34] = fb(copysignf(x, y));
	o[35] = fb(truncf(x) + rintf(y));
	// integer and bit intrinsics
	o[36] = __popc(k);
	o[37] = __clz(k);
	o[38] = __brev(k);
	o[39] = __byte_perm(k, ~k, 0x5140);
	o[40] = __funnelshift_l(k, 0x12345678, i);
	o[41] = __funnelshift_r(k, 0x12345678, i);
	o[42] = __dp4a(k, 0x01ff7f80, 5);
	o[43] = __mulhi(k, 0x7654321);
	o[44] = (uint32_t)(__umul64hi((uint64_t)k * 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full));
	o[45] = (uint32_t)((int64_t)k * 1000003 / ((i - 128) | 1));
	o[46] = (uint32_t)((int64_t)k * 1000003 % ((i - 128) | 1));
	o[47] = (uint32_t)(k / 7) ^ (uint32_t)(k % 7);
	o[48] = __ffs(k);
	o[49] = __sad(k, i, 3);
	// memory: constant, global table, local array, shared and dynamic shared
	int loc[8];
	for (int j = 0; j < 8; j++) loc[j] = k * j + i;
	o[50] = loc[(k & 7)] + gtab[i & 3];
	o[51] = fb(ctab[i & 3] * x);
	dyn[threadIdx.x] = k;
	red[threadIdx.x] = x;
	__syncthreads();
	o[52] = dyn[(threadIdx.x + 1) % blockDim.x];
	float s = 0.0f;
	if (threadIdx.x < 32) {
		for (int j = threadIdx.x; j < blockDim.x; j += 32) s = __fadd_rn(s, red[j]);
		for (int off = 16; off > 0; off >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));
	}
	o[53] = fb(s);
	// warp operations
	int lane = threadIdx.x & 31;
	o[54] = __shfl_up_sync(0xffffffffu, k, 3, 16);
	o[55] = __shfl_down_sync(0xffffffffu, k, 5, 8);
	o[56] = __shfl_sync(0xffffffffu, k, 9, 16);
	o[57] = __ballot_sync(0xffffffffu, x > 0.0f);
	o[58] = __all_sync(0xffffffffu, k != 12345) | (__any_sync(0xffffffffu, x > y) << 1);
	uint32_t am = 0;
	if (lane & 1) am = __activemask();
	o[59] = am;
	__syncwarp();
	o[60] = __reduce_add_sync(0xffffffffu, (uint32_t)k) ^ __reduce_max_sync(0xffffffffu, k);
	// atomics
	o[61] = atomicAdd(&counters[0], 1) < 100000u;
	atomicMax((int *)&counters[1], k);
	atomicCAS(&counters[2], 0u, 77u);
	o[62] = atomicExch(&counters[3], (uint32_t)i) < 100000u;
	o[63] = fb(__saturatef(x));
}
