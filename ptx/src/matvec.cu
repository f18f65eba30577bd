// matvec.cu: matvec_<weight>_<act> and matvec8_<weight>_<act>, the kernels of
// device/kernels/matvec.go, two per weight format: Y[c][r] = Σ_i W[r][i]·X[c][i] for r < Rows, c < N, with W in repack's device layout
// (packed.cuh) and X already converted to the format's activation layout by an act.cu kernel.
//
// Order, the contract of the package doc of device/kernels: the row is cut into units (each
// format's own); lane l folds units l, l+32, l+64, … in increasing order into its float32
// accumulator, starting at +0, with the format's unit step; then the xor butterfly
// 16, 8, 4, 2, 1 (num.WarpSum) combines the 32 accumulators and lane 0 writes the result.
// With add_y (MatVecArgs.Acc) lane 0 adds the result to y's value instead of storing it.
// matvec8 takes a pass's R × C sums together (warp_sums: the same butterfly's bits, in about R·C
// shuffles rather than 5·R·C), and the first lane holding each total writes it.
//
// matvec (decoding): ceil(Rows/4) blocks of 128 threads, one warp per weight row, one column
// after another. A lane keeps MV_AHEAD units' loads in flight (AH in the format's MATVEC line;
// 2 in the megakernel): before folding unit k it has issued the loads of units up to
// k + MV_AHEAD − 1, so that one warp's wait for memory covers several units, not one.
//
// matvec8 (a tree verify's columns): each warp handles G weight rows (G = kernels.MatVec8Rows,
// per format in the MATVEC lines below), ceil(Rows/4G) blocks of 128 threads; columns go in
// passes of kernels.MaxColumns = 8. A lane loads unit u of each of the rows of a pass once, then
// each column's activations of that unit once, and folds them into the accumulator of every
// (row, column) with the one-column arithmetic: the weights are read once per 8 columns, the
// activations once per pass's rows. Each (row, column) thus gets the bits of a one-column launch,
// whatever the rows per warp or pass.
#include "packed.cuh"
#include "grid.cuh"

template <typename P, typename F, int MV_AHEAD, bool PF>
static __device__ __forceinline__ void matvec(const Grid &gr, const uint8_t *RESTRICT w, const uint8_t *RESTRICT x,
                                              float *RESTRICT y, int32_t rows, int32_t cols, int32_t n,
                                              int32_t add_y) {
	int32_t r = gr.bx * (gr.ntid / 32) + gr.tid / 32;
	int lane = gr.tid & 31;
	if (r >= rows) return; // the whole warp leaves together
	PkLayout l = P::layout(cols);
	int64_t xb = F::act_bytes(cols);
	int32_t units = cols / F::UNIT;
	const uint8_t *wr = grid_stage(gr, w + r * l.stride, l.stride); // the megakernel's staged copy, if it holds the row
	for (int32_t c = 0; c < n; c++) {
		const uint8_t *xc = x + c * xb;
		float v = warp_sum(row_fold<P, MV_AHEAD, PF>(wr, l, xc, units, lane, c == 0)); // MV_AHEAD units in flight a lane
		if (lane == 0) {
			float *yp = y + (int64_t)c * rows + r;
			*yp = add_y ? __fadd_rn(*yp, v) : v; // the residual add, fused (Acc)
		}
	}
}

// Mv8Unit holds one unit's loads of a pass: the weights of its R rows and the activations of
// its C columns.
template <typename P, int R, int C> struct Mv8Unit {
	typename P::W w[R];
	typename P::X x[C];
};

// mv8_issue issues every load of unit u (the lane's k-th) of a pass before any is used,
// branch-free: a row or a column past the last (i ≥ nr, j ≥ nc) reads the last one's bytes
// again, into an accumulator that is never stored.
template <typename P, int R, int C>
static __device__ __forceinline__ void mv8_issue(Mv8Unit<P, R, C> &t, const uint8_t *RESTRICT wr, const PkLayout &l,
                                                 int lane, int32_t u, int32_t k, int32_t nr, const uint8_t *RESTRICT xc,
                                                 int64_t xb, int32_t nc) {
#pragma unroll
	for (int i = 0; i < R; i++) t.w[i] = P::load(wr + (i < nr ? i : nr - 1) * l.stride, l, lane, u, k);
#pragma unroll
	for (int j = 0; j < C; j++) t.x[j] = P::xload(t.w[0], xc + (j < nc ? j : nc - 1) * xb, u);
}

// mv8_fold folds a unit's loads into the pass's accumulators.
template <typename P, int R, int C>
static __device__ __forceinline__ void mv8_fold(float (&acc)[R][C], const Mv8Unit<P, R, C> &t) {
#pragma unroll
	for (int j = 0; j < C; j++)
#pragma unroll
		for (int i = 0; i < R; i++) acc[i][j] = P::apply(acc[i][j], t.w[i], t.x[j]);
}

// mv8_store takes the warp totals of a pass's R × C accumulators (warp_sums: each has
// warp_sum's bits) and stores those of the rows and columns that exist, each from the first
// lane holding it; with add_y the lane adds the total to y's value (the residual add, fused:
// Acc). Every lane of the warp must call it.
template <int R, int C>
static __device__ __forceinline__ void mv8_store(float (&acc)[R][C], int lane, float *RESTRICT y, int32_t rows, int32_t r0,
                                                 int32_t c0, int32_t nr, int32_t nc, int32_t add_y) {
	const int N = R * C, per = 32 / N; // the values a lane holds, the lanes holding each total
	static_assert(N >= 2 && N <= 32, "a pass's accumulators fit the warp's lanes");
	float v[N];
#pragma unroll
	for (int i = 0; i < R; i++)
#pragma unroll
		for (int j = 0; j < C; j++) v[i * C + j] = acc[i][j];
	float t = warp_sums<N>(v, lane);
	int q = lane / per, i = q / C, j = q % C;
	if (lane % per == 0 && i < nr && j < nc) {
		float *yp = y + (int64_t)(c0 + j) * rows + r0 + i;
		*yp = add_y ? __fadd_rn(*yp, t) : t;
	}
}

