// Package lora merges LoRA adapters into a model's weights when it is loaded, so that every
// kernel, layout, twin and device path sees ordinary tensors and decodes as fast as the base.
//
// An adapter is the GGUF file llama.cpp's convert_lora_to_gguf.py writes: general.type
// "adapter", adapter.type "lora", adapter.lora.alpha, and for each target matrix W
// (ne = [n_in, n_out], y = W·x) the pair
//
//	<W>.lora_a  ne = [n_in, r]    A: r rows of n_in
//	<W>.lora_b  ne = [r, n_out]   B: n_out rows of r
//
// merged as W' = W + P·A with P = scale·alpha/r·B (r = lora_b's ne0; alpha 0 means the scale
// as is), the formula llama.cpp applies at run time. token_embd.weight comes transposed
// (lora_a ne = [r, n_vocab], lora_b ne = [r, n_embd]): row t of the embedding gains
// scale·alpha/r · Σ_k lora_a[t][k]·lora_b[·][k]. When the base has tied embeddings (no
// output.weight) and the embedding is targeted, only the input lookup changes: the merged
// file gains an output.weight holding the base embedding, as llama.cpp and PEFT keep the head.
//
// A plan (NewPlan) checks every adapter against the base before anything is computed, and any
// problem is an error naming the tensor; nothing is skipped. Merge then computes each target
// row by row on all cores — the row of P·A in float64, k = 0…r−1 in order, adapters in the
// order given — into owned 64-byte-aligned buffers, and returns a view of the base file
// (gguf.File.WithTensors) in which those buffers replace the targets; the mapping is never
// written.
//
// Each merged tensor keeps its type. F32, F16 and BF16 are written element by element, to
// nearest. The quantised types keep each block's scales and move each code by Δ/step, rounded
// stochastically: up with probability equal to the fraction, the draw a hash of the tensor's
// name, the row and the element, so merges are reproducible. Nearest rounding would snap a
// trained adapter's delta — usually far below half a step — back to the old code, keeping
// none of it; stochastic rounding keeps it in expectation (E[W'] = W + Δ) at the cost of
// zero-mean noise. A code that would leave its range is clamped to it; where the clamped
// codes lose more (in squared error) than the rounding of the block's other moves costs, a
// fresh quantisation of W + Δ is tried — ggml's reference quantiser picks the new scales, and
// the codes on that grid are rounded stochastically too — and whichever candidate has the
// lower squared error against W + Δ is written. A block whose Δ is exactly zero is copied
// byte for byte, so scale 0 reproduces the file.
package lora
