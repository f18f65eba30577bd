// Package cuda is the device.Backend for NVIDIA GPUs, over the CUDA driver API
// (gorgonia.org/cu). It is compiled only with the build tag cuda; without it, Open returns
// device.ErrNotBuilt and Count returns 0, and the package needs neither cgo nor CUDA.
//
// A cuda-tagged binary links against libcuda.so.1 and initialises the driver before main
// (gorgonia.org/cu exits the process when cuInit fails), so it is for machines with a working
// GPU; the untagged build is the CPU fallback.
//
// Each open device has one goroutine, locked to its OS thread, that owns the device's
// context and makes every driver call. Kernels come from package ptx: a module is loaded on the
// first launch of one of its entries, from package ptx's cubin for the device's exact
// architecture where there is one (sm_80, sm_90; sm_37 for any Kepler GPU), else from its
// PTX, which the driver JIT-compiles (on a GPU from sm_80 on; a Kepler GPU cannot run it). A
// cubin that fails to load falls back to the PTX. Each load is recorded (Modules: which code,
// why, the load's wall time, the JIT's wall time and info log); a failed one returns the JIT's
// error log in its error. VERITY_CUDA_CODE=ptx makes every module load its PTX, =cubin only
// cubins; VERITY_CUDA_TRACE=1 prints each load as it starts and ends on stderr, so that a slow
// JIT reads as one. Functions are cached per entry. A kernel left out of a cubin gives
// device.ErrUnsupported naming the kernel, a module without code the device can run gives it
// naming the module.
//
// A sticky error — an illegal address, a trap, a launch failure: what the CUDA docs say leaves
// the process unable to use the device — is remembered: from then on every call of every
// backend in the process, and Open, return a *LostError (errors.Is device.ErrDeviceLost)
// naming the first fault, without calling the driver, and Close releases nothing (the process
// must end).
//
// Every kernel parameter travels in its own 8-byte slot (device.Params), its value in the low
// bytes, from which the driver reads the size the PTX entry declares. Allocations are zeroed
// and 256-byte aligned; Upload copies (it never aliases host memory). Errors read
// "cuda: <op> <name>: <cause>"; a driver failure is a *DriverError carrying the driver's name
// and description of the code (cuGetErrorName, cuGetErrorString).
//
// A few lines of cgo (driver.go, graph.go) add what gorgonia.org/cu lacks: launches asking
// for more than 48 KiB of dynamic shared memory opt in to it (cuFuncSetAttribute) up to the
// device's per-block maximum; Write and Read of 16 MiB or more go through two pinned host
// buffers (cuMemHostAlloc), freed by Close; Capture records a sequence of launches into a CUDA
// graph that Graph.Launch replays; Time measures device time with events; Copy copies on the
// device; Info describes the device. All of it runs on the context goroutine.
package cuda
