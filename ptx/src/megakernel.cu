// megakernel.cu: the megakernel, the entry of megakernel/kernel.go — one persistent launch that
// runs a whole step: the instruction stream of package megakernel (read its package doc and
// stream.go for the layout), one thread block of MK_THREADS threads per queue.
//
// Block k runs queue k's items in order. For each item (part p of instruction i):
//   - the first warp waits until done[d] equals the part count of every dependency d of i, lane
//     l polling dependencies l, l+32, … (with an atomic read, then a fence: the acquire half of
//     the hand-off), and the block meets at a barrier;
//   - the part's virtual blocks — blocks ⌊p·B/P⌋ … ⌊(p+1)·B/P⌋−1 of the instruction's grid of B
//     blocks in P parts, block v at (v mod grid x, v div grid x) — run the kernel's body
//     (megakernel_table.cuh) with the hardware grid replaced by the instruction's: a thread
//     block holds as many virtual blocks as fit in groups of whole warps, one virtual block
//     for bodies that synchronise their block (which then get named barrier 1 over their own
//     threads);
//   - the block meets at a barrier, and thread 0 fences and adds 1 to done[i] (the release half).
// Each virtual block computes exactly what the same block of the instruction's own launch
// would, so the results are those of the eager launches, bit for bit; the order only follows
// the dependencies. All blocks must be resident at once: a block may wait for any other.
//
// Shared memory (grid.cuh): every body that uses some gets the start of one dynamic buffer,
// mk_shared, of MK_SHARED_BYTES (the largest body's struct; the launch asks for
// megakernel.SharedBytes, the same figure), so bodies' needs do not add up.
//
// Inputs are read with ordinary loads, never through the read-only cache (RESTRICT is empty
// here): another SM may have written them during this launch.
#define MEGAKERNEL
#include "grid.cuh"
#include "num.cuh"

// mk_ptr turns a parameter word into whatever pointer type the body takes.
struct MkPtr {
	uint64_t v;
	template <typename T> __device__ __forceinline__ operator T *() const { return (T *)v; }
};
static __device__ __forceinline__ MkPtr mk_ptr(uint64_t v) { return MkPtr{v}; }

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

#include "megakernel_table.cuh"

#define MK_THREADS 256
#define MK_MAGIC 0x314b4d56u
#define MK_VERSION 1u
#define MK_HEADER 8
#define MK_INSTR 10
// MK_SPIN_LIMIT bounds one dependency wait (2^26 polls: tens of seconds on a GPU), so that a
// stream that cannot finish — blocks that are not all resident, say — ends the launch with an
// error instead of hanging it.
#define MK_SPIN_LIMIT (1u << 26)

// The megakernel needs sm_70 (independent thread scheduling for the polling thread, nanosleep);
// the K80's cubin leaves it out.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
extern __shared__ __align__(16) unsigned char mk_shared[];

// mk_dynamic_shared is the dynamic shared memory the launch gave each block, in bytes.
static __device__ __forceinline__ uint32_t mk_dynamic_shared() {
	uint32_t n;
	asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
	return n;
}

extern "C" __global__ void __launch_bounds__(MK_THREADS) megakernel(const uint32_t *stream, uint32_t *done, int32_t sms) {
	uint32_t ninstr = stream[3], nsm = stream[4], ndeps = stream[6], nitems = stream[7];
	// A stream for another kernel table or shape is an error (the host checks before launching;
	// a PTX built from other kernels than the host's would otherwise leave stale results).
	if (stream[0] != MK_MAGIC || stream[1] != MK_VERSION || stream[2] != MK_TABLE_HASH || nsm != (uint32_t)sms ||
	    gridDim.x != nsm || blockDim.x != MK_THREADS || mk_dynamic_shared() < MK_SHARED_BYTES)
		__trap();
	const uint32_t *instrs = stream + MK_HEADER;
	const uint32_t *deps = instrs + (uint64_t)MK_INSTR * ninstr;
	const uint32_t *queues = deps + ndeps;
	const uint32_t *items = queues + nsm + 1;
	uint64_t words = MK_HEADER + (uint64_t)MK_INSTR * ninstr + ndeps + nsm + 1 + 2 * (uint64_t)nitems;
	const uint64_t *params = (const uint64_t *)(stream + words + (words & 1));

	for (uint32_t it = queues[blockIdx.x]; it < queues[blockIdx.x + 1]; it++) {
		uint32_t i = items[2 * it], part = items[2 * it + 1];
		const uint32_t *in = instrs + (uint64_t)MK_INSTR * i;
		uint32_t k = in[0], gx = in[3], gy = in[4], threads = in[5], parts = in[6];
		if (threadIdx.x < 32) { // the first warp's lanes wait on the dependencies side by side
			for (uint32_t j = in[7] + threadIdx.x; j < in[7] + in[8]; j += 32) {
				uint32_t d = deps[j], need = instrs[(uint64_t)MK_INSTR * d + 6];
				for (uint32_t spins = 0; atomicAdd(&done[d], 0u) < need; spins++) {
					if (spins == MK_SPIN_LIMIT) __trap(); // a block that never comes: fail, do not hang
					__nanosleep(32);
				}
			}
			__threadfence();
		}
		__syncthreads();

		uint64_t blocks = (uint64_t)gx * gy;
		uint32_t lo = (uint32_t)(part * blocks / parts), hi = (uint32_t)((part + 1) * blocks / parts);
		bool own = mk_exclusive(k);
		uint32_t span = (threads + 31) & ~31u; // a virtual block's threads, in whole warps
		uint32_t groups = own ? 1 : MK_THREADS / span;
		uint32_t grp = threadIdx.x / span, t = threadIdx.x % span;
		for (uint32_t v0 = lo; v0 < hi; v0 += groups) {
			uint32_t v = v0 + grp;
			if (grp < groups && v < hi && t < threads) {
				Grid gr{v % gx, v / gx, gx, gy, t, threads, own ? 1u : 0u, mk_shared};
				mk_run(k, gr, params + in[1]);
			}
			// a body that has the block to itself may read its shared memory after its last
			// barrier: the next virtual block must not overwrite it before then
			if (own) __syncthreads();
		}

		__syncthreads();
		if (threadIdx.x == 0) {
			__threadfence();
			atomicAdd(&done[i], 1u);
		}
	}
}
#endif
