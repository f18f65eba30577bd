package main

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"verity/bench"
	"verity/device"
	"verity/device/backend"
	"verity/device/dtype"
	"verity/device/kernels"
)

// backendHelp describes the --backend values.
const backendHelp = backend.Help

// megakernelHelp and smsHelp describe the megakernel flags.
const (
	megakernelHelp = "run each step as one megakernel stream (the Go VM on cpu) instead of one launch per op"
	smsHelp        = "the megakernel's queues: thread blocks on a GPU, goroutines for the Go VM (0: two per SM where they fit, one per CPU)"
)

// layersHelp describes the --layers values.
const layersHelp = "with several backends: the first layer of every stage after the first (default: placed by each backend's memory)"

// openBackends opens the comma-separated backends of spec (see backendHelp).
func openBackends(spec string, threads int) ([]device.Backend, error) {
	bs, err := backend.OpenList(spec, threads)
	return bs, flagError(spec, err)
}

func closeAll(bs []device.Backend) { backend.CloseAll(bs) }

// backendsName names a list of backends.
func backendsName(bs []device.Backend) string { return backend.Names(bs) }

// openBackend opens the backend named by spec (see backendHelp); threads sizes the CPU ones.
func openBackend(spec string, threads int) (device.Backend, error) {
	b, err := backend.Open(spec, threads)
	return b, flagError(spec, err)
}

// flagError is a backend's error as the flag's: a cuda backend in a binary without CUDA says
// how to build one.
func flagError(spec string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, device.ErrNotBuilt):
		return fmt.Errorf("--backend %s: this verity binary was built without CUDA; build it with go build -tags cuda ./tools/verity (README: GPU build)", spec)
	}
	return fmt.Errorf("--%w", err)
}

// deviceCopier is a backend that times copies in its own memory (the CUDA backend).
type deviceCopier interface {
	Copy(dst, src device.Ptr, n int64) error
	Time(f func() error) (time.Duration, error)
}

// probeBandwidth measures the copy rate of the memory the backend's kernels read, in bytes
// per second counting reads and writes (2·n per copy of n): device-to-device copies timed by
// the device on a GPU, host memory copies on threads goroutines otherwise. It also returns a
// description of what was measured.
func probeBandwidth(b device.Backend, threads int) (float64, string, error) {
	dc, ok := b.(deviceCopier)
	if !ok {
		bw := bench.Bandwidth(256<<20, threads, 5)
		if threads <= 0 {
			return bw, "host copy, all threads", nil
		}
		return bw, fmt.Sprintf("host copy, %d threads", threads), nil
	}
	const n = 512 << 20
	src, err := b.Alloc(n)
	if err != nil {
		return 0, "", err
	}
	defer b.Free(src)
	dst, err := b.Alloc(n)
	if err != nil {
		return 0, "", err
	}
	defer b.Free(dst)
	best := time.Duration(0)
	for r := 0; r < 6; r++ { // the first round warms up
		d, err := dc.Time(func() error { return dc.Copy(dst, src, n) })
		if err != nil {
			return 0, "", err
		}
		if r > 0 && (best == 0 || d < best) {
			best = d
		}
	}
	return 2 * n / best.Seconds(), "device-to-device copy", nil
}

// threadsPerCPU bounds --threads: more workers than this many per CPU only add switching.
const threadsPerCPU = 4

// checkThreads checks a command's --threads (a count or, for bench, a list): 0 means all
// CPUs; a negative count, or one far past the machine's CPUs, is an error.
func checkThreads(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("threads")
	if f == nil || !f.Changed {
		return nil
	}
	var vs []int
	switch f.Value.Type() {
	case "int":
		v, err := cmd.Flags().GetInt("threads")
		if err != nil {
			return err
		}
		vs = []int{v}
	case "intSlice":
		v, err := cmd.Flags().GetIntSlice("threads")
		if err != nil {
			return err
		}
		vs = v
	default:
		return nil
	}
	limit := threadsPerCPU * runtime.NumCPU()
	for _, v := range vs {
		if v < 0 || v > limit {
			return fmt.Errorf("--threads %d: want 0 (one per CPU) to %d (%d per CPU on this machine's %d)", v, limit, threadsPerCPU, runtime.NumCPU())
		}
	}
	return nil
}

// cacheFlags are the K/V cache type flags of every command that runs a model.
type cacheFlags struct{ k, v string }

// add registers --cache-type-k/-ctk and --cache-type-v/-ctv (llama.cpp's names) on cmd.
func (c *cacheFlags) add(cmd *cobra.Command) {
	const help = "element type of the %s cache: f32, f16 or bf16 (default: f16 on a cuda backend, f32 on cpu and ptxvm)"
	cmd.Flags().StringVarP(&c.k, "cache-type-k", "", "", fmt.Sprintf(help, "K"))
	cmd.Flags().StringVarP(&c.v, "cache-type-v", "", "", fmt.Sprintf(help, "V"))
	// llama.cpp spells the short forms with one dash (-ctk f16); Go's flag parsing of cobra
	// takes them as --ctk and -ctk alike through these aliases
	cmd.Flags().StringVar(&c.k, "ctk", "", "short for --cache-type-k")
	cmd.Flags().StringVar(&c.v, "ctv", "", "short for --cache-type-v")
}

// types returns the cache types for a model on backends bes: as given, or the default
// (backend.DefaultCacheType).
func (c cacheFlags) types(bes []device.Backend) (k, v dtype.Type, err error) {
	return c.typesWith(backend.DefaultCacheType(bes))
}

// typesFor is types for a model on a GPU (gpu) or not.
func (c cacheFlags) typesFor(gpu bool) (k, v dtype.Type, err error) {
	def := dtype.F32
	if gpu {
		def = dtype.F16
	}
	return c.typesWith(def)
}

// typesWith is types with def for the flags not given.
func (c cacheFlags) typesWith(def dtype.Type) (k, v dtype.Type, err error) {
	parse := func(flag, s string) (dtype.Type, error) {
		if s == "" {
			return def, nil
		}
		t, err := dtype.Parse(s)
		if err != nil || !kernels.CacheTypeOK(t) {
			return 0, fmt.Errorf("--%s %s: want f32, f16 or bf16", flag, s)
		}
		return t, nil
	}
	if k, err = parse("cache-type-k", c.k); err != nil {
		return 0, 0, err
	}
	v, err = parse("cache-type-v", c.v)
	return k, v, err
}