// matvec8's forms of a pass over the units (the A and MA of a MATVEC line):
//   MV8_GUARDED  loads only the rows and columns that exist, a column's activations just before
//                its folds;
//   MV8_CLAMPED  branch-free, in the same order: a row or column past the last reads the last
//                one's bytes again, so that the compiler may issue the unit's loads together;
//   MV8_AHEAD    branch-free, every load of a unit issued before its first fold (mv8_issue), and
//                the next unit's before this unit's folds, in two buffers taken in turn: a lane
//                waits for loads that have been in flight for a unit's folds.
//   MV8_AHEAD3   the same with three buffers: the unit after next is issued before this unit's
//                folds, so a lane's loads have two units' folds to arrive (a DRAM trip is
//                longer than one unit's folds of four rows by eight columns).
//   MV8_STAGED   the quantised formats (matvec8_staged below): the block copies each column's
//                activations to shared memory once, a chunk of 32 units at a time, and its
//                warps read them from there; MV8_STAGED_BLOCKS blocks resident an SM;
//   MV8_STAGED1  the same with one block an SM and the registers that leaves a thread (the
//                formats whose weight registers, with the prefetch's, would spill at two).
//   MV8_MMA      q8_0 and q4_0 (matvec8_mma below): a unit's integer sums for G rows and the eight
//                columns at once on the integer tensor cores (mma.m8n8k16), from the block's
//                activations and each warp's rows in shared memory; sm_75 and later (the
//                K80's cubin folds the same rows in MV8_GUARDED: MV8_MMA_FORM).
#define MV8_GUARDED 0
#define MV8_CLAMPED 1
#define MV8_AHEAD 2
#define MV8_STAGED 3
#define MV8_STAGED1 4
#define MV8_AHEAD3 5
#define MV8_MMA 6

// MV8_STAGED_WARPS is the warps of a staged block (kernels.MatVec8Warps); each copies
// 8 / MV8_STAGED_WARPS columns of a chunk.
#define MV8_STAGED_WARPS 8

// Mv8Stage is the shared memory of matvec8's staged form: two buffers, taken in turn, each
// holding one chunk — units 32k … 32k+31, unit 32k + l in slot l — of every column of a pass,
// as x_pack lays a unit out (two quant halves and the aux words, each its own array, so that a
// warp's 32 slots are 32 consecutive vectors: no bank conflicts).
struct Mv8Stage {
	uint4 lo[2][8][32];
	uint4 hi[2][8][32];
	float2 aux[2][8][32];
};

// Mv8Staged is one warp's pass of matvec8's staged form over eight columns: the block's warps
// copy the columns' activations of a chunk to shared memory, a unit a lane, and every warp folds
// its G rows' units of the chunk against all the columns from there.
template <typename P, int G> struct Mv8Staged {
	static const int C = 8; // kernels.MaxColumns
	Mv8Stage &sh;
	const uint8_t *wr; // the warp's first row
	PkLayout l;
	const uint8_t *xc; // the pass's first column
	int64_t xb;
	int32_t nr, nc, units, chunks; // rows from the warp's first (≤ 0: none), columns of the pass
	int tid, lane;

	// has reports whether the lane has a unit in chunk k (and the warp a row).
	__device__ __forceinline__ bool has(int32_t k) const { return nr > 0 && lane + 32 * k < units; }

	// prefetch asks the L2 for chunk k of the G rows that exist, if the rows have it.
	__device__ __forceinline__ void prefetch(int32_t k) const {
		if (k < chunks) pk_prefetch_lines<P, G>(wr, l, min(nr, G), lane, k);
	}

	// load loads the weights of the lane's unit of chunk k for the G rows (a row past the last
	// reads the last one's again, into an accumulator that is never stored).
	__device__ __forceinline__ void load(typename P::W (&wu)[G], int32_t k) const {
#pragma unroll
		for (int i = 0; i < G; i++) wu[i] = P::load(wr + (i < nr ? i : nr - 1) * l.stride, l, lane, lane + 32 * k, k);
	}

	// A thread copies unit 32k + lane of columns tid/32 + MV8_STAGED_WARPS·c (c < S): fetch
	// loads them, put stores them into buffer b. Columns past the pass's last and units past the
	// row's last are left alone: no lane reads them.
	static const int S = C / MV8_STAGED_WARPS;
	__device__ __forceinline__ bool copies(int c, int32_t k) const {
		return (tid >> 5) + MV8_STAGED_WARPS * c < nc && 32 * k + lane < units;
	}
	__device__ __forceinline__ void fetch(typename P::X (&a)[S], int32_t k) const {
#pragma unroll
		for (int c = 0; c < S; c++)
			if (copies(c, k)) a[c] = P::xat(xc + ((tid >> 5) + MV8_STAGED_WARPS * c) * xb, 32 * k + lane);
	}
	__device__ __forceinline__ void put(int b, const typename P::X (&a)[S], int32_t k) const {
#pragma unroll
		for (int c = 0; c < S; c++) {
			int j = (tid >> 5) + MV8_STAGED_WARPS * c;
			if (copies(c, k)) x_pack(a[c], &sh.lo[b][j][lane], &sh.hi[b][j][lane], &sh.aux[b][j][lane]);
		}
	}

	// step folds chunk k (in buffer k mod 2, its weights in cur) while chunk k + 1's weights load
	// into nxt and its activations are copied to the other buffer, and meets the block. With pf
	// (the first pass) it asks the L2 for chunk k + 1 + MV_PREFETCH.
	__device__ __forceinline__ void step(const Grid &gr, float (&acc)[G][C], const typename P::W (&cur)[G],
	                                     typename P::W (&nxt)[G], int32_t k, bool pf) const {
		int b = k & 1;
		bool more = k + 1 < chunks;
		typename P::X a[S];
		if (more) fetch(a, k + 1);
		if (pf && nr > 0) prefetch(k + 1 + MV_PREFETCH);
		if (more && has(k + 1)) load(nxt, k + 1);
		if (has(k)) {
#pragma unroll
			for (int j = 0; j < C; j++) {
				int jj = j < nc ? j : nc - 1; // a column past the last folds the last one's again, unstored
				typename P::X xj;
				x_unpack(&xj, sh.lo[b][jj][lane], sh.hi[b][jj][lane], sh.aux[b][jj][lane]);
#pragma unroll
				for (int i = 0; i < G; i++) acc[i][j] = P::apply(acc[i][j], cur[i], xj);
			}
		}
		if (more) put(b ^ 1, a, k + 1);
		grid_sync(gr); // chunk k is read before it is overwritten; chunk k + 1 is written before it is read
	}
};

