package device

// Mapped is a backend that can give kernels host memory to write: memory in the host's address
// space that the device addresses directly (CUDA's mapped pinned memory). What a kernel writes
// there and makes visible to the system (a system-scope fence) is the host's to read from the
// slice at once — even after a fault has ended the kernel and poisoned its context, when no
// copy from device memory works any more. The megakernel writes why it gave up there.
type Mapped interface {
	// AllocMapped returns n bytes of zeroed host memory and its device address.
	AllocMapped(n int) (Ptr, []byte, error)
	// FreeMapped releases memory from AllocMapped.
	FreeMapped(p Ptr) error
}
