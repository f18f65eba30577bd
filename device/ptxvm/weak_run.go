package ptxvm

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// weak_run.go: the weak mode's scheduler. One goroutine runs the launch: up to `resident`
// blocks are started (in a seeded random order of the grid), and each turn a seeded choice of
// resident block runs a slice of a seeded length, its warps also taking turns of seeded
// lengths; a warp at nanosleep ends its block's slice. Between slices a block's buffered
// stores may drain. A block that finishes commits its buffer and its slot takes the next block.

// randLen returns a length between 1 and 2^maxLog, log-uniformly: mostly short turns, now
// and then a long one that lets one block or warp run far ahead.
func randLen(r *rand.Rand, maxLog int) int {
	e := r.IntN(maxLog + 1)
	return 1<<e + r.IntN(1<<e)
}

func (l *launch) runWeak(nb int64, resident int) (Stats, error) {
	w := l.cfg.Weak
	nwarps := (int64(l.g.Block.X)*int64(l.g.Block.Y)*int64(l.g.Block.Z) + 31) / 32
	wk := &weakMem{l: l, cfg: *w, rng: rand.New(rand.NewPCG(w.Seed, w.Seed^0x9e3779b97f4a7c15)),
		nwarps: uint64(nwarps), regions: map[uint64]*regionShadow{}}
	l.wk = wk
	// the order blocks start in (the grid itself when it is too large to shuffle cheaply)
	var order []int64
	if nb <= 1<<16 {
		order = make([]int64, nb)
		for i, p := range wk.rng.Perm(int(nb)) {
			order[i] = int64(p)
		}
	}
	next := int64(0)
	take := func() int64 {
		b := next
		if order != nil {
			b = order[next]
		}
		next++
		return b
	}
	wk.slots = make([]*blockRun, resident)
	active := make([]*blockRun, 0, resident)
	for i := range wk.slots {
		b := getBlockRun(l)
		defer putBlockRun(b)
		b.slot = int32(i)
		wk.slots[i] = b
		b.begin(take())
		active = append(active, b)
	}
	var st Stats
	var err error
	for len(active) > 0 {
		i := wk.rng.IntN(len(active))
		b := active[i]
		done, e := b.slice(randLen(wk.rng, 13))
		if e != nil {
			err = e
			break
		}
		if len(b.buf) > 0 && wk.rng.IntN(4) == 0 {
			wk.drain(b)
		}
		if !done {
			continue
		}
		wk.flush(b, func(*bufEntry) bool { return true }) // the block's stores become visible when it ends
		if next < nb {
			b.begin(take())
			continue
		}
		active[i] = active[len(active)-1]
		active = active[:len(active)-1]
	}
	for _, b := range wk.slots {
		wk.flush(b, func(*bufEntry) bool { return true })
		st.Blocks += b.stats.Blocks
		st.WarpInstructions += b.stats.WarpInstructions
		st.ThreadInstructions += b.stats.ThreadInstructions
		st.GenericShared += b.stats.GenericShared
	}
	st.StaleReads = wk.staleReads
	return st, err
}

// slice runs up to budget warp instructions of the block (weak mode) and reports whether it
// has finished.
func (b *blockRun) slice(budget int) (done bool, err error) {
	rng := b.l.wk.rng
	n := len(b.warps)
	for budget > 0 {
		start := rng.IntN(n)
		ran := false
		for i := 0; i < n; i++ {
			w := b.warps[(start+i)%n]
			if w.live&^w.wait == 0 {
				continue
			}
			k := w.run(min(budget, randLen(rng, 10)))
			b.steps += int64(k)
			b.stats.WarpInstructions += int64(k)
			budget -= k
			if b.fault != nil {
				return true, b.fault
			}
			if k > 0 {
				ran = true
				break
			}
		}
		if b.steps > b.l.cfg.MaxSteps {
			return true, b.stall(fmt.Sprintf("step budget of %d warp instructions exceeded", b.l.cfg.MaxSteps))
		}
		if !ran {
			if b.live > 0 {
				return true, b.stall("barrier deadlock: every live thread waits at a barrier that cannot complete")
			}
			b.stats.Blocks++
			return true, nil
		}
		if b.halt { // a warp yielded at nanosleep
			b.halt = false
			return false, nil
		}
	}
	return false, nil
}

// weakLd is ld/ldu for global or generic addresses in the weak mode.
func (w *warp) weakLd(sp space, a *address, regs []int32, k kind, size, total int, ord memOrder, m uint32) {
	base := w.s(a.base)
	var buf [16]byte
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		addr := a.at(w, base, l)
		var mem []byte
		if isGlobal(sp, addr) && addr&uint64(total-1) == 0 {
			if mem = w.global(addr, total, false, l); mem == nil {
				return
			}
			if w.gc.writable {
				if !w.b.l.wk.load(w, l, addr, mem, buf[:total], ord) {
					return
				}
				mem = buf[:total]
			}
		} else if mem = w.access(sp, addr, total, false, l); mem == nil {
			return
		}
		for i, r := range regs {
			w.s(r)[l] = k.norm(loadBits(mem[i*size : (i+1)*size]))
		}
	}
	w.b.l.wk.maybeYield(w)
}

// maybeYield ends the block's turn after a global memory instruction, a quarter of the
// time: other blocks then run between this warp's accesses.
func (wk *weakMem) maybeYield(w *warp) {
	if wk.rng.IntN(4) == 0 {
		w.b.halt = true
	}
}

// weakSt is st for global or generic addresses in the weak mode.
func (w *warp) weakSt(sp space, a *address, regs []int32, size, total int, ord memOrder, m uint32) {
	base := w.s(a.base)
	var buf [16]byte
	for ; m != 0; m &= m - 1 {
		l := bits.TrailingZeros32(m)
		addr := a.at(w, base, l)
		if isGlobal(sp, addr) && addr&uint64(total-1) == 0 {
			if w.global(addr, total, true, l) == nil {
				return
			}
			for i, r := range regs {
				storeBits(buf[i*size:(i+1)*size], w.s(r)[l])
			}
			if !w.b.l.wk.store(w, l, addr, buf[:total], ord) {
				return
			}
			continue
		}
		b := w.access(sp, addr, total, true, l)
		if b == nil {
			return
		}
		for i, r := range regs {
			storeBits(b[i*size:(i+1)*size], w.s(r)[l])
		}
	}
	w.b.l.wk.maybeYield(w)
}

// isGlobal reports whether an access of space sp at addr reaches global memory.
func isGlobal(sp space, addr uint64) bool {
	return sp == spGlobal || sp == spGeneric && addr-sharedBase >= windowSize && addr-localBase >= windowSize
}
