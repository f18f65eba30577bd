// simt.h runs CUDA kernels on the host (see host.cpp and simt_test.go): a launch runs one thread
// block at a time, each CUDA thread a coroutine (ucontext) on one host thread, switched only at
// barriers, so a run is deterministic. The rounding intrinsics are hostshim.h's; a warp shuffle
// or vote exchanges values through the warp's slot array between two barrier phases, and
// __syncthreads is a barrier over the block. Shared memory (static locals) is one copy, which
// is right because blocks run one after another. A launch whose threads all wait at barriers
// that can never complete is reported as a deadlock.
#pragma once

#include "hostshim.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <ucontext.h>
#include <vector>

struct simt_barrier {
	int expected = 0, arrived = 0;
	unsigned phase = 0;
};

struct simt_thread {
	ucontext_t ctx;
	char *stack = nullptr; // not zeroed: allocating it is then nearly free
	host_dim3 tid;
	int lane = 0, warp = 0;
	bool done = false;
};

static host_dim3 threadIdx, blockIdx;
static ucontext_t simt_sched;
static simt_thread *simt_cur;
static std::vector<simt_barrier> simt_warp_bars;
static std::vector<uint64_t> simt_slots; // 32 per warp
static simt_barrier simt_block_bar;
static unsigned long simt_progress; // phases completed and threads finished

static void simt_wait(simt_barrier &b) {
	unsigned ph = b.phase;
	if (++b.arrived == b.expected) {
		b.arrived = 0;
		b.phase++;
		simt_progress++;
		return;
	}
	while (b.phase == ph) swapcontext(&simt_cur->ctx, &simt_sched);
}

// simt_drop removes an exited thread from a barrier, completing the phase if it was the last.
static void simt_drop(simt_barrier &b) {
	b.expected--;
	if (b.arrived > 0 && b.arrived == b.expected) {
		b.arrived = 0;
		b.phase++;
		simt_progress++;
	}
}

template <typename T> static inline T simt_exchange(T v, int src) {
	uint64_t bits = 0;
	memcpy(&bits, &v, sizeof v);
	uint64_t *slot = &simt_slots[32 * simt_cur->warp];
	slot[simt_cur->lane] = bits;
	simt_wait(simt_warp_bars[simt_cur->warp]);
	bits = slot[src & 31];
	simt_wait(simt_warp_bars[simt_cur->warp]);
	T r;
	memcpy(&r, &bits, sizeof r);
	return r;
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int off) { return simt_exchange(v, simt_cur->lane ^ off); }
template <typename T> static inline T __shfl_sync(unsigned, T v, int src) { return simt_exchange(v, src); }
static inline bool __all_sync(unsigned, bool v) {
	uint64_t *slot = &simt_slots[32 * simt_cur->warp];
	slot[simt_cur->lane] = v;
	simt_wait(simt_warp_bars[simt_cur->warp]);
	bool all = true;
	for (int l = 0; l < simt_warp_bars[simt_cur->warp].expected; l++) all = all && slot[l] != 0;
	simt_wait(simt_warp_bars[simt_cur->warp]);
	return all;
}
static inline bool __any_sync(unsigned m, bool v) { return !__all_sync(m, !v); }
static inline unsigned __ballot_sync(unsigned, bool v) {
	uint64_t *slot = &simt_slots[32 * simt_cur->warp];
	slot[simt_cur->lane] = v;
	simt_wait(simt_warp_bars[simt_cur->warp]);
	unsigned bits = 0;
	for (int l = 0; l < simt_warp_bars[simt_cur->warp].expected; l++) bits |= (slot[l] != 0 ? 1u : 0u) << l;
	simt_wait(simt_warp_bars[simt_cur->warp]);
	return bits;
}
static inline void __syncthreads() { simt_wait(simt_block_bar); }
static inline void __syncwarp() { simt_wait(simt_warp_bars[simt_cur->warp]); }
// Blocks run one after another on one host thread: atomics are plain updates, fences nothing.
static inline uint32_t atomicAdd(uint32_t *p, uint32_t v) {
	uint32_t old = *p;
	*p = old + v;
	return old;
}
static inline uint32_t atomicExch(uint32_t *p, uint32_t v) {
	uint32_t old = *p;
	*p = v;
	return old;
}
static inline uint32_t atomicOr(uint32_t *p, uint32_t v) {
	uint32_t old = *p;
	*p = old | v;
	return old;
}
static inline void __threadfence() {}
static inline float __ldcg(const float *p) { return *p; }
static inline uint32_t __ldcg(const uint32_t *p) { return *p; }

static std::function<void()> simt_body;

static void simt_entry() {
	simt_body();
	simt_cur->done = true;
	simt_progress++;
	simt_drop(simt_warp_bars[simt_cur->warp]);
	simt_drop(simt_block_bar);
}

// simt_run runs body once for every thread of every block of the launch (gridDim and blockDim
// set), and reports false on a deadlock.
static bool simt_run(const std::function<void()> &body) {
	simt_body = body;
	unsigned n = blockDim.x * blockDim.y * blockDim.z, warps = (n + 31) / 32;
	const size_t stack_bytes = 64 << 10;
	std::vector<simt_thread> ts(n);
	std::vector<char *> stacks;
	for (auto &t : ts) stacks.push_back(t.stack = (char *)malloc(stack_bytes));
	simt_slots.assign(32 * warps, 0);
	for (unsigned bz = 0; bz < gridDim.z; bz++)
		for (unsigned by = 0; by < gridDim.y; by++)
			for (unsigned bx = 0; bx < gridDim.x; bx++) {
				blockIdx = {bx, by, bz};
				simt_warp_bars.assign(warps, simt_barrier{});
				for (unsigned w = 0; w < warps; w++) simt_warp_bars[w].expected = (int)std::min(32u, n - 32 * w);
				simt_block_bar = simt_barrier{};
				simt_block_bar.expected = (int)n;
				for (unsigned i = 0; i < n; i++) {
					simt_thread &t = ts[i];
					t.tid = {i % blockDim.x, i / blockDim.x % blockDim.y, i / (blockDim.x * blockDim.y)};
					t.lane = (int)(i % 32);
					t.warp = (int)(i / 32);
					t.done = false;
					getcontext(&t.ctx);
					t.ctx.uc_stack.ss_sp = t.stack;
					t.ctx.uc_stack.ss_size = stack_bytes;
					t.ctx.uc_link = &simt_sched;
					makecontext(&t.ctx, simt_entry, 0);
				}
				for (unsigned left = n; left > 0;) {
					unsigned long before = simt_progress;
					for (auto &t : ts) {
						if (t.done) continue;
						simt_cur = &t;
						threadIdx = t.tid;
						swapcontext(&simt_sched, &t.ctx);
						if (t.done) left--;
					}
					if (left > 0 && simt_progress == before) {
						for (char *p : stacks) free(p);
						return false;
					}
				}
			}
	for (char *p : stacks) free(p);
	return true;
}
