// Package megakernel runs a whole step of a model — every op of the Program, for every row —
// as one persistent launch that interprets an instruction stream, instead of one kernel launch
// per op.
//
// # Instructions, parts and queues
//
// An instruction is one kernel launch of the eager executor: a kernel, its parameters, and its
// grid of blocks. Build splits each instruction into parts — contiguous ranges of its blocks,
// more parts for ops that move more bytes, never more than there are SMs or blocks — and
// places every part in the queue of one SM, so that an op's work is spread over the machine
// while small ops stay on few SMs. Each instruction lists the earlier instructions it depends
// on (it reads what they write, or writes what they read or write); an SM runs a part only
// when every part of those instructions has finished. Instructions that do not depend on each
// other overlap: one layer's attention can run while another SM still finishes a matvec the
// attention does not read.
//
// Placement is list scheduling on estimated time (bytes moved, plus a fixed cost per part):
// instructions in program order, each part to the SM that can start it first. Every queue is
// therefore in program order, which is what makes the stream deadlock-free when all SMs run at
// once: the unfinished part of lowest instruction index, wherever it is queued, waits only on
// instructions of lower index, all of whose parts have finished — they sit at or before the
// heads of their queues, which have passed them.
//
// # Bits
//
// A part runs exactly the blocks (on a GPU) or the index range of the twin's parallel-for (on
// the CPU, see device.Exec.For) that the eager launch would run for it, with the same
// arithmetic, so a step's results are bit-identical to the eager executor's whatever the
// number of SMs and however their work interleaves; dependencies only decide when.
//
// # Executors
//
// The stream (Encode, Decode) is a flat little-endian byte layout, the same for every
// executor:
//
//   - Kernel, the megakernel entry (ptx/src/megakernel.cu): one persistent launch of one
//     thread block per queue, which must all be resident at once. A block waits for a part's
//     dependencies by polling their completion counters, then runs the part's virtual blocks
//     through the kernels' own bodies (every kernel is a body over a Grid plus an entry, see
//     ptx/src/grid.cuh), several small virtual blocks to a thread block. The kernel table it
//     dispatches on is generated from the Go registry (tools/mkgen); a stream records the
//     table's hash, so a stream and a binary that disagree are refused. It runs on a GPU
//     through device/cuda and on any CPU through the PTX interpreter (device/ptxvm).
//   - VM, the Go interpreter and the entry's twin: one goroutine per queue, running the parts
//     with the kernels' twins.
//
// host/exec compiles each step of a Program into a stream (Executor.UseMegakernel) and hands
// it to the backend's runner; `--megakernel` on the verity commands turns it on.
package megakernel
