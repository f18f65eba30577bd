package ptxvm

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"verity/device"
)

// Config tunes a launch; the zero value is the default.
type Config struct {
	// Workers is the number of goroutines running blocks (0: GOMAXPROCS). Results do not
	// depend on it unless blocks communicate through global memory.
	Workers int
	// MaxSteps is the budget of warp instructions per block (0: DefaultMaxSteps).
	MaxSteps int64
	// NoRaceCheck turns off shared-memory race detection (faster).
	NoRaceCheck bool
	// AllowFloatAtomics lets float atom/red instructions run; by default they are an error,
	// because their result depends on the order threads reach them.
	AllowFloatAtomics bool
	// Weak, if set, runs launches in the weak-memory mode (see the package doc): blocks
	// interleave on one goroutine in a seeded adversarial order, Workers of them resident at
	// a time, and global memory is only as coherent as the PTX memory model guarantees.
	Weak *Weak
}

// DefaultMaxSteps is the per-block warp-instruction budget when Config.MaxSteps is 0.
const DefaultMaxSteps = 1 << 28

// quantum is how many instructions a warp runs before the next warp of its block gets a turn.
const quantum = 1 << 12

// Stats counts what a launch executed.
type Stats struct {
	Blocks int64
	// WarpInstructions counts instructions issued per warp (a warp-wide instruction once);
	// ThreadInstructions counts them per thread (active lanes).
	WarpInstructions   int64
	ThreadInstructions int64
	// StaleReads counts the racy loads that returned a stale value (weak mode with
	// Weak.AllowStale).
	StaleReads int64
	// GenericShared counts the lanes' accesses through generic addresses that reached shared
	// memory (the megakernel's bodies reading staged weights do so).
	GenericShared int64
}

// ExecError is a fault raised by one thread of a running kernel.
type ExecError struct {
	Kernel        string
	Block, Thread [3]uint32
	Line          int
	Instr         string
	Msg           string
	// Err classifies the fault when it is one of this package's sentinel errors
	// (ErrStaleRead); nil otherwise.
	Err error
}

func (e *ExecError) Unwrap() error { return e.Err }

func (e *ExecError) Error() string {
	return fmt.Sprintf("ptxvm: %s: block (%d,%d,%d) thread (%d,%d,%d): line %d `%s`: %s", e.Kernel,
		e.Block[0], e.Block[1], e.Block[2], e.Thread[0], e.Thread[1], e.Thread[2], e.Line, e.Instr, e.Msg)
}

// StallError reports a block that cannot finish: a barrier deadlock, or a step budget
// exhausted. Warps lists where each warp's threads stand.
type StallError struct {
	Kernel string
	Block  [3]uint32
	Reason string
	Warps  []string
}

func (e *StallError) Error() string {
	return fmt.Sprintf("ptxvm: %s: block (%d,%d,%d): %s; %s", e.Kernel, e.Block[0], e.Block[1], e.Block[2], e.Reason, strings.Join(e.Warps, "; "))
}

// launch is one kernel launch in progress.
type launch struct {
	k      *Kernel
	g      device.Geometry
	params []byte
	mem    Memory
	cfg    Config
	shared int64 // bytes of shared memory per block
	atomMu sync.Mutex
	fatom  atomic.Int64 // float atomics executed
	wk     *weakMem     // the weak-memory state (Config.Weak), or nil
}

// bindParams lays out the parameter values in the kernel's .param space.
func (k *Kernel) bindParams(ps []device.Param) ([]byte, error) {
	if len(ps) != len(k.params) {
		return nil, fmt.Errorf("ptxvm: %s takes %d parameters, got %d", k.Name, len(k.params), len(ps))
	}
	buf := make([]byte, k.paramBytes)
	for i, p := range ps {
		kp := k.params[i]
		want := int64(8)
		if p.Kind != device.U64 {
			want = 4
		}
		if kp.size != want {
			return nil, fmt.Errorf("ptxvm: %s parameter %d (%s, .%v, %d bytes) receives %s %s (%d bytes)", k.Name, i, kp.name, kp.typ, kp.size, p.Kind, p.Name, want)
		}
		if kp.typ == kF32 && p.Kind != device.F32 || p.Kind == device.F32 && kp.typ != kF32 && kp.typ != kB32 {
			return nil, fmt.Errorf("ptxvm: %s parameter %d (%s) is .%v but receives %s %s", k.Name, i, kp.name, kp.typ, p.Kind, p.Name)
		}
		var tmp [8]byte
		binary.LittleEndian.PutUint64(tmp[:], p.Bits)
		copy(buf[kp.off:], tmp[:want])
	}
	return buf, nil
}

