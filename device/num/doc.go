// Package num is the arithmetic contract shared by every bit-exact kernel and its CPU twin.
//
// Kernels and twins use only operations IEEE 754 defines exactly: float32 add, sub, mul, fma,
// div and sqrt rounded to nearest even, conversions with explicit rounding, and integer
// arithmetic. Everything else — exp, sigmoid, softplus, silu — is a software routine written
// from those operations, identically in CUDA and here.
//
// Go lets the compiler fuse x*y + z into one FMA (and does so on arm64, and on amd64 with
// GOAMD64=v3), which rounds once instead of twice. Twin code therefore never writes a bare
// a*b + c on float32 values: it writes float32(a*b) + c when two roundings are meant, and
// FMA32(a, b, c) when one is.
package num