// matvec8_staged is matvec8 with the activations staged, in blocks of MV8_STAGED_WARPS warps
// (the grid is matvec8's): every warp folds its G rows' unit lane + 32k
// against chunk k (units 32k … 32k+31) of every column in shared memory, while the block copies
// chunk k + 1 and the warps load its weights, two sets of weight registers taken in turn; the
// block meets once a chunk. A warp past the last row still copies and meets. The folds are
// matvec8's, in the same order, on the same values.
template <typename P, typename F, int G, bool PF>
static __device__ __forceinline__ void matvec8_staged(const Grid &gr, const uint8_t *RESTRICT w, const uint8_t *RESTRICT x,
                                                      float *RESTRICT y, int32_t rows, int32_t cols, int32_t n,
                                                      int32_t add_y) {
	const int C = 8;
	int32_t r0 = (gr.bx * (gr.ntid / 32) + gr.tid / 32) * G;
	PkLayout l = P::layout(cols);
	int32_t units = cols / F::UNIT;
	const int32_t nr = rows - r0; // the same in every lane
	Mv8Staged<P, G> s{grid_shared<Mv8Stage>(gr), w + (nr > 0 ? r0 : 0) * l.stride, l, x, F::act_bytes(cols), nr, 0,
	                  units, (units + 31) / 32, (int)gr.tid, (int)(gr.tid & 31)};
	for (int32_t c0 = 0; c0 < n; c0 += C) {
		s.nc = min(n - c0, C); // the same in every thread
		s.xc = x + c0 * s.xb;
		float acc[G][C];
#pragma unroll
		for (int i = 0; i < G; i++)
#pragma unroll
			for (int j = 0; j < C; j++) acc[i][j] = 0.0f;
		typename P::W wa[G], wb[G];
		const bool pf = PF && c0 == 0; // the later passes find the rows in the caches
		if (pf && nr > 0) pk_prefetch_start<P, G>(s.wr, l, min(nr, G), s.lane, 1, s.chunks);
		if (s.has(0)) s.load(wa, 0);
		{
			typename P::X a[Mv8Staged<P, G>::S];
			s.fetch(a, 0);
			s.put(0, a, 0);
		}
		grid_sync(gr);
#pragma unroll 1
		for (int32_t k = 0; k < s.chunks; k += 2) {
			s.step(gr, acc, wa, wb, k, pf);
			if (k + 1 >= s.chunks) break;
			s.step(gr, acc, wb, wa, k + 1, pf);
		}
		mv8_store<G, C>(acc, s.lane, y, rows, r0, c0, nr, s.nc, add_y);
	}
}

