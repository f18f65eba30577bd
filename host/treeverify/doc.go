// Package treeverify is the contract of the seed workload "megakernel-spec-decode-verify"
// as a Go API over Verity's executors: verify an 8-node speculative draft tree of a
// Llama-shaped bf16 model in one step, every node attending to the whole committed K/V cache
// and to exactly its own ancestors, at the RoPE position of its depth.
//
//	m, err := treeverify.BuildModel(weights, kvCache, cfg, maxSeq, opt) // untimed
//	logits, err := m.VerifyStep(tokens, treeMask, depth, pos)           // timed
//
// BuildModel takes the seed's four arguments — the bf16 weights (Weights, row-major and
// applied as h·Wᵀ, in Hugging Face's layout), the K/V cache (KVCache: per layer (n_kv,
// max_seq, hd) bf16, slots [0, pos) committed), the configuration and the cache's capacity —
// plus where to run (Options: a backend, eager or megakernel). VerifyStep runs one tree:
// node i attends to slots [0, pos) and to the nodes j with treeMask[i][j], at RoPE position
// pos + depth[i]; all eight nodes' keys and values go into the cache at slots pos … pos+7,
// and the next call (pos + 8) attends over them. The cache is the model's from BuildModel
// on: it lives where the executor runs, and ReadKV reads it back. The mask and depths are
// arguments of every call, so nothing about the tree is precomputed.
//
// How the model is run: BuildModel writes the weights into an in-memory GGUF file of the
// llama architecture — Wq and Wk with their rows permuted as llama.cpp's converter does, so
// that RoPE rotates adjacent pairs, exactly equivalent to Hugging Face's rotate-half — and
// loads it like any model (host/model, host/exec), the cache's keys permuted the same way.
// A step's rows are the nodes; node i's key list is the history in order, then its
// ancestors (and itself) by depth, which is the order the contract reduces keys in, so each
// node's logits are bit-identical to decoding its path one token at a time (DecodePath).
//
// Grading, as the seed grades: the relative Frobenius error of all 8 × vocab logits against
// a float64 reference of the same computation (Reference), at most Tolerance. Three wrong
// implementations the seed names — a causal triangle instead of the tree mask, no mask over
// the new nodes, chain positions pos + i instead of pos + depth — are Variants of a tree, run
// through the same step and grader.
package treeverify
