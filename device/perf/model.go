package perf

import (
	"fmt"
	"math"
	"strings"

	"verity/device"
	"verity/device/perf/sass"
)

// Prediction is the model's reading of one launch on one card. Times are modelled, never
// measured.
type Prediction struct {
	Entry string `json:"entry"`
	Card  string `json:"card"`

	Grid          device.Dim3 `json:"grid"`
	Block         device.Dim3 `json:"block"`
	Warps         int64       `json:"warps"`
	Registers     int         `json:"registers"`       // per thread
	Shared        int         `json:"shared_bytes"`    // per block, static and dynamic
	BlocksPerSM   int         `json:"blocks_per_sm"`   // what the resources allow
	Occupancy     string      `json:"occupancy_limit"` // registers, shared, warps, blocks or grid
	ResidentWarps int         `json:"resident_warps"`  // per SM at once, on the busiest SM

	Bytes   int64   `json:"bytes"`    // DRAM traffic (Traffic.Bytes)
	FloorUS float64 `json:"floor_us"` // Bytes at the card's bandwidth
	TimeUS  float64 `json:"time_us"`  // the predicted kernel time: the largest of the limits below
	Pct     float64 `json:"pct_of_floor"`
	Limiter string  `json:"limiter"` // dram, latency, lsu or issue
	// Equivalent is the bytes that would take TimeUS at the card's bandwidth: the prediction
	// in the unit of a byte-costed scheduler (the megakernel's placement).
	Equivalent int64 `json:"equivalent_bytes"`

	// The limits, as times: DRAM bandwidth; one warp's chain of waits times the rounds of
	// resident warps (Little's law); the L1/shared data path's cycles; instruction issue.
	DRAMUS    float64 `json:"dram_us"`
	LatencyUS float64 `json:"latency_us"`
	LSUUS     float64 `json:"lsu_us"`
	IssueUS   float64 `json:"issue_us"`

	// InFlight is the DRAM bytes a busiest SM has in flight at the latency limit's rate, and
	// Needed what the card's bandwidth needs in flight per SM (bandwidth × DRAM latency / SMs).
	InFlight float64 `json:"in_flight_bytes_per_sm"`
	Needed   float64 `json:"needed_bytes_per_sm"`
	// Memory instructions and L1/shared cycles per KB of DRAM traffic, against the cycles per
	// KB an SM has at full bandwidth (LSUBudgetPerKB).
	MemInstrsPerKB float64 `json:"mem_instrs_per_kb"`
	LSUCyclesPerKB float64 `json:"lsu_cycles_per_kb"`
	LSUBudgetPerKB float64 `json:"lsu_budget_per_kb"`
	// Chain is the global loads one iteration of the hottest loop waits for one after another
	// (1: its loads overlap; more: dependent or serialised loads).
	Chain int `json:"dependent_loads"`
	// WarpCycles is one warp's lifetime when it never waits for an issue slot; WarpInstrs and
	// WarpLSUCycles its instructions and L1/shared cycles.
	WarpCycles    float64 `json:"warp_cycles"`
	WarpInstrs    float64 `json:"warp_instrs"`
	WarpLSUCycles float64 `json:"warp_lsu_cycles"`
	// WarpCyclesSaved is what a warp's lifetime is shorter by, on average over the launch's
	// blocks, when the block before it ran just before on its SM (Work.Successors).
	WarpCyclesSaved float64 `json:"warp_cycles_saved,omitempty"`
	// LeadBlocks and LeadCycles are the grid's leading region (Work.Leading: its blocks and
	// the Returning ones) and its warps' average lifetime; WarpCycles is then the other
	// blocks' alone.
	LeadBlocks int64   `json:"lead_blocks,omitempty"`
	LeadCycles float64 `json:"lead_cycles,omitempty"`
	// MergeCycles is what a merging block's warp lives longer (Work.Merging): a part of the
	// launch that holds such a block is that much longer; WarpCycles leaves it out.
	MergeCycles   float64 `json:"merge_cycles,omitempty"`
	Blocks        int64   `json:"blocks"`
	WarpsPerBlock int     `json:"warps_per_block"`
	Hot           string  `json:"hot_loop"` // the SASS address range of the hottest loop
	LaunchUS      float64 `json:"launch_us"`
	Note          string  `json:"note,omitempty"`
}

