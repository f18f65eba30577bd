// Package reference is an independent float64 forward pass of the dense transformer
// architectures, written to be read as their specification and used as the referee of the
// float32 CPU twin and the GPU kernels. It shares no numeric code with them: it decodes the
// weights with host/quant, reads the metadata itself, and computes every op in float64, one
// position at a time, in the plainest order. It is slow and meant for small models.
//
// # Semantics
//
// The semantics are llama.cpp's (src/models/llama.cpp and qwen3.cpp), as it reads the same GGUF
// file. A matrix W of y = W·x is stored with dims [in, out]; each of the out rows holds in
// values. With E = embedding_length, H = attention.head_count, Hkv = attention.head_count_kv
// (default H), D = attention.key_length (default E/H), and eps =
// attention.layer_norm_rms_epsilon:
//
//	x = token_embd[token]
//	per layer:
//	  n = rmsnorm(x)·attn_norm                      rmsnorm(v) = v / sqrt(mean(v²) + eps)
//	  q, k, v = Wq·n, Wk·n, Wv·n                    head h is elements [h·D, (h+1)·D)
//	  qwen3: q_h = rmsnorm(q_h)·attn_q_norm, k_j = rmsnorm(k_j)·attn_k_norm   (per head)
//	  q_h, k_j = rope(q_h, pos), rope(k_j, pos)
//	  a_h = Σ_{s ≤ pos} softmax_s(q_h·k_{j,s} / sqrt(D)) v_{j,s}   j = h / (H/Hkv)   (GQA)
//	  x = x + Wo·[a_0 … a_{H-1}]
//	  n = rmsnorm(x)·ffn_norm
//	  x = x + Wdown·(silu(Wgate·n) ⊙ Wup·n)         silu(g) = g / (1 + e^−g)
//	logits = Woutput·(rmsnorm(x)·output_norm)       Woutput = token_embd when output.weight is absent
//
// RoPE rotates pairs of a head's elements by θ_i = pos · base^(−2i/D) / f_i / s, i < D/2, with
// base = rope.freq_base (default 10000), f_i = rope_freqs.weight[i] when that tensor is present
// (llama), else 1, and s the linear scaling factor (below). A pair (a, b) becomes
// (a·cos θ − b·sin θ, a·sin θ + b·cos θ). The pairs differ by architecture:
//   - llama: adjacent elements (2i, 2i+1) (ggml's "normal" mode; converters permute the rows of
//     Wq and Wk so that this is right);
//   - qwen3: elements (i, i + D/2) (ggml's "NEOX" mode, HF's rotate_half).
//
// Both architectures rotate the whole head: rope.dimension_count, when present, must equal D,
// and the value head size (attention.value_length) too, as llama.cpp requires.
//
// The linear scaling factor s is rope.scaling.factor (or the older rope.scale_linear), 1 when
// absent or 0. llama.cpp applies it unless rope.scaling.type is "none"; an absent type means
// "linear". The types "yarn" and "longrope" are not supported. rope.scaling.attn_factor, when
// present, multiplies cos θ and sin θ.
//
// The attention scale is 1/sqrt(D). llama.cpp does not read attention.scale for these two
// architectures, and neither does this package.
//
// # Weights
//
// Every tensor is decoded with host/quant's Dequantize (ggml's dequantize_row_* results, so
// token embeddings are exactly what ggml's get_rows produces) and widened to float64 once, at
// Load. For the formats with a block offset (Q4_1, Q5_1, K-quants) that result is the exact
// d·q + m rounded once to float32, which ggml's dot products do not do: a difference far
// below the agreement measured against llama.cpp. A file with a tensor this package does not use (biases, MoE experts, a fused QKV) is
// rejected rather than half understood.
//
// # Activation conversion (Options.ActQuant)
//
// ggml's CPU backend converts the activation vector of every matrix product to the weight
// type's vec_dot_type before the dot products. With ActQuant the reference does the same: the
// float64 activation is rounded to float32, then
//   - F32 weights: kept as it is;
//   - F16 / BF16 weights: rounded to fp16 / bf16;
//   - Q4_0, Q5_0, Q8_0: quantised to Q8_0 (blocks of 32) and decoded;
//   - Q4_1, Q5_1: quantised to Q8_1 (the Q8_0 values plus a block sum s); ggml's dot product
//     takes the block sum of the activations from s = fp16(Σq · d) instead of from the values,
//     so for these types the product adds Σ_blocks m·(s − Σ values) per row, m being the
//     weight block's offset;
//   - K-quants (Q2_K … Q6_K): quantised to Q8_K (blocks of 256) and decoded;
//
// and the product is then computed in float64 with the exactly decoded activation. Matrix
// product by matrix product, this agrees with llama.cpp's CPU kernels to float32 summation
// error (~1e-7) for every type above; without ActQuant the difference is that of the
// activation rounding (~3e-4 for fp16, ~2e-3 for bf16, ~1e-2 for 8-bit activations). Over a
// whole model the agreement is ~1e-7 too, except where an activation computed in float64 and
// one computed in float32 fall on either side of a rounding boundary of the conversion: the
// step that flips can move the logits of a small random model by up to ~1e-2.
//
// Weights are decoded by host/quant; the formats of the activations (fp16, bf16, Q8_0, Q8_K)
// are encoded and decoded by host/quant too, with Q8_1's block sum computed here.
package reference