// Launch runs the kernel over geometry g with parameters ps (as device.Params flattens
// them) against global memory mem.
func (k *Kernel) Launch(g device.Geometry, ps []device.Param, mem Memory, cfg Config) (Stats, error) {
	var st Stats
	params, err := k.bindParams(ps)
	if err != nil {
		return st, err
	}
	nb := int64(g.Grid.X) * int64(g.Grid.Y) * int64(g.Grid.Z)
	nt := int64(g.Block.X) * int64(g.Block.Y) * int64(g.Block.Z)
	if nb == 0 || nt == 0 {
		return st, fmt.Errorf("ptxvm: %s: empty launch grid %v block %v", k.Name, g.Grid, g.Block)
	}
	if nt > 1024 {
		return st, fmt.Errorf("ptxvm: %s: %d threads per block (at most 1024)", k.Name, nt)
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	l := &launch{k: k, g: g, params: params, mem: mem, cfg: cfg}
	l.shared = k.dynOff + int64(g.Shared)
	if g.Shared == 0 {
		l.shared = k.staticShared
	}
	if l.shared > maxShared {
		return st, fmt.Errorf("ptxvm: %s: %d bytes of shared memory per block (at most %d)", k.Name, l.shared, maxShared)
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if int64(workers) > nb {
		workers = int(nb)
	}
	if cfg.Weak != nil {
		return l.runWeak(nb, workers)
	}
	var (
		next     atomic.Int64
		failed   atomic.Bool
		mu       sync.Mutex
		firstErr error
		errBlock = nb
		wg       sync.WaitGroup
	)
	results := make([]Stats, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := getBlockRun(l)
			defer putBlockRun(r)
			for !failed.Load() {
				b := next.Add(1) - 1
				if b >= nb {
					break
				}
				if err := r.run(b); err != nil {
					mu.Lock()
					if b < errBlock {
						errBlock, firstErr = b, err
					}
					mu.Unlock()
					failed.Store(true)
				}
			}
			results[i] = r.stats
		}(i)
	}
	wg.Wait()
	for _, r := range results {
		st.Blocks += r.Blocks
		st.WarpInstructions += r.WarpInstructions
		st.ThreadInstructions += r.ThreadInstructions
		st.GenericShared += r.GenericShared
	}
	return st, firstErr
}

// barrier is one of a block's 16 named barriers.
type barrier struct {
	arrived int
	count   int // expected threads; -1: every live thread of the block
}

// blockRun executes blocks one after another, reusing its warps and shared memory.
type blockRun struct {
	l       *launch
	k       *Kernel
	idx     [3]uint32
	warps   []*warp
	shared  []byte
	race    []shadow
	epoch   uint32
	bars    [16]barrier
	live    int // threads not exited
	fault   error
	halt    bool // stop issuing: a fault, or (weak mode) a yield at nanosleep
	stats   Stats
	nthread int
	steps   int64 // warp instructions of the current block
	blockWeak
}

// getBlockRun returns a block run for launch l: one a finished launch of the same block
// shape left (begin resets what a block sees), or a new one.
func getBlockRun(l *launch) *blockRun {
	for {
		b, _ := l.k.runs.Get().(*blockRun)
		if b == nil {
			return newBlockRun(l)
		}
		g := l.g.Block
		if b.nthread == int(g.X*g.Y*g.Z) && int64(len(b.shared)) == l.shared && (b.race != nil) == (!l.cfg.NoRaceCheck && l.shared > 0) {
			b.l, b.stats = l, Stats{}
			return b
		}
	}
}

// putBlockRun keeps b for a later launch, without references into this one's memory.
func putBlockRun(b *blockRun) {
	b.l, b.fault = nil, nil
	b.blockWeak = blockWeak{}
	for _, w := range b.warps {
		w.gc, w.warpWeak = cachedRegion{}, warpWeak{}
	}
	b.k.runs.Put(b)
}

func newBlockRun(l *launch) *blockRun {
	b := &blockRun{l: l, k: l.k, shared: make([]byte, l.shared)}
	if !l.cfg.NoRaceCheck && l.shared > 0 {
		b.race = make([]shadow, l.shared)
	}
	g := l.g.Block
	b.nthread = int(g.X * g.Y * g.Z)
	nw := (b.nthread + 31) / 32
	for i := 0; i < nw; i++ {
		w := &warp{b: b, id: i, r: make([]uint64, l.k.nslots*32), local: make([]byte, 32*l.k.localBytes)}
		b.warps = append(b.warps, w)
	}
	return b
}

// threadIdx returns the (x, y, z) index of linear thread t of a block.
func (b *blockRun) threadIdx(t int) [3]uint32 {
	g := b.l.g.Block
	return [3]uint32{uint32(t) % g.X, uint32(t) / g.X % g.Y, uint32(t) / (g.X * g.Y)}
}

// begin prepares the block run for block linear.
func (b *blockRun) begin(linear int64) {
	g := b.l.g.Grid
	b.idx = [3]uint32{uint32(linear % int64(g.X)), uint32(linear / int64(g.X) % int64(g.Y)), uint32(linear / (int64(g.X) * int64(g.Y)))}
	clear(b.shared)
	b.epoch++
	b.bars = [16]barrier{}
	b.live = b.nthread
	b.fault, b.halt = nil, false
	b.steps = 0
	for _, w := range b.warps {
		w.reset()
	}
	if b.l.wk != nil {
		b.beginWeak(linear)
	}
}

func (b *blockRun) run(linear int64) error {
	b.begin(linear)
	var steps int64
	for {
		ran := false
		for _, w := range b.warps {
			if w.live&^w.wait == 0 {
				continue
			}
			n := w.run(quantum)
			steps += int64(n)
			ran = ran || n > 0
			if b.fault != nil {
				b.stats.WarpInstructions += steps
				return b.fault
			}
		}
		if steps > b.l.cfg.MaxSteps {
			b.stats.WarpInstructions += steps
			return b.stall(fmt.Sprintf("step budget of %d warp instructions exceeded", b.l.cfg.MaxSteps))
		}
		if !ran {
			break
		}
	}
	b.stats.WarpInstructions += steps
	b.stats.Blocks++
	if b.live > 0 {
		return b.stall("barrier deadlock: every live thread waits at a barrier that cannot complete")
	}
	return nil
}

// stall builds a StallError describing every warp.
func (b *blockRun) stall(reason string) error {
	e := &StallError{Kernel: b.k.Name, Block: b.idx, Reason: reason}
	for _, w := range b.warps {
		e.Warps = append(e.Warps, w.describe())
	}
	return e
}

// describe says where the warp's lanes are: groups of lanes sharing a PC.
func (w *warp) describe() string {
	if w.live == 0 {
		return fmt.Sprintf("warp %d exited", w.id)
	}
	w.materialize()
	groups := map[int32]uint32{}
	for m := w.live; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		groups[w.pc[l]] |= 1 << l
	}
	var parts []string
	for pc, m := range groups {
		in := &w.b.k.prog[pc]
		state := "at"
		if m&w.wait != 0 {
			state = "waiting at"
		} else if m&w.park != 0 {
			state = "waiting for the rest of the warp at"
		}
		parts = append(parts, fmt.Sprintf("lanes %s %s line %d `%s`", laneSet(m), state, in.line, in.text))
	}
	sortStrings(parts)
	return fmt.Sprintf("warp %d: %s", w.id, strings.Join(parts, ", "))
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// laneSet formats a lane mask as ranges: "0-15,17".
func laneSet(m uint32) string {
	var parts []string
	for l := 0; l < 32; {
		if m&(1<<l) == 0 {
			l++
			continue
		}
		e := l
		for e+1 < 32 && m&(1<<(e+1)) != 0 {
			e++
		}
		if e == l {
			parts = append(parts, fmt.Sprint(l))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", l, e))
		}
		l = e + 1
	}
	return strings.Join(parts, ",")
}

// warp is 32 threads executing in lock-step. Each lane has its own PC; the warp issues the
// instruction at the lowest PC among its runnable lanes, for all lanes at that PC, which
// reconverges structured control flow at the join point. While all runnable lanes share
// one PC (uniform), only upc is kept up to date.
type warp struct {
	b       *blockRun
	id      int
	r       []uint64 // registers: slot*32 + lane
	pc      [32]int32
	waitBar [32]int8
	live    uint32 // lanes that exist and have not exited
	wait    uint32 // lanes waiting at a barrier
	park    uint32 // lanes waiting at a warp-synchronous instruction for the other member lanes
	uniform bool
	upc     int32
	cur     int32 // PC of the executing instruction
	local   []byte
	gc      cachedRegion
	atomic  bool // an atomic or strong access is executing (exempt from race checks)
	warpWeak
}

// s returns the 32 lanes of register slot i.
func (w *warp) s(i int32) *[32]uint64 { return (*[32]uint64)(w.r[int(i)<<5:]) }

func (w *warp) reset() {
	b := w.b
	k := b.k
	clear(w.r)
	clear(w.local)
	w.gc = cachedRegion{}
	first := w.id * 32
	n := b.nthread - first
	if n > 32 {
		n = 32
	}
	w.live = uint32(1<<n - 1)
	if n == 32 {
		w.live = ^uint32(0)
	}
	w.wait, w.park = 0, 0
	w.uniform, w.upc = true, 0
	for _, c := range k.consts {
		s := w.s(c.slot)
		for l := range s {
			s[l] = c.val
		}
	}
	g, grid := b.l.g.Block, b.l.g.Grid
	for _, sp := range k.specials {
		s := w.s(sp.slot)
		for l := 0; l < 32; l++ {
			t := b.threadIdx(first + l)
			var v uint64
			switch sp.name {
			case "%tid.x":
				v = uint64(t[0])
			case "%tid.y":
				v = uint64(t[1])
			case "%tid.z":
				v = uint64(t[2])
			case "%ntid.x":
				v = uint64(g.X)
			case "%ntid.y":
				v = uint64(g.Y)
			case "%ntid.z":
				v = uint64(g.Z)
			case "%ctaid.x":
				v = uint64(b.idx[0])
			case "%ctaid.y":
				v = uint64(b.idx[1])
			case "%ctaid.z":
				v = uint64(b.idx[2])
			case "%nctaid.x":
				v = uint64(grid.X)
			case "%nctaid.y":
				v = uint64(grid.Y)
			case "%nctaid.z":
				v = uint64(grid.Z)
			case "%laneid":
				v = uint64(l)
			case "%warpid":
				v = uint64(w.id)
			case "%nwarpid":
				v = uint64(len(b.warps))
			case "%lanemask_eq":
				v = 1 << l
			case "%lanemask_lt":
				v = 1<<l - 1
			case "%lanemask_le":
				v = 1<<(l+1) - 1
			case "%lanemask_gt":
				v = uint64(^uint32(1<<(l+1) - 1))
			case "%lanemask_ge":
				v = uint64(^uint32(1<<l - 1))
			case "%dynamic_smem_size":
				v = uint64(b.l.g.Shared)
			case "%total_smem_size":
				v = uint64(len(b.shared))
			}
			s[l] = v & 0xffffffff
		}
	}
}

// fault records the first error of the block, for lane l at the executing instruction.
func (w *warp) fault(l int, format string, args ...any) {
	if w.b.fault != nil {
		return
	}
	in := &w.b.k.prog[w.cur]
	w.b.fault = &ExecError{Kernel: w.b.k.Name, Block: w.b.idx, Thread: w.b.threadIdx(w.id*32 + l),
		Line: in.line, Instr: in.text, Msg: fmt.Sprintf(format, args...)}
	w.b.halt = true
}

// faultErr is fault with a sentinel error the ExecError wraps.
func (w *warp) faultErr(l int, err error, format string, args ...any) {
	if w.b.fault != nil {
		return
	}
	w.fault(l, format, args...)
	w.b.fault.(*ExecError).Err = err
}

// materialize writes upc into every runnable lane's PC before the warp leaves uniform mode.
func (w *warp) materialize() {
	if !w.uniform {
		return
	}
	for m := w.live &^ w.wait &^ w.park; m != 0; m &= m - 1 {
		w.pc[bits.TrailingZeros32(m)] = w.upc
	}
}

func (w *warp) advance(m uint32, next int32) {
	if w.uniform {
		w.upc = next
		return
	}
	for ; m != 0; m &= m - 1 {
		w.pc[bits.TrailingZeros32(m)] = next
	}
}

// run issues up to n instructions and returns how many it issued; it stops early when no
// lane can run (all exited or waiting at a barrier) or on a fault.
func (w *warp) run(n int) int {
	prog := w.b.k.prog
	steps := 0
	var threads int64
	for steps < n {
		sched := w.live &^ w.wait &^ w.park
		if sched == 0 {
			if w.park == 0 || !w.unpark() {
				break
			}
			sched = w.live &^ w.wait &^ w.park
		}
		pc, mask := w.upc, sched
		if !w.uniform {
			lo, hi := int32(1<<30), int32(-1)
			for m := sched; m != 0; m &= m - 1 {
				p := w.pc[bits.TrailingZeros32(m)]
				lo = min(lo, p)
				hi = max(hi, p)
			}
			if lo == hi {
				w.uniform, w.upc = true, lo
			} else {
				mask = 0
				for m := sched; m != 0; m &= m - 1 {
					l := bits.TrailingZeros32(m)
					if w.pc[l] == lo {
						mask |= 1 << l
					}
				}
			}
			pc = lo
		}
		in := &prog[pc]
		em := mask
		if in.guard >= 0 {
			p := w.s(in.guard)
			em = 0
			for m := mask; m != 0; m &= m - 1 {
				l := bits.TrailingZeros32(m)
				em |= uint32(p[l]&1) << l
			}
			if in.guardNeg {
				em = mask &^ em
			}
		}
		w.cur = pc
		steps++
		threads += int64(bits.OnesCount32(em))
		switch in.ctl {
		case ctlNone:
			if em != 0 {
				in.fn(w, em)
			}
			w.advance(mask, pc+1)
		case ctlWarpReq:
			if em == 0 {
				w.advance(mask, pc+1)
				break
			}
			all, ready := w.converged(in, pc, em)
			if !ready {
				// wait here (with the lanes already waiting) for the other member lanes
				w.materialize()
				w.uniform = false
				w.advance(mask&^em, pc+1)
				w.park |= em
				for m := em; m != 0; m &= m - 1 {
					w.pc[bits.TrailingZeros32(m)] = pc
				}
				break
			}
			if w.b.fault != nil {
				break
			}
			if all != em {
				// lanes parked here join the group
				w.materialize()
				w.uniform = false
				w.park &^= all
			}
			in.fn(w, all)
			w.advance(mask, pc+1)
			for m := all &^ mask; m != 0; m &= m - 1 {
				w.pc[bits.TrailingZeros32(m)] = pc + 1
			}
		case ctlBra:
			switch {
			case em == mask:
				w.advance(mask, in.target)
			case em == 0:
				w.advance(mask, pc+1)
			default:
				w.materialize()
				w.uniform = false
				for m := mask; m != 0; m &= m - 1 {
					l := bits.TrailingZeros32(m)
					if em&(1<<l) != 0 {
						w.pc[l] = in.target
					} else {
						w.pc[l] = pc + 1
					}
				}
			}
		case ctlExit:
			w.advance(mask, pc+1)
			if em != 0 {
				w.live &^= em
				w.b.live -= bits.OnesCount32(em)
				w.b.releaseAll()
			}
		case ctlBar, ctlArrive:
			w.advance(mask, pc+1)
			if em != 0 {
				w.barrier(in, em)
			}
		}
		if w.b.halt {
			break
		}
	}
	w.b.stats.ThreadInstructions += threads
	return steps
}

// unpark is called when no lane can run but some wait at a warp-synchronous instruction:
// if the lowest such group lacks no live member lane any more (the others exited), it
// becomes runnable again. Member lanes parked at another instruction are a fault; member
// lanes waiting at a barrier may still come (another warp can release them).
func (w *warp) unpark() bool {
	pc := int32(1 << 30)
	for m := w.park; m != 0; m &= m - 1 {
		pc = min(pc, w.pc[bits.TrailingZeros32(m)])
	}
	var group uint32
	for m := w.park; m != 0; m &= m - 1 {
		if l := bits.TrailingZeros32(m); w.pc[l] == pc {
			group |= 1 << l
		}
	}
	in := &w.b.k.prog[pc]
	missing := uint32(0)
	if in.member >= 0 {
		missing = uint32(w.s(in.member)[bits.TrailingZeros32(group)]) & w.live &^ group
	}
	switch {
	case missing == 0:
		w.park &^= group
		w.uniform = false // the group resumes at its own PC
		return true
	case missing&w.wait != 0:
		return false
	}
	w.cur = pc
	l := bits.TrailingZeros32(missing)
	w.fault(bits.TrailingZeros32(group), "member lanes %s are not converged here (lane %d waits at line %d)", laneSet(missing), l, w.b.k.prog[w.pc[l]].line)
	return false
}

// converged gathers the lanes of a warp-synchronous instruction at pc: the executing lanes
// em and those parked there earlier. ready is false while live member lanes have yet to
// arrive (the caller parks em); it is true with all = the full group, or after recording a
// fault when the group can never form (a lane outside the member mask executes it, or
// member lanes wait at a different warp-synchronous instruction).
func (w *warp) converged(in *inst, pc int32, em uint32) (all uint32, ready bool) {
	all = em
	for m := w.park; m != 0; m &= m - 1 {
		if l := bits.TrailingZeros32(m); w.pc[l] == pc {
			all |= 1 << l
		}
	}
	if in.member < 0 {
		return all, true
	}
	l0 := bits.TrailingZeros32(em)
	member := uint32(w.s(in.member)[l0])
	if all&^member != 0 {
		w.fault(bits.TrailingZeros32(all&^member), "lane is not in the member mask %#08x", member)
		return all, true
	}
	missing := member & w.live &^ all
	if missing == 0 {
		return all, true
	}
	if missing&^w.park != 0 {
		return all, false // they may still arrive
	}
	l := bits.TrailingZeros32(missing)
	w.fault(l0, "member lanes %s are not converged here (lane %d waits at line %d)", laneSet(missing), l, w.b.k.prog[w.pc[l]].line)
	return all, true
}

// barrier makes the lanes in em arrive at a named barrier (and wait, for bar.sync).
func (w *warp) barrier(in *inst, em uint32) {
	l0 := bits.TrailingZeros32(em)
	id := w.s(in.barID)[l0]
	if id > 15 {
		w.fault(l0, "barrier number %d (at most 15)", id)
		return
	}
	count := -1
	if in.barCount >= 0 {
		count = int(uint32(w.s(in.barCount)[l0]))
		if count%32 != 0 || count == 0 {
			w.fault(l0, "barrier thread count %d is not a positive multiple of 32", count)
			return
		}
	}
	bar := &w.b.bars[id]
	bar.arrived += bits.OnesCount32(em)
	bar.count = count
	if w.b.l.wk != nil {
		w.arriveWeak(int(id))
	}
	if in.ctl == ctlBar {
		w.materialize()
		w.uniform = false
		w.wait |= em
		for m := em; m != 0; m &= m - 1 {
			l := bits.TrailingZeros32(m)
			w.waitBar[l] = int8(id)
			w.pc[l] = w.cur
		}
	}
	w.b.release(int(id))
}

// release completes barrier id if enough threads have arrived: its waiting lanes resume
// and a new race-detection epoch begins.
func (b *blockRun) release(id int) {
	bar := &b.bars[id]
	need := bar.count
	if need < 0 {
		need = b.live
	}
	if bar.arrived == 0 || bar.arrived < need {
		return
	}
	bar.arrived = 0
	for _, w := range b.warps {
		var left uint32
		for m := w.wait; m != 0; m &= m - 1 {
			if l := bits.TrailingZeros32(m); int(w.waitBar[l]) == id {
				left |= 1 << l
			}
		}
		if left == 0 {
			continue
		}
		// the released lanes resume at their own PCs: the warp leaves uniform mode (its
		// other lanes may have moved on, or exited, while these waited)
		w.materialize()
		w.uniform = false
		w.wait &^= left
		for m := left; m != 0; m &= m - 1 {
			w.pc[bits.TrailingZeros32(m)]++
		}
		if b.l.wk != nil {
			w.leaveBarrier(id)
		}
	}
	if b.l.wk != nil {
		b.barView[id] = view{}
	}
	b.epoch++
}

// releaseAll re-checks every barrier after threads exit.
func (b *blockRun) releaseAll() {
	for id := range b.bars {
		if b.bars[id].arrived > 0 {
			b.release(id)
		}
	}
}
