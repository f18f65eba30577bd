// Package reference is an independent float64 forward pass of the supported architectures
// (llama, phi3, qwen2, qwen3, qwen3moe, the hybrid qwen35moe, and gemma, gemma2 and gemma3: gemma.go), written to be read as their specification and used as
// the referee of the float32 CPU twin and the GPU kernels. It shares no numeric code with them:
// it decodes the weights with host/quant, reads the metadata itself, and computes every op in
// float64, one position at a time, in the plainest order. It is slow and meant for small models.
//
// # Semantics
//
// The semantics are llama.cpp's (src/models/llama.cpp, phi3.cpp, qwen2.cpp, qwen3.cpp,
// qwen3moe.cpp and qwen35moe.cpp), as it reads
// the same GGUF file. A matrix W of y = W·x is stored with dims [in, out]; each of the out rows holds in
// values. With E = embedding_length, H = attention.head_count, Hkv = attention.head_count_kv
// (default H), D = attention.key_length (default E/H), and eps =
// attention.layer_norm_rms_epsilon:
//
//	x = token_embd[token]
//	per layer:
//	  n = rmsnorm(x)·attn_norm                      rmsnorm(v) = v / sqrt(mean(v²) + eps)
//	  q, k, v = Wq·n, Wk·n, Wv·n                    head h is elements [h·D, (h+1)·D)
//	  qwen2: q, k, v += attn_q.bias, attn_k.bias, attn_v.bias   (llama: any of these and
//	         attn_output.bias a file has, the last added to Wo·a)
//	  phi3:  Wq, Wk, Wv may be the rows of one attn_qkv, in that order; Wgate and Wup are the
//	         first and second halves of ffn_up's rows
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
//   - phi3, qwen2, qwen3: elements (i, i + D/2) (ggml's "NEOX" mode, HF's rotate_half);
//   - qwen35moe: NEOX pairs on part of the head (see below).
//
// llama, qwen2 and qwen3 rotate the whole head: rope.dimension_count, when present, must equal
// D, and the value head size (attention.value_length) too, as llama.cpp requires. phi3 rotates
// the first rope.dimension_count elements (all, or part as in Phi-4-mini), and its long-context
// files' f_i are rope_factors_short (what llama.cpp uses for contexts up to
// rope.scaling.original_context_length; rope_factors_long, past it, is not used here).
//
// The linear scaling factor s is rope.scaling.factor (or the older rope.scale_linear), 1 when
// absent or 0. llama.cpp applies it unless rope.scaling.type is "none"; an absent type means
// "linear", and "longrope" reads it alike. The type "yarn" is not supported.
// rope.scaling.attn_factor, when present, multiplies cos θ and sin θ.
//
// The attention scale is 1/sqrt(D). llama.cpp does not read attention.scale for these
// architectures, and neither does this package.
//
// # qwen35moe
//
// A hybrid of gated full attention and Gated DeltaNet (linear attention) layers, each followed
// by a mixture-of-experts feed-forward with a shared expert. Keys are read with the prefix
// "qwen35moe."; besides those above: expert_count, expert_used_count,
// expert_feed_forward_length (default feed_forward_length / expert_used_count),
// expert_shared_feed_forward_length (default feed_forward_length), ssm.conv_kernel (K),
// ssm.state_size (d, the head size of keys and values), ssm.group_count (nk key heads),
// ssm.time_step_rank (nv value heads; a multiple of nk), ssm.inner_size (must be nv·d),
// rope.dimension_sections (required, four integers), full_attention_interval (default 4) or
// attention.recurrent_layers (a flag per block), nextn_predict_layers (default 0). The last
// nextn_predict_layers of the block_count blocks are multi-token-prediction blocks: their
// tensors are accepted and not used. Layer i is full attention iff (i+1) is a multiple of
// full_attention_interval, else Gated DeltaNet. With rmsnorm and eps as above:
//
//	x = token_embd[token]
//	per layer:
//	  x = x + Mixer(rmsnorm(x)·attn_norm)
//	  x = x + MoE(rmsnorm(x)·post_attention_norm)
//	logits = Woutput·(rmsnorm(x)·output_norm)
//
// Gated full attention (D = attention.key_length, which attention.value_length must equal):
//
//	Wq·n holds 2·D values per head h: q_h = [2hD, 2hD+D), gate_h = [2hD+D, 2(h+1)D)
//	q_h = rmsnorm(q_h)·attn_q_norm, k_j = rmsnorm(k_j)·attn_k_norm     (per head, before RoPE)
//	RoPE on the first n_rot = rope.dimension_count elements of each head (n_rot ≤ D, even):
//	  NEOX pairs (i, i + n_rot/2), θ_i = p_i·base^(−2i/n_rot); elements from n_rot on unchanged
//	a_h as for qwen3 (GQA j = h / (H/Hkv), scale 1/sqrt(D))
//	Mixer = Wo·[a_0 ⊙ sigmoid(gate_0) … a_{H-1} ⊙ sigmoid(gate_{H-1})]
//
// The rotation is ggml's IMROPE: with sections (t, h, w, e), pair i has sector
// s = i mod (t+h+w+e) and uses the temporal position if s ≡ 0 (mod 3) and s < 3t, the height
// position if s ≡ 1 and s < 3h, the width position if s ≡ 2 and s < 3w, else the fourth
// position. For text llama.cpp passes (pos, pos, pos, 0), so p_i = pos except for the pairs of
// the fourth kind, which are not rotated (θ = 0).
//
// Gated DeltaNet, with C = 2·nk·d + nv·d channels and per value head h a state S_h of d×d
// (key index × value index), zero at the start, as are the convolution's inputs before it:
//
//	m_t = W_qkv·n_t                                 (attn_qkv; channels [q: nk·d | k: nk·d | v: nv·d], head-major)
//	c_t[ch] = silu(Σ_{k<K} conv[ch][k]·m_{t−K+1+k}[ch])   (ssm_conv1d, dims [K, C]: causal depthwise)
//	q_i = l2norm(c_t's q head i) / sqrt(d), k_i = l2norm(c_t's k head i)   l2norm(v) = v / max(‖v‖, eps)
//	v_h = c_t's v head h
//	β_h = sigmoid(W_beta·n)_h,  g_h = ssm_a[h]·softplus((W_alpha·n)_h + ssm_dt.bias[h])
//	value head h uses key head i = h mod nk (GGUF files store the heads tiled; HF's
//	  repeat_interleave, i = h / (nv/nk), is wrong here)
//	S_h = e^{g_h}·S_h;  u = S_hᵀ·k_i;  S_h = S_h + k_i ⊗ β_h·(v_h − u);  o_h = S_hᵀ·q_i   (after the write)
//	Mixer = W_out·[rmsnorm(o_0)·ssm_norm ⊙ silu(z_0) … ],  z = W_gate·n   (attn_gate, head h at [h·d, (h+1)·d))
//
// ssm_a holds −exp(A_log), used as stored; softplus(x) = log(1 + e^x), x above 20.
//
// Mixture of experts (expert tensors are 3-D, dims [in, out, n_expert]: expert e is the e-th
// [in, out] matrix):
//
//	p = softmax(ffn_gate_inp·n) over all experts   (the router)
//	top = the expert_used_count experts of largest p, the lower index first among equals
//	MoE = Σ_{e∈top} (p_e / Σ_{top} p)·down_e(silu(gate_e·n) ⊙ up_e·n)
//	    + sigmoid(ffn_gate_inp_shexp·n)·down_s(silu(gate_s·n) ⊙ up_s·n)   (shared expert, a 1-D gate)
//
// ggml clamps Σ_top p to at least 2^−14 before dividing; the package does too. The fused
// variants llama.cpp also accepts (attn_qkv in an attention layer, ffn_gate_up_exps) are not
// supported.
//
// # Weights
//
// Every tensor is decoded with host/quant's Dequantize (ggml's dequantize_row_* results, so
// token embeddings are exactly what ggml's get_rows produces) and widened to float64 once, at
// Load. For the formats with a block offset (Q4_1, Q5_1, K-quants) that result is the exact
// d·q + m rounded once to float32, which ggml's dot products do not do: a difference far
// below the agreement measured against llama.cpp. A file with a tensor this package does not
// use (biases, MoE experts in llama, a fused QKV in an attention layer) is rejected rather than
// half understood; only qwen35moe's multi-token-prediction blocks are skipped.
//
// # Activation conversion (Options.ActQuant)
//
// ggml's CPU backend converts the activation vector of every matrix product to the weight
// type's vec_dot_type before the dot products. With ActQuant the reference does the same, for
// every product: each expert's (in that expert tensor's type), the F32 router and the shared
// expert's 1-D gate included. The float64 activation is rounded to float32, then
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
// step that flips can move the logits of a small random model by up to ~1e-2, and by more in
// qwen35moe when it changes which experts a token is routed to.
//
// Weights are decoded by host/quant; the formats of the activations (fp16, bf16, Q8_0, Q8_K)
// are encoded and decoded by host/quant too, with Q8_1's block sum computed here.
package reference