template <typename P, typename F, int G, int R, int A, bool PF>
static __device__ __forceinline__ void matvec8(const Grid &gr, const uint8_t *RESTRICT w, const uint8_t *RESTRICT x,
                                               float *RESTRICT y, int32_t rows, int32_t cols, int32_t n,
                                               int32_t add_y) {
	static_assert(G % R == 0, "a warp's rows are whole passes of R rows");
	const int C = 8; // kernels.MaxColumns
	int32_t w0 = (gr.bx * (gr.ntid / 32) + gr.tid / 32) * G;
	int lane = gr.tid & 31;
	if (w0 >= rows) return; // the whole warp leaves together
	PkLayout l = P::layout(cols);
	int64_t xb = F::act_bytes(cols);
	int32_t units = cols / F::UNIT;
	// the warp's rows: the megakernel's staged copy of them, if it holds all G
	const uint8_t *wg = grid_stage(gr, w + w0 * l.stride, G * l.stride);
	// the warp's G rows, R at a time (one group when R = G)
#pragma unroll 1
	for (int32_t g = 0; g < G; g += R) {
		int32_t r0 = w0 + g;
		if (r0 >= rows) break; // the same in every lane
		// row r0 + i exists when i < rows − r0 (the same in every lane; compared, not clamped:
		// the SASS of a clamp to R, VIMNMX with an immediate, is beyond nvdisasm 11.8)
		const int32_t nr = rows - r0;
		const uint8_t *wr = wg + g * l.stride;
		for (int32_t c0 = 0; c0 < n; c0 += C) {
			int32_t nc = min(n - c0, C); // the same in every lane
			const uint8_t *xc = x + c0 * xb;
			float acc[R][C];
#pragma unroll
			for (int i = 0; i < R; i++)
#pragma unroll
				for (int j = 0; j < C; j++) acc[i][j] = 0.0f;
			if (A == MV8_AHEAD) {
				Mv8Unit<P, R, C> t0, t1;
				int32_t u = lane, k = 0;
				const int32_t chunks = (units + 31) / 32;
				const bool pf = PF && c0 == 0; // the later passes find the rows in the caches
				auto prefetch = [&](int32_t kk) { // chunk kk of the pass's rows that exist
					if (pf && kk < chunks) pk_prefetch_lines<P, R>(wr, l, min(nr, R), lane, kk);
				};
				if (pf) pk_prefetch_start<P, R>(wr, l, min(nr, R), lane, 1, chunks);
				if (u < units) mv8_issue<P, R, C>(t0, wr, l, lane, u, k, nr, xc, xb, nc);
#pragma unroll 1
				while (u < units) {
					prefetch(k + 1 + MV_PREFETCH);
					if (u + 32 < units) mv8_issue<P, R, C>(t1, wr, l, lane, u + 32, k + 1, nr, xc, xb, nc);
					mv8_fold<P, R, C>(acc, t0);
					u += 32, k++;
					if (u >= units) break;
					prefetch(k + 1 + MV_PREFETCH);
					if (u + 32 < units) mv8_issue<P, R, C>(t0, wr, l, lane, u + 32, k + 1, nr, xc, xb, nc);
					mv8_fold<P, R, C>(acc, t1);
					u += 32, k++;
				}
			} else if (A == MV8_AHEAD3) {
				// MV8_AHEAD's loop with a third buffer, written out rather than shared with it:
				// the megakernel's bf16 body is MV8_AHEAD, and its allocation at 255 registers
				// moves with any change to the code (one loop for both forms took its sm_90
				// spills from 996 to 1 240 bytes stored)
				Mv8Unit<P, R, C> t0, t1, t2;
				int32_t u = lane, k = 0;
				const int32_t chunks = (units + 31) / 32;
				const bool pf = PF && c0 == 0;
				auto prefetch = [&](int32_t kk) {
					if (pf && kk < chunks) pk_prefetch_lines<P, R>(wr, l, min(nr, R), lane, kk);
				};
				if (pf) pk_prefetch_start<P, R>(wr, l, min(nr, R), lane, 1, chunks);
				if (u < units) mv8_issue<P, R, C>(t0, wr, l, lane, u, k, nr, xc, xb, nc);
				if (u + 32 < units) mv8_issue<P, R, C>(t1, wr, l, lane, u + 32, k + 1, nr, xc, xb, nc);
				// each step issues unit k + 2 into the buffer unit k − 1 left, then folds unit k
#pragma unroll 1
				while (u < units) {
					prefetch(k + 1 + MV_PREFETCH);
					if (u + 64 < units) mv8_issue<P, R, C>(t2, wr, l, lane, u + 64, k + 2, nr, xc, xb, nc);
					mv8_fold<P, R, C>(acc, t0);
					u += 32, k++;
					if (u >= units) break;
					prefetch(k + 1 + MV_PREFETCH);
					if (u + 64 < units) mv8_issue<P, R, C>(t0, wr, l, lane, u + 64, k + 2, nr, xc, xb, nc);
					mv8_fold<P, R, C>(acc, t1);
					u += 32, k++;
					if (u >= units) break;
					prefetch(k + 1 + MV_PREFETCH);
					if (u + 64 < units) mv8_issue<P, R, C>(t1, wr, l, lane, u + 64, k + 2, nr, xc, xb, nc);
					mv8_fold<P, R, C>(acc, t2);
					u += 32, k++;
				}
			} else if (A == MV8_CLAMPED) {
				int32_t k = 0;
#pragma unroll 1
				for (int32_t u = lane; u < units; u += 32, k++) {
					typename P::W wu[R];
#pragma unroll
					for (int i = 0; i < R; i++) wu[i] = P::load(wr + (i < nr ? i : nr - 1) * l.stride, l, lane, u, k);
#pragma unroll
					for (int j = 0; j < C; j++) {
						typename P::X xj = P::xload(wu[0], xc + (j < nc ? j : nc - 1) * xb, u);
#pragma unroll
						for (int i = 0; i < R; i++) acc[i][j] = P::apply(acc[i][j], wu[i], xj);
					}
				}
			} else {
				int32_t k = 0;
#pragma unroll 1
				for (int32_t u = lane; u < units; u += 32, k++) {
					typename P::W wu[R];
#pragma unroll
					for (int i = 0; i < R; i++)
						if (i < nr) wu[i] = P::load(wr + i * l.stride, l, lane, u, k);
#pragma unroll
					for (int j = 0; j < C; j++) {
						if (j < nc) {
							typename P::X xj = P::xload(wu[0], xc + j * xb, u);
#pragma unroll
							for (int i = 0; i < R; i++)
								if (i < nr) acc[i][j] = P::apply(acc[i][j], wu[i], xj);
						}
					}
				}
			}
			mv8_store<R, C>(acc, lane, y, rows, r0, c0, nr, nc, add_y);
		}
	}
}

// MV8_MMA_WARPS is the warps of a block of matvec8's MMA form (kernels.MatVec8Warps).
#define MV8_MMA_WARPS 4

// Mv8MmaStage is the shared memory of matvec8's MMA form over a chunk (units 32k … 32k+31).
// Its layouts let a warp read two or four units' values with one 16-byte load a lane and meet
// no bank conflict, in the copies or the reads:
//   - the eight columns' activations, two buffers taken in turn: unit u's quants of column j
//     at [u][j] (x_pack's two 16-byte halves, in lo and hi: rows of 9 vectors) and its d_x in
//     dx[column pair j/2][u][j mod 2] (pair rows of 68 floats);
//   - each warp's G rows of the chunk: row r's 16-byte plane pieces (MMA_SEGS a unit) split in
//     8-byte halves, half h of piece m of unit u at byte 544m + 272h + 8u of the row (rows 1088
//     bytes apart), so that a lane's 8 bytes of units u and u + 1 are one vector; and the rows'
//     d as floats (rows of 36).
template <int G> struct Mv8MmaStage {
	uint4 lo[2][32][9];
	uint4 hi[2][32][9];
	float dx[2][4][68];
	uint2 w[MV8_MMA_WARPS][G][136];
	float wd[MV8_MMA_WARPS][G][36];
};

