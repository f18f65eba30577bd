package machine

import (
	"fmt"
	"time"

	"verity/device"
)

// The facts a GPU backend reports, each an optional method of device.Backend (device/cuda has
// them all).
type (
	totalMemory interface{ TotalMemory() (int64, error) }
	smCount     interface{ Multiprocessors() (int, error) }
	copyTimer   interface {
		Copy(dst, src device.Ptr, n int64) error
		Time(f func() error) (time.Duration, error)
	}
)

// IsGPU reports whether b has memory of its own (a GPU) rather than computing in host memory.
func IsGPU(b device.Backend) bool {
	_, ok := b.(totalMemory)
	return ok
}

// MeasureGPU measures backend b's device: its memory and SMs as the driver reports them and
// its device-to-device copy rate, timed by the device (on two buffers of up to 512 MB, an
// eighth of its memory at most). It returns false for a backend that is not a GPU.
func MeasureGPU(b device.Backend) (GPU, bool, error) {
	tm, ok := b.(totalMemory)
	if !ok {
		return GPU{}, false, nil
	}
	g := GPU{Backend: b.Name()}
	var err error
	if g.MemoryBytes, err = tm.TotalMemory(); err != nil {
		return g, true, fmt.Errorf("machine: %s: memory: %w", g.Backend, err)
	}
	if s, ok := b.(smCount); ok {
		if g.SMs, err = s.Multiprocessors(); err != nil {
			return g, true, fmt.Errorf("machine: %s: SMs: %w", g.Backend, err)
		}
	}
	ct, ok := b.(copyTimer)
	if !ok {
		return g, true, nil
	}
	n := min(int64(512<<20), g.MemoryBytes/8)
	src, err := b.Alloc(n)
	if err != nil {
		return g, true, err
	}
	defer b.Free(src)
	dst, err := b.Alloc(n)
	if err != nil {
		return g, true, err
	}
	defer b.Free(dst)
	best := time.Duration(0)
	for r := 0; r < 6; r++ { // the first round warms up
		d, err := ct.Time(func() error { return ct.Copy(dst, src, n) })
		if err != nil {
			return g, true, err
		}
		if r > 0 && d > 0 && (best == 0 || d < best) {
			best = d
		}
	}
	if best > 0 {
		g.CopyBytesPerSec = 2 * float64(n) / best.Seconds()
	}
	return g, true, nil
}
