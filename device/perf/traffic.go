package perf

import (
	"fmt"
	"reflect"
	"strings"
	"sync"

	"verity/device"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/repack"
)

// Traffic is what one launch moves between memory and the SMs, buffer by buffer: the floor's
// bytes, and how often the warps ask for them. The machine code says how each warp reads a
// buffer; only the kernel's family knows how much of each buffer a launch covers, so each
// argument type has a traffic function (RegisterTraffic; families.go holds them).
type Traffic struct {
	Streams []Stream
	// Note says what the figures assume (data-dependent choices: expert ids, key lists).
	Note string
	// Passes, where set, is how many times a warp runs a loop that holds its innermost loops
	// (a matvec's passes over the columns, each beginning with its pipeline's first loads;
	// regionCounts). Zero: not known — every loop is then counted from its own bytes.
	Passes int64
	// Work, where set, is the launch's work as its family counts it, for a kernel whose loads
	// the lane analysis cannot attribute: the model then times the launch from it instead of
	// from its regions (Model).
	Work *Work
}

// Work is what the working blocks of a launch do, counted from the kernel's source. A block
// waits for DRAM, the L2 and its barriers one after another (Chain), and computes for Instrs
// warp instructions and LSUCycles of the L1/shared data path; the blocks resident on an SM at
// once wait together and compute together.
type Work struct {
	// Blocks is the number of blocks that do the work; the others return at once, or after
	// what Returning counts.
	Blocks int64
	// Instrs and LSUCycles are one working block's warp instructions and L1/shared cycles.
	Instrs, LSUCycles float64
	// DRAMWaits, L2Waits and Syncs are one working block's dependent waits.
	DRAMWaits, L2Waits, Syncs int
	// Leading, if set, counts working blocks of another kind that come first in the grid,
	// before Blocks (attention's blocks of the rows' own chunks, before the shared chunks'):
	// with the Returning blocks, which are among them, they make the grid's leading region,
	// which a part of the launch run on one SM may hold some of.
	Leading *Work
	// Returning, if set, counts the blocks that return having found their work done by
	// another (Blocks of them), with what they do before they return (attention's rows whose
	// chunk an earlier row computes first read the group's key lists to find that out).
	Returning *Work
	// Merging, if set, counts what some of the working blocks (Blocks of them, among those
	// above) do besides: finish a reduction the launch's blocks share — attention's block that
	// brings a row's chunk count to its end merges the row's chunks — its waits and work alone.
	Merging *Work
	// Successors is how many of Blocks find what their DRAM waits wait for in the L2 when the
	// grid's block before them ran just before on their SM, as a megakernel's part runs its
	// blocks one after another: that block asked the L2 for it (attention's block of a shared
	// chunk asks for the next KV head's keys and values). An eager launch gains nothing: the
	// blocks run side by side.
	Successors int64
}

// Stream is one buffer's traffic in a launch.
type Stream struct {
	Param string // the argument (a field of the kernel's argument struct) it goes through
	// Bytes are the distinct bytes moved between DRAM and the SMs: read once, or written.
	Bytes int64
	// Requested are the bytes the warps' loads (or stores) ask for in all (0: Bytes). More than
	// Bytes when the same bytes are read (written) again: the L2 serves the repeats, at its
	// latency rather than DRAM's.
	Requested int64
	Write     bool
}

func (s Stream) requested() int64 {
	if s.Requested > 0 {
		return s.Requested
	}
	return s.Bytes
}

// Bytes is the launch's DRAM traffic: the floor's numerator.
func (t Traffic) Bytes() int64 {
	var n int64
	for _, s := range t.Streams {
		n += s.Bytes
	}
	return n
}

type trafficFunc func(entry string, args any) (Traffic, error)

var (
	trafficMu    sync.Mutex
	trafficFuncs = map[reflect.Type]trafficFunc{}
)

// RegisterTraffic adds the traffic function of kernels whose arguments are of type A (at
// init time). It panics on a second function for the same type.
func RegisterTraffic[A any](f func(entry string, a A) (Traffic, error)) {
	trafficMu.Lock()
	defer trafficMu.Unlock()
	t := reflect.TypeFor[A]()
	if _, dup := trafficFuncs[t]; dup {
		panic("perf: traffic of " + t.String() + " registered twice")
	}
	trafficFuncs[t] = func(entry string, args any) (Traffic, error) {
		a, ok := args.(A)
		if !ok {
			return Traffic{}, fmt.Errorf("perf: %s takes %v, got %T", entry, t, args)
		}
		return f(entry, a)
	}
}

