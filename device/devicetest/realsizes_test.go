package devicetest_test

import (
	"testing"

	"verity/device"
	"verity/device/devicetest"
)

// Every entry with real-size cases is a registered kernel. (The cases themselves allocate
// gigabytes, so only a real device runs them: TestConformanceRealSizes in device/cuda.)
func TestRealEntriesAreKernels(t *testing.T) {
	specs := map[string]bool{}
	for _, k := range device.Kernels() {
		specs[k.Entry()] = true
	}
	entries := devicetest.RealEntries()
	if len(entries) == 0 {
		t.Fatal("no real-size cases")
	}
	for _, e := range entries {
		if !specs[e] {
			t.Errorf("real-size cases for %s, which is not a registered kernel", e)
		}
	}
}

// Identical seeds give identical bytes, and no float field of any width is Inf or NaN.
func TestFiniteBits(t *testing.T) {
	a, b := devicetest.FiniteBits(1, 1001), devicetest.FiniteBits(1, 1001)
	if string(a) != string(b) {
		t.Fatal("FiniteBits is not a function of its seed")
	}
	for i := 0; i+1 < len(a); i++ {
		if hi := a[i+1]; hi&0x7c == 0x7c || hi&0x7f == 0x7f {
			t.Fatalf("bytes %d,%d (%#02x %#02x) read as an f16/bf16/f32 high byte would be Inf or NaN", i, i+1, a[i], hi)
		}
	}
}
