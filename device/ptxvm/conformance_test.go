package ptxvm_test

import (
	"testing"

	"verity/device/devicetest"
	"verity/device/ptxvm"
	"verity/megakernel"
	"verity/ptx"
)

// The committed PTX of every kernel with test cases, run in the interpreter, gives the
// twins' bits.
func TestConformance(t *testing.T) {
	b := ptxvm.New(ptxvm.Options{})
	defer b.Close()
	s := devicetest.Run(t, b)
	t.Logf("%d kernels, %d launches (one shape each), %d output bytes compared, %d skipped, %d failed",
		s.Kernels, s.Launches, s.Bytes, s.Skipped, s.Failed)
}

// The same in the weak-memory mode: no load is stale however the blocks interleave (the
// kernels' blocks share nothing during a launch but attention's, whose partial results are
// ordered by its counters' acquire-release atomics).
func TestConformanceWeak(t *testing.T) {
	b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: 4, Weak: &ptxvm.Weak{Seed: 1}}})
	defer b.Close()
	s := devicetest.Run(t, b)
	t.Logf("%d kernels, %d launches, %d failed", s.Kernels, s.Launches, s.Failed)
}

// Every committed PTX entry loads, and has conformance cases (the megakernel's are whole
// programs: TestMegakernelGoldens).
func TestEveryEntryHasCases(t *testing.T) {
	b := ptxvm.New(ptxvm.Options{})
	defer b.Close()
	for _, e := range ptx.Entries() {
		m, err := b.Module(e.Module)
		if err != nil {
			t.Errorf("module %s: %v", e.Module, err)
			continue
		}
		if m.Kernel(e.Name) == nil {
			t.Errorf("module %s: no entry %s", e.Module, e.Name)
		}
		if devicetest.Cases(e.Name) == nil && e.Name != megakernel.Kernel.EntryName {
			t.Errorf("entry %s has no devicetest cases", e.Name)
		}
	}
}