// mma_s8 is one mma.m8n8k16 of signed bytes: (d0, d1) = (c0, c1) + the lane's two elements of
// A·B, with A's and B's fragments in a and b (the PTX ISA's layout: lane 4g + t holds
// A[g][4t … 4t+3], B[4t … 4t+3][g] and D[g][2t], D[g][2t+1]). Exact: int32 sums, in any order
// the same. The tensor cores' instruction on sm_75 and later; elsewhere (the host builds of the
// sources) the same products gathered with shuffles. Every lane of the warp must call it.
__device__ __forceinline__ void mma_s8(int32_t &d0, int32_t &d1, uint32_t a, uint32_t b, int32_t c0, int32_t c1, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
	(void)lane;
	asm("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%4, %5};"
	    : "=r"(d0), "=r"(d1)
	    : "r"(a), "r"(b), "r"(c0), "r"(c1));
#else
	const unsigned full = 0xffffffffu;
	const int g = lane >> 2, t = lane & 3;
	int32_t s0 = c0, s1 = c1;
	for (int q = 0; q < 4; q++) { // k = 4q … 4q+3: A[g][k] from lane 4g + q, B[k][col] from lane 4col + q
		uint32_t av = __shfl_sync(full, a, 4 * g + q);
		uint32_t b0 = __shfl_sync(full, b, 4 * (2 * t) + q), b1 = __shfl_sync(full, b, 4 * (2 * t + 1) + q);
		for (int i = 0; i < 4; i++) {
			int32_t x = (int8_t)(av >> (8 * i));
			s0 += x * (int8_t)(b0 >> (8 * i));
			s1 += x * (int8_t)(b1 >> (8 * i));
		}
	}
	d0 = s0, d1 = s1;
#endif
}

// mv8_tree_step is the warp butterfly's step at offset OFF over 32 lanes' accumulators held by
// one thread: lane v's value plus lane v + OFF's, for v < OFF (its offsets constant, so that the
// accumulators stay in registers).
template <int OFF> static __device__ __forceinline__ void mv8_tree_step(float (&a)[32][2]) {
#pragma unroll
	for (int v = 0; v < OFF; v++) a[v][0] = __fadd_rn(a[v][0], a[v + OFF][0]), a[v][1] = __fadd_rn(a[v][1], a[v + OFF][1]);
}

