//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"verity/device"
)

// maxStaticShared is the dynamic shared memory a launch may ask for without opting in
// (cuFuncSetAttribute; see allowShared).
const maxStaticShared = 48 << 10

// align is the granularity of every allocation; the driver's own is at least as coarse.
const align = 256

// logBytes is the size of each JIT log buffer.
const logBytes = 16 << 10

// Count returns the number of CUDA devices, or 0 when the driver reports none.
func Count() int {
	n, err := cu.NumDevices()
	if err != nil {
		return 0
	}
	return n
}

// Open creates a context on device ordinal and returns a backend that owns it. Each call makes
// a context of its own, also on a device already open.
func Open(ordinal int) (device.Backend, error) {
	policy, err := codePolicy()
	if err != nil {
		return nil, fmt.Errorf("cuda: open %d: %w", ordinal, err)
	}
	b, err := open(ordinal, policy)
	if err != nil {
		return nil, err // not a nil *Backend in a non-nil interface
	}
	return b, nil
}

// open is Open with the code policy given.
func open(ordinal int, policy string) (*Backend, error) {
	n := Count()
	if n == 0 {
		return nil, fmt.Errorf("cuda: open %d: %w", ordinal, device.ErrNoDevice)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: open %d: no such device (%d present): %w", ordinal, n, device.ErrNoDevice)
	}
	if err := lostError(); err != nil {
		return nil, fmt.Errorf("cuda: open %d: %w", ordinal, err)
	}
	b := &Backend{
		ordinal: ordinal,
		policy:  policy,
		jobs:    make(chan job),
		stopped: make(chan struct{}),
		modules: map[string]*module{},
		allocs:  map[device.Ptr]int64{},
	}
	ready := make(chan error, 1)
	go b.loop(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return b, nil
}

// Backend is a device.Backend on one CUDA device. One goroutine, locked to its OS thread,
// owns the device's context and makes every driver call; methods hand it their work and
// wait. Methods may be called from several goroutines; calls are serialised.
type Backend struct {
	ordinal int
	name    string
	sm      string // the device's architecture ("sm_90"): whose cubins are loaded
	kepler  bool   // compute capability 3.x, which cannot run the PTX: cubins only
	policy  string // what to load (VERITY_CUDA_CODE): codeAuto, codePTX or codeCubin
	jobs    chan job
	stopped chan struct{} // closed when the context goroutine has destroyed the context

	loadMu  sync.Mutex // held while a module loads, so each loads once
	mu      sync.Mutex
	closed  bool
	modules map[string]*module // by stem; a failed load is kept as its error
	loads   []ModuleLoad       // every load, in order
	allocs  map[device.Ptr]int64
	bases   []device.Ptr // allocation bases, sorted

	closeErr error // from destroying the context; read after stopped is closed

	x extras // pinned staging, shared memory opt-in, graph capture (driver.go, graph.go)
}

type module struct {
	mod     cu.Module
	code    string          // what was loaded: "PTX" or "sm_90 cubin"
	rec     ModuleLoad      // how it was loaded
	entries map[string]bool // the entries it holds
	funcs   map[string]cu.Function
	err     error
}

type job struct {
	op, name string
	fn       func() error
	done     chan error
}

// loop is the context-owning goroutine.
func (b *Backend) loop(ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(b.stopped)
	var ctx cu.CUContext
	err := guard("open", fmt.Sprint(b.ordinal), func() error {
		dev, err := cu.GetDevice(b.ordinal)
		if err != nil {
			return err
		}
		name, err := dev.Name()
		if err != nil {
			return err
		}
		major, minor, err := dev.ComputeCapability()
		if err != nil {
			return err
		}
		// A GPU of an architecture package ptx has machine code for loads it; any other JIT-
		// compiles the PTX, which a Kepler GPU cannot run (package ptx has sm_37 machine
		// code for the K80 only).
		b.sm = fmt.Sprintf("sm_%d%d", major, minor)
		b.kepler = major == 3
		if ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
			return err
		}
		if err := cu.SetCurrentContext(ctx); err != nil {
			_ = ctx.Destroy()
			return err
		}
		b.name = fmt.Sprintf("cuda:%d (%s, sm_%d%d, driver %d, %s)", b.ordinal, name, major, minor, cu.Version(), codeName(b.sm, b.policy))
		return nil
	})
	ready <- err
	if err != nil {
		return
	}
	for j := range b.jobs {
		j.done <- guard(j.op, j.name, j.fn)
	}
	b.closeErr = guard("close", "context", func() error { return ctx.Destroy() })
}

