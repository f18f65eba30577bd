// Package device is the seam between host code and compute.
//
// A Backend owns memory (addressed by Ptr, as a GPU would be) and launches kernels. A kernel
// is described once, by a Kernel[A] spec: its PTX entry and module, its launch geometry as a
// function of its argument struct A, and its twin — the Go function that computes the same
// bits on the CPU. The CPU backend (device/cpu) launches twins; the CUDA backend launches the
// PTX entry; a conformance suite compares any backend against the twins bit for bit.
//
// Argument structs are flat: their exported fields, in order, are the kernel's PTX parameters.
// Ptr, int64 and uint64 fields are 64-bit parameters; int32, uint32 and float32 fields are
// 32-bit ones. Every parameter is passed in its own 8-byte slot (see Params).
//
// The arithmetic contract every bit-exact kernel and twin follows is in package device/num;
// each kernel file states its reduction order in words.
package device
