package ptxvm

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"verity/device"
	"verity/device/cpu"
	"verity/ptx"
)

// Backend is a device.Backend that runs each kernel's committed PTX in the interpreter. Its
// memory is the CPU backend's (distinct allocations separated by unmapped gaps, uploads
// read-only to kernels); Launch looks up the spec's module and entry, flattens the arguments
// with device.Params and runs the launch. Like other backends it is for one goroutine at a
// time.
type Backend struct {
	mem     *cpu.Backend
	regions Regions
	source  func(stem string) (string, error)
	cfg     Config

	fallback bool

	mu       sync.Mutex
	modules  map[string]*Module
	errs     map[string]error
	stats    Stats
	twinRuns map[string]int
	launches uint64 // interpreted launches so far (weak mode: mixed into each launch's seed)
}

// Options configures a Backend.
type Options struct {
	Config
	// Source returns the PTX text of a module stem; nil means the committed modules
	// (ptx.Module). Tests pass edited PTX through it.
	Source func(stem string) (string, error)
	// Fallback runs the twin of a kernel that has no PTX yet, instead of failing with
	// device.ErrUnsupported (TwinRuns lists them), so that whole programs can run.
	Fallback bool
}

// New returns an interpreter backend.
func New(opt Options) *Backend {
	src := opt.Source
	if src == nil {
		src = ptx.Module
	}
	return &Backend{mem: cpu.New(1), source: src, cfg: opt.Config, fallback: opt.Fallback,
		modules: map[string]*Module{}, errs: map[string]error{}, twinRuns: map[string]int{}}
}

func (b *Backend) Name() string {
	if w := b.cfg.Weak; w != nil {
		return fmt.Sprintf("ptxvm (PTX interpreter, weak memory, seed %d)", w.Seed)
	}
	return "ptxvm (PTX interpreter)"
}

// SharedOptin is the shared memory a block may have: 48 KiB, a GPU's without opting in (so the
// megakernel launches with its least, megakernel.MinShared, and stages up to 36 KiB).
func (b *Backend) SharedOptin() (int, error) { return 48 << 10, nil }

// Multiprocessors is the number of blocks the interpreter runs at once (its workers): a
// megakernel may have no more, since its blocks wait for each other.
func (b *Backend) Multiprocessors() (int, error) {
	if b.cfg.Workers > 0 {
		return b.cfg.Workers, nil
	}
	return runtime.GOMAXPROCS(0), nil
}

func (b *Backend) Alloc(n int64) (device.Ptr, error) {
	p, err := b.mem.Alloc(n)
	if err != nil {
		return 0, err
	}
	data, err := b.mem.Bytes(p, n)
	if err != nil {
		return 0, err
	}
	return p, b.regions.Add(uint64(p), data, true)
}

// Upload aliases data (no copy); kernels may read it but not write it.
func (b *Backend) Upload(data []byte) (device.Ptr, error) {
	p, err := b.mem.Upload(data)
	if err != nil {
		return 0, err
	}
	return p, b.regions.Add(uint64(p), data, false)
}

func (b *Backend) Free(p device.Ptr) error {
	if err := b.mem.Free(p); err != nil {
		return err
	}
	b.regions.Remove(uint64(p))
	return nil
}

func (b *Backend) Write(dst device.Ptr, src []byte) error { return b.mem.Write(dst, src) }
func (b *Backend) Read(dst []byte, src device.Ptr) error  { return b.mem.Read(dst, src) }

// Bytes implements device.Memory.
func (b *Backend) Bytes(p device.Ptr, n int64) ([]byte, error) { return b.mem.Bytes(p, n) }

func (b *Backend) Sync() error  { return nil }
func (b *Backend) Close() error { return b.mem.Close() }

// Stats returns what every launch so far executed.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// TwinRuns returns how many launches of each kernel ran as its twin (Options.Fallback).
func (b *Backend) TwinRuns() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.twinRuns))
	for k, v := range b.twinRuns {
		out[k] = v
	}
	return out
}

// Module returns the loaded module stem (loading and compiling it on first use).
func (b *Backend) Module(stem string) (*Module, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m, ok := b.modules[stem]; ok {
		return m, nil
	}
	if err, ok := b.errs[stem]; ok {
		return nil, err
	}
	src, err := b.source(stem)
	if err != nil {
		err = fmt.Errorf("ptxvm: module %s: %v: %w", stem, err, device.ErrUnsupported)
		b.errs[stem] = err
		return nil, err
	}
	m, err := Load(src)
	if err != nil {
		err = fmt.Errorf("ptxvm: module %s: %w", stem, err)
		b.errs[stem] = err
		return nil, err
	}
	b.modules[stem] = m
	return m, nil
}

// Launch runs the PTX entry of k. A kernel whose module or entry has no PTX yet gives an
// error wrapping device.ErrUnsupported.
func (b *Backend) Launch(k device.Spec, args any) error {
	g, err := k.Geometry(args)
	if err != nil {
		return fmt.Errorf("ptxvm: launch %s: %w", k.Entry(), err)
	}
	m, err := b.Module(k.Module())
	var kern *Kernel
	if err == nil {
		if kern = m.Kernel(k.Entry()); kern == nil {
			err = fmt.Errorf("ptxvm: module %s has no entry %s: %w", k.Module(), k.Entry(), device.ErrUnsupported)
		}
	}
	if err != nil {
		if b.fallback && errors.Is(err, device.ErrUnsupported) {
			b.mu.Lock()
			b.twinRuns[k.Entry()]++
			b.mu.Unlock()
			return b.mem.Launch(k, args)
		}
		return err
	}
	ps, err := device.Params(args)
	if err != nil {
		return fmt.Errorf("ptxvm: launch %s: %w", k.Entry(), err)
	}
	cfg := b.cfg
	b.mu.Lock()
	n := b.launches
	b.launches++
	b.mu.Unlock()
	if cfg.Weak != nil {
		w := *cfg.Weak
		w.Seed = launchSeed(w.Seed, n)
		cfg.Weak = &w
	}
	st, err := kern.Launch(g, ps, &b.regions, cfg)
	b.mu.Lock()
	b.stats.Blocks += st.Blocks
	b.stats.WarpInstructions += st.WarpInstructions
	b.stats.ThreadInstructions += st.ThreadInstructions
	b.stats.StaleReads += st.StaleReads
	b.stats.GenericShared += st.GenericShared
	b.mu.Unlock()
	return err
}

// launchSeed derives launch n's seed from the backend's (splitmix64 of their sum).
func launchSeed(seed, n uint64) uint64 {
	z := seed + (n+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// IsFault reports whether err is a kernel fault (ExecError) or stall (StallError), as
// opposed to a launch the backend refused.
func IsFault(err error) bool {
	var e *ExecError
	var s *StallError
	return errors.As(err, &e) || errors.As(err, &s)
}

var _ device.Backend = (*Backend)(nil)
