//go:build cuda

package cuda_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"verity/device"
	"verity/device/cuda"
	"verity/device/devicetest"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/repack"
)

// Bandwidth measurements. Rates are in GB/s (10⁹ bytes per second). A copy of n bytes counts
// 2n bytes (n read and n written): the convention of the copy rate the design's targets quote.
// A matvec counts the weight bytes it reads (the packed layout's size), not its activations.

const (
	copyBytes   = 1 << 30  // the device-to-device copy measured
	copyRounds  = 8        // best of
	mvRows      = 16384    // rows of each packed matrix, stacked mvTall times per launch
	mvTall      = 4        // so that a launch reads 4× the matrix (hundreds of MB): gaps between launches weigh less
	mvMinBytes  = 64 << 20 // each matrix has at least this many GGUF bytes
	mvIters     = 10       // launches per timed batch
	mvRounds    = 3        // best batch of
	hostBytes   = 1 << 30  // host↔device transfer size
	hostRepeats = 3        // best of
)

// busy keeps the device occupied with a copy, so that what is enqueued next is queued before
// the device reaches it and launch overhead stays out of event timings.
type busy struct {
	b        *cuda.Backend
	src, dst device.Ptr
	took     time.Duration // device time of one busy copy
}

// TestBandwidth measures the device-to-device copy rate, then each weight type's matvec rate
// on a matrix of at least 64 MB with 1 and 8 activation columns, as a fraction of the copy
// rate.
func TestBandwidth(t *testing.T) {
	b := openCUDA(t)
	src, err := b.Alloc(copyBytes)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := b.Alloc(copyBytes)
	if err != nil {
		t.Fatal(err)
	}
	bz := &busy{b: b, src: src, dst: dst}
	if err := b.Copy(dst, src, copyBytes); err != nil { // warm-up
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	best := time.Duration(math.MaxInt64)
	for i := 0; i < copyRounds; i++ {
		// The first copy keeps the device busy while the timed one is enqueued behind it.
		if err := b.Copy(dst, src, copyBytes); err != nil {
			t.Fatal(err)
		}
		d, err := b.Time(func() error { return b.Copy(dst, src, copyBytes) })
		if err != nil {
			t.Fatal(err)
		}
		best = min(best, d)
	}
	bz.took = best
	copyRate := 2 * copyBytes / best.Seconds()
	t.Logf("copy %d MiB: %v, %.0f GB/s read+write (%.0f GB/s one way)", copyBytes>>20, best, copyRate/1e9, copyRate/2e9)
	record(t, "copy", map[string]any{"bytes": copyBytes, "rounds": copyRounds, "best_us": us(best),
		"gb_s": copyRate / 1e9, "one_way_gb_s": copyRate / 2e9, "convention": "read+write: 2 x bytes / time"})

	for _, ty := range kernels.WeightTypes() {
		t.Run(ty.String(), func(t *testing.T) { matvecBandwidth(t, b, bz, ty, copyRate) })
	}
}

// matvecBandwidth times the matvec of type ty on two copies of one random matrix, alternately
// (so that the L2 cache never holds the matrix the next launch reads), in batches of mvIters
// launches queued behind a busy copy; the best batch counts.
func matvecBandwidth(t *testing.T, b *cuda.Backend, bz *busy, ty dtype.Type, copyRate float64) {
	f, err := kernels.Lookup(ty)
	if err != nil {
		t.Fatal(err)
	}
	cols := 256
	for {
		rb, err := ty.RowBytes(int64(cols))
		if err != nil {
			t.Fatal(err)
		}
		if mvRows*rb >= mvMinBytes {
			break
		}
		cols += 256
	}
	rb, _ := ty.RowBytes(int64(cols))
	gguf := devicetest.FiniteBits(uint64(ty), mvRows*int(rb))
	p, err := repack.Pack(ty, []int64{int64(cols), mvRows}, gguf)
	if err != nil {
		t.Fatal(err)
	}
	// Packed rows are independent, so mvTall copies of the matrix back to back are one matrix of
	// mvTall·mvRows rows; two such, launched alternately, never fit the L2 cache.
	var ws [2]device.Ptr
	for i := range ws {
		if ws[i], err = b.Alloc(mvTall * p.Layout.Size()); err != nil {
			t.Fatal(err)
		}
		defer b.Free(ws[i])
		for k := int64(0); k < mvTall; k++ {
			if err := b.Write(ws[i]+device.Ptr(k*p.Layout.Size()), p.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	used := mvTall * usedBytes(&p.Layout)
	const maxN = 8
	xf, err := b.Upload(device.F32Bytes(randF32(uint64(ty)+1, maxN*cols)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(xf)
	x := xf
	if k := kernels.Convert(f.Act); k != nil {
		if x, err = b.Alloc(int64(maxN * f.Act.RowBytes(cols))); err != nil {
			t.Fatal(err)
		}
		defer b.Free(x)
		// an unsupported conversion leaves x unset; the matvec's unsupported error is reported
		if err := device.Launch(b, k, kernels.ConvertArgs{X: xf, Out: x, Cols: int32(cols), N: maxN}); err != nil && !errors.Is(err, device.ErrUnsupported) {
			t.Fatal(err)
		}
	}
	y, err := b.Alloc(4 * maxN * mvTall * mvRows)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(y)

	for _, n := range []int{1, maxN} {
		mv, err := kernels.MatVecFor(ty, n) // matvec for one column, matvec8 for eight
		if err != nil {
			t.Fatal(err)
		}
		launch := func(i int) error {
			return device.Launch(b, mv, kernels.MatVecArgs{W: ws[i%2], X: x, Y: y, Rows: mvTall * mvRows, Cols: int32(cols), N: int32(n)})
		}
		row := map[string]any{"type": ty.String(), "kernel": mv.Entry(), "n": n, "rows": mvTall * mvRows, "cols": cols,
			"used_bytes": used, "packed_bytes": mvTall * p.Layout.Size(), "gguf_bytes": mvTall * len(gguf)}
		if err := errors.Join(launch(0), launch(1), b.Sync()); err != nil {
			if errors.Is(err, device.ErrUnsupported) {
				row["error"] = "unsupported"
				record(t, "matvec", row)
				t.Skip(err)
			}
			t.Fatal(err)
		}
		best, hostBound := time.Duration(math.MaxInt64), false
		for r := 0; r < mvRounds; r++ {
			start := time.Now()
			if err := b.Copy(bz.dst, bz.src, copyBytes); err != nil {
				t.Fatal(err)
			}
			var queued time.Duration
			d, err := b.Time(func() error {
				for i := 0; i < mvIters; i++ {
					if err := launch(i); err != nil {
						return err
					}
				}
				queued = time.Since(start)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// If the launches were not all queued before the busy copy ended, the device
			// waited for some of them and the timing includes those gaps.
			hostBound = hostBound || queued > bz.took
			best = min(best, d/mvIters)
		}
		rate := float64(used) / best.Seconds()
		row["us"], row["gb_s"], row["pct_of_copy"], row["host_bound"] = us(best), rate/1e9, 100*rate/copyRate, hostBound
		note := ""
		if hostBound {
			note = " (host-bound: the timing includes gaps)"
		}
		t.Logf("%s n=%d: %d×%d, %.1f MB read (%.1f MB packed with padding, %.1f MB GGUF): %v, %.0f GB/s, %.1f%% of copy%s", ty, n,
			mvTall*mvRows, cols, float64(used)/1e6, float64(mvTall*p.Layout.Size())/1e6, float64(mvTall*len(gguf))/1e6, best, rate/1e9,
			100*rate/copyRate, note)
		record(t, "matvec", row)
	}
}

// TestHostTransfer measures Write and Read of 1 GiB, staged through pinned buffers and direct
// (pageable memory, the driver's own staging).
func TestHostTransfer(t *testing.T) {
	b := open(t)
	host := devicetest.FiniteBits(3, hostBytes)
	p, err := b.Alloc(hostBytes)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]any{"bytes": hostBytes}
	for _, mode := range []struct {
		name string
		min  int64
	}{{"staged", 0}, {"direct", 1 << 62}} {
		if err := cuda.SetStageMin(b, mode.min); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, hostBytes)
		for _, dir := range []string{"write", "read"} {
			best := time.Duration(math.MaxInt64)
			for i := 0; i < hostRepeats; i++ {
				start := time.Now()
				if dir == "write" {
					err = b.Write(p, host)
				} else {
					err = b.Read(back, p)
				}
				if err != nil {
					t.Fatal(err)
				}
				best = min(best, time.Since(start))
			}
			res[fmt.Sprintf("%s_%s_gb_s", dir, mode.name)] = hostBytes / best.Seconds() / 1e9
		}
		if !bytes.Equal(back, host) {
			t.Errorf("%s: read back differs", mode.name)
		}
	}
	t.Logf("%v", res)
	record(t, "host_link", res)
}

// usedBytes is what a matvec reads of a packed matrix: every row's fp16 fields, unpacked
// scales and plane bytes (the GGUF bytes for float types), not the alignment padding.
func usedBytes(l *repack.Layout) int64 {
	if len(l.Planes) == 0 {
		return l.Rows * l.RowBytes
	}
	row := 2*l.F16Fields*l.Blocks + l.ScaleBytes*l.Blocks
	for _, pl := range l.Planes {
		row += l.Units * pl.Width
	}
	return l.Rows * row
}
