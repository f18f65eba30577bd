package megakernel

import (
	"fmt"
	"math"
	"sort"

	"verity/device/perf"
)

// The cost model: what a schedule costs on a GPU, modelled — never measured. It replays the
// schedule as the megakernel runs it (megakernel.cu): each queue's items in order, an item
// starting when its queue has finished the one before and paid the item's own start, and its
// instruction's dependencies have finished and woken it; a part's time comes from a
// PartModel (the kernels' static model where one is given, else bytes at the queue's share
// of the bandwidth). What limits the step is then read off the critical path: the chain of
// items, each started by the one before it on its queue or by the dependency it waited for,
// that ends last.

// Machine is a GPU as the cost model sees it. The defaults (H200) are named and sourced here;
// the first GPU run calibrates them.
type Machine struct {
	Name         string
	SMs          int
	ClockGHz     float64
	BandwidthGBs float64 // the floor's: DRAM bytes read or written per second, in GB
	// L2GBs is the rate lines already in the L2 are read at, in GB/s (0: not known), and
	// L2Bytes the L2's size (0: not known).
	L2GBs   float64
	L2Bytes int64
	// L2Latency and DRAMLatency are a load's latency under load, in cycles.
	L2Latency, DRAMLatency int
	// ItemCycles is the start of an item when nothing waits: the loop reads the item and then
	// its dependencies (two dependent loads of the copies the block keeps in shared memory; the
	// instruction's words beside them, from the L2), polls each counter once (an acquire load),
	// and meets at two barriers.
	ItemCycles int
	// WakeCycles is the time from a dependency's last part ending to a waiting block running:
	// the release reduction reaching L2 behind the part's writes, and half a poll period — the
	// loop polls back to back (HotWakeCycles for a dependency that ends within HotWaitCycles
	// of the wait's start: HotPolls trips to the L2), then sleeps up to 256 ns between polls
	// (WakeCycles).
	WakeCycles, HotWakeCycles, HotWaitCycles int
	// LaunchUS is the launch itself: the driver's call and the blocks' start, with the copy of
	// each queue's item records and dependencies to shared memory.
	LaunchUS float64
	// StageBytes is the weights a block staged alone on its SM copies to shared memory while
	// it waits (megakernel.cu): StageBytes of the dynamic shared memory the runner launches
	// with there, what a block may opt in to less room for the L1 (LaunchShared). Blocks that share an SM
	// are launched with MinShared.
	StageBytes int64
}

// stageBytes is what each queue stages when qps queues share an SM.
func (m Machine) stageBytes(qps int) int64 {
	if qps > 1 {
		return StageBytes(MinShared)
	}
	return m.StageBytes
}

// H200 is the design's card: the kernels' static model's H200 (device/perf/cards.go: 132 SMs
// at 1.98 GHz; 4.3 TB/s, the device-to-device copy rate measured on the project's H200; 260
// and 800 cycles of L2 and loaded DRAM latency from Hopper microbenchmarks) with the
// megakernel loop's own costs (MachineFor).
var H200 = MachineFor(perf.Cards["H200"])

// The megakernel loop's costs on sm_90, from its SASS: an item's start is two dependent loads
// of shared memory (its record, then its instruction's dependencies, which the record locates:
// the copies the block made when it started, ~30 cycles each; the instruction's words are read
// from the L2 beside them and the poll), one poll (an acquire load, an L2 trip), two barriers
// (~40 cycles each) and ~100 issue cycles: ≈ 500 cycles (≈ 960 when the record and its
// dependencies came from the L2); a hand-off is two L2 trips (the release behind the part's
// writes, the poll that sees it) and half a poll period: half an L2 trip while the polls come
// back to back (the first HotPolls of a wait), ≈ 650 cycles; half of 256 ns and an L2 trip
// after, ≈ 900 cycles; a launch ≈ 4 µs (the driver's call and the blocks' start; to calibrate) and
// the copy of the records, then of the dependencies they locate, when the blocks start: two
// dependent DRAM trips and two barriers, ≈ 1 700 cycles.
const (
	loopItemCycles  = 500
	loopWakeCycles  = 900
	loopHotWake     = 650
	loopLaunchUS    = 4
	loopStartCycles = 1700
)

