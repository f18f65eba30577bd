// megakernel.cu: the megakernel, the entry of megakernel/kernel.go — one persistent launch that
// runs a whole step: the instruction stream of package megakernel (read its package doc and
// stream.go for the layout), one thread block of MK_THREADS threads per queue.
//
// Block k runs queue k's items in order. For each item (part p of instruction i):
//   - the warps after the first ask the L2 for the item's prefetch ranges: its queue's window
//     of coming streams (megakernel/prefetch.go: matvecs' weights, which nothing of the step
//     writes), so that memory works while the block waits;
//   - the first warp waits until every dependency d of i has finished its parts in this launch
//     (done[d] ≥ epoch · parts(d): the counters are zeroed once, each launch adds to them), lane
//     l polling dependencies l, l+32, … (each recorded with its part count; the item's record
//     says where i's are, so the wait needs no word of i's own) with acquire loads
//     (ld.acquire.gpu), and the block meets
//     at a barrier: the acquire half of the hand-off, which orders the block's later reads
//     after the writes the counter publishes;
//   - the part's virtual blocks — blocks ⌊p·B/P⌋ … ⌊(p+1)·B/P⌋−1 of the instruction's grid of B
//     blocks in P parts, block v at (v mod grid x, v div grid x) — run the kernel's body
//     (megakernel_table.cuh) with the hardware grid replaced by the instruction's: a thread
//     block holds as many virtual blocks as fit in groups of whole warps, one virtual block
//     for bodies that synchronise their block (which then get named barrier 1 over their own
//     threads);
//   - the block meets at a barrier, and the last warp adds 1 to done[i] with a release reduction
//     (red.release.gpu; cumulative, so it publishes every write the barrier ordered before it):
//     the release half. No full fences.
// Each virtual block computes exactly what the same block of the instruction's own launch
// would, so the results are those of the eager launches, bit for bit; the order only follows
// the dependencies. All blocks must be resident at once: a block may wait for any other.
//
// A wait polls MK_HOT_POLLS times back to back, then sleeps between polls (64 ns, doubling to 256).
// After `spins` polls of one counter (the launch's argument; megakernel.DefaultSpins is a few
// seconds) the block gives up: it writes the status words (megakernel.Status: why, which
// block, which item, its instruction and part, the counter it waited for, the value it saw
// and the value it needed) — the first block to give up writes them — makes them visible to
// the host, which maps them from its own memory so that it can read them after the fault,
// and traps. A stream the kernel cannot run (another table, version or shape) is refused the
// same way before any item runs.
//
// Shared memory (grid.cuh): every body that uses some gets the start of one dynamic buffer,
// mk_shared, of at least MK_SHARED_BYTES (the largest body's struct, megakernel.SharedBytes), so
// bodies' needs do not add up. The launch gives the buffer `shared` bytes (its argument, at
// least MK_SHARED_BYTES + MK_BOOK; what the device lets a block opt in to, less room for the
// L1: megakernel.LaunchShared), the last MK_BOOK of them the book: the staging's words, then the
// queue's first MK_CACHED_ITEMS item records, each with up to MK_ITEM_DEPS of its dependencies,
// which the block copies there when it starts — an item's start then reads its record and its
// dependencies from shared memory, not by two dependent trips to the L2; a later item, or a
// further dependency, is read from the stream.
//
// Weights staged in shared memory. The L2 window bounds what a queue may have asked for and
// not yet read; a wait longer than the window's fetch leaves the bandwidth idle. So while the
// first warp waits for a matvec item's dependencies, the other warps also copy the part's own
// weights (its stream, which nothing of the step writes) into the buffer, a round at a time,
// and for every round copied ask the L2 for as many bytes more of the queue's coming streams:
// the window, now measured past what the block holds, keeps moving while the block waits. When
// the wait ends the first warp says so in the book, the copying warps stop after their round,
// and the body reads the rows the copy holds from shared memory (grid_stage: Grid.stage and
// Grid.staged) and the rest from global memory — the same bytes, so the same bits.
//
// The kernels' inputs are read with ordinary loads, never through the read-only cache (RESTRICT
// is empty here): another SM may have written them during this launch. The stream itself is
// read through it (__ldg): the host writes it before the launch and nothing during.
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
// MK_LINE is the stride of the L2 prefetches: a cache line.
#define MK_LINE 128
// the first status word: why the launch gave up (megakernel.Stalled, megakernel.Refused)
#define MK_STALLED 1u
#define MK_REFUSED 2u
// Staging (see "Weights staged in shared memory" above): the book, MK_BOOK bytes at the end of
// the dynamic buffer (the kernel table's), holds the wait's end (word 0: the item's index + 1)
// and each copying warp's rounds (word w for warp w); a round copies MK_STAGE_UNROLL 16-byte
// vectors a thread of those warps.
#define MK_STAGE_UNROLL 4
#define MK_STAGE_ROUND (16u * MK_STAGE_UNROLL * (MK_THREADS - 32))
// MK_HOT_POLLS polls of a counter come back to back (megakernel_table.cuh); then the wait
// sleeps between polls, MK_SLEEP_MIN nanoseconds doubling up to MK_SLEEP_MAX.
#define MK_SLEEP_MIN 64u
#define MK_SLEEP_MAX 256u

