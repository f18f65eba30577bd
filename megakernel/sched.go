package megakernel

import (
	"fmt"
	"math"
	"reflect"
	"sort"

	"verity/device"
)

// Resource names something ops read and write: a buffer, a layer's cache, a recurrent state.
// The caller chooses the values; two ops conflict when they share one.
type Resource uint64

// Op is one kernel launch of a step, in program order.
type Op struct {
	Name   string
	Kernel device.Spec
	Args   any
	// Reads and Writes are the resources the launch reads and writes (an op that updates
	// something in place lists it in both).
	Reads, Writes []Resource
	// Bytes is what the launch moves (weights and activations), for placement.
	Bytes int64
	// Stream, if set, is what the launch reads that no op of the step writes — a matvec's
	// weights — which a part may therefore fetch before its dependencies are ready.
	Stream *Stream
}

// Stream is Bytes bytes from the address in parameter Param of a launch, laid out block by
// block in the order of the grid's blocks (an even share each), read and never written.
type Stream struct {
	Param int
	Bytes int64
}

// Prefetch is an instruction's prefetchable bytes: block v's are [v·PerBlock, (v+1)·PerBlock)
// from the address in parameter Param (−1: none), clipped to Total.
type Prefetch struct {
	Param           int
	PerBlock, Total int64
}

// Config shapes a schedule.
type Config struct {
	SMs int // queues (thread blocks of the megakernel on a GPU, or the VM's goroutines)
	// QueuesPerSM is how many of the queues share one SM (default: as few as the machine's
	// SMs allow).
	QueuesPerSM int
	// Machine and Model are what placement costs parts with (default H200 and BytesModel):
	// the cost model of model.go.
	Machine *Machine
	Model   PartModel
	// MinPartUS is the shortest part worth an item of its own: an instruction gets as many
	// parts as it has modelled time in units of this, up to one per queue and per block
	// (default: an item's start on the Machine, Machine.ItemCycles — 0.25 µs on the H200 —
	// what a part more costs its queue: a finer split of an instruction on the critical path
	// ends it sooner while other queues are free to start its parts).
	MinPartUS float64
	// PartBytes, if set, chooses parts by bytes instead: one per PartBytes moved.
	PartBytes int64
	// PrefetchBytes is each queue's prefetch window (prefetch.go): how far into its coming
	// streams (Op.Stream) a block asks the L2 for before it waits (negative: none). All
	// queues' windows must fit the L2 at once, with room for what the parts read besides: a
	// line evicted before its part reads it comes from DRAM twice, which the cost model does
	// not see. The default is 256 KiB, or less where the queues' windows would take more than
	// two thirds of the machine's L2 (an H200's 132 queues take 33 MiB of its 50 MiB).
	PrefetchBytes int64
}

func (c Config) withDefaults() (Config, error) {
	if c.SMs < 1 || c.SMs > MaxSMs {
		return c, fmt.Errorf("megakernel: %d SMs (1…%d allowed)", c.SMs, MaxSMs)
	}
	if c.Machine == nil {
		m := H200
		c.Machine = &m
	}
	if c.QueuesPerSM <= 0 {
		c.QueuesPerSM = (c.SMs + c.Machine.SMs - 1) / c.Machine.SMs
	}
	if c.Model == nil {
		c.Model = BytesModel{*c.Machine}
	}
	if c.MinPartUS <= 0 {
		c.MinPartUS = c.Machine.us(c.Machine.ItemCycles)
	}
	switch {
	case c.PrefetchBytes == 0:
		c.PrefetchBytes = 256 << 10
		if l2 := c.Machine.L2Bytes; l2 > 0 {
			c.PrefetchBytes = min(c.PrefetchBytes, l2*2/3/int64(c.SMs)&^127)
		}
	case c.PrefetchBytes < 0:
		c.PrefetchBytes = 0
	}
	c.PrefetchBytes = min(c.PrefetchBytes, 1<<30)
	return c, nil
}

// Instr is one instruction of a schedule.
type Instr struct {
	Name   string
	Kernel int // index in Kernels()
	Params []uint64
	// The launch's grid (GridX · GridY blocks) and threads per block.
	GridX, GridY, Threads int
	Parts                 int
	Deps                  []int // earlier instructions that must finish first, increasing
	Bytes                 int64
	Prefetch              Prefetch
}

// Blocks is the number of blocks of the instruction's grid.
func (in *Instr) Blocks() int { return in.GridX * in.GridY }

// Item is one entry of an SM's queue: part Part of instruction Instr.
type Item struct {
	Instr, Part int32
}

