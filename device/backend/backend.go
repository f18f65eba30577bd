// Package backend opens device backends by name, as the command line's --backend and the C
// library's options give them: cpu, ptxvm, ptxvm-weak[:SEED], cuda[:N], or a comma-separated
// list of those (the stages of a pipeline).
package backend

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"verity/device"
	"verity/device/cpu"
	"verity/device/cuda"
	"verity/device/dtype"
	"verity/device/ptxvm"
)

// Help describes the names Open takes.
const Help = "where kernels run: cpu (the Go twins), ptxvm (the committed PTX, interpreted), ptxvm-weak or ptxvm-weak:SEED (interpreted with memory as weakly ordered as PTX allows, blocks scheduled adversarially from SEED, default 1), cuda or cuda:N (GPU N; a binary built with -tags cuda); a comma-separated list splits the layers across them as a pipeline"

// Open opens the backend spec names ("" is cpu); threads sizes the CPU ones (0: one per CPU).
// A cuda backend in a binary built without the cuda tag is an error wrapping
// device.ErrNotBuilt.
func Open(spec string, threads int) (device.Backend, error) {
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
				return nil, fmt.Errorf("backend %s: want ptxvm-weak:SEED with a decimal seed", spec)
			}
			seed = v
		}
		return ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: threads, NoRaceCheck: true, Weak: &ptxvm.Weak{Seed: seed}}}), nil
	case spec == "cuda" || strings.HasPrefix(spec, "cuda:"):
		n := 0
		if s, ok := strings.CutPrefix(spec, "cuda:"); ok {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("backend %s: want cuda:N with a device number N", spec)
			}
			n = v
		}
		b, err := cuda.Open(n)
		if errors.Is(err, device.ErrNotBuilt) {
			return nil, fmt.Errorf("backend %s: %w (this binary was built without CUDA: build it with -tags cuda)", spec, err)
		}
		return b, err
	}
	return nil, fmt.Errorf("backend %q: want cpu, ptxvm, ptxvm-weak[:SEED], cuda or cuda:N", spec)
}

// OpenList opens the comma-separated backends of spec (see Open): the stages of a pipeline.
func OpenList(spec string, threads int) ([]device.Backend, error) {
	var out []device.Backend
	for _, s := range strings.Split(spec, ",") {
		b, err := Open(strings.TrimSpace(s), threads)
		if err != nil {
			CloseAll(out)
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// CloseAll closes every backend of bs.
func CloseAll(bs []device.Backend) {
	for _, b := range bs {
		b.Close()
	}
}

// Names names a list of backends, in pipeline order.
func Names(bs []device.Backend) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Name()
	}
	return strings.Join(names, " → ")
}

// DefaultCacheType is the K/V caches' element type when none is asked for: f16 when a stage
// is a GPU (half the memory, and half the bytes attention reads), f32 on the CPU twin and the
// interpreter (where the goldens and the float64 reference's agreement are kept).
func DefaultCacheType(bes []device.Backend) dtype.Type {
	for _, b := range bes {
		if strings.HasPrefix(b.Name(), "cuda") {
			return dtype.F16
		}
	}
	return dtype.F32
}
