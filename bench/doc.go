// Package bench measures Verity's executors: prefill, decode and draft-tree verification
// throughput, the bytes each token moves according to the Program's cost model, and how that
// compares with the memory bandwidth measured on the same machine (the roofline floor for
// memory-bound decoding).
package bench
