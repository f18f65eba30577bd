package main

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"verity/bench"
	"verity/device"
	"verity/device/cpu"
	"verity/device/cuda"
	"verity/device/ptxvm"
)

// backendHelp describes the --backend values.
const backendHelp = "where kernels run: cpu (the Go twins), ptxvm (the committed PTX, interpreted), ptxvm-weak or ptxvm-weak:SEED (interpreted with memory as weakly ordered as PTX allows, blocks scheduled adversarially from SEED, default 1), cuda or cuda:N (GPU N; a binary built with -tags cuda); a comma-separated list splits the layers across them as a pipeline"

// megakernelHelp and smsHelp describe the megakernel flags.
const (
	megakernelHelp = "run each step as one megakernel stream (the Go VM on cpu) instead of one launch per op"
	smsHelp        = "the megakernel's queues: SMs on a GPU, goroutines for the Go VM (0: one per SM or CPU)"
)

// layersHelp describes the --layers values.
const layersHelp = "with several backends: the first layer of every stage after the first (default: placed by each backend's memory)"

// openBackends opens the comma-separated backends of spec (see backendHelp).
func openBackends(spec string, threads int) ([]device.Backend, error) {
	var out []device.Backend
	for _, s := range strings.Split(spec, ",") {
		b, err := openBackend(strings.TrimSpace(s), threads)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func closeAll(bs []device.Backend) {
	for _, b := range bs {
		b.Close()
	}
}

// backendsName names a list of backends.
func backendsName(bs []device.Backend) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Name()
	}
	return strings.Join(names, " → ")
}

// openBackend opens the backend named by spec (see backendHelp); threads sizes the CPU ones.
func openBackend(spec string, threads int) (device.Backend, error) {
	switch {
	case spec == "" || spec == "cpu":
		return cpu.New(threads), nil
	case spec == "ptxvm":
		return ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: threads, NoRaceCheck: true}}), nil
	case spec == "ptxvm-weak" || strings.HasPrefix(spec, "ptxvm-weak:"):
		seed := uint64(1)
		if s, ok := strings.CutPrefix(spec, "ptxvm-weak:"); ok {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("--backend %s: want ptxvm-weak:SEED with a decimal seed", spec)
			}
			seed = v
		}
		return ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: threads, NoRaceCheck: true, Weak: &ptxvm.Weak{Seed: seed}}}), nil
	case spec == "cuda" || strings.HasPrefix(spec, "cuda:"):
		n := 0
		if s, ok := strings.CutPrefix(spec, "cuda:"); ok {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("--backend %s: want cuda:N with a device number N", spec)
			}
			n = v
		}
		b, err := cuda.Open(n)
		if errors.Is(err, device.ErrNotBuilt) {
			return nil, fmt.Errorf("--backend %s: this verity binary was built without CUDA; build it with go build -tags cuda ./tools/verity (README: GPU build)", spec)
		}
		return b, err
	}
	return nil, fmt.Errorf("--backend %q: want cpu, ptxvm, ptxvm-weak[:SEED], cuda or cuda:N", spec)
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