// Schedule is a step compiled for the megakernel.
type Schedule struct {
	Instrs []Instr
	Queues [][]Item // one per SM, each in program order
	// EstimateUS is the modelled length of the step as placement saw it (µs; Predict gives
	// it with its breakdown).
	EstimateUS float64
	// PrefetchBytes is Config.PrefetchBytes: each queue's prefetch window.
	PrefetchBytes int64

	place *placement // where each part's item lies in the stream (Build's; copies share it)
}

// placement is where each part of a schedule lies among its items in stream order (queue
// after queue): part p of instruction i is item item[first[i]+p]. It belongs to the queues
// it was made from, which copies of a schedule with other arguments keep (a patched step's):
// re-encoding one rewrites a changed instruction's items without walking the others.
type placement struct {
	queues [][]Item // the queues it describes
	first  []int32  // per instruction, where its parts start in item; one more at the end
	item   []int32
}

// newPlacement indexes s's queues, or returns nil when an item names a part that s does not
// have.
func newPlacement(s *Schedule) *placement {
	p := &placement{queues: s.Queues, first: make([]int32, len(s.Instrs)+1)}
	n := 0
	for i := range s.Instrs {
		p.first[i] = int32(n)
		n += max(s.Instrs[i].Parts, 0)
	}
	p.first[len(s.Instrs)] = int32(n)
	p.item = make([]int32, n)
	o := int32(0)
	for _, q := range s.Queues {
		for _, it := range q {
			if it.Instr < 0 || int(it.Instr) >= len(s.Instrs) || it.Part < 0 || int(it.Part) >= s.Instrs[it.Instr].Parts {
				return nil
			}
			p.item[p.first[it.Instr]+it.Part] = o
			o++
		}
	}
	return p
}

// of reports whether p describes the queues of s: the very same slices.
func (p *placement) of(s *Schedule) bool {
	if p == nil || len(p.queues) != len(s.Queues) || len(p.first) != len(s.Instrs)+1 {
		return false
	}
	if len(p.queues) == 0 || &p.queues[0] == &s.Queues[0] { // the same array of queues
		return true
	}
	for k, q := range s.Queues {
		if !sameSlice(q, p.queues[k]) {
			return false
		}
	}
	return true
}

