// Package num is the arithmetic contract shared by every bit-exact kernel and its CPU twin.
//
// Kernels and twins use only operations IEEE 754 defines exactly: float32 add, sub, mul, fma,
// div and sqrt rounded to nearest even, conversions with explicit rounding, and integer
// arithmetic. Everything else — exp, log, sigmoid, softplus, silu — is a software routine written
// from those operations, identically in CUDA and here: each routine's doc comment lists its
// sequence step by step, and its constants are float32 bit patterns. Accuracy is measured against
// float64 over all 2^32 inputs (see the exhaustive tests); every routine here is faithful.
//
// Go lets the compiler fuse x*y + z into one FMA (and does so on arm64, and on amd64 with
// GOAMD64=v3), which rounds once instead of twice. Twin code therefore never writes a bare
// a*b + c on float32 values: it writes float32(a*b) + c (MulAdd32) when two roundings are meant,
// and FMA32(a, b, c) when one is.
//
// NaN: an NVIDIA GPU's float32 arithmetic returns only the canonical NaN 0x7fffffff (NaNBits),
// while x86 propagates payloads. Every routine here that can return a NaN returns the canonical
// one; plain Go float32 arithmetic does not, so twins compare NaN results as a class unless they
// go through these routines.
//
// Reduction order is part of the contract too: a warp reduces with an xor butterfly (WarpSum,
// WarpMax), after lane-strided accumulation (LaneSums, StridedSum, StridedMax).
package num
