package model

import (
	"verity/device/kernels"
	"verity/host/gguf"
)

// qwen3: dense Qwen3. NEOX RoPE pairs (i, i+n_rot/2) and a per-head RMSNorm on q and k.
func init() {
	Register("qwen3", func(f *gguf.File) (*Program, error) {
		return buildDense(f, "qwen3", denseOptions{ropeMode: kernels.RopeNeox, qkNorm: true})
	})
}
