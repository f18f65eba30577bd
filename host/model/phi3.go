package model

import (
	"verity/device/kernels"
	"verity/host/gguf"
)

// phi3: Phi-3, Phi-3.5 and Phi-4 dense models. NEOX RoPE (over all or part of a head); q, k and
// v fused into attn_qkv (or apart), the feed-forward's gate and up fused into ffn_up: the
// Program takes their rows apart. Long-context files rotate with their short RoPE factors
// and rope.scaling.attn_factor, which is what llama.cpp does for sessions up to the original
// context; longer sessions are refused (Config.MaxContext). A sliding window is ignored, as
// llama.cpp ignores it for phi3.
func init() {
	Register("phi3", func(f *gguf.File) (*Program, error) {
		return buildDense(f, "phi3", denseOptions{ropeMode: kernels.RopeNeox, fused: true, longRope: true})
	})
}
