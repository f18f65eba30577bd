package model

import (
	"fmt"

	"verity/device/kernels"
	"verity/host/gguf"
)

// phi3: Phi-3 and Phi-4 dense models. NEOX RoPE; q, k and v fused into attn_qkv (or apart), the
// feed-forward's gate and up fused into ffn_up; the Program takes their rows apart. The
// long-context variants' RoPE factors (rope_factors_long/short) are refused, and a sliding
// window is ignored, as llama.cpp ignores it for phi3.
func init() {
	Register("phi3", func(f *gguf.File) (*Program, error) {
		for _, name := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
			if _, ok := f.Tensor(name); ok {
				return nil, fmt.Errorf("model: phi3: %s: long-context RoPE factors are not supported", name)
			}
		}
		return buildDense(f, "phi3", denseOptions{ropeMode: kernels.RopeNeox, fused: true})
	})
}