// sameSlice reports whether a and b are the same slice: the same length, at the same address.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Build compiles a step's launches into a schedule for cfg.SMs SMs.
func Build(ops []Op, cfg Config) (*Schedule, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("megakernel: a step with no ops")
	}
	ids := kernelIDs()
	s := &Schedule{Instrs: make([]Instr, len(ops)), Queues: make([][]Item, cfg.SMs), PrefetchBytes: cfg.PrefetchBytes}
	lastWrite := map[Resource]int{}
	readers := map[Resource][]int{} // readers since the last write
	finish := make([]float64, len(ops))
	reach := make([]bits, len(ops)) // reach[i]: the instructions i waits for, transitively
	clock := make([]float64, cfg.SMs)
	mc := *cfg.Machine
	item, stage := mc.us(mc.ItemCycles), mc.stageBytes(cfg.QueuesPerSM)
	windows := make([]window, cfg.SMs) // each queue's prefetch window (model.go)
	for i, op := range ops {
		id, ok := ids[op.Kernel.Entry()]
		if !ok {
			return nil, fmt.Errorf("megakernel: op %d %s: kernel %s is not registered", i, op.Name, op.Kernel.Entry())
		}
		g, err := op.Kernel.Geometry(op.Args)
		if err != nil {
			return nil, fmt.Errorf("megakernel: op %d %s: %w", i, op.Name, err)
		}
		ps, err := device.Params(op.Args)
		if err != nil {
			return nil, fmt.Errorf("megakernel: op %d %s: %w", i, op.Name, err)
		}
		in := &s.Instrs[i]
		in.Name, in.Kernel, in.Bytes = op.Name, id, max(op.Bytes, 0)
		if g.Grid.Z != 1 || g.Block.Y != 1 || g.Block.Z != 1 || g.Block.X > MaxThreads || uint64(g.Grid.X)*uint64(g.Grid.Y) > 1<<31 {
			return nil, fmt.Errorf("megakernel: op %d %s: kernel %s launches %v blocks of %v threads; the megakernel runs 2-D grids of 1-D blocks of up to %d threads",
				i, op.Name, op.Kernel.Entry(), g.Grid, g.Block, MaxThreads)
		}
		if g.Grid.X == 0 || g.Grid.Y == 0 {
			// an instruction of no parts would count as done at once, and its dependents,
			// which rely on it for what it waits for, would not wait
			return nil, fmt.Errorf("megakernel: op %d %s: kernel %s launches no blocks", i, op.Name, op.Kernel.Entry())
		}
		in.GridX, in.GridY, in.Threads = int(g.Grid.X), int(g.Grid.Y), int(g.Block.X)
		in.Params = make([]uint64, len(ps))
		for j, p := range ps {
			in.Params[j] = p.Bits
		}
		in.Prefetch.Param = -1
		if st := op.Stream; st != nil && st.Bytes > 0 {
			if st.Param < 0 || st.Param >= len(ps) || reflect.TypeOf(op.Args).Field(st.Param).Type != ptrType || st.Bytes >= 1<<32 {
				return nil, fmt.Errorf("megakernel: op %d %s: a stream of %d bytes through parameter %d", i, op.Name, st.Bytes, st.Param)
			}
			b := int64(in.Blocks())
			in.Prefetch = Prefetch{Param: st.Param, PerBlock: (st.Bytes + b - 1) / b, Total: st.Bytes}
		}

		// Dependencies: read after write, write after read, write after write.
		dep := map[int]bool{}
		for _, r := range op.Reads {
			if w, ok := lastWrite[r]; ok {
				dep[w] = true
			}
		}
		for _, r := range op.Writes {
			if w, ok := lastWrite[r]; ok {
				dep[w] = true
			}
			for _, rd := range readers[r] {
				dep[rd] = true
			}
		}
		// keep only the direct ones: a dependency that another dependency already waited for
		// (transitively) costs a counter read and orders nothing more
		for d := range dep {
			covered := false
			for e := range dep {
				if e != d && reach[e].has(d) {
					covered = true
					break
				}
			}
			if !covered {
				in.Deps = append(in.Deps, d)
			}
		}
		sort.Ints(in.Deps)
		reach[i] = newBits(len(ops))
		for _, d := range in.Deps {
			reach[i].set(d)
			reach[i].or(reach[d])
		}
		for _, r := range op.Reads {
			readers[r] = append(readers[r], i)
		}
		for _, r := range op.Writes {
			lastWrite[r] = i
			readers[r] = nil
		}

		// Parts, and their placement: each on the queue that would end it first, its start
		// and its time as the replay (model.go) has them — the wake, the staging's overrun,
		// what the queue's prefetch window brought. Every queue is therefore in program order.
		if cfg.PartBytes > 0 {
			in.Parts = int(min(int64(cfg.SMs), int64(in.Blocks()), max(1, (in.Bytes+cfg.PartBytes-1)/cfg.PartBytes)))
		} else {
			all, _ := cfg.Model.PartUS(in, 0, in.Blocks(), cfg.QueuesPerSM, cfg.SMs)
			in.Parts = int(min(float64(cfg.SMs), float64(in.Blocks()), math.Max(1, math.Ceil(all/cfg.MinPartUS))))
		}
		// a part starts once its queue has started the item and the last dependency's end has
		// reached it: a hot wake if that end comes while the wait's polls come back to back
		// (as the replay has it)
		ready := -1.0
		for _, d := range in.Deps {
			ready = max(ready, finish[d])
		}
		stages := stagesWhileWaiting(in, stage, cfg.PrefetchBytes)
		start := func(sm int) float64 {
			st, _ := mc.partStart(clock[sm]+item, ready, stages)
			return st
		}
		for p := 0; p < in.Parts; p++ {
			lo, hi := partBlocks(in, p)
			cost, _ := cfg.Model.PartUS(in, lo, hi, cfg.QueuesPerSM, cfg.SMs)
			from, to := itemStream(in, p)
			n := to - from
			var staged int64
			if stages {
				staged = min(stage, n)
			}
			partBytes := float64(in.Bytes) * float64(hi-lo) / float64(in.Blocks())
			// the part's end on queue sm starting at st, through that queue's prefetch window as
			// the replay follows it (the queue's later items are not placed yet: its streams
			// have no end)
			end := func(sm int, st float64) (float64, window) {
				w := windows[sm]
				if cfg.PrefetchBytes <= 0 {
					return st + cost, w
				}
				t, _ := mc.windowed(&w, cost, partBytes, n, clock[sm], st, cfg.PrefetchBytes+staged, math.MaxInt64, cfg.QueuesPerSM)
				return st + t, w
			}
			best := 0
			eb, wb := end(0, start(0))
			for sm := 1; sm < cfg.SMs; sm++ { // the earliest end; of equal ends, the queue idle longest
				st := start(sm)
				if st > eb || st == eb && clock[sm] >= clock[best] {
					continue // it cannot end sooner: a part takes no less than nothing
				}
				if e, w := end(sm, st); e < eb || e == eb && clock[sm] < clock[best] {
					best, eb, wb = sm, e, w
				}
			}
			clock[best], windows[best] = eb, wb
			finish[i] = max(finish[i], clock[best])
			s.Queues[best] = append(s.Queues[best], Item{Instr: int32(i), Part: int32(p)})
		}
		s.EstimateUS = max(s.EstimateUS, finish[i])
	}
	s.place = newPlacement(s)
	return s, nil
}