// The megakernel needs sm_70 (independent thread scheduling for the polling thread, nanosleep,
// acquire and release operations); the K80's cubin leaves it out.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
extern __shared__ __align__(16) unsigned char mk_shared[];

// mk_dynamic_shared is the dynamic shared memory the launch gave each block, in bytes.
static __device__ __forceinline__ uint32_t mk_dynamic_shared() {
	uint32_t n;
	asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
	return n;
}

// mk_acquire is an acquire load of a counter at GPU scope.
static __device__ __forceinline__ uint32_t mk_acquire(const uint32_t *p) {
	uint32_t v;
	asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

// mk_prefetch asks the L2 for the line holding global address a.
static __device__ __forceinline__ void mk_prefetch(uint64_t a) { l2_prefetch((const void *)a); }

// mk_release adds v to a counter with release semantics at GPU scope.
static __device__ __forceinline__ void mk_release(uint32_t *p, uint32_t v) {
	asm volatile("red.release.gpu.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// mk_give_up writes the status words (why, block, item, instruction, part, counter, seen,
// needed) unless another block has — the first to claim the word before the counters, in
// device memory (atomics on the host's memory need not be atomic), writes them — makes them
// visible to the host, and traps.
static __device__ __forceinline__ void mk_give_up(uint32_t *claim, volatile uint32_t *s, uint32_t why, uint32_t item,
                                                  uint32_t instr, uint32_t part, uint32_t counter, uint32_t seen,
                                                  uint32_t need) {
	if (atomicCAS(claim, 0u, 1u) == 0u) {
		s[1] = blockIdx.x, s[2] = item, s[3] = instr, s[4] = part, s[5] = counter, s[6] = seen, s[7] = need;
		__threadfence_system();
		s[0] = why; // last: the host reads the others once this is set
	}
	__threadfence_system(); // the host reads the words after the trap has ended the context
	__trap();
}

// One block of MK_THREADS per SM is all the launch bounds promise: with every body inlined
// ptxas gives the kernel up to 255 registers (attention's chunked body needs them; at 128, two
// blocks per SM, it spills ~1.7 KB), so a GPU holds one queue per SM unless a build of fewer
// bodies fits two (the runner asks the driver how many fit).
extern "C" __global__ void __launch_bounds__(MK_THREADS)
    megakernel(const uint32_t *stream, uint32_t *counters, volatile uint32_t *status, int32_t sms, uint32_t epoch,
               uint32_t spins, uint32_t shared) {
	uint32_t *claim = counters, *done = counters + 1; // done[i]: instruction i's finished parts, all launches
	uint32_t ninstr = stream[3], nsm = stream[4], ndeps = stream[6], nitems = stream[7], nranges = stream[9];
	// A stream for another kernel table or shape is an error (the host checks before launching;
	// a PTX built from other kernels than the host's would otherwise leave stale results).
	if (stream[0] != MK_MAGIC || stream[1] != MK_VERSION || stream[2] != MK_TABLE_HASH || nsm != (uint32_t)sms ||
	    gridDim.x != nsm || blockDim.x != MK_THREADS || mk_dynamic_shared() != shared || shared < MK_SHARED_BYTES + MK_BOOK ||
	    shared % 16 != 0 || epoch == 0) {
		if (threadIdx.x == 0) mk_give_up(claim, status, MK_REFUSED, 0, 0, 0, 0, stream[1], MK_VERSION);
		return;
	}
	const uint32_t *instrs = stream + MK_HEADER;
	const uint32_t *deps = instrs + (uint64_t)MK_INSTR * ninstr;
	const uint32_t *queues = deps + 2 * (uint64_t)ndeps;
	const uint32_t *items = queues + nsm + 1;
	const uint32_t *ranges = items + (uint64_t)MK_ITEM * nitems;
	uint64_t words = MK_HEADER + (uint64_t)MK_INSTR * ninstr + 2 * (uint64_t)ndeps + nsm + 1 + MK_ITEM * (uint64_t)nitems +
	                 MK_RANGE * (uint64_t)nranges;
	const uint64_t *params = (const uint64_t *)(stream + words + (words & 1));
	// the staging buffer is the dynamic buffer less the book (both from the argument, which
	// costs no register across the bodies)
#define MK_STAGE_CAP (shared - MK_BOOK)
#define MK_BOOK_WORDS ((volatile uint32_t *)(mk_shared + MK_STAGE_CAP))
	if (threadIdx.x == 0) MK_BOOK_WORDS[0] = 0;
	// the queue's cached items: records first, then the dependencies they locate
	const uint32_t q0 = queues[blockIdx.x], q1 = queues[blockIdx.x + 1];
	const uint32_t ncached = min(q1 - q0, (uint32_t)MK_CACHED_ITEMS);
	uint32_t *cache = (uint32_t *)(mk_shared + MK_STAGE_CAP + 32);
	for (uint32_t w = threadIdx.x; w < ncached * MK_ITEM; w += MK_THREADS)
		cache[(w / MK_ITEM) * MK_ITEM_SLOT + w % MK_ITEM] = __ldg(items + (uint64_t)MK_ITEM * q0 + w);
	__syncthreads();
	for (uint32_t w = threadIdx.x; w < ncached * 2 * MK_ITEM_DEPS; w += MK_THREADS) {
		uint32_t *slot = cache + (w / (2 * MK_ITEM_DEPS)) * MK_ITEM_SLOT, j = w % (2 * MK_ITEM_DEPS);
		if (j / 2 < slot[7]) slot[MK_ITEM + j] = __ldg(deps + 2 * (uint64_t)slot[6] + j);
	}
	__syncthreads();

	for (uint32_t it = q0; it < q1; it++) {
		// word k of the item's record: from the cache, or from the stream past it
		const bool cached = it - q0 < MK_CACHED_ITEMS;
		const uint32_t *citem = cache + (it - q0) * MK_ITEM_SLOT, *item = items + (uint64_t)MK_ITEM * it;
		auto iw = [&](int k) -> uint32_t { return cached ? citem[k] : __ldg(item + k); };
		uint32_t i = iw(0), part = iw(1), lo = iw(2), hi = iw(3);
		// the instruction's words, asked for now and used after the wait (the item repeats its
		// dependencies, so the wait does not wait for these)
		const uint32_t *in = instrs + (uint64_t)MK_INSTR * i;
		uint32_t k = __ldg(in), gx = __ldg(in + 3), gy = __ldg(in + 4), threads = __ldg(in + 5), pw = __ldg(in + 1);
		uint32_t pf = __ldg(in + 9);
		// the part's stream, which the block may stage while it waits: a matvec's weights
		// (a body that does not use shared memory), 16-byte aligned, as much as the buffer
		// holds, in a stream with a prefetch window (which the staging moves on)
		uint64_t sfrom = 0;
		uint32_t sbytes = 0;
		if (pf != 0 && __ldg(stream + 8) != 0 && iw(7) != 0 && !mk_exclusive(k)) {
			uint64_t per = __ldg(in + 10), total = __ldg(in + 11);
			uint64_t from = min((uint64_t)lo * per, total), to = min((uint64_t)hi * per, total);
			sfrom = __ldg(params + pw + pf - 1) + from;
			sbytes = (sfrom & 15) != 0 ? 0u : (uint32_t)min(to - from, (uint64_t)MK_STAGE_CAP) & ~15u;
		}
		// the item's prefetch ranges (weights: nothing of this step writes them), asked of the
		// L2 before the wait: every line the range touches, a line a thread at a time — by
		// the warps after the first, so that its poll does not wait behind their loads
		if (threadIdx.x >= 32)
			for (uint32_t r = iw(4), rend = r + iw(5); r < rend; r++) {
				const uint32_t *rg = ranges + (uint64_t)MK_RANGE * r;
				uint64_t base = __ldg(params + __ldg(rg)), end = base + __ldg(rg + 2);
				for (uint64_t a = ((base + __ldg(rg + 1)) & ~(uint64_t)(MK_LINE - 1)) + MK_LINE * (threadIdx.x - 32); a < end;
				     a += MK_LINE * (MK_THREADS - 32))
					mk_prefetch(a);
			}
		// Staging: until the wait ends, the same warps copy the part's stream to shared memory a
		// round at a time, and for each round ask the L2 for as many bytes more of the queue's
		// coming streams (the ranges after the item's own): the copied bytes have left the
		// window, so the window moves on by as many. A warp decides each round on its first
		// lane's reading of the book, so its lanes copy the same rounds.
		if (threadIdx.x >= 32 && sbytes != 0) {
			volatile uint32_t *book = MK_BOOK_WORDS;
			uint32_t t = threadIdx.x - 32, rounds = 0;
			uint32_t ri = iw(4) + iw(5), roff = 0; // the extension's next range and offset
			// the extension stops at the end of the queue's ranges (its last item's)
			const uint32_t *last = items + (uint64_t)MK_ITEM * (q1 - 1);
			uint32_t qend = __ldg(last + 4) + __ldg(last + 5);
			for (uint32_t off = 0; off < sbytes; off += MK_STAGE_ROUND, rounds++) {
				if (__shfl_sync(0xffffffffu, book[0] == it + 1 ? 1u : 0u, 0) != 0) break; // the wait is over
				for (uint32_t left = MK_STAGE_ROUND; left != 0 && ri < qend;) {
					const uint32_t *rg = ranges + (uint64_t)MK_RANGE * ri;
					uint32_t rlen = __ldg(rg + 2) - __ldg(rg + 1), n = min(left, rlen - roff);
					uint64_t a0 = __ldg(params + __ldg(rg)) + __ldg(rg + 1) + roff;
					for (uint64_t a = (a0 & ~(uint64_t)(MK_LINE - 1)) + MK_LINE * t; a < a0 + n; a += MK_LINE * (MK_THREADS - 32))
						mk_prefetch(a);
					left -= n, roff += n;
					if (roff == rlen) ri++, roff = 0;
				}
				uint4 v[MK_STAGE_UNROLL];
#pragma unroll
				for (int u = 0; u < MK_STAGE_UNROLL; u++) { // (every v set each round: none lives across rounds)
					uint32_t o = off + 16 * (t + (MK_THREADS - 32) * u);
					v[u] = o < sbytes ? __ldcg((const uint4 *)(sfrom + o)) : make_uint4(0, 0, 0, 0);
				}
#pragma unroll
				for (int u = 0; u < MK_STAGE_UNROLL; u++) {
					uint32_t o = off + 16 * (t + (MK_THREADS - 32) * u);
					if (o < sbytes) *(uint4 *)(mk_shared + o) = v[u];
				}
			}
			if ((threadIdx.x & 31) == 0) book[threadIdx.x / 32] = rounds;
		}
		if (threadIdx.x < 32) { // the first warp's lanes wait on the dependencies side by side
			const uint32_t first = iw(6), nd = iw(7);
			for (uint32_t j = threadIdx.x; j < nd; j += 32) {
				const bool kept = cached && j < MK_ITEM_DEPS;
				uint32_t d = kept ? citem[MK_ITEM + 2 * j] : __ldg(deps + 2 * (uint64_t)(first + j));
				uint32_t need = epoch * (kept ? citem[MK_ITEM + 2 * j + 1] : __ldg(deps + 2 * (uint64_t)(first + j) + 1));
				uint32_t sleep = MK_SLEEP_MIN;
				for (uint32_t n = 0;; n++) {
					uint32_t seen = mk_acquire(&done[d]);
					if (seen >= need) break;
					if (n >= spins) mk_give_up(claim, status, MK_STALLED, it, i, part, d, seen, need); // a block that never comes
					if (n >= MK_HOT_POLLS) {
						__nanosleep(sleep);
						sleep = min(2 * sleep, MK_SLEEP_MAX);
					}
				}
			}
			__syncwarp();
			if (threadIdx.x == 0) MK_BOOK_WORDS[0] = it + 1; // the copying warps stop
		}
		__syncthreads();
		// the staged bytes: the rounds every copying warp finished
		uint32_t staged = 0;
		if (sbytes != 0) {
			uint32_t r = MK_BOOK_WORDS[1];
#pragma unroll
			for (int w = 2; w < MK_THREADS / 32; w++) r = min(r, MK_BOOK_WORDS[w]);
			staged = min(r * MK_STAGE_ROUND, sbytes);
		}

		bool own = mk_exclusive(k);
		uint32_t span = (threads + 31) & ~31u; // a virtual block's threads, in whole warps
		uint32_t groups = own ? 1 : MK_THREADS / span;
		uint32_t grp = threadIdx.x / span, t = threadIdx.x % span;
		for (uint32_t v0 = lo; v0 < hi; v0 += groups) {
			uint32_t v = v0 + grp;
			if (grp < groups && v < hi && t < threads) {
				Grid gr{v % gx, v / gx, gx, gy, t, threads, own ? 1u : 0u, mk_shared, sfrom, staged};
				mk_run(k, gr, params + pw);
			}
			// a body that has the block to itself may read its shared memory after its last
			// barrier: the next virtual block must not overwrite it before then
			if (own) __syncthreads();
		}

		__syncthreads();
		// the last warp releases, so that the first can start on the next item's wait at once
		if (threadIdx.x == MK_THREADS - 32) mk_release(&done[i], 1u);
	}
}
#endif
