//go:build unix

package lora

import (
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"

	"verity/device/dtype"
	"verity/host/gguf"
)

// BenchmarkMerge merges a rank-16 adapter into one 2048×2048 matrix (a Llama-3.2-1B attention
// projection) of each type, with a delta of 0.1 and 0.5 quantisation steps RMS; the rate is in
// weights per second.
func BenchmarkMerge(b *testing.B) {
	const in, out, rank = 2048, 2048, 16
	for _, typ := range []dtype.Type{dtype.Q4_K, dtype.Q6_K, dtype.Q8_0, dtype.F16} {
		for _, frac := range []float64{0.1, 0.5} {
			b.Run(fmt.Sprintf("%s/%.1f", typ, frac), func(b *testing.B) {
				base := writeFile(b, map[string]gguf.Value{"general.architecture": gguf.Str("llama")},
					[]tensorSpec{{name: "blk.0.attn_q.weight", typ: typ, dims: []int64{in, out}}}, 1)
				step := 0.0066 // a q4_K step for N(0, 1/2048) weights, about
				const alpha = 32
				sigma := math.Sqrt(frac * step * math.Sqrt(rank) / alpha)
				a := adapterFile(b, "llama", alpha, []pairSpec{{target: "blk.0.attn_q.weight", in: in, out: out, rank: rank, std: sigma}}, 2)
				p, err := NewPlan(base, []Use{{a, 1}}, Options{Memory: -1})
				if err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				var res *Result
				cpu0 := cpuTime()
				for range b.N {
					if _, res, err = p.Merge(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(in*out)*float64(b.N)/b.Elapsed().Seconds(), "weights/s")
				// CPU time is steadier than wall time on a shared machine.
				b.ReportMetric(float64(in*out)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "weights/cpu-s")
				bl := res.Blocks
				n := float64(bl.Moved + bl.Clamped + bl.Refit + bl.Copied)
				b.ReportMetric(float64(bl.Refit)/n, "refit-share")
				b.ReportMetric(float64(bl.Clamped)/n, "clamped-share")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
