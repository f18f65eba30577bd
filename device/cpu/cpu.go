// Package cpu is the twin backend: host memory addressed like device memory, and kernel
// launches that run each kernel's Go twin, spread over a fixed pool of worker goroutines.
//
// Allocations live at distinct, 256-byte aligned addresses separated by unmapped gaps, so a
// twin that strays past its buffer gets an error rather than a neighbour's bytes. Results never
// depend on the number of workers: twins partition work by output row, and every row is
// computed the same way whoever computes it.
package cpu

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"verity/device"
)

const (
	baseAddr = 1 << 32
	align    = 256
	gap      = 4096 // unmapped bytes between allocations
)

type region struct {
	base device.Ptr
	data []byte
	ro   bool // uploaded (possibly aliased) data
}

// Backend is the CPU twin backend. Its memory methods are safe for concurrent use.
type Backend struct {
	mu      sync.RWMutex
	regions []region // sorted by base
	next    device.Ptr
	workers int
	pool    *pool

	execOnce sync.Once
	exec     *device.Exec
}

// New returns a CPU backend using the given number of worker goroutines (0: GOMAXPROCS).
func New(workers int) *Backend {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return &Backend{next: baseAddr, workers: workers, pool: newPool(workers)}
}

func (b *Backend) Name() string { return fmt.Sprintf("cpu (%d threads)", b.workers) }

// Workers is the number of worker goroutines.
func (b *Backend) Workers() int { return b.workers }

func (b *Backend) add(data []byte, ro bool) device.Ptr {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.next
	n := device.Ptr(len(data))
	b.next = (p + n + gap + align - 1) &^ (align - 1)
	b.regions = append(b.regions, region{base: p, data: data, ro: ro})
	return p
}

func (b *Backend) Alloc(n int64) (device.Ptr, error) {
	if n < 0 || n > 1<<46 {
		return 0, fmt.Errorf("cpu: bad allocation size %d", n)
	}
	// allocate as uint64 words so float and int views are aligned
	words := make([]uint64, (n+7)/8)
	var data []byte
	if len(words) > 0 {
		data = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	}
	return b.add(data, false), nil
}

// Upload aliases data (no copy): the caller keeps it alive and unchanged until Free.
func (b *Backend) Upload(data []byte) (device.Ptr, error) { return b.add(data, true), nil }

func (b *Backend) find(p device.Ptr) (int, error) {
	i := sort.Search(len(b.regions), func(i int) bool { return b.regions[i].base > p }) - 1
	if i < 0 {
		return -1, &device.OutOfRangeError{Ptr: p, Why: "below every allocation"}
	}
	return i, nil
}

func (b *Backend) Free(p device.Ptr) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, err := b.find(p)
	if err != nil || b.regions[i].base != p {
		return fmt.Errorf("cpu: free of %#x, which is not the start of an allocation", uint64(p))
	}
	b.regions = append(b.regions[:i], b.regions[i+1:]...)
	return nil
}

// Bytes implements device.Memory.
func (b *Backend) Bytes(p device.Ptr, n int64) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.bytesLocked(p, n)
}

// Size returns the size of the allocation that starts at p.
func (b *Backend) Size(p device.Ptr) (int64, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	i, err := b.find(p)
	if err != nil {
		return 0, err
	}
	if b.regions[i].base != p {
		return 0, &device.OutOfRangeError{Ptr: p, Why: "not the start of an allocation"}
	}
	return int64(len(b.regions[i].data)), nil
}

func (b *Backend) bytesLocked(p device.Ptr, n int64) ([]byte, error) {
	if n < 0 {
		return nil, &device.OutOfRangeError{Ptr: p, N: n, Why: "negative length"}
	}
	i, err := b.find(p)
	if err != nil {
		return nil, err
	}
	r := b.regions[i]
	off := int64(p - r.base)
	if off+n > int64(len(r.data)) {
		return nil, &device.OutOfRangeError{Ptr: p, N: n, Why: fmt.Sprintf("allocation at %#x has %d bytes", uint64(r.base), len(r.data))}
	}
	return r.data[off : off+n : off+n], nil
}

func (b *Backend) Write(dst device.Ptr, src []byte) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	d, err := b.bytesLocked(dst, int64(len(src)))
	if err != nil {
		return err
	}
	if i, _ := b.find(dst); b.regions[i].ro {
		return fmt.Errorf("cpu: write to uploaded read-only data at %#x", uint64(dst))
	}
	copy(d, src)
	return nil
}

func (b *Backend) Read(dst []byte, src device.Ptr) error {
	s, err := b.Bytes(src, int64(len(dst)))
	if err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

// Exec returns the twin execution context of this backend (one value, made once: twins only
// read it).
func (b *Backend) Exec() *device.Exec {
	b.execOnce.Do(func() { b.exec = &device.Exec{Mem: b, Workers: b.workers, For: b.pool.For} })
	return b.exec
}

func (b *Backend) Launch(k device.Spec, args any) error {
	if _, err := k.Geometry(args); err != nil {
		return fmt.Errorf("cpu: launch %s: %w", k.Entry(), err)
	}
	return k.RunTwin(b.Exec(), args)
}

func (b *Backend) Sync() error { return nil }

func (b *Backend) Close() error {
	b.mu.Lock()
	b.regions = nil
	b.mu.Unlock()
	b.pool.close()
	return nil
}

// Allocated returns the bytes currently allocated (excluding uploads).
func (b *Backend) Allocated() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var n int64
	for _, r := range b.regions {
		if !r.ro {
			n += int64(len(r.data))
		}
	}
	return n
}
