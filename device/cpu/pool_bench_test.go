package cpu

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkFor is the cost of one parallel-for over a few cheap indices — the per-op overhead
// of the worker pool — at 1 and 2 threads, back to back and with a few microseconds of the
// caller's own work between calls (an executor lowering the next op). Besides the mean it
// reports the median and the fastest call (ns/call-p50, ns/call-min), which a machine shared
// with other work disturbs far less.
func BenchmarkFor(b *testing.B) {
	for _, workers := range []int{1, 2} {
		for _, gap := range []time.Duration{0, 3 * time.Microsecond} {
			b.Run(fmt.Sprintf("workers=%d/gap=%v", workers, gap), func(b *testing.B) {
				be := New(workers)
				defer be.Close()
				var sink [64]int64
				body := func(lo, hi int) {
					for j := lo; j < hi; j++ {
						sink[j]++
					}
				}
				var calls []time.Duration
				for b.Loop() {
					if gap > 0 {
						for t := time.Now(); time.Since(t) < gap; {
						}
					}
					t := time.Now()
					be.pool.For(64, body)
					calls = append(calls, time.Since(t))
				}
				slices.Sort(calls)
				b.ReportMetric(float64(calls[len(calls)/2].Nanoseconds()), "ns/call-p50")
				b.ReportMetric(float64(calls[0].Nanoseconds()), "ns/call-min")
			})
		}
	}
}