// Predict models a launch of spec with args on card c, from the committed facts of spec's
// entry on the card's architecture and the traffic of its family.
func Predict(c Card, spec device.Spec, args any) (Prediction, error) {
	return PredictWith(c, spec, args, Options{})
}

// Options say what the launch finds that its facts and traffic cannot: the context it runs in.
type Options struct {
	// Unprefetched prices the code as if it made none of its prefetches (every wait as its
	// buffer's): the megakernel's instantiations of the bodies, which ask the L2 for nothing
	// (they stage their weights themselves), priced from the standalone kernel's facts.
	Unprefetched bool
	// Resident names the arguments whose buffers an earlier launch of the same step wrote, so
	// that the launch finds them in the L2 (an activation the previous op produced): their
	// waits cost an L2 trip, not a DRAM one.
	Resident map[string]bool
}

// PredictWith is Predict in the context opts describe.
func PredictWith(c Card, spec device.Spec, args any, opts Options) (Prediction, error) {
	f, err := KernelFacts(c.Arch, spec.Entry())
	if err != nil {
		return Prediction{}, err
	}
	geo, err := spec.Geometry(args)
	if err != nil {
		return Prediction{}, fmt.Errorf("%s: %w", spec.Entry(), err)
	}
	tr, err := TrafficOf(spec, args)
	if err != nil {
		return Prediction{}, err
	}
	ps, err := device.Params(args)
	if err != nil {
		return Prediction{}, err
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return model(c, f, geo, tr, names, opts)
}

// Model is Predict's arithmetic over given facts: geo is the launch shape, tr its traffic,
// params the kernel's argument names in order (the PTX parameters).
func Model(c Card, f *sass.Facts, geo device.Geometry, tr Traffic, params []string) (Prediction, error) {
	return model(c, f, geo, tr, params, Options{})
}

func model(c Card, f *sass.Facts, geo device.Geometry, tr Traffic, params []string, opts Options) (Prediction, error) {
	p := Prediction{Entry: f.Entry, Card: c.Name, Grid: geo.Grid, Block: geo.Block, Registers: f.Registers,
		LaunchUS: c.LaunchUS, Note: tr.Note}
	blocks := int64(geo.Grid.X) * int64(geo.Grid.Y) * int64(geo.Grid.Z)
	threads := int(geo.Block.X * geo.Block.Y * geo.Block.Z)
	if blocks <= 0 || threads <= 0 {
		return p, fmt.Errorf("perf: %s: an empty launch", f.Entry)
	}
	wpb := (threads + 31) / 32
	p.Warps = blocks * int64(wpb)

	// occupancy: registers are allocated per warp in units of 256, shared memory per block
	p.Shared = f.Shared + int(geo.Shared)
	regsPerWarp := (f.Registers*32 + 255) / 256 * 256
	limits := []struct {
		name string
		n    int
	}{
		{"blocks", c.MaxBlocksPerSM},
		{"warps", c.MaxWarpsPerSM / wpb},
		{"registers", c.RegistersPerSM / max(1, regsPerWarp*wpb)},
		{"shared", c.SharedPerSM / max(1, p.Shared+c.SharedReserved)},
	}
	p.BlocksPerSM, p.Occupancy = math.MaxInt, ""
	for _, l := range limits {
		if l.n < p.BlocksPerSM {
			p.BlocksPerSM, p.Occupancy = l.n, l.name
		}
	}
	if p.BlocksPerSM < 1 {
		return p, fmt.Errorf("perf: %s: a block of %d threads, %d registers each and %d bytes of shared memory does not fit an SM of %s",
			f.Entry, threads, f.Registers, p.Shared, c.Name)
	}
	perSM := (blocks + int64(c.SMs) - 1) / int64(c.SMs) // blocks on the busiest SM
	resident := min(int64(p.BlocksPerSM), perSM)
	if resident < int64(p.BlocksPerSM) {
		p.Occupancy = "grid"
	}
	p.ResidentWarps = int(resident) * wpb
	warpsSM := perSM * int64(wpb)

	// each region's executions per warp, from the bytes its accesses move per execution
	counts, loads := regionCounts(f, tr, params, p.Warps)
	stand := standIn(f, tr, params)
	pre, res := map[int]bool{}, map[int]bool{}
	if !opts.Unprefetched {
		pre = prefetched(f, stand)
	}
	for i, name := range params {
		res[i] = opts.Resident[name]
	}
	var tw, iw, lw, mw float64
	hotT := -1.0
	for i, r := range f.Regions {
		n := counts[i]
		if n == 0 {
			continue
		}
		t := float64(regionCycles(c, r, tr, params, stand, pre, res))
		t = max(t, float64(r.Instrs))
		tw += n * t
		iw += n * float64(r.Instrs)
		for _, a := range r.Access {
			m := n
			if a.Space == sass.Global {
				m = loads[i]
			}
			lw += m * float64(a.Cycles)
			mw += m
		}
		if r.Loop && n*t > hotT {
			hotT = n * t
			p.Hot = fmt.Sprintf("%#x-%#x", r.Start, r.End)
			p.Chain = 0
			for _, g := range r.Path.Global {
				p.Chain += g.N
			}
		}
	}
	p.WarpCycles, p.WarpInstrs, p.WarpLSUCycles, p.Blocks, p.WarpsPerBlock = tw, iw, lw, blocks, wpb

	clock := c.ClockGHz * 1e3 // cycles per µs
	p.Bytes = tr.Bytes()
	p.FloorUS = float64(p.Bytes) / (c.BandwidthGBs * 1e3)
	p.DRAMUS = p.FloorUS
	p.LatencyUS = tw * float64(warpsSM) / float64(p.ResidentWarps) / clock
	p.LSUUS = lw * float64(warpsSM) / clock
	p.IssueUS = iw * float64(warpsSM) / float64(c.Schedulers) / clock
	if w := tr.Work; w != nil && w.Blocks > 0 {
		workModel(c, &p, w, blocks, wpb)
		tw, lw = p.WarpCycles, p.WarpLSUCycles
	}
	p.TimeUS, p.Limiter = p.DRAMUS, "dram"
	for _, l := range []struct {
		name string
		us   float64
	}{{"latency", p.LatencyUS}, {"lsu", p.LSUUS}, {"issue", p.IssueUS}} {
		if l.us > p.TimeUS {
			p.TimeUS, p.Limiter = l.us, l.name
		}
	}
	if p.TimeUS > 0 {
		p.Pct = min(100, 100*p.FloorUS/p.TimeUS)
	}
	p.Equivalent = int64(math.Round(p.TimeUS * c.BandwidthGBs * 1e3))

	bpc := c.bytesPerCycle()
	perWarp := float64(p.Bytes) / float64(p.Warps) // DRAM bytes a warp moves
	if tw > 0 {
		p.InFlight = float64(p.ResidentWarps) * perWarp / tw * float64(c.DRAMLatency)
	}
	p.Needed = bpc * float64(c.DRAMLatency)
	if perWarp > 0 {
		p.MemInstrsPerKB = mw / perWarp * 1024
		p.LSUCyclesPerKB = lw / perWarp * 1024
	}
	p.LSUBudgetPerKB = 1024 / bpc
	return p, nil
}

// workModel times a launch from its family's Work: the working blocks spread over the SMs,
// BlocksPerSM of them at once; each wave of resident blocks waits through one block's chain
// together, and the busiest SM computes its blocks' instructions at its issue rate (or their
// L1/shared cycles, if more) besides; the blocks that return having found their work done
// (Work.Returning) add their own waves and instructions the same way. The blocks that also
// merge (Work.Merging) are among the working ones, spread over the SMs: the busiest SM computes
// its share of the merges, and its last wave waits for one merge's chain more; per warp, a
// merge is MergeCycles, not averaged into WarpCycles (a part holding one is that much longer).
func workModel(c Card, p *Prediction, w *Work, blocks int64, wpb int) {
	clock := c.ClockGHz * 1e3
	var cycles, instrs, lsu float64 // the busiest SM's
	p.WarpInstrs, p.WarpLSUCycles, p.WarpCycles, p.MergeCycles, p.LeadBlocks, p.LeadCycles = 0, 0, 0, 0, 0, 0
	kinds := []*Work{w, w.Returning}
	if l := w.Leading; l != nil && l.Blocks > 0 {
		// the launch's time: the leading blocks share the others' waves, the longer chain
		merged := *w
		merged.Blocks = w.Blocks + l.Blocks
		merged.Instrs = (float64(w.Blocks)*w.Instrs + float64(l.Blocks)*l.Instrs) / float64(merged.Blocks)
		merged.LSUCycles = (float64(w.Blocks)*w.LSUCycles + float64(l.Blocks)*l.LSUCycles) / float64(merged.Blocks)
		if chainOf(c, l) > chainOf(c, w) {
			merged.DRAMWaits, merged.L2Waits, merged.Syncs = l.DRAMWaits, l.L2Waits, l.Syncs
		}
		kinds[0] = &merged
	}
	for _, k := range kinds {
		if k == nil || k.Blocks <= 0 {
			continue
		}
		perSM := (k.Blocks + int64(c.SMs) - 1) / int64(c.SMs)
		res := min(int64(p.BlocksPerSM), perSM)
		waves := (perSM + res - 1) / res
		chain := float64(k.DRAMWaits*c.DRAMLatency + k.L2Waits*c.L2Latency + k.Syncs*c.SyncLatency)
		cycles += float64(waves) * chain
		instrs += float64(perSM) * k.Instrs
		lsu += float64(perSM) * k.LSUCycles
		// per warp of the launch, on average (PartUS): each kind of block's share
		frac := float64(k.Blocks) / float64(blocks)
		p.WarpInstrs += frac * k.Instrs / float64(wpb)
		p.WarpLSUCycles += frac * k.LSUCycles / float64(wpb)
		p.WarpCycles += frac * (chain + k.Instrs/float64(wpb))
	}
	// a part's view (PartCycles): the grid's leading region (the Leading blocks and the
	// Returning ones among them) and the others, each kind its own lifetime
	if l := w.Leading; l != nil && l.Blocks > 0 {
		p.WarpCycles = chainOf(c, w) + w.Instrs/float64(wpb)
		lead, n := float64(l.Blocks)*(chainOf(c, l)+l.Instrs/float64(wpb)), l.Blocks
		if r := w.Returning; r != nil && r.Blocks > 0 {
			lead += float64(r.Blocks) * (chainOf(c, r) + r.Instrs/float64(wpb))
			n += r.Blocks
		}
		p.LeadBlocks, p.LeadCycles = n, lead/float64(n)
	}
	if rest := blocks - p.LeadBlocks; w.Successors > 0 && rest > 0 {
		p.WarpCyclesSaved = float64(min(w.Successors, rest)) / float64(rest) * float64(w.DRAMWaits*(c.DRAMLatency-c.L2Latency))
	}
	if m := w.Merging; m != nil && m.Blocks > 0 {
		perSM := (m.Blocks + int64(c.SMs) - 1) / int64(c.SMs)
		chain := float64(m.DRAMWaits*c.DRAMLatency + m.L2Waits*c.L2Latency + m.Syncs*c.SyncLatency)
		cycles += chain
		instrs += float64(perSM) * m.Instrs
		lsu += float64(perSM) * m.LSUCycles
		frac := float64(m.Blocks) / float64(blocks)
		p.WarpInstrs += frac * m.Instrs / float64(wpb)
		p.WarpLSUCycles += frac * m.LSUCycles / float64(wpb)
		p.MergeCycles = chain + m.Instrs/float64(wpb)
	}
	p.LatencyUS = (cycles + max(instrs/float64(c.Schedulers), lsu)) / clock
	p.IssueUS = instrs / float64(c.Schedulers) / clock
	p.LSUUS = lsu / clock
	p.Chain = w.DRAMWaits + w.L2Waits
	p.Hot = "counted by its family"
}

// PartUS is the modelled time of n of the launch's blocks run on one SM of card c, with that
// SM's share of the card's bandwidth: the cost of one part of the launch in a persistent
// kernel that spreads its blocks over the SMs (the megakernel). c must be the card p is for.
func (p Prediction) PartUS(c Card, n int) float64 {
	if n <= 0 || p.Blocks <= 0 {
		return 0
	}
	clock := c.ClockGHz * 1e3
	warps := float64(n * p.WarpsPerBlock)
	resident := float64(min(n, p.BlocksPerSM) * p.WarpsPerBlock)
	dram := float64(p.Bytes) * float64(n) / float64(p.Blocks) / (c.BandwidthGBs * 1e3 / float64(c.SMs))
	return max(dram, (p.PartCycles(0, n, min(n, p.BlocksPerSM))/resident+p.MergeCycles)/clock, warps*p.WarpLSUCycles/clock, warps*p.WarpInstrs/float64(c.Schedulers)/clock)
}

// PartCycles is the warp cycles of the launch's blocks lo … hi−1 run on one SM, at most
// resident of them at once, one after another: their warps' lifetimes (LeadCycles for those
// of the grid's leading region, WarpCycles for the others), less what a block saves when the
// block before it ran just before (WarpCyclesSaved: all but the first resident of the others).
func (p Prediction) PartCycles(lo, hi, resident int) float64 {
	lead := max(0, min(int64(hi), p.LeadBlocks)-int64(lo))
	rest := int64(hi-lo) - lead
	wpb := int64(p.WarpsPerBlock)
	return float64(lead*wpb)*p.LeadCycles + float64(rest*wpb)*p.WarpCycles - float64(max(0, rest-int64(resident))*wpb)*p.WarpCyclesSaved
}

// chainOf is a block of kind k's waits, in cycles.
func chainOf(c Card, k *Work) float64 {
	return float64(k.DRAMWaits*c.DRAMLatency + k.L2Waits*c.L2Latency + k.Syncs*c.SyncLatency)
}

// paramIndex maps argument names to parameter indices.
func paramIndex(params []string, name string) int {
	for i, p := range params {
		if p == name {
			return i
		}
	}
	return -1
}

// requested is the bytes the warps of a launch ask for through each parameter index.
func requested(tr Traffic, params []string) map[int]int64 {
	out := map[int]int64{}
	for _, s := range tr.Streams {
		if i := paramIndex(params, s.Param); i >= 0 {
			out[i] += s.requested()
		}
	}
	return out
}

// fromDRAM reports whether loads through parameter i wait for DRAM: a buffer read about once
// (or not described), as opposed to one the warps read again and again from the L2.
func fromDRAM(tr Traffic, params []string, i int) bool {
	if i < 0 {
		return true
	}
	var bytes, req int64
	for _, s := range tr.Streams {
		if s.Param == params[i] && !s.Write {
			bytes += s.Bytes
			req += s.requested()
		}
	}
	if bytes == 0 {
		return false // a small buffer the traffic leaves out: cached
	}
	return float64(req) < 1.5*float64(bytes)
}

// regionCycles is one execution of a region's critical path on card c; a wait for a load of
// unknown buffer is priced as one of the buffer it stands for (standIn), as regionCounts
// counts it. A loop's wait for a buffer the kernel asks the L2 for ahead of its loads (pre:
// prefetched) is an L2 hit: the kernels issue their prefetches chunks ahead, far enough for a
// DRAM round trip (MV_PREFETCH in ptx/src/packed.cuh), and the straight code's first loads
// wait for DRAM as before. A wait for a buffer an earlier launch of the step wrote (res:
// Options.Resident) is an L2 hit.
func regionCycles(c Card, r sass.Region, tr Traffic, params []string, stand int, pre, res map[int]bool) int {
	p := r.Path
	t := p.Issue + p.ALU + p.Shared*c.SharedLatency + p.Shuffle*c.ShuffleLatency + p.Const*c.ConstLatency +
		p.Local*c.DRAMLatency + p.Sync*c.SyncLatency
	for _, g := range p.Global {
		lat := c.L2Latency
		k := g.Param
		if k < 0 {
			k = stand
		}
		if fromDRAM(tr, params, k) && !(r.Loop && pre[k]) && !res[k] {
			lat = c.DRAMLatency
		}
		t += g.N * lat
	}
	return max(t, 0)
}

// prefetched is the parameters whose buffers the kernel asks the L2 for (sass.Prefetch
// accesses; one of unknown buffer counts for the stand-in's).
func prefetched(f *sass.Facts, stand int) map[int]bool {
	out := map[int]bool{}
	for _, r := range f.Regions {
		for _, a := range r.Access {
			if a.Op != sass.Prefetch {
				continue
			}
			if k := a.Param; k >= 0 {
				out[k] = true
			} else if stand >= 0 {
				out[stand] = true
			}
		}
	}
	return out
}

// standIn is the parameter that accesses of unknown buffer stand for: the largest requested
// buffer that no access names (-1: none).
func standIn(f *sass.Facts, tr Traffic, params []string) int {
	req := requested(tr, params)
	attributed := map[int]bool{}
	for _, r := range f.Regions {
		for _, a := range r.Access {
			if a.Space == sass.Global && a.Param >= 0 {
				attributed[a.Param] = true
			}
		}
	}
	stand := -1
	for i, n := range req {
		if !attributed[i] && n > 0 && (stand < 0 || n > req[stand] || n == req[stand] && i < stand) {
			stand = i
		}
	}
	return stand
}

// regionCounts is how many times each region runs per warp, and how many times its global
// accesses do. The straight code runs once. A loop's driver is the parameter it moves the most
// bytes through per iteration. The innermost loops of a driver run equally often, as many
// times as that parameter's requested bytes per warp (less what the straight code moves) take
// at their bytes per iteration. Where the traffic gives the passes (Traffic.Passes), a loop
// that holds another loop of its driver (a matvec's pass over the columns around its loop over
// the units) runs that many times; what it loads is a pipeline's fill, which the inner loops'
// last iterations then do not load (their loads past the row are guarded): their global
// accesses run as many times as the bytes left take, and the fill's no more than the row holds.
// A loop that moves nothing runs as often as the nearest loop before it that does.
func regionCounts(f *sass.Facts, tr Traffic, params []string, warps int64) (counts, loads []float64) {
	req := requested(tr, params)
	stand := standIn(f, tr, params)
	param := func(a sass.Access) int {
		if a.Param < 0 {
			return stand
		}
		return a.Param
	}
	bytes := make([]map[int]float64, len(f.Regions))
	for i, r := range f.Regions {
		bytes[i] = map[int]float64{}
		for _, a := range r.Access {
			if a.Space == sass.Global && a.Op != sass.Prefetch {
				if k := param(a); k >= 0 {
					bytes[i][k] += float64(a.Bytes)
				}
			}
		}
	}
	counts, loads = make([]float64, len(f.Regions)), make([]float64, len(f.Regions))
	driver := make([]int, len(f.Regions))
	group := map[int]float64{} // driver → bytes of it per iteration, over its loops
	for i, r := range f.Regions {
		driver[i] = -1
		if !r.Loop {
			counts[i] = 1
			continue
		}
		best := 0.0
		for k, b := range bytes[i] {
			if req[k] > 0 && (b > best || b == best && k < driver[i]) {
				best, driver[i] = b, k
			}
		}
		if driver[i] >= 0 {
			group[driver[i]] += best
		}
	}
	// the loops that hold another loop of their driver, and the bytes they load per warp
	outer := make([]bool, len(f.Regions))
	passes := float64(max(tr.Passes, 1))
	fill := map[int]float64{}
	for i, r := range f.Regions {
		k := driver[i]
		if !r.Loop || k < 0 || tr.Passes == 0 {
			continue
		}
		for j, q := range f.Regions {
			if j != i && q.Loop && driver[j] == k && q.Depth > r.Depth && q.Start >= r.Start && q.End <= r.End {
				outer[i] = true
				group[k] -= bytes[i][k]
				fill[k] += passes * bytes[i][k]
				break
			}
		}
	}
	last := 0.0
	for i, r := range f.Regions {
		if !r.Loop {
			loads[i] = counts[i]
			continue
		}
		k := driver[i]
		if k < 0 {
			counts[i] = max(last, 1)
			loads[i] = counts[i]
			continue
		}
		per := max(0, float64(req[k])/float64(warps)-bytes[0][k])
		switch {
		case outer[i]:
			counts[i] = passes
			loads[i] = passes * min(1, per/fill[k])
		case group[k] > 0:
			counts[i] = per / group[k]
			loads[i] = max(0, per-fill[k]) / group[k]
		}
		last = counts[i]
	}
	return counts, loads
}

// Limit names are the limiters Prediction.Limiter takes.
var Limits = []string{"dram", "latency", "lsu", "issue"}

// String is a one-line summary.
func (p Prediction) String() string {
	return fmt.Sprintf("%s on %s: %.1f µs predicted, floor %.1f µs (%.0f %%), %s-bound", p.Entry, p.Card, p.TimeUS, p.FloorUS, p.Pct,
		strings.ToUpper(p.Limiter[:1])+p.Limiter[1:])
}
