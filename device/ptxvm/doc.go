// Package ptxvm interprets PTX on the CPU, so that the committed CUDA kernels themselves —
// not only their Go twins — are checked on every machine, GPU or not.
//
// Because bit-exact kernels use only operations IEEE 754 defines exactly (see device/num),
// an interpreter that implements those operations exactly reproduces the GPU's bits. Backend
// is a device.Backend whose Launch runs a kernel spec's PTX entry (from package ptx) in the
// interpreter over the CPU backend's memory model; device/devicetest compares it with the
// twins bit for bit.
//
// # Execution model
//
// A launch runs its blocks on Config.Workers goroutines (results never depend on how many),
// every global store visible to every block at once (the weak-memory mode below is the
// exception); a block's threads form 32-lane warps that execute in lock-step. Each lane has its own PC:
// a warp issues the instruction at the lowest PC among its runnable lanes, for all lanes at
// that PC, which reconverges structured control flow where the paths join. A
// warp-synchronous instruction (shfl.sync, vote.sync, bar.warp.sync …) waits, as on sm_70
// and later, until every live lane of its member mask has reached it. Warps of a block
// take turns (a few thousand instructions each) and meet at barriers; a thread that exits
// counts as arrived. Shared memory is per block and starts zeroed, local memory per thread,
// and global memory is a Memory: a set of allocations, every access bounds-checked against
// one of them and required to be naturally aligned. Module-scope .global and .const
// variables live in the module and persist across launches. Generic addresses of shared and
// local memory lie in windows of their own (cvta converts).
//
// # Arithmetic
//
// Float instructions round exactly as IEEE 754 says in every mode PTX names (.rn, .rz, .rm,
// .rp; directed modes through math/big), keep subnormals unless an instruction says .ftz,
// and return NVIDIA's canonical NaN (0x7fffffff, 0x7fff for f16/bf16 results) for every NaN
// result (for f64 this package uses 0x7fffffffffffffff; no GPU has confirmed it). A bare
// add/sub/mul.f32 runs as .rn although ptxas may contract such a pair; the ptx package's
// tests keep them out of bit-exact kernels. Approximate instructions (.approx, div.full, ex2,
// lg2, sin, cos, tanh, rsqrt) are refused, and float atomics are refused unless
// Config.AllowFloatAtomics is set, because their results depend on the hardware or on
// thread order.
//
// # Errors
//
// Load reports PTX it cannot run — an unknown instruction, modifier, directive or register —
// as a SyntaxError with its line. A running kernel stops at the first fault of its lowest
// failing block with an ExecError naming the kernel, block, thread, line, instruction and
// address: an access outside every allocation (with the distance past the nearest one), a
// store to read-only (uploaded) data, a misaligned access, integer division by zero, a shfl
// reading a lane that is not executing it, member lanes of a warp-synchronous instruction
// waiting at a different one, or a shared-memory race (two warps touching the same byte between two
// barriers, at least one of them storing; Config.NoRaceCheck turns the check off). A block
// that cannot finish — a barrier deadlock, or more than Config.MaxSteps warp instructions —
// gives a StallError listing where each warp's lanes are.
//
// # Weak-memory mode
//
// Config.Weak runs launches as a test of their memory ordering. A persistent kernel whose
// blocks hand data to each other is only correct if every hand-off is a release and an
// acquire the PTX memory model honours; a coherent interpreter cannot tell. In this mode:
//
// Scheduling. A launch runs on one goroutine with Workers blocks resident, started in a
// seeded random order of the grid. Each turn a seeded choice of resident block runs 1 to
// 16384 warp instructions (log-uniformly), its warps taking turns of seeded lengths; a turn
// ends early at nanosleep and, a quarter of the time, after a global memory instruction or
// a fence. The same Weak.Seed, launch and Workers give the same run, bit for bit and fault for
// fault (Backend mixes its launch count into the seed).
//
// Agents and scopes. A warp is one thread of the model (its lanes act together, in program
// order). .cta and .cluster scopes are the block (launches have one-block clusters), .gpu
// and .sys the launch (one device, no host threads). membar.cta/gl/sys is fence.sc at scope
// cta/gpu/sys; ld/st.volatile and .mmio are .relaxed.sys; atom and red are .relaxed.gpu
// unless they say otherwise.
//
// Stores. A plain store (st, st.weak, or a strong st of .cta scope) waits in its block's
// store buffer (per 4-byte word). A release by a warp of the block — fence.sc, fence.acq_rel
// or fence.release at gpu scope, or an st, red or atom .release/.acq_rel at gpu scope —
// commits the buffered stores it covers: the warp's own, and those of other warps made before
// a barrier (bar.sync, barrier.sync, bar.arrive) the two later met at or a fence of theirs
// that preceded one of its own (a block's fences are ordered among themselves). The rest stay
// buffered. Buffers also drain at seeded moments, a random subset at a time, and completely
// when the block exits. A strong store at gpu scope, and every atomic, is committed at once;
// atomics read and write the latest committed value. Committed writes of a word are its
// coherence order; memory always holds the latest.
//
// Loads. A load of a word returns one of the committed values from the latest one the warp
// is guaranteed to see to the latest committed (its own block's buffered bytes over it, and
// never older than what the warp read before). A warp sees its own block's writes, and the
// writes its synchronisation orders before it: a strong write carries the writer's view (at
// the write if it releases, else at the warp's last release fence; an atomic adds the view of
// the write it replaced, continuing a release sequence), and an acquire joins the views of
// the writes it read into the reader's, together with those writes themselves: ld or atom
// .acquire/.acq_rel at gpu scope, or a strong load or atom followed by fence.sc, .acq_rel or
// .acquire at gpu scope (red forms no acquire pattern, weak loads none). fence.sc fences join
// each other's views in the order they run; barriers join the views of the warps that meet
// there. A plain load takes the oldest value it may; a strong one the latest half the time,
// else a random allowed one. ld.global.nc and ldu ignore all of this: the data must not change
// during the launch, and they may return any value the word held since it began (the value
// at launch, unless Weak.AllowStale).
//
// Stale reads. A plain or non-coherent load that returns a value older than one another block
// has committed or buffered to that word — a data race in the model's terms: the write is not
// ordered before the load — stops the launch with an ExecError wrapping ErrStaleRead that
// names both instructions. With Weak.AllowStale the load returns it (loads then pick any
// allowed value at random) and Stats.StaleReads counts it; litmus tests use this to see every
// outcome the model allows.
//
// Where the mode is stronger than PTX (outcomes PTX allows that it never produces): global
// memory is coherent within a block (a store is visible to the block's other warps at once;
// PTX orders them only through barriers and fences), and a warp's lanes are one thread; any
// fence, even .acq_rel, orders the block's warps among themselves as fence.sc would; strong
// stores are never delayed (a later load may still miss them); a warp that observes one byte
// of a word through a strong load observes the whole word; atomics of .cta scope are still
// atomic for other blocks; strong loads are not checked for races with plain stores. Not
// modelled: proxies (fence.proxy is a no-op), the async proxy (cp.async, mbarrier, TMA),
// clusters and distributed shared memory, the host, and shared memory (per block, coherent;
// its races are the race detector's). Write–write races are not reported (the later commit
// wins, and the results usually show it).
//
// # Supported PTX
//
// The module directives .version, .target, .address_size 64, .file, .loc, .section (skipped),
// .pragma; .visible/.extern/.weak .entry with .param lists and performance directives;
// module- and function-scope .global, .const, .shared (extern arrays are dynamic shared
// memory) and .local variables with alignment, arrays and numeric initialisers; .reg
// declarations including %r<N> ranges and nested { } scopes; labels; guards @%p and @!%p.
// Operands: registers, special registers (%tid, %ntid, %ctaid, %nctaid, %laneid, %warpid,
// %nwarpid, %lanemask_*, %dynamic_smem_size, %total_smem_size, %smid), immediates (decimal,
// hex, 0f/0d float bit patterns), variable addresses, [reg+off], [var+off] and vectors
// {a, b, …}. Instructions, one file per family:
//
//	ops_int.go    add sub mul mad (.lo .hi .wide .sat, .cc addc subc madc) mul24 mad24 sad div rem min max (.relu) abs neg
//	ops_float.go  add sub mul fma mad div sqrt rcp (.rn .rz .rm .rp .ftz .sat) min max (.NaN .xorsign.abs) abs neg copysign testp
//	ops_bits.go   and or xor not cnot shl shr bfe bfi prmt (all modes) popc clz brev bfind lop3 shf bmsk szext dp4a dp2a
//	ops_cmp.go    setp (all comparisons, .and .or .xor, p|q) set selp slct
//	ops_cvt.go    cvt (every integer width, int↔float, f16 bf16 f32 f64, .rni .rzi .rmi .rpi, .sat .relu .ftz, f16x2 bf16x2) cvta
//	ops_mov.go    mov (registers, immediates, special registers, addresses, vector pack and unpack)
//	ops_mem.go    ld ldu st (.v2 .v4, every state space, .nc and cache/ordering qualifiers) prefetch atom red
//	ops_warp.go   shfl.sync vote.sync redux.sync match.sync activemask bar.warp.sync bar/barrier (.sync .arrive, counts) membar fence
//	ops_ctrl.go   bra ret exit trap brkpt nanosleep (call is refused: device functions must be inlined)
//	ops_mma.go    mma.sync.aligned.m8n8k16 (the integer tensor-core product: s8/u8 operands, s32 sums)
//
// # Adding an instruction
//
// Write a builder, func(o *opcode, ins *inst) error, in the file of its family (or a new
// ops_<family>.go), and register it for its opcode names in that file's init. The builder
// consumes the modifiers it understands (o.has, o.oneOf, o.typ, o.rounding; any modifier
// left over is reported as unsupported), compiles its operands to register slots (o.dst,
// o.src, o.pred, o.addr, o.vec) and sets ins.fn, a closure that computes the instruction for
// the lanes of a mask: registers are 64-bit slots, 32 lanes each (w.s(slot)), holding a
// value in their low bits (every reader truncates to its own type; loads and conversions to
// signed types sign-extend). Control instructions set ins.ctl instead, and
// warp-synchronous ones set ins.ctl = ctlWarpReq with ins.member. Then add table cases to
// the family's _test.go file, checked against the instruction's definition.
package ptxvm
