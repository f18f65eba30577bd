package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/repack"
)

// BenchmarkDecodeSmall: the one-column matvecs of a small model's decode step in turn (four
// layers of 256-wide projections and a 768-wide feed-forward, q4_K, and a 1024-row q6_K
// output: 2.4 MB, beyond a core's L2), one call per op, with the rows forms' prefetching on
// and off; per step. BenchmarkPrefillSmall: the same matvecs for a 64-token prompt step (the
// rows forms' prefetching is a one-column matter).
func BenchmarkDecodeSmall(b *testing.B) { benchSmallStep(b, 1, false) }

func BenchmarkPrefillSmall(b *testing.B) { benchSmallStep(b, 64, false) }

// BenchmarkPrefillWide: a 64-token prompt step's matvecs at a 1B model's widths (2048-wide
// projections, an 8192-wide feed-forward down projection), a slice of their rows.
func BenchmarkPrefillWide(b *testing.B) { benchSmallStep(b, 64, true) }

func benchSmallStep(b *testing.B, n int, wide bool) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, workers := range []int{1, 2} {
		be := cpu.New(workers)
		type op struct {
			k *device.Kernel[kernels.MatVecArgs]
			a kernels.MatVecArgs
		}
		var ops []op
		xs := map[int]device.Ptr{}
		yp, _ := be.Alloc(int64(4 * 1024 * n))
		add := func(t dtype.Type, rows, cols int) {
			f, _ := kernels.Lookup(t)
			if _, ok := xs[cols]; !ok {
				xb := f.Act.RowBytes(cols)
				x := make([]byte, n*xb)
				for c := 0; c < n; c++ {
					kernels.ConvertRow(f.Act, x[c*xb:], randF32(r, cols, 1))
				}
				xs[cols] = upload(b, be, x)
			}
			l, _ := repack.NewLayout(t, []int64{int64(cols), int64(rows)})
			w := make([]byte, l.Size())
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			for row := 0; row < rows; row++ {
				for j := int64(0); j < l.Blocks*l.F16Fields; j++ {
					binary.LittleEndian.PutUint16(w[int64(row)*l.RowStride+l.F16Off+2*j:], uint16(r.IntN(0x3800)))
				}
			}
			k, _ := kernels.MatVecFor(t, n)
			ops = append(ops, op{k, kernels.MatVecArgs{W: upload(b, be, w), X: xs[cols], Y: yp, Rows: int32(rows), Cols: int32(cols), N: int32(n)}})
		}
		if wide {
			add(dtype.Q4_K, 512, 2048)
			add(dtype.Q4_K, 256, 8192)
			add(dtype.Q6_K, 256, 8192)
		}
		for layer := 0; layer < 4 && !wide; layer++ {
			for _, rows := range []int{256, 64, 64, 256, 768, 768} {
				add(dtype.Q4_K, rows, 256)
			}
			add(dtype.Q4_K, 256, 768)
		}
		if !wide {
			add(dtype.Q6_K, 1024, 256)
		}
		for _, pf := range []bool{true, false}[:3-min(n, 2)] {
			name := fmt.Sprintf("threads=%d", workers)
			if n == 1 {
				name += fmt.Sprintf("/prefetch=%v", pf)
			}
			b.Run(name, func(b *testing.B) {
				kernels.SetRowsPrefetch(pf)
				defer kernels.SetRowsPrefetch(true)
				timeCalls(b, func() error {
					for _, o := range ops {
						if err := device.Launch(be, o.k, o.a); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
		be.Close()
	}
}
