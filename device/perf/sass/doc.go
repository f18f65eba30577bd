// Package sass reads what ptxas emitted for a kernel — the SASS text nvdisasm prints for a
// cubin, and ptxas -v's resource report — and summarises each entry as Facts for the static
// performance model (package device/perf).
//
// The analysis (analyse.go) builds the function's control-flow graph and follows, to a fixed
// point, what every register holds in the 32 lanes of a warp (lanes.go): a common part (the
// same in every lane, a known multiple of a power of two, possibly a pointer parameter's value)
// plus a known offset per lane. From an address's lanes it measures each memory request: the
// distinct bytes, 32-byte sectors and 128-byte lines it touches, and the L1 or shared-memory
// cycles it takes (four tag look-ups a cycle; 32 banks of 4 bytes a cycle, in phases of 128
// bytes). Backward branches close loops; every instruction belongs to the innermost loop that
// holds it, or to the straight code. For each region a single warp issues the instructions in
// order, each when its inputs are ready (arithmetic after a few cycles, loads after their
// latency), and the longest chain of waits is kept with what it waits for; a loop's is the
// steady-state difference between two iterations.
package sass
