// Package cuda is the device.Backend for NVIDIA GPUs, over the CUDA driver API
// (gorgonia.org/cu). It is compiled only with the build tag cuda; without it, Open returns
// device.ErrNotBuilt and Count returns 0, and the package needs neither cgo nor CUDA.
//
// A cuda-tagged binary links against libcuda.so.1 and initialises the driver before main
// (gorgonia.org/cu exits the process when cuInit fails), so it is for machines with a working
// GPU; the untagged build is the CPU fallback.
//
// Each open device has one goroutine, locked to its OS thread, that owns the device's
// context and makes every driver call. Kernels are the committed PTX of package ptx: a
// module is JIT-compiled on the first launch of one of its entries (the JIT's error and info
// logs are returned in the error when that fails), and functions are cached per entry. Every
// kernel parameter travels in its own 8-byte slot (device.Params), its value in the low
// bytes, from which the driver reads the size the PTX entry declares. Allocations are zeroed and 256-byte aligned; Upload
// copies (it never aliases host memory). Errors read "cuda: <op> <name>: <cause>".
package cuda