// guard runs fn, turning a panic into an error, and wraps any error as
// "cuda: <op> <name>: <err>". A sticky error (see sticky) marks the process's devices lost.
func guard(op, name string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cuda: %s %s: panic: %v", op, name, r)
		}
	}()
	if err = fn(); err != nil {
		err = fmt.Errorf("cuda: %s %s: %w", op, name, describe(err))
		noteLost(err)
	}
	return err
}

// do runs fn on the context goroutine. Once a device has faulted, nothing more runs.
func (b *Backend) do(op, name string, fn func() error) error {
	b.mu.Lock()
	closed, refused := b.closed, b.x.refuse(op)
	b.mu.Unlock()
	if closed {
		return fmt.Errorf("cuda: %s %s: backend closed", op, name)
	}
	if err := lostError(); err != nil {
		return fmt.Errorf("cuda: %s %s: %w", op, name, err)
	}
	if refused {
		return fmt.Errorf("cuda: %s %s: not allowed while a graph is being captured", op, name)
	}
	done := make(chan error, 1)
	b.jobs <- job{op, name, fn, done}
	return <-done
}

func (b *Backend) Name() string { return b.name }

func (b *Backend) Alloc(n int64) (device.Ptr, error) {
	if n < 0 || n > 1<<46 {
		return 0, fmt.Errorf("cuda: alloc %d: bad size", n)
	}
	size := (max(n, 1) + align - 1) / align * align
	var p cu.DevicePtr
	err := b.do("alloc", fmt.Sprint(n), func() error {
		var err error
		if p, err = cu.MemAlloc(size); err != nil {
			return err
		}
		if uint64(p)%align != 0 {
			_ = cu.MemFree(p)
			return fmt.Errorf("driver returned %#x, not %d-byte aligned", uint64(p), align)
		}
		if err := cu.MemsetD8(p, 0, size); err != nil {
			_ = cu.MemFree(p)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	b.track(device.Ptr(p), n)
	return device.Ptr(p), nil
}

// Upload copies data to a new allocation (the host bytes are not aliased).
func (b *Backend) Upload(data []byte) (device.Ptr, error) {
	p, err := b.Alloc(int64(len(data)))
	if err != nil {
		return 0, err
	}
	if err := b.Write(p, data); err != nil {
		_ = b.Free(p)
		return 0, err
	}
	return p, nil
}

func (b *Backend) Free(p device.Ptr) error {
	b.mu.Lock()
	_, ok := b.allocs[p]
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: free %#x: not an allocation", uint64(p))
	}
	if err := b.do("free", fmt.Sprintf("%#x", uint64(p)), func() error { return cu.MemFree(cu.DevicePtr(p)) }); err != nil {
		return err
	}
	b.untrack(p)
	return nil
}

func (b *Backend) Write(dst device.Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := b.inside(dst, int64(len(src))); err != nil {
		return err
	}
	return b.do("write", fmt.Sprintf("%#x+%d", uint64(dst), len(src)), func() error {
		if b.x.staged(len(src)) {
			return b.writeStaged(dst, src)
		}
		return cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)))
	})
}

func (b *Backend) Read(dst []byte, src device.Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := b.inside(src, int64(len(dst))); err != nil {
		return err
	}
	return b.do("read", fmt.Sprintf("%#x+%d", uint64(src), len(dst)), func() error {
		if b.x.staged(len(dst)) {
			return b.readStaged(dst, src)
		}
		return cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)))
	})
}

// Launch runs the entry of k. A kernel whose module or entry has no code for the device (no
// PTX, or on a Kepler GPU no cubin, or one that leaves the kernel out) gives an error wrapping
// device.ErrUnsupported, as does a launch needing more dynamic shared memory than
// the device lets a block opt in to.
func (b *Backend) Launch(k device.Spec, args any) error {
	name := k.Entry()
	g, err := k.Geometry(args)
	if err != nil {
		return fmt.Errorf("cuda: launch %s: %w", name, err)
	}
	if g.Grid.X == 0 || g.Grid.Y == 0 || g.Grid.Z == 0 || g.Block.X == 0 || g.Block.Y == 0 || g.Block.Z == 0 {
		return fmt.Errorf("cuda: launch %s: empty geometry %+v", name, g)
	}
	ps, err := device.Params(args)
	if err != nil {
		return fmt.Errorf("cuda: launch %s: %w", name, err)
	}
	// One 8-byte slot per parameter, the value in its low bytes: cu copies exactly 8 bytes
	// from each pointer into the argument array it hands the driver.
	slots := make([]uint64, len(ps))
	ptrs := make([]unsafe.Pointer, len(ps))
	for i, p := range ps {
		slots[i] = p.Bits
		ptrs[i] = unsafe.Pointer(&slots[i])
	}
	fn, err := b.function(k.Module(), name)
	if err != nil {
		return err
	}
	return b.do("launch", name, func() error {
		if g.Shared > maxStaticShared {
			if err := b.allowShared(fn, g.Shared); err != nil {
				return err
			}
		}
		return fn.Launch(int(g.Grid.X), int(g.Grid.Y), int(g.Grid.Z),
			int(g.Block.X), int(g.Block.Y), int(g.Block.Z), int(g.Shared), b.x.launchStream(), ptrs)
	})
}

