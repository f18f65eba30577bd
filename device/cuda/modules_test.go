//go:build cuda

package cuda_test

import (
	"errors"
	"flag"
	"slices"
	"testing"
	"time"

	"verity/device"
	"verity/device/cuda"
	"verity/device/devicetest"
	"verity/device/kernels"
	"verity/ptx"
)

var faultTest = flag.Bool("fault", false, "run TestFaultIsSticky (alone: nothing runs on the device after it)")

// modulesLastMegakernel lists the modules with the megakernel's, the longest to compile, last.
func modulesLastMegakernel() []string {
	mods := ptx.Modules()
	if i := slices.Index(mods, "megakernel"); i >= 0 {
		mods = append(append(mods[:i:i], mods[i+1:]...), "megakernel")
	}
	return mods
}

// TestModules loads every module as every other test loads it — the device's cubin, else the
// PTX through the driver's JIT (whose compute cache then has it for the later tests) — and
// records, for each, what was loaded and why, how long it took, and every kernel's registers,
// shared and local memory as the driver reports them.
func TestModules(t *testing.T) {
	b := openCUDA(t)
	for _, m := range modulesLastMegakernel() {
		rec, err := b.LoadModule(m)
		record(t, "module", rec)
		if err != nil {
			t.Errorf("module %s: %v", m, err)
			continue
		}
		t.Logf("%s: %s in %.1f ms (JIT %.1f ms) %s", m, rec.Code, rec.LoadMS, rec.JITMS, rec.Why)
		for name, a := range rec.Kernels {
			if a.BinaryVersion == 0 || a.MaxThreads == 0 {
				t.Errorf("%s: implausible attributes %+v", name, a)
			}
		}
	}
}

// TestJIT loads every module from its PTX through the driver's JIT — the path of a GPU without
// cubins — and records each JIT's wall time and log; then it runs the first test case of every
// kernel that has one both ways, JIT-compiled and from the cubins (where the device has them),
// and requires the same output bits from both, and the twin's.
func TestJIT(t *testing.T) {
	auto := openCUDA(t)
	if cuda.Count() == 0 {
		t.Skip("no CUDA device")
	}
	jit, err := cuda.OpenPTX(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := jit.Close(); err != nil {
			t.Error(err)
		}
	})
	start := time.Now()
	for _, m := range modulesLastMegakernel() {
		rec, err := jit.LoadModule(m)
		record(t, "module_jit", rec)
		if err != nil {
			t.Errorf("module %s: %v", m, err)
			continue
		}
		t.Logf("%s: PTX in %.1f ms (JIT %.1f ms)", m, rec.LoadMS, rec.JITMS)
	}
	t.Logf("every module JIT-compiled in %v", time.Since(start))

	var compared, differ []string
	cubins := 0
	for _, k := range device.Kernels() {
		cs := devicetest.Cases(k.Entry())
		if cs == nil {
			continue
		}
		c := cs[0]
		viaJIT, errJ := devicetest.Outputs(jit, k, c)
		viaAuto, errA := devicetest.Outputs(auto, k, c)
		if errors.Is(errJ, device.ErrUnsupported) && errors.Is(errA, device.ErrUnsupported) {
			continue
		}
		if err := errors.Join(errJ, errA); err != nil {
			t.Errorf("%s case %s: %v", k.Entry(), c.Name, err)
			if errors.Is(err, device.ErrDeviceLost) {
				break
			}
			continue
		}
		compared = append(compared, k.Entry())
		for i, buf := range c.Buffers {
			if err := devicetest.Compare(viaAuto[i], viaJIT[i]); err != nil {
				differ = append(differ, k.Entry())
				t.Errorf("%s case %s: buffer %s from the JIT-compiled PTX differs from the loaded code's: %v", k.Entry(), c.Name, buf.Name, err)
				break
			}
		}
		if err := devicetest.Check(jit, k, c); err != nil {
			t.Errorf("%s case %s, JIT-compiled: %v", k.Entry(), c.Name, err)
		}
	}
	for _, l := range auto.Modules() {
		if l.Code != "PTX" && l.Error == "" {
			cubins++
		}
	}
	if len(compared) == 0 {
		t.Error("no kernel compared")
	}
	record(t, "cubin_vs_ptx", map[string]any{"kernels": len(compared), "differ": differ, "cubin_modules": cubins,
		"backend": auto.Name()})
}

// TestFaultIsSticky launches a kernel at an address nothing allocated: the fault is a
// device.ErrDeviceLost naming the driver's error, and from then on every call — a new
// allocation, a new context — returns the same fault without reaching the driver. It must run
// in a process of its own (the GPU check's fault phase): nothing runs on the device after it,
// so it runs only when asked for with -fault.
func TestFaultIsSticky(t *testing.T) {
	if !*faultTest {
		t.Skip("leaves the device unusable for the rest of the process: run it alone, with -fault")
	}
	b := openCUDA(t)
	const unmapped = device.Ptr(0x7f0000000000)
	err := device.Launch(b, kernels.Add, kernels.BinaryArgs{A: unmapped, B: unmapped, Y: unmapped, N: 1 << 20})
	if err == nil {
		err = b.Sync()
	}
	if !errors.Is(err, device.ErrDeviceLost) {
		t.Fatalf("a launch at an unmapped address: %v, want a device.ErrDeviceLost", err)
	}
	t.Logf("the fault: %v", err)
	fault, code := err.Error(), ""
	var de *cuda.DriverError
	if errors.As(err, &de) {
		code = de.Name
	} else {
		t.Errorf("the fault %v carries no *cuda.DriverError", err)
	}
	_, err = b.Alloc(256)
	var le *cuda.LostError
	if !errors.As(err, &le) || !errors.Is(err, device.ErrDeviceLost) {
		t.Errorf("an allocation after the fault: %v, want a *cuda.LostError", err)
	}
	if _, err := cuda.Open(0); !errors.As(err, &le) {
		t.Errorf("a new context after the fault: %v, want a *cuda.LostError", err)
	}
	record(t, "fault", map[string]any{"error": fault, "code": code})
}