// TrafficOf returns what a launch of spec with args moves.
func TrafficOf(spec device.Spec, args any) (Traffic, error) {
	trafficMu.Lock()
	f := trafficFuncs[reflect.TypeOf(args)]
	trafficMu.Unlock()
	if f == nil {
		return Traffic{}, fmt.Errorf("perf: no traffic function for %s's arguments (%T): add one to device/perf/families.go", spec.Entry(), args)
	}
	return f(spec.Entry(), args)
}

// HasTraffic reports whether arguments of type t have a traffic function.
func HasTraffic(t reflect.Type) bool {
	trafficMu.Lock()
	defer trafficMu.Unlock()
	return trafficFuncs[t] != nil
}

// weightTypes maps a weight kernel's entry name to its weight type: matvec_<t>_<act>,
// matvec8_, moe_matvec_, moe_gate_up_, moe_down_, embed_<t>.
var weightTypes = sync.OnceValue(func() map[string]dtype.Type {
	m := map[string]dtype.Type{}
	for _, t := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(t)
		suffix := t.String() + "_" + f.Act.String()
		for _, p := range []string{"matvec_", "matvec8_", "moe_matvec_", "moe_gate_up_", "moe_down_"} {
			m[p+suffix] = t
		}
		m["embed_"+t.String()] = t
	}
	return m
})

func weightType(entry string) (dtype.Type, *kernels.Format, error) {
	t, ok := weightTypes()[entry]
	if !ok {
		return 0, nil, fmt.Errorf("perf: %s is not a weight kernel", entry)
	}
	f, err := kernels.Lookup(t)
	return t, f, err
}

// weightRow is a weight kernel's weight type, its format and usedRowBytes of a row of cols.
func weightRow(entry string, cols int32) (dtype.Type, *kernels.Format, int64, error) {
	t, f, err := weightType(entry)
	if err != nil {
		return 0, nil, 0, err
	}
	row, err := usedRowBytes(t, int64(cols))
	return t, f, row, err
}

// usedRowBytes is what a matvec reads of one packed row of cols values of type t: its fp16
// fields, unpacked scales and plane bytes (the GGUF bytes for float types), not the padding.
func usedRowBytes(t dtype.Type, cols int64) (int64, error) {
	l, err := repack.NewLayout(t, []int64{cols, 1})
	if err != nil {
		return 0, err
	}
	if len(l.Planes) == 0 {
		return l.RowBytes, nil
	}
	row := 2*l.F16Fields*l.Blocks + l.ScaleBytes*l.Blocks
	for _, pl := range l.Planes {
		row += l.Units * pl.Width
	}
	return row, nil
}

// l2Resident is the size of data taken to stay in the L2 between passes over it within a
// launch: half the L2 of the smallest card with facts (the A100's 40 MB).
const l2Resident = 20 << 20

// passes is how many times a launch reading w bytes of weights ceil(n/c) times fetches them
// from DRAM: once when they stay in the L2 (l2Resident), else every pass.
func passes(w int64, n, c int) int64 {
	if w <= l2Resident {
		return 1
	}
	return int64((n + c - 1) / c)
}

// rowsPerWarp is how many weight rows one warp of a matvec handles (ptx/src/matvec.cu): one,
// or kernels.MatVec8Rows for the matvec8 family.
func rowsPerWarp(entry string, t dtype.Type) int64 {
	if strings.HasPrefix(entry, "matvec8_") {
		return int64(kernels.MatVec8Rows(t))
	}
	return 1
}

// xReaders is how many times a matvec-style launch over rows weight rows reads its activation
// rows: once per warp, or, for a matvec8 that stages them (kernels.MatVec8Staged), once per
// block.
func xReaders(entry string, t dtype.Type, rows int32) int64 {
	per := rowsPerWarp(entry, t)
	if strings.HasPrefix(entry, "matvec8_") && kernels.MatVec8Staged(t) {
		per *= int64(kernels.MatVec8Warps(t))
	}
	return (int64(rows) + per - 1) / per
}

// columns is how many activation rows a matvec-style kernel applies each weight unit to in one
// pass: kernels.MaxColumns for the matvec8 family, else 1.
func columns(entry string) int {
	if strings.HasPrefix(entry, "matvec8_") {
		return kernels.MaxColumns
	}
	return 1
}