// matvec8_mma is matvec8 of q8_0 and q4_0 on the integer tensor cores (a unit's 32 quants as
// int8s: P::mma_a — q8_0's bytes, q4_0's nibbles less 8). A warp owns G ≤ 4 rows, blocks of
// MV8_MMA_WARPS warps (matvec8's grid of G rows a warp); columns go in passes of eight. Chunk k
// of a pass: the block copies the columns' activations of units 32k … 32k+31 to shared memory
// (one of two buffers: the next chunk's copy overlaps this one's folds), each warp stores its
// rows' chunk, loaded into registers while the chunk before was folded, to its own tile, and
// loads the next chunk's; then, unit by unit, two mma.m8n8k16 give the integer sums S of the
// unit for the G rows and eight columns (rows of A: the warp's rows, a row past G zeros; B:
// the columns; a lane with t = lane mod 4 supplies the
// unit's bytes 8t … 8t+3 to the first and 8t+4 … 8t+7 to the second: any split of the 32
// products between the two is the same integer), and lane 4g + t folds S of row g and columns
// 2t, 2t+1 as the format's apply does, fma(float32(S), d·d_x, acc), into the accumulator of unit
// 32k + u's lane u of the contract. With all 32 of a row's lanes' accumulators in one thread,
// the warp's butterfly is a sum in registers in the same tree: at each step (offsets 16, 8, 4,
// 2, 1) a[v] = a[v] + a[v + off] for v < off — lane v's own value and lane v ^ off's, the
// butterfly's operands in its order — leaving lane 0's total in a[0]. The bits are the
// one-column kernel's: the same units in the same order into the same accumulators, the same
// products and sums in the same tree.
template <typename P, typename F, int G, bool PF>
static __device__ __forceinline__ void matvec8_mma(const Grid &gr, const uint8_t *RESTRICT w, const uint8_t *RESTRICT x,
                                                   float *RESTRICT y, int32_t rows, int32_t cols, int32_t n,
                                                   int32_t add_y) {
	static_assert(G >= 1 && G <= 4, "a warp's rows are at most 4: rows 4 … 7 of A are zeros");
	static_assert(P::PW0 == 16 * P::MMA_SEGS && P::PW1 == 0, "the MMA form's formats: one plane of whole 16-byte pieces");
	const int C = 8, S = C / MV8_MMA_WARPS; // a thread copies S columns' unit of each chunk
	Mv8MmaStage<G> &sh = grid_shared<Mv8MmaStage<G>>(gr);
	const int tid = (int)gr.tid, lane = tid & 31, wi = tid >> 5;
	const int g = lane >> 2, t = lane & 3; // the lane's row of A and D (and column of B), its share of k
	const int32_t r0 = (gr.bx * MV8_MMA_WARPS + wi) * G;
	const int32_t nr = rows - r0; // the warp's rows (≤ 0: none; it still copies and meets)
	PkLayout l = P::layout(cols);
	const int64_t xb = F::act_bytes(cols);
	const int32_t units = cols / F::UNIT, chunks = (units + 31) / 32;
	// a lane loads, of each chunk: unit 32k + lane's MMA_SEGS 16-byte plane pieces of each row,
	// and lanes 4r … 4r+3 row r's 32 fp16 d, 8 each
	const uint8_t *wr = w + (int64_t)(nr > 0 ? r0 : 0) * l.stride;
	auto row_of = [&](int i) { return wr + (int64_t)(i < nr ? i : max(nr - 1, 0)) * l.stride; };
	struct Regs {
		uint4 q[G][P::MMA_SEGS], d;
	} ra, rb; // two chunks' weights in flight, taken in turn
	auto load = [&](Regs &r, int32_t k) { // chunk k's weights into r
		if (nr <= 0 || k >= chunks) return;
		// unguarded: a row's plane holds whole chunks (repack pads each lane's stream to them)
		// and its d of a chunk past its last unit are bytes of the row; what a unit past the
		// last brings is never folded
#pragma unroll
		for (int i = 0; i < G; i++) {
			const uint8_t *p = row_of(i) + l.plane0 + 512 * P::MMA_SEGS * (int64_t)k + 16 * lane;
#pragma unroll
			for (int m = 0; m < P::MMA_SEGS; m++) r.q[i][m] = *(const uint4 *)(p + 512 * m);
		}
		if (lane < 4 * G) r.d = *(const uint4 *)(row_of(lane >> 2) + 64 * (int64_t)k + 16 * (lane & 3));
	};
	auto store = [&](const Regs &r) { // r into the warp's tile
		if (nr <= 0) return;
#pragma unroll
		for (int i = 0; i < G; i++) {
#pragma unroll
			for (int m = 0; m < P::MMA_SEGS; m++) {
				sh.w[wi][i][68 * m + lane] = make_uint2(r.q[i][m].x, r.q[i][m].y);
				sh.w[wi][i][68 * m + 34 + lane] = make_uint2(r.q[i][m].z, r.q[i][m].w);
			}
		}
		if (lane < 4 * G) {
			const uint32_t h[4] = {r.d.x, r.d.y, r.d.z, r.d.w};
			float f[8];
#pragma unroll
			for (int m = 0; m < 4; m++) f[2 * m] = f16_to_f32((uint16_t)h[m]), f[2 * m + 1] = f16_to_f32((uint16_t)(h[m] >> 16));
			float *o = &sh.wd[wi][lane >> 2][8 * (lane & 3)];
			*(float4 *)o = make_float4(f[0], f[1], f[2], f[3]);
			*(float4 *)(o + 4) = make_float4(f[4], f[5], f[6], f[7]);
		}
	};
	// the block's copy of the columns' activations: thread (warp wi, lane) copies unit 32k + lane
	// of columns wi + MV8_MMA_WARPS·c; a column past the pass's last or a unit past the row's
	// is stored as zeros, so that every byte an mma reads was written
	typename P::X a[S];
	int32_t nc = 0;
	const uint8_t *xc = x;
	auto fetch = [&](int32_t k) {
#pragma unroll
		for (int c = 0; c < S; c++)
			if (wi + MV8_MMA_WARPS * c < nc && 32 * k + lane < units) a[c] = P::xat(xc + (wi + MV8_MMA_WARPS * c) * xb, 32 * k + lane);
	};
	auto put = [&](int b, int32_t k) {
#pragma unroll
		for (int c = 0; c < S; c++) {
			int j = wi + MV8_MMA_WARPS * c;
			float *dx = &sh.dx[b][j >> 1][2 * lane + (j & 1)];
			if (j < nc && 32 * k + lane < units) {
				x_pack(a[c].a, &sh.lo[b][lane][j], &sh.hi[b][lane][j]);
				*dx = a[c].d;
			} else {
				sh.lo[b][lane][j] = sh.hi[b][lane][j] = make_uint4(0, 0, 0, 0);
				*dx = 0.0f;
			}
		}
	};
	for (int32_t c0 = 0; c0 < n; c0 += C) {
		nc = min(n - c0, C);
		xc = x + c0 * xb;
		float acc[32][2];
#pragma unroll
		for (int v = 0; v < 32; v++) acc[v][0] = acc[v][1] = 0.0f;
		// step k: chunk k's weights (in cur since step k − 2) go to the warp's tile and chunk
		// k + 2's load into cur; chunk k + 1's activations are fetched, then, after chunk k's
		// fold, copied to the other buffer. Steps −2 and −1 fill the pipeline: every step moves
		// one chunk of each.
		auto step = [&](Regs &cur, int32_t k) {
			const int b = k & 1;
			__syncwarp(); // the warp's folds of chunk k − 1 have read its tile
			if (k >= 0) store(cur);
			load(cur, k + 2);
			const bool next = k + 1 >= 0 && k + 1 < chunks; // a chunk k + 1 to copy
			if (next) fetch(k + 1);
			grid_sync(gr); // chunk k's activations (and the warp's tile) are written
			if (nr > 0 && k >= 0) {
				// the lane's fragments: row g's bytes 8t … 8t+7 of a unit (P::mma_a of the 8
				// bytes at mma_off(t) of piece mma_piece(t)), column g's likewise (t < 2: the
				// first half's, else the second's), d of row g, d_x of columns 2t and 2t+1; the
				// weights and d_x of two units, d of four, a load
				const uint8_t *wa = (const uint8_t *)&sh.w[wi][g % G][0] + 544 * P::mma_piece(t) + 272 * (P::mma_off(t) >> 3);
				const uint8_t *xa = (const uint8_t *)(t < 2 ? &sh.lo[b][0][g] : &sh.hi[b][0][g]) + 8 * (t & 1);
				const float *wd = &sh.wd[wi][g % G][0];
				const float *dxp = &sh.dx[b][t][0];
				const int32_t left = units - 32 * k; // units of the chunk (the same in every lane)
				// every lane runs every unit's mma (they need the whole warp, converged); the
				// folds of units past the row's last are left out
				uint4 a2 = make_uint4(0, 0, 0, 0);
				float4 dw4 = make_float4(0, 0, 0, 0), dx2 = dw4;
#pragma unroll
				for (int u = 0; u < 32; u++) {
					if (u % 2 == 0) {
						a2 = *(const uint4 *)(wa + 8 * u); // rows past G: row g mod G again, zeroed below
						dx2 = *(const float4 *)(dxp + 2 * u);
					}
					if (u % 4 == 0) dw4 = *(const float4 *)(wd + u);
					uint2 av = P::mma_a(u % 2 == 0 ? make_uint2(a2.x, a2.y) : make_uint2(a2.z, a2.w), t);
					if (g >= G) av = make_uint2(0, 0);
					uint2 bv = *(const uint2 *)(xa + 144 * u);
					int32_t s0, s1;
					mma_s8(s0, s1, av.x, bv.x, 0, 0, lane);
					mma_s8(s0, s1, av.y, bv.y, s0, s1, lane);
					if (u < left) {
						const float dw = u % 4 == 0 ? dw4.x : u % 4 == 1 ? dw4.y : u % 4 == 2 ? dw4.z : dw4.w;
						const float dx0 = u % 2 == 0 ? dx2.x : dx2.z, dx1 = u % 2 == 0 ? dx2.y : dx2.w;
						acc[u][0] = __fmaf_rn(__int2float_rn(s0), __fmul_rn(dw, dx0), acc[u][0]);
						acc[u][1] = __fmaf_rn(__int2float_rn(s1), __fmul_rn(dw, dx1), acc[u][1]);
					}
				}
			}
			if (next) put(b ^ 1, k + 1);
		};
#pragma unroll 1
		for (int32_t k = -2; k < chunks; k += 2) {
			step(ra, k);
			if (k + 1 >= chunks) break;
			step(rb, k + 1);
		}
		// the butterfly's tree over the 32 lanes' accumulators, in registers
		mv8_tree_step<16>(acc);
		mv8_tree_step<8>(acc);
		mv8_tree_step<4>(acc);
		mv8_tree_step<2>(acc);
		mv8_tree_step<1>(acc);
		if (g < G && g < nr) {
#pragma unroll
			for (int e = 0; e < 2; e++) {
				int j = 2 * t + e;
				if (j < nc) {
					float *yp = y + (int64_t)(c0 + j) * rows + r0 + g;
					*yp = add_y ? __fadd_rn(*yp, acc[0][e]) : acc[0][e];
				}
			}
		}
		grid_sync(gr); // the next pass's first copy overwrites buffer 0
	}
}

