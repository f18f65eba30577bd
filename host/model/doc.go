// Package model turns a GGUF model into a Program: a flat list of ops over named buffers,
// each op carrying the bytes it moves and the flops it does. Executors (the CPU twin, the
// eager GPU executor, later the megakernel) run the same Program.
//
// A Program is built once per model. It does not depend on the batch: a step runs it over
// any number of rows (tokens or tree nodes), and every op treats rows independently except
// attention, whose per-row key lists the step supplies. Buffers are row-major, one row per
// token; their widths are fixed by the model.
//
// # Step inputs
//
// Besides the weights, a step provides per-row inputs in these buffers (Program.Inputs):
//   - tokens: int32 token id per row;
//   - rope.<n>: float32 (cos, sin) pairs per row for each RoPE table the model needs,
//     computed on the host in float64 from each row's position and rounded once
//     (see RopeTable.Fill);
//   - kv.slots: int32 physical cache slot per row, where the row's K and V are stored;
//   - kv.keys, kv.keyoff: each row's list of cache slots to attend to, in logical order;
//   - out.rows: int32 indices of the rows whose logits are wanted (the head runs on those).
//
// # Extending
//
// One architecture is one file: a function that checks the configuration, binds tensors and
// emits ops, registered with Register under its general.architecture name.
package model
