//go:build cuda

package cuda_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"verity/device"
	"verity/device/cuda"
	"verity/device/devicetest"
	"verity/device/kernels"
)

// TestInfo records the device's properties.
func TestInfo(t *testing.T) {
	b := openCUDA(t)
	in, err := b.Info()
	if err != nil {
		t.Fatal(err)
	}
	if in.SMs <= 0 || in.TotalMem <= 0 || in.SharedOptin < 48<<10 {
		t.Errorf("implausible device properties %+v", in)
	}
	record(t, "device", struct {
		cuda.Info
		Backend    string  `json:"backend"`
		PeakGBs    float64 `json:"peak_gb_s"` // from the memory clock and bus width
		ComputeCap string  `json:"compute_capability"`
	}{in, b.Name(), in.PeakBandwidth() / 1e9, fmt.Sprintf("%d.%d", in.Major, in.Minor)})
}

// A failing driver call names the driver's error code.
func TestDriverErrorNames(t *testing.T) {
	b := open(t)
	_, err := b.Alloc(1 << 45) // 32 TiB
	if err == nil {
		t.Fatal("32 TiB allocation succeeded")
	}
	var de *cuda.DriverError
	if !errors.As(err, &de) || de.Name != "CUDA_ERROR_OUT_OF_MEMORY" || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Errorf("got %v (%#v), want a DriverError named CUDA_ERROR_OUT_OF_MEMORY", err, de)
	}
	t.Log(err)
}

// sharedSpec is a kernel asking for more dynamic shared memory than it uses.
type sharedSpec struct {
	device.Spec
	shared uint32
}

func (s sharedSpec) Geometry(args any) (device.Geometry, error) {
	g, err := s.Spec.Geometry(args)
	g.Shared = s.shared
	return g, err
}

// Launches may ask for more than 48 KiB of dynamic shared memory up to the device's opt-in
// maximum; beyond it they are unsupported.
func TestSharedMemoryOptIn(t *testing.T) {
	b := openCUDA(t)
	in, err := b.Info()
	if err != nil {
		t.Fatal(err)
	}
	c := devicetest.Cases("add_f32")[2]
	for _, shared := range []uint32{64 << 10, uint32(in.SharedOptin) - 4096} {
		err := devicetest.Check(b, sharedSpec{kernels.Add, shared}, c)
		if errors.Is(err, device.ErrUnsupported) && shared == 64<<10 {
			t.Skip(err) // no PTX for the kernel
		}
		if err != nil {
			t.Errorf("%d bytes of dynamic shared memory: %v", shared, err)
		}
	}
	err = devicetest.Check(b, sharedSpec{kernels.Add, uint32(in.SharedOptin) + 1}, c)
	if !errors.Is(err, device.ErrUnsupported) {
		t.Errorf("one byte over the opt-in maximum: %v, want ErrUnsupported", err)
	}
}

// Transfers staged through pinned memory give the bytes of direct ones, at any offset.
func TestStagedTransfers(t *testing.T) {
	b := open(t)
	n := 2*cuda.StageChunk + 5*cuda.StageChunk/2 + 123 // several chunks and a ragged end
	p, err := b.Alloc(int64(n) + 4096)
	if err != nil {
		t.Fatal(err)
	}
	data := devicetest.FiniteBits(1, n)
	got := make([]byte, n)
	for _, c := range []struct {
		name              string
		writeMin, readMin int64
	}{{"staged write, direct read", 1, 1 << 62}, {"direct write, staged read", 1 << 62, 1}, {"staged both", 1, 1}} {
		for _, off := range []device.Ptr{0, 1, 4095} {
			clear(got)
			if err := cuda.SetStageMin(b, c.writeMin); err != nil {
				t.Fatal(err)
			}
			if err := b.Write(p+off, data); err != nil {
				t.Fatal(err)
			}
			if err := cuda.SetStageMin(b, c.readMin); err != nil {
				t.Fatal(err)
			}
			if err := b.Read(got, p+off); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("%s at offset %d: bytes differ", c.name, off)
			}
		}
	}
}

// While a graph is being captured, calls that cannot be captured fail, and the backend works
// normally afterwards.
func TestCaptureRefusesOtherCalls(t *testing.T) {
	b := openCUDA(t)
	src, err := b.Upload([]byte("captured copy"))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := b.Alloc(256)
	if err != nil {
		t.Fatal(err)
	}
	var allocErr, syncErr error
	g, err := b.Capture(func() error {
		_, allocErr = b.Alloc(256)
		syncErr = b.Sync()
		return b.Copy(dst, src, 13)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if allocErr == nil || syncErr == nil {
		t.Errorf("during capture: Alloc error %v, Sync error %v; want both refused", allocErr, syncErr)
	}
	if g.Nodes() != 1 {
		t.Errorf("capture of one copy has %d nodes", g.Nodes())
	}
	got := make([]byte, 13)
	if err := b.Read(got, dst); err != nil || string(got) != string(make([]byte, 13)) {
		t.Errorf("the captured copy ran during capture: %q, %v", got, err)
	}
	if err := g.Launch(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := b.Read(got, dst); err != nil || string(got) != "captured copy" {
		t.Errorf("after the graph ran: %q, %v", got, err)
	}
	if _, err := b.Alloc(256); err != nil {
		t.Errorf("after capture: %v", err)
	}
	if _, err := b.Capture(func() error { return errors.New("f failed") }); err == nil || err.Error() != "f failed" {
		t.Errorf("capture of a failing function: %v", err)
	}
}

// The timeline's marks bracket device work: a copy of 256 MiB between two marks takes device
// time, two marks with nothing between take next to none, released marks are gone, and their
// events are reused.
func TestTimeline(t *testing.T) {
	b := openCUDA(t)
	const n = 256 << 20
	src, err := b.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := b.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		m0, err := b.Mark()
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Copy(dst, src, n); err != nil {
			t.Fatal(err)
		}
		m1, err := b.Mark()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := b.Mark()
		if err != nil {
			t.Fatal(err)
		}
		busy, err := b.Elapsed(m0, m1)
		if err != nil {
			t.Fatal(err)
		}
		idle, err := b.Elapsed(m1, m2)
		if err != nil {
			t.Fatal(err)
		}
		if busy <= 0 || idle > busy/10 {
			t.Errorf("round %d: the copy took %v, the empty interval %v", round, busy, idle)
		}
		if err := b.ReleaseMarks(m0, m1, m2); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Elapsed(m0, m1); err == nil {
			t.Errorf("round %d: a released mark still measures", round)
		}
		t.Logf("round %d: %d MiB copied in %v (%.0f GB/s); empty interval %v", round, n>>20, busy, 2*n/busy.Seconds()/1e9, idle)
	}
}
