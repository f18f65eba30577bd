// Package kernels holds one file per kernel family: the argument struct, the launch geometry,
// the Go twin that defines the kernel's bits, and the registration of its spec.
//
// # Conventions
//
// Activations are float32 rows, row-major: a buffer of n rows of width w holds row r at
// [r*w, (r+1)*w). A "row" is one token (or tree node) of a step; kernels treat rows
// independently, so a row's bits never depend on how many rows a step has (width
// invariance). A matrix with y = W·x is out rows of in values each, every row a whole number
// of blocks of its ggml type. Embedding tables and small weights (norms, conv taps) are read
// as GGUF stores them; the matvec and MoE kernels read matrices in the device layout of
// package repack (256-byte aligned rows, fp16 fields and scales in their own sections, quants
// in lane-interleaved planes), whose bytes map one to one onto the GGUF bytes: the layout
// changes where a kernel finds a value, never the arithmetic. A format's Dot, over GGUF bytes,
// defines the bits; the twins run its PackedDot over the device layout (tested equal to Dot),
// or restore a row's GGUF bytes (repack.Layout.UnpackRow) for a format without one.
//
// NaN: every NaN a kernel computes is the canonical NaN (num.NaNBits), the only one an NVIDIA
// GPU's float32 arithmetic produces; values a kernel only moves (gather, K/V store, state
// copies) keep their bits. Twins pass results of Go's float operators, which give the CPU's
// default NaN for Inf−Inf or Inf·0 and keep an operand NaN's payload, through num.Canon.
//
// # Matrix–vector products
//
// A matvec computes y[c][r] = Σ_i W[r][i]·x[c][i] for every row r of W and every column c
// (token) of x. Before the product, x is converted to the weight type's activation format —
// the format ggml's CPU backend converts to (its vec_dot_type): float32 for F32 weights, f16
// for F16, bf16 for BF16, Q8_0 blocks for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the
// K-quants. Quantised activations make each block's dot product an exact integer sum.
//
// Reduction order (the contract every matvec kernel and twin follows): a row is cut into
// units (a few consecutive values; each weight format defines its unit). Lane l of a 32-lane
// warp owns units l, l+32, l+64, … and folds them, in increasing order, into its float32
// accumulator acc_l (starting at +0) with the format's unit step. The 32 accumulators are
// then combined by num.WarpSum (xor butterfly 16, 8, 4, 2, 1). Every column uses exactly this
// order, so a multi-column launch gives each column the bits of a one-column launch. The CUDA
// kernels exploit that: a lane loads each weight unit once and folds it into up to MaxColumns
// columns (the nodes of a tree verify) before loading the next.
//
// # Grouped MoE
//
// MoEGateUp and MoEDown (moe.go) run a token's routed experts in two launches: gate, up and
// SwiGLU of all K experts in one, the down projections with the router-weighted sum and the
// gated shared expert in the other. Their bits are those of the unfused MoEMatVec, SwiGLU,
// MoEMatVec and MoECombine sequence, which stays registered as their reference.
package kernels
