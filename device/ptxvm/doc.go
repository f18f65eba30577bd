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
// A launch runs its blocks on Config.Workers goroutines (results never depend on how many);
// a block's threads form 32-lane warps that execute in lock-step. Each lane has its own PC:
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
