package model

import (
	"verity/device/kernels"
	"verity/host/gguf"
)

// qwen2: dense Qwen2 and Qwen2.5. NEOX RoPE pairs (i, i+n_rot/2) and biases on the q, k and v
// projections.
func init() {
	Register("qwen2", func(f *gguf.File) (*Program, error) {
		return buildDense(f, "qwen2", denseOptions{ropeMode: kernels.RopeNeox, qkvBias: true})
	})
}
