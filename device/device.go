package device

import (
	"errors"
	"fmt"
)

// Ptr is an address in a backend's memory. The zero Ptr is nil. Ptr arithmetic (p + offset)
// is allowed within one allocation.
type Ptr uint64

// Backend is the interface every executor's memory and kernel launches go through.
// Methods are safe for use by one goroutine at a time unless a backend says otherwise.
type Backend interface {
	// Name identifies the backend and device, e.g. "cpu (2 threads)".
	Name() string
	// Alloc returns n bytes of zeroed memory, aligned to at least 256 bytes.
	Alloc(n int64) (Ptr, error)
	// Upload makes read-only data (weights) available to kernels. A backend may alias the
	// host bytes instead of copying them: the caller must keep data alive and unmodified
	// until the Ptr is freed.
	Upload(data []byte) (Ptr, error)
	// Free releases memory from Alloc or Upload.
	Free(p Ptr) error
	// Write copies host bytes to device memory at dst.
	Write(dst Ptr, src []byte) error
	// Read copies device memory at src into dst.
	Read(dst []byte, src Ptr) error
	// Launch runs kernel k with arguments args (which must be k's argument type).
	Launch(k Spec, args any) error
	// Sync waits for all launched work and reports the first asynchronous error.
	Sync() error
	// Close releases everything the backend holds.
	Close() error
}

// Sentinel errors callers branch on.
var (
	// ErrNotBuilt: the backend was not compiled into this binary (e.g. no cuda build tag).
	ErrNotBuilt = errors.New("device: backend not built into this binary")
	// ErrNoDevice: the backend is built but no device is present.
	ErrNoDevice = errors.New("device: no device present")
	// ErrUnsupported: the backend cannot run this kernel or configuration.
	ErrUnsupported = errors.New("device: unsupported")
	// ErrDeviceLost: the device faulted (an illegal address, a trap, a launch failure) and
	// nothing more can run on it in this process; the error names the first fault.
	ErrDeviceLost = errors.New("device: lost")
)

// OutOfRangeError reports an access outside every allocation.
type OutOfRangeError struct {
	Ptr Ptr
	N   int64
	Why string
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("device: access [%#x, +%d) out of range: %s", uint64(e.Ptr), e.N, e.Why)
}