// function returns entry of module stem, loading the module on first use.
func (b *Backend) function(stem, entry string) (cu.Function, error) {
	b.loadMu.Lock()
	b.mu.Lock()
	m, ok := b.modules[stem]
	b.mu.Unlock()
	if !ok {
		m = b.load(stem)
		b.mu.Lock()
		b.modules[stem] = m
		b.mu.Unlock()
	}
	b.loadMu.Unlock()
	if m.err != nil {
		return cu.Function{}, m.err
	}
	b.mu.Lock()
	fn, ok := m.funcs[entry]
	b.mu.Unlock()
	if ok {
		return fn, nil
	}
	if !m.entries[entry] {
		return cu.Function{}, fmt.Errorf("cuda: launch %s: the %s of module %s has no such entry: %w", entry, m.code, stem, device.ErrUnsupported)
	}
	err := b.do("function", entry, func() error {
		var err error
		fn, err = m.mod.Function(entry)
		return err
	})
	if err != nil {
		return cu.Function{}, err
	}
	b.mu.Lock()
	m.funcs[entry] = fn
	b.mu.Unlock()
	return fn, nil
}

func (b *Backend) Sync() error {
	return b.do("sync", "context", cu.Synchronize)
}

// Close frees every allocation, unloads every module, destroys the graphs, frees the pinned
// staging buffers and destroys the context.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	if lostError() != nil {
		// The fault was reported where it happened; every call now returns it again, and
		// the process's exit releases what the context held.
		b.closed = true
		b.mu.Unlock()
		close(b.jobs)
		<-b.stopped
		return nil
	}
	type loaded struct {
		stem string
		m    *module
	}
	var mods []loaded
	for stem, m := range b.modules {
		mods = append(mods, loaded{stem, m})
	}
	bases := append([]device.Ptr(nil), b.bases...)
	b.mu.Unlock()
	var errs []error
	errs = append(errs, b.Sync())
	// graphs (in the extras) refer to the modules' kernels: destroy them first
	errs = append(errs, b.do("close", "extras", b.closeExtras))
	for _, p := range bases {
		errs = append(errs, b.Free(p))
	}
	for _, l := range mods {
		if l.m.err == nil {
			errs = append(errs, b.do("unload", l.stem, l.m.mod.Unload))
		}
	}
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	close(b.jobs)
	<-b.stopped
	errs = append(errs, b.closeErr)
	return errors.Join(errs...)
}

func (b *Backend) track(p device.Ptr, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allocs[p] = n
	i := sort.Search(len(b.bases), func(i int) bool { return b.bases[i] >= p })
	b.bases = append(b.bases, 0)
	copy(b.bases[i+1:], b.bases[i:])
	b.bases[i] = p
}

func (b *Backend) untrack(p device.Ptr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.allocs, p)
	i := sort.Search(len(b.bases), func(i int) bool { return b.bases[i] >= p })
	if i < len(b.bases) && b.bases[i] == p {
		b.bases = append(b.bases[:i], b.bases[i+1:]...)
	}
}

// inside checks that [p, p+n) lies within one allocation.
func (b *Backend) inside(p device.Ptr, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := sort.Search(len(b.bases), func(i int) bool { return b.bases[i] > p }) - 1
	if i < 0 {
		return &device.OutOfRangeError{Ptr: p, N: n, Why: "below every allocation"}
	}
	base := b.bases[i]
	if size := b.allocs[base]; uint64(p-base)+uint64(n) > uint64(size) {
		return &device.OutOfRangeError{Ptr: p, N: n, Why: fmt.Sprintf("allocation %#x holds %d bytes", uint64(base), size)}
	}
	return nil
}

var (
	_ device.Backend  = (*Backend)(nil)
	_ device.Timeline = (*Backend)(nil)
	_ device.Mapped   = (*Backend)(nil)
)