// mv8_run runs matvec8 in form A; the staged form, which only the quantised formats have, is
// its own function (the tag picks the overload, so a float format never instantiates it).
template <int A> struct Mv8Form {};
template <typename P, typename F, int G, int R, bool PF, int A>
static __device__ __forceinline__ void mv8_run(Mv8Form<A>, const Grid &gr, const uint8_t *RESTRICT w, const uint8_t *RESTRICT x,
                                               float *RESTRICT y, int32_t rows, int32_t cols, int32_t n, int32_t add_y) {
	matvec8<P, F, G, R, A, PF>(gr, w, x, y, rows, cols, n, add_y);
}
template <typename P, typename F, int G, int R, bool PF>
static __device__ __forceinline__ void mv8_run(Mv8Form<MV8_STAGED>, const Grid &gr, const uint8_t *RESTRICT w,
                                               const uint8_t *RESTRICT x, float *RESTRICT y, int32_t rows, int32_t cols,
                                               int32_t n, int32_t add_y) {
	matvec8_staged<P, F, G, PF>(gr, w, x, y, rows, cols, n, add_y);
}
template <typename P, typename F, int G, int R, bool PF>
static __device__ __forceinline__ void mv8_run(Mv8Form<MV8_STAGED1>, const Grid &gr, const uint8_t *RESTRICT w,
                                               const uint8_t *RESTRICT x, float *RESTRICT y, int32_t rows, int32_t cols,
                                               int32_t n, int32_t add_y) {
	matvec8_staged<P, F, G, PF>(gr, w, x, y, rows, cols, n, add_y);
}

template <typename P, typename F, int G, int R, bool PF>
static __device__ __forceinline__ void mv8_run(Mv8Form<MV8_MMA>, const Grid &gr, const uint8_t *RESTRICT w,
                                               const uint8_t *RESTRICT x, float *RESTRICT y, int32_t rows, int32_t cols,
                                               int32_t n, int32_t add_y) {
	matvec8_mma<P, F, G, PF>(gr, w, x, y, rows, cols, n, add_y);
}

// MV8_MMA_FORM is MV8_MMA where the integer tensor cores are (sm_75 and later), else
// MV8_GUARDED (the K80's cubin), over the same grid.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750
#define MV8_MMA_FORM MV8_GUARDED
#define MV8_ENTRY_MV8_MMA_FORM(name, params, ...) ENTRY(name, params, __VA_ARGS__)
#else
#define MV8_MMA_FORM MV8_MMA
#define MV8_ENTRY_MV8_MMA_FORM(name, params, ...) \
	ENTRY_SHARED_BOUNDS(name, Mv8MmaStage<MV8_MMA_ROWS>, __launch_bounds__(MV8_MMA_WARPS * 32), params, __VA_ARGS__)
#endif
// MV8_MMA_ROWS is G of the MMA form's MATVEC line (the rows of its tile).
#define MV8_MMA_ROWS 4

// MATVEC(suffix, P, F, AH, B, PF1, G, A, PF, M, MA): matvec's units in flight a lane (AH),
// resident blocks an SM asked of ptxas (B, MV1_BOUNDS) and whether it asks the L2 for its row
// MV_PREFETCH chunks ahead (PF1), matvec8's geometry and forms per weight format, chosen by the
// static model (device/perf) at ffn_up and ffn_down of n = 1 and n = 8: the prefetch only
// where it pays for the registers it holds. A warp owns G rows (kernels.MatVec8Rows: the
// grid); the standalone kernel folds all G in one pass over the weights in form A, asking the
// L2 for them ahead where PF is 1; the megakernel, whose every body must fit its register
// budget, folds M of them a pass (G/M passes, the same grid) in form MA. The quantised formats
// but q5_1 and q8_0 keep one unit in flight a lane on one column: on rows of 2048 values (two
// units a lane) a deeper pipeline's first loads are most of a warp's pass, and the registers
// it frees are warps (q4_K's ffn_up 43 → 64 % of the floor for ffn_down's 65 → 54). f16 and f32 take
// MV8_AHEAD3 on their own (234–240 registers: 4 warps an SM at ffn_down are then enough for
// the DRAM latency); bf16 keeps MV8_AHEAD in both, because the static model prices a
// megakernel body with its standalone entry's SASS and the megakernel cannot hold a third
// buffer in its bf16 body (its sm_90 spills grow 996 → 1 660 bytes, inside the matvec loop).
// q8_0 and q4_0 take the MMA form (MV8_MMA_FORM, four rows a warp), the megakernel its guarded
// form a row a pass: the tensor cores' fragments and tile are a block's shared memory, which a
// megakernel body with it holds its thread block alone to use.
#ifdef MEGAKERNEL
#define MV1_AHEAD(AH) 2
#define MV8_PASS(G, M) M
#define MV8_FORM(A, MA) MA
#else
#define MV1_AHEAD(AH) AH
#define MV8_PASS(G, M) G
#define MV8_FORM(A, MA) A
#endif

