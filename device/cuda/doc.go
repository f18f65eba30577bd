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
// logs are returned in the error when that fails), and functions are cached per entry. A
// Kepler GPU (compute capability 3.x), which cannot run that PTX, loads the module's cubin for
// its architecture instead: package ptx has sm_37 (K80) machine code. A kernel left out of a
// cubin gives device.ErrUnsupported naming the kernel, a module without one (on a 3.0 or 3.5
// GPU, any module) gives it naming the module. Every
// kernel parameter travels in its own 8-byte slot (device.Params), its value in the low
// bytes, from which the driver reads the size the PTX entry declares. Allocations are zeroed and 256-byte aligned; Upload
// copies (it never aliases host memory). Errors read "cuda: <op> <name>: <cause>"; a driver
// failure is a *DriverError carrying the driver's name and description of the code
// (cuGetErrorName, cuGetErrorString).
//
// A few lines of cgo (driver.go, graph.go) add what gorgonia.org/cu lacks: launches asking
// for more than 48 KiB of dynamic shared memory opt in to it (cuFuncSetAttribute) up to the
// device's per-block maximum; Write and Read of 16 MiB or more go through two pinned host
// buffers (cuMemHostAlloc), freed by Close; Capture records a sequence of launches into a CUDA
// graph that Graph.Launch replays; Time measures device time with events; Copy copies on the
// device; Info describes the device. All of it runs on the context goroutine.
package cuda