func (m Machine) us(cycles int) float64 { return float64(cycles) / (m.ClockGHz * 1e3) }

// wakeUS is how long after a dependency's end at ready a block that waits for it from free
// sees it: a hot wake if it ends while the wait's polls come back to back (HotWaitCycles from
// the wait's start), else a wake between sleeps.
func (m Machine) wakeUS(ready, free float64) float64 {
	if m.HotWakeCycles > 0 && ready <= free+m.us(m.HotWaitCycles) {
		return m.us(m.HotWakeCycles)
	}
	return m.us(m.WakeCycles)
}

// queueShare is one queue's share of the bandwidth, in bytes per µs, when every SM runs qps
// queues.
func (m Machine) queueShare(qps int) float64 { return m.BandwidthGBs * 1e3 / float64(m.SMs*qps) }

// A PartModel times parts: blocks [lo, hi) of instruction in, run by one queue of the
// megakernel (one block of MaxThreads threads) while queuesPerSM queues share each SM and
// queues run in all (at most the machine's SMs × queuesPerSM; fewer when the schedule uses
// fewer). It returns µs and what limits them ("dram", "latency", "lsu", "issue").
type PartModel interface {
	PartUS(in *Instr, lo, hi, queuesPerSM, queues int) (us float64, limiter string)
}

// BytesModel times a part as its share of the instruction's bytes at a queue's share of the
// machine's bandwidth (all SMs' queues busy): a floor, blind to bytes in flight and issue
// limits. It stands in where the kernels' static model is not given.
type BytesModel struct{ Machine Machine }

func (b BytesModel) PartUS(in *Instr, lo, hi, qps, _ int) (float64, string) {
	if in.Blocks() == 0 {
		return 0, "dram"
	}
	bytes := float64(in.Bytes) * float64(hi-lo) / float64(in.Blocks())
	return bytes / b.Machine.queueShare(qps), "dram"
}

// Prediction is a schedule's modelled time and where it goes.
type Prediction struct {
	Machine     string  `json:"machine"`
	Queues      int     `json:"queues"`
	QueuesPerSM int     `json:"queues_per_sm"`
	US          float64 `json:"us"`          // the step: the schedule's replay, or the floor if longer, plus the launch
	ScheduleUS  float64 `json:"schedule_us"` // the replay: the last item's end
	FloorUS     float64 `json:"floor_us"`    // every instruction's bytes at the bandwidth
	LaunchUS    float64 `json:"launch_us"`
	Bytes       int64   `json:"bytes"`
	Items       int     `json:"items"`
	MaxItems    int     `json:"max_items_per_queue"`
	Levels      int     `json:"levels"`
	// The critical path: the time of its parts, by kernel; of its items' starts; of its
	// hand-offs (waits for a dependency: the wake-up, and the time a part waited beyond it
	// because it started before its dependencies ended — imbalance); and how many hand-offs.
	Path     []KernelTime `json:"critical_path"`
	PartsUS  float64      `json:"parts_us"`
	ItemsUS  float64      `json:"item_starts_us"`
	WakesUS  float64      `json:"wakes_us"`
	Handoffs int          `json:"handoffs"`
	// Prefetched is the stream bytes the replay found in L2 (or staged) when their parts began
	// (fetched through their queue's window while it waited or ran parts that left bandwidth
	// unused).
	Prefetched int64 `json:"prefetched_bytes"`
	// StageBytes is what a waiting block stages in shared memory (Machine.StageBytes for its
	// queues per SM).
	StageBytes int64 `json:"stage_bytes"`
}

// KernelTime is a kernel's share of the critical path.
type KernelTime struct {
	Entry   string  `json:"entry"`
	US      float64 `json:"us"`
	Parts   int     `json:"parts"`
	Limiter string  `json:"limiter"` // the limiter of its longest part on the path
}

