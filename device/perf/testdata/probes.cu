// probes.cu: kernels whose speed is known by hand, for the performance model's tests. They are
// compiled by tools/kernelfacts (go generate ./ptx) to probes.ptx, probes.sm_90.sass and
// probes.sm_90.ptxas beside this file; nothing runs them.
#include <stdint.h>

// probe_copy: y[i] = x[i] for i < n, one 16-byte load and store per thread. It moves 2·16·n
// bytes at full bandwidth when enough warps are resident: memory-bound.
extern "C" __global__ void probe_copy(const uint4 *__restrict__ x, uint4 *__restrict__ y, int32_t n) {
	int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = x[i];
}

// probe_chain: every lane follows steps links of a list, j = next[j] from j = 0, and stores
// where it ends. Each load's address is the previous load's value: one memory round trip per
// step whatever the bandwidth, latency-bound.
extern "C" __global__ void probe_chain(const int32_t *__restrict__ next, int32_t *__restrict__ out, int32_t steps) {
	int32_t j = 0;
	for (int32_t k = 0; k < steps; k++) j = next[j];
	out[threadIdx.x] = j;
}