// Rebind gives instruction i of s other arguments for its kernel: its parameters and grid
// become theirs, and a prefetch its share of the same bytes per block, as Build would make
// them; its parts, dependencies and placement stay. This is what a step whose launches differ
// from a kept schedule's only in arguments (an attention's chunk count as key lists grow, an
// address after a buffer moved) changes in a copy of that schedule. The instruction gets a
// new parameter slice, so other copies that shared the old one keep it. It fails, leaving the
// instruction as it was, when args are not its kernel's arguments or launch another shape:
// other threads, a grid that is not 2-D, or fewer blocks than its parts.
func (s *Schedule) Rebind(i int, args any) error {
	if i < 0 || i >= len(s.Instrs) {
		return fmt.Errorf("megakernel: no instruction %d of %d", i, len(s.Instrs))
	}
	in := &s.Instrs[i]
	ks := Kernels()
	if in.Kernel < 0 || in.Kernel >= len(ks) {
		return fmt.Errorf("megakernel: instruction %d: kernel %d outside the table of %d", i, in.Kernel, len(ks))
	}
	k := ks[in.Kernel]
	g, err := k.Geometry(args)
	if err != nil {
		return fmt.Errorf("megakernel: instruction %d %s: %w", i, in.Name, err)
	}
	blocks := uint64(g.Grid.X) * uint64(g.Grid.Y)
	if g.Grid.Z != 1 || g.Block.Y != 1 || g.Block.Z != 1 || int(g.Block.X) != in.Threads || blocks > 1<<31 || blocks < uint64(max(in.Parts, 1)) {
		return fmt.Errorf("megakernel: instruction %d %s: new arguments launch %v blocks of %v threads, for %d parts of %d threads",
			i, in.Name, g.Grid, g.Block, in.Parts, in.Threads)
	}
	params := make([]uint64, len(in.Params))
	if !paramWords(in.Kernel, args, params) {
		return fmt.Errorf("megakernel: instruction %d %s: arguments of type %T, not kernel %s's", i, in.Name, args, k.Entry())
	}
	in.Params, in.GridX, in.GridY = params, int(g.Grid.X), int(g.Grid.Y)
	if pf := &in.Prefetch; pf.Param >= 0 {
		pf.PerBlock = (pf.Total + int64(blocks) - 1) / int64(blocks)
	}
	return nil
}

// Items is the number of parts in all queues.
func (s *Schedule) Items() int {
	n := 0
	for _, q := range s.Queues {
		n += len(q)
	}
	return n
}

// bits is a set of instruction indices.
type bits []uint64

func newBits(n int) bits      { return make(bits, (n+63)/64) }
func (b bits) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bits) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bits) or(c bits) {
	for i := range c {
		b[i] |= c[i]
	}
}

// Stats summarise a schedule.
type Stats struct {
	Instrs     int     `json:"instructions"`
	Parts      int     `json:"parts"`
	Deps       int     `json:"dependencies"` // direct dependencies, all instructions
	Levels     int     `json:"levels"`       // the longest chain of dependent instructions
	Bytes      int64   `json:"bytes"`        // moved by all instructions
	EstimateUS float64 `json:"estimate_us"`  // Schedule.EstimateUS
}

// Stats returns the schedule's summary.
func (s *Schedule) Stats() Stats {
	st := Stats{Instrs: len(s.Instrs), EstimateUS: s.EstimateUS}
	level := make([]int, len(s.Instrs))
	for i, in := range s.Instrs {
		st.Parts += in.Parts
		st.Deps += len(in.Deps)
		st.Bytes += in.Bytes
		level[i] = 1
		for _, d := range in.Deps {
			level[i] = max(level[i], level[d]+1)
		}
		st.Levels = max(st.Levels, level[i])
	}
	return st
}
