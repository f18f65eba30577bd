package model

import (
	"verity/device/kernels"
	"verity/host/gguf"
)

// llama: Llama 2/3 and compatible dense models. RoPE rotates adjacent pairs (the HF converter
// permuted Wq and Wk for this). Projection biases are used where a file has them.
func init() {
	Register("llama", func(f *gguf.File) (*Program, error) {
		return buildDense(f, "llama", denseOptions{ropeMode: kernels.RopeAdjacent, optionalBias: true})
	})
}
