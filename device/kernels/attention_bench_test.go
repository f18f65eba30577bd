package kernels_test

import (
	"strings"
	"testing"

	"verity/device/cpu"
	"verity/device/devicetest"
	"verity/device/kernels"
)

// BenchmarkAttentionTwin times the CPU twin's attention at real sizes (devicetest's real cases
// of attention_f32: an 8-node tree and a decode after 2048 positions, Llama-3.2-1B's heads),
// one launch a round on all the CPU's workers.
func BenchmarkAttentionTwin(b *testing.B) {
	for _, c := range devicetest.RealCases("attention_f32") {
		if strings.HasSuffix(c.Name, "/deferred") || !strings.HasPrefix(c.Name, "llama") {
			continue
		}
		b.Run(c.Name, func(b *testing.B) {
			be := cpu.New(0)
			defer be.Close()
			a := attentionArgsOn(b, be, c)
			b.ResetTimer()
			for b.Loop() {
				if err := be.Launch(kernels.Attention, a); err != nil {
					b.Fatal(err)
				}
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
