package megakernel

import "encoding/binary"

// Prefetching: the bytes a matvec streams (its weights, Op.Stream) are written by nothing in
// the step, so a block may ask the L2 for them long before their part is ready to run. Each
// queue keeps a window of its coming streams asked for: before it waits for item k's
// dependencies, its block asks for the stream bytes of items k, k+1, … of its queue, in queue
// order, that no earlier item of the queue asked for, up to Schedule.PrefetchBytes past the
// start of item k's own. A wait (on a dependency, or the start of an item) is then spent
// fetching what the queue will stream next, and so is the bandwidth a latency-bound part
// (attention, a norm) leaves unused: during one layer's attention, the queues fetch its output
// projection and the first bytes of the layer's FFN. The window bounds what a queue has asked
// for and not yet read, so the L2 holds every queue's window at once (132 × 256 KiB is 33 MiB
// of an H200's 50 MiB) and a line asked for is still there when its part reads it. A block that
// waits for a matvec's dependencies also stages the part's own bytes in shared memory, and for
// each round it copies asks for as many bytes of the ranges after its item's (megakernel.cu):
// what it has copied has left the window, so the window moves on past it without growing. The
// cost model (model.go) replays the same window.

// PrefetchRange is bytes [From, To) of instruction Instr's stream (its Prefetch parameter's
// bytes), asked of the L2 by an item.
type PrefetchRange struct {
	Instr    int32
	From, To uint32
}

// itemStream is the bytes [from, to) of its instruction's stream that part p of in reads.
func itemStream(in *Instr, p int) (from, to int64) {
	pf := in.Prefetch
	if pf.Param < 0 || pf.PerBlock <= 0 {
		return 0, 0
	}
	lo, hi := partBlocks(in, p)
	from, to = int64(lo)*pf.PerBlock, min(int64(hi)*pf.PerBlock, pf.Total)
	return from, max(from, to)
}

// queueStreams lays the streams of a queue's items end to end: item k's bytes are
// [start[k], start[k+1]).
func (s *Schedule) queueStreams(items []Item) (start []int64) {
	start = make([]int64, len(items)+1)
	for k, it := range items {
		from, to := itemStream(&s.Instrs[it.Instr], int(it.Part))
		start[k+1] = start[k] + to - from
	}
	return start
}

// putRanges writes plan's ranges into w, RangeWords each: the parameter word holding the
// stream's address (its instruction's first word, Encode's layout, plus its prefetch
// parameter), then the bytes [from, to).
func (s *Schedule) putRanges(w []byte, plan [][][]PrefetchRange) {
	pword := make([]uint32, len(s.Instrs))
	n := 0
	for i := range s.Instrs {
		pword[i] = uint32(n + s.Instrs[i].Prefetch.Param)
		n += len(s.Instrs[i].Params)
	}
	for _, q := range plan {
		for _, rs := range q {
			for _, r := range rs {
				binary.LittleEndian.PutUint32(w, pword[r.Instr])
				binary.LittleEndian.PutUint32(w[4:], r.From)
				binary.LittleEndian.PutUint32(w[8:], r.To)
				w = w[4*RangeWords:]
			}
		}
	}
}

// PrefetchPlan returns, for each queue and each of its items, the ranges that item's block
// asks the L2 for (the window described above), in the order it asks.
func (s *Schedule) PrefetchPlan() [][][]PrefetchRange {
	plan := make([][][]PrefetchRange, len(s.Queues))
	for q, items := range s.Queues {
		plan[q] = make([][]PrefetchRange, len(items))
		if s.PrefetchBytes <= 0 {
			continue
		}
		start := s.queueStreams(items)
		asked, j := int64(0), 0 // bytes of the queue's streams asked for; the item holding byte asked
		for k := range items {
			asked = max(asked, start[k])
			j = max(j, k)
			until := min(start[k]+s.PrefetchBytes, start[len(items)])
			for asked < until {
				for start[j+1] <= asked {
					j++
				}
				end := min(until, start[j+1])
				it := items[j]
				from, _ := itemStream(&s.Instrs[it.Instr], int(it.Part))
				plan[q][k] = append(plan[q][k], PrefetchRange{Instr: it.Instr,
					From: uint32(from + asked - start[j]), To: uint32(from + end - start[j])})
				asked = end
			}
		}
	}
	return plan
}
