package engine_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/reference"
)

// With 16-bit K/V caches the twin matches the float64 reference that rounds its keys and
// values the same way several times more closely than the unrounded reference (f16: ≤ 3e-5
// relative against 1e-4 … 1e-3; bf16: ≤ 5e-4 against 1e-3 … 1e-2: a float32 key and the
// reference's float64 key can round to neighbouring 16-bit values),
// verify equals decode bit for bit across an attention chunk's end, and the cache takes half
// the memory.
func TestCacheTypes(t *testing.T) {
	for _, name := range []string{"tiny-llama-f32", "tiny-qwen3-f32", "tiny-q35moe-f32"} {
		for _, ct := range [][2]dtype.Type{{dtype.F16, dtype.F16}, {dtype.BF16, dtype.BF16}, {dtype.F16, dtype.BF16}} {
			t.Run(fmt.Sprintf("%s/%s,%s", name, ct[0], ct[1]), func(t *testing.T) {
				f, err := fixtures.Parse(name)
				if err != nil {
					t.Fatal(err)
				}
				m := loadWith(t, name, 2, engine.LoadOptions{MaxRows: 16, Context: 128, CacheK: ct[0], CacheV: ct[1]})
				if n, f32 := m.CacheBytes(); n*2 != f32 || m.Program().CacheK != ct[0] {
					t.Errorf("cache of %d bytes, %d as f32", n, f32)
				}
				nv := m.Program().Config.NVocab
				r := rand.New(rand.NewPCG(31, 32))
				toks := randTokens(r, 90, nv)
				all := m.NewSession()
				got, err := all.Prefill(toks, true)
				if err != nil {
					t.Fatal(err)
				}
				all.Close()
				rel := func(o reference.Options) float64 {
					ref, err := reference.Load(f, o)
					if err != nil {
						t.Fatal(err)
					}
					want, err := ref.Forward(toks)
					if err != nil {
						t.Fatal(err)
					}
					var maxErr, maxRef float64
					for i := range want {
						for j := range want[i] {
							maxErr = math.Max(maxErr, math.Abs(float64(got[i][j])-want[i][j]))
							maxRef = math.Max(maxRef, math.Abs(want[i][j]))
						}
					}
					return maxErr / maxRef
				}
				rounded, plain := rel(reference.Options{RoundCache: true, CacheK: ct[0], CacheV: ct[1]}), rel(reference.Options{})
				t.Logf("max relative error against the reference rounding K/V the same way %.3g, against the unrounded one %.3g", rounded, plain)
				bound := 3e-5 // a key or value whose float32 and float64 values round to different 16-bit ones
				if ct[0] == dtype.BF16 || ct[1] == dtype.BF16 {
					bound = 5e-4 // bf16's 8-bit significand: such a flip moves a value 2^-8 (relative)
				}
				if rounded > bound || rounded*4 > plain {
					t.Errorf("relative error %.3g against the rounded reference (%.3g unrounded)", rounded, plain)
				}

				// verify == decode over a history that ends inside the tree's chunk
				prefix := toks[:60]
				tree := engine.Tree{Tokens: toks[60:68], Parents: []int{-1, 0, 1, 2, 3, 4, 5, 6}}
				s := m.NewSession()
				if _, err := s.Prefill(prefix, false); err != nil {
					t.Fatal(err)
				}
				ver, err := s.Verify(tree)
				if err != nil {
					t.Fatal(err)
				}
				for i := range ver {
					sameBits(t, fmt.Sprintf("node %d", i), ver[i], got[60+i])
				}
			})
		}
	}
}
