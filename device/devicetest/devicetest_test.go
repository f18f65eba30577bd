package devicetest_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/devicetest"
	"verity/device/kernels"
)

// The CPU backend with several workers passes its own conformance suite: the harness runs,
// and the twins do not depend on how their rows are split between workers.
func TestCPU(t *testing.T) {
	b := cpu.New(3)
	defer b.Close()
	devicetest.Run(t, b)
}

// Every kernel entry with cases is a registered kernel, and every case's shape is one its
// spec accepts.
func TestCasesAreValid(t *testing.T) {
	specs := map[string]device.Spec{}
	for _, k := range device.Kernels() {
		specs[k.Entry()] = k
	}
	for _, e := range devicetest.Entries() {
		k, ok := specs[e]
		if !ok {
			t.Errorf("cases for %s, which is not a registered kernel", e)
			continue
		}
		for _, c := range devicetest.Cases(e) {
			ptrs := make([]device.Ptr, len(c.Buffers))
			for i := range ptrs {
				ptrs[i] = device.Ptr(1<<32 + i<<20)
			}
			if _, err := k.Geometry(c.Args(ptrs)); err != nil {
				t.Errorf("%s case %s: %v", e, c.Name, err)
			}
		}
	}
}

// brokenBackend corrupts one output byte, writes past a buffer, or modifies an input, to
// check that the harness notices each.
type brokenBackend struct {
	*cpu.Backend
	mode string
}

func (b *brokenBackend) Launch(k device.Spec, args any) error {
	if err := b.Backend.Launch(k, args); err != nil {
		return err
	}
	a := args.(kernels.BinaryArgs)
	switch b.mode {
	case "output":
		buf, _ := b.Bytes(a.Y, 4)
		buf[0] ^= 1
	case "guard":
		buf, _ := b.Bytes(a.Y+device.Ptr(4*a.N), 1)
		buf[0] ^= 0xff
	case "input":
		buf, _ := b.Bytes(a.B, 4)
		buf[1] ^= 1
	}
	return nil
}

func TestHarnessCatches(t *testing.T) {
	add := kernels.Add
	c := devicetest.Cases("add_f32")[1]
	for mode, want := range map[string]string{
		"output": "output Y differs from the twin: word 0 (byte 0)",
		"guard":  "buffer Y: guard byte 0 after the buffer was overwritten",
		"input":  "read-only buffer B was modified",
	} {
		b := &brokenBackend{cpu.New(1), mode}
		err := devicetest.Check(b, add, c)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", mode, err, want)
		}
		b.Close()
	}
	// an unsupported kernel is reported as such (Run skips it)
	err := devicetest.Check(unsupported{cpu.New(1)}, add, c)
	if !errors.Is(err, device.ErrUnsupported) {
		t.Errorf("got %v, want ErrUnsupported", err)
	}
}

type unsupported struct{ *cpu.Backend }

func (unsupported) Launch(device.Spec, any) error { return device.ErrUnsupported }

// lostBackend loses the device at its second launch: that launch and every later call fail
// with device.ErrDeviceLost, as a CUDA context does after an illegal address.
type lostBackend struct {
	*cpu.Backend
	launches int
}

var errLost = fmt.Errorf("cuda: sync context: CUDA_ERROR_ILLEGAL_ADDRESS: %w", device.ErrDeviceLost)

func (b *lostBackend) Launch(k device.Spec, args any) error {
	b.launches++
	if b.launches >= 2 {
		return errLost
	}
	return b.Backend.Launch(k, args)
}

func (b *lostBackend) Read(dst []byte, src device.Ptr) error {
	if b.launches >= 2 {
		return errLost
	}
	return b.Backend.Read(dst, src)
}

// Run stops at the launch that loses the device, names its kernel and case, and leaves the
// later kernels unchecked rather than failing each of them. (Run fails the test it is given,
// so it runs in a child process of this test binary.)
func TestRunStopsWhenDeviceLost(t *testing.T) {
	if os.Getenv("DEVICETEST_LOST") == "1" {
		st := devicetest.Run(t, &lostBackend{Backend: cpu.New(1)})
		t.Logf("stats %+v", st)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunStopsWhenDeviceLost$", "-test.v")
	cmd.Env = append(os.Environ(), "DEVICETEST_LOST=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the run that lost its device passed:\n%s", out)
	}
	kernels := devicetest.Entries()
	var first string
	for _, k := range device.Kernels() {
		if devicetest.Cases(k.Entry()) != nil {
			first = k.Entry()
			break
		}
	}
	cs := devicetest.Cases(first)
	if len(cs) < 2 {
		t.Fatalf("the first kernel with cases, %s, has %d cases; the test needs 2", first, len(cs))
	}
	lost := first + " case " + cs[1].Name
	for _, want := range []string{
		"case " + cs[1].Name + ": the device was lost: cuda: sync context: CUDA_ERROR_ILLEGAL_ADDRESS",
		fmt.Sprintf("stopped at %s, which lost the device; %d kernels with cases not checked", lost, len(kernels)-1),
		`Lost:` + lost,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