// MV8_ENTRY_<form>: the entry of a matvec8 in that form (pasted from the MATVEC line's A; the
// staged form's block shares an Mv8Stage, and its launch bounds keep
// MV8_STAGED_BLOCKS blocks resident on an SM: registers ≤ 64 K / (32 · MV8_STAGED_WARPS ·
// MV8_STAGED_BLOCKS)).
#define MV8_STAGED_BLOCKS 2
#define MV8_ENTRY_MV8_GUARDED(name, params, ...) ENTRY(name, params, __VA_ARGS__)
#define MV8_ENTRY_MV8_CLAMPED(name, params, ...) ENTRY(name, params, __VA_ARGS__)
#define MV8_ENTRY_MV8_AHEAD(name, params, ...) ENTRY(name, params, __VA_ARGS__)
#define MV8_ENTRY_MV8_AHEAD3(name, params, ...) ENTRY(name, params, __VA_ARGS__)
#define MV8_ENTRY_MV8_STAGED(name, params, ...) \
	ENTRY_SHARED_BOUNDS(name, Mv8Stage, __launch_bounds__(MV8_STAGED_WARPS * 32, MV8_STAGED_BLOCKS), params, __VA_ARGS__)
#define MV8_ENTRY_MV8_STAGED1(name, params, ...) \
	ENTRY_SHARED_BOUNDS(name, Mv8Stage, __launch_bounds__(MV8_STAGED_WARPS * 32, 1), params, __VA_ARGS__)

// MV1_BOUNDS_<B>: the launch bounds of a matvec entry whose MATVEC line asks for B resident
// blocks of 128 threads an SM (0: none, ptxas's choice of registers), so that ptxas keeps
// registers ≤ 64 K / (128 · B).
#define MV1_BOUNDS_0
#define MV1_BOUNDS_6 __launch_bounds__(128, 6)
#define MATVEC(suffix, P, F, AH, B, PF1, G, A, PF, M, MA)                                                                                \
	__device__ __forceinline__ void matvec_##suffix##_body(const Grid &gr, const uint8_t *RESTRICT w,   \
	                                                              const uint8_t *RESTRICT x,                  \
	                                                              float *RESTRICT y, int32_t rows,            \
	                                                              int32_t cols, int32_t n, int32_t add_y) {       \
		matvec<P, F, MV1_AHEAD(AH), PF1>(gr, w, x, y, rows, cols, n, add_y);                                                             \
	}                                                                                                           \
	__device__ __forceinline__ void matvec8_##suffix##_body(const Grid &gr, const uint8_t *RESTRICT w,  \
	                                                               const uint8_t *RESTRICT x,                 \
	                                                               float *RESTRICT y, int32_t rows,           \
	                                                               int32_t cols, int32_t n, int32_t add_y) {      \
		mv8_run<P, F, G, MV8_PASS(G, M), PF>(Mv8Form<MV8_FORM(A, MA)>(), gr, w, x, y, rows, cols, n, add_y);                                                      \
	}                                                                                                           \
	ENTRY_BOUNDS(matvec_##suffix, MV1_BOUNDS_##B,                                                                                      \
	      (const uint8_t *RESTRICT w, const uint8_t *RESTRICT x, float *RESTRICT y, int32_t rows,   \
	       int32_t cols, int32_t n, int32_t add_y),                                                               \
	      w, x, y, rows, cols, n, add_y)                                                                               \
	MV8_ENTRY_##A(matvec8_##suffix,                                                                                     \
	      (const uint8_t *RESTRICT w, const uint8_t *RESTRICT x, float *RESTRICT y, int32_t rows,   \
	       int32_t cols, int32_t n, int32_t add_y),                                                               \
	      w, x, y, rows, cols, n, add_y)

MATVEC(f32_f32, PkF32, FmtF32, 4, 0, 0, 4, MV8_AHEAD3, 0, 2, MV8_GUARDED)
MATVEC(f16_f16, PkF16, FmtF16, 3, 0, 0, 4, MV8_AHEAD3, 0, 1, MV8_GUARDED)
MATVEC(bf16_bf16, PkBF16, FmtBF16, 3, 0, 0, 4, MV8_AHEAD, 0, 4, MV8_AHEAD)
MATVEC(q4_0_q8_0, PkQ4_0, FmtQ4_0, 1, 0, 1, MV8_MMA_ROWS, MV8_MMA_FORM, 0, 1, MV8_GUARDED)
MATVEC(q4_1_q8_1, PkQ4_1, FmtQ4_1, 1, 0, 1, 2, MV8_STAGED, 0, 2, MV8_GUARDED)
MATVEC(q5_0_q8_0, PkQ5_0, FmtQ5_0, 1, 0, 0, 1, MV8_STAGED, 0, 1, MV8_GUARDED)
MATVEC(q5_1_q8_1, PkQ5_1, FmtQ5_1, 2, 0, 1, 2, MV8_STAGED, 1, 2, MV8_GUARDED)
MATVEC(q8_0_q8_0, PkQ8_0, FmtQ8_0, 2, 0, 0, MV8_MMA_ROWS, MV8_MMA_FORM, 0, 1, MV8_GUARDED)
MATVEC(q2_K_q8_K, PkQ2_K, FmtQ2_K, 1, 0, 0, 2, MV8_STAGED, 1, 1, MV8_GUARDED)
MATVEC(q3_K_q8_K, PkQ3_K, FmtQ3_K, 1, 6, 0, 2, MV8_STAGED, 1, 1, MV8_GUARDED)
MATVEC(q4_K_q8_K, PkQ4_K, FmtQ4_K, 1, 6, 0, 2, MV8_STAGED, 0, 1, MV8_GUARDED)
MATVEC(q5_K_q8_K, PkQ5_K, FmtQ5_K, 1, 0, 0, 2, MV8_STAGED1, 1, 1, MV8_GUARDED)
MATVEC(q6_K_q8_K, PkQ6_K, FmtQ6_K, 1, 0, 1, 2, MV8_STAGED1, 1, 1, MV8_GUARDED)