// Predict replays s on machine m with queuesPerSM of its queues on each SM, timing parts with
// pm (nil: BytesModel).
func Predict(s *Schedule, m Machine, queuesPerSM int, pm PartModel) (Prediction, error) {
	queues := len(s.Queues)
	if queuesPerSM < 1 || queues > queuesPerSM*m.SMs {
		return Prediction{}, fmt.Errorf("megakernel: %d queues on %d SMs at %d per SM", queues, m.SMs, queuesPerSM)
	}
	if pm == nil {
		pm = BytesModel{m}
	}
	r := replay(s, m, queuesPerSM, pm)
	p := Prediction{Machine: m.Name, Queues: queues, QueuesPerSM: queuesPerSM, LaunchUS: m.LaunchUS, Items: s.Items(),
		Levels: s.Stats().Levels, Prefetched: r.prefetched, StageBytes: m.stageBytes(queuesPerSM)}
	for _, in := range s.Instrs {
		p.Bytes += in.Bytes
	}
	for _, q := range s.Queues {
		p.MaxItems = max(p.MaxItems, len(q))
	}
	p.FloorUS = float64(p.Bytes) / (m.BandwidthGBs * 1e3)
	p.ScheduleUS = r.end
	p.US = max(r.end, p.FloorUS) + m.LaunchUS
	// walk the critical path back from the item that ends last
	type onPath struct {
		KernelTime
		longest float64
	}
	by := map[string]*onPath{}
	kernels := Kernels()
	for it := r.last; it != nil; it = it.cause {
		entry := kernels[s.Instrs[it.instr].Kernel].Entry()
		k := by[entry]
		if k == nil {
			k = &onPath{KernelTime: KernelTime{Entry: entry}}
			by[entry] = k
		}
		k.US += it.part
		k.Parts++
		if it.part >= k.longest {
			k.longest, k.Limiter = it.part, it.limiter
		}
		p.PartsUS += it.part
		if it.byDep {
			p.WakesUS += it.start - it.causeEnd
			p.Handoffs++
		} else {
			p.ItemsUS += it.start - it.causeEnd
		}
		if it.cause == nil {
			p.ItemsUS += it.causeEnd // the first item's own start
		}
	}
	for _, k := range by {
		p.Path = append(p.Path, k.KernelTime)
	}
	sort.Slice(p.Path, func(a, b int) bool { return p.Path[a].US > p.Path[b].US })
	return p, nil
}

// stagesWhileWaiting reports whether a block that stages stage bytes does so for in's part
// while it waits: a part with a stream and dependencies, in a schedule with a window (which
// the staging moves on).
func stagesWhileWaiting(in *Instr, stage, window int64) bool {
	return stage > 0 && window > 0 && in.Prefetch.Param >= 0 && len(in.Deps) > 0
}

// partStart is when a part starts on a queue free from free (its previous item's end and its
// own item's start) whose last dependency ends at ready (negative: none), and whether it
// waited for that dependency: a wake after it ends (wakeUS), and for a block that stages
// while it waits the copying warps' last round, half an L2 trip (the window brought its lines).
func (m Machine) partStart(free, ready float64, stages bool) (float64, bool) {
	if ready < 0 {
		return free, false
	}
	w := m.wakeUS(ready, free)
	if ready+w <= free {
		return free, false
	}
	if stages {
		return ready + w + m.us(m.L2Latency)/2, true
	}
	return ready + w, true
}

// window is a queue's prefetch window as the replay and the placement follow it: at is where
// its next item's stream bytes begin among the queue's streams laid end to end, arrived how
// far the bytes asked for have come.
type window struct{ at, arrived int64 }

// windowed times a part through its queue's window: a part of t µs by the part model, moving
// partBytes, whose stream is the queue's next n bytes, on a queue free from free (its previous
// item's end) that starts it at start. While the block waited (from free on) the window fetched
// at the queue's share of the bandwidth, up to reach bytes past the part's first (the window,
// and what a waiting block stages: the copy keeps pace with what arrives, the head first) and
// no further than end, the queue's last stream byte. What of the part's stream has come is
// read at the latency's ratio but no faster than a queue's share of the L2's rate; while the
// part runs, its queue's share of the bandwidth that the part leaves unused (a latency-bound
// part's: attention's, a norm's) brings in the rest of the window. It returns the part's time
// and the stream bytes it found, and moves w past the part.
func (m Machine) windowed(w *window, t, partBytes float64, n int64, free, start float64, reach, end int64, qps int) (float64, int64) {
	share, l2 := m.queueShare(qps), float64(m.L2Latency)/float64(m.DRAMLatency)
	asked := min(w.at+reach, end)
	a := min(asked, max(w.arrived, w.at)+int64((start-free)*share))
	got := min(a, w.at+n) - w.at
	dram := partBytes // what the part reads from DRAM itself
	if got > 0 && partBytes > 0 {
		f := math.Min(1, float64(got)/partBytes)
		fast := t * f * l2
		if m.L2GBs > 0 {
			fast = max(fast, f*partBytes/(m.L2GBs*1e3/float64(m.SMs*qps)))
		}
		t = t*(1-f) + fast
		dram *= 1 - f
	}
	w.arrived = min(asked, max(a, w.at+n)+int64(max(0, t*share-dram)))
	w.at += n
	return t, max(got, 0)
}

