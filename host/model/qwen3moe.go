package model

import (
	"verity/device/kernels"
	"verity/host/gguf"
)

// qwen3moe: Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder). Qwen3's attention (NEOX RoPE, per-head
// RMSNorm of q and k) and in every layer a mixture of experts without a shared expert.
func init() {
	Register("qwen3moe", func(f *gguf.File) (*Program, error) {
		return buildDense(f, "qwen3moe", denseOptions{ropeMode: kernels.RopeNeox, qkNorm: true, moe: true})
	})
}