// replayed is one item as the replay ran it.
type replayed struct {
	instr    int
	start    float64 // when its part began
	part     float64 // the part's time
	limiter  string
	cause    *replayed // what it started after: its queue's previous item, or the dependency that woke it
	causeEnd float64   // when the cause ended
	byDep    bool      // woken by a dependency
}

type replayResult struct {
	end        float64
	last       *replayed
	prefetched int64
}

// replay runs s's items in the model. Instructions go in program order and each queue holds
// its items in program order, so every item's dependencies have been replayed before it.
func replay(s *Schedule, m Machine, qps int, pm PartModel) replayResult {
	queues := len(s.Queues)
	item, stage := m.us(m.ItemCycles), m.stageBytes(qps)
	clock := make([]float64, queues)
	prev := make([]*replayed, queues)
	lastOf := make([]*replayed, len(s.Instrs)) // each instruction's part that ended last
	next := make([]int, queues)
	byInstr := make([][]int, len(s.Instrs)) // the queues holding each instruction's parts, in order
	for q, items := range s.Queues {
		for _, it := range items {
			byInstr[it.Instr] = append(byInstr[it.Instr], q)
		}
	}
	// each queue's streams laid end to end (prefetch.go): item k's bytes are
	// [streams[q][k], streams[q][k+1]); arrived[q] is how far the bytes asked for have come
	streams := make([][]int64, queues)
	for q, items := range s.Queues {
		streams[q] = s.queueStreams(items)
	}
	arrived := make([]int64, queues)
	var res replayResult
	for i := range s.Instrs {
		in := &s.Instrs[i]
		var ready float64
		var dep *replayed
		for _, d := range in.Deps {
			if l := lastOf[d]; l != nil && l.start+l.part > ready {
				ready, dep = l.start+l.part, l
			}
		}
		for _, q := range byInstr[i] {
			k := next[q]
			it := s.Queues[q][k]
			next[q]++
			lo, hi := partBlocks(in, int(it.Part))
			r := &replayed{instr: i, cause: prev[q], causeEnd: clock[q]}
			stages := stagesWhileWaiting(in, stage, s.PrefetchBytes)
			waitFor := -1.0
			if dep != nil {
				waitFor = ready
			}
			start, waited := m.partStart(clock[q]+item, waitFor, stages)
			if waited {
				r.cause, r.causeEnd, r.byDep = dep, ready, true
			}
			t, lim := pm.PartUS(in, lo, hi, qps, queues)
			if s.PrefetchBytes > 0 {
				st := streams[q]
				var staged int64
				if stages {
					staged = min(stage, st[k+1]-st[k])
				}
				w := window{at: st[k], arrived: arrived[q]}
				var got int64
				t, got = m.windowed(&w, t, float64(in.Bytes)*float64(hi-lo)/float64(in.Blocks()), st[k+1]-st[k], clock[q], start,
					s.PrefetchBytes+staged, st[len(st)-1], qps)
				arrived[q] = w.arrived
				res.prefetched += got
			}
			r.start, r.part, r.limiter = start, t, lim
			clock[q], prev[q] = start+t, r
			if lastOf[i] == nil || start+t > lastOf[i].start+lastOf[i].part {
				lastOf[i] = r
			}
			if start+t > res.end {
				res.end, res.last = start+t, r
			}
		}
	}
	return res
}
