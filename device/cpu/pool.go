package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool is a fixed set of persistent workers serving parallel-for calls: the goroutine that
// calls For and workers−1 others. Between calls a worker waits for the next one in three
// phases — it spins on the job counter (tens of microseconds: the gap between one op and the
// next of a step), then yields its processor between looks (a fraction of a millisecond: the
// gap between steps), then parks until For wakes it — so that the ops of a step meet at a
// barrier of well under a microsecond, and an idle pool costs nothing. While it spins or runs
// a worker stays on its OS thread (runtime.LockOSThread); a parked one holds none.
//
// A call splits [0, n) into pieces of fixed size, piecesPerWorker per worker, and gives each
// worker its own contiguous run of them — the same run for the same call shape every time, so
// that a small model's weights stay in the caches of the core that read them last step — and
// a worker that finishes its run takes pieces from the others' (so that one slowed by another
// process on its core leaves the rest of its share to them). Which worker runs a piece does
// not matter: twins give the same bits for any partition.
type pool struct {
	workers  int
	mu       sync.Mutex // one call at a time; a concurrent caller runs its loop alone
	seq      atomic.Uint64
	cur      atomic.Pointer[job]
	spin     bool // workers may spin (there are processors for them all)
	sleepers []*sleeper
	quit     atomic.Bool
	wg       sync.WaitGroup
	closeMu  sync.Once
}

// job is one parallel-for call. Each worker's claim counter has a cache line of its own, and
// a worker reports the pieces it finished once, when it runs out of pieces to claim, so that
// the workers of a call share a line only when one takes pieces from another's run.
type job struct {
	n, pieces int
	body      func(lo, hi int)
	next      []claims     // per worker: how many pieces of its run have been claimed
	left      atomic.Int64 // pieces not finished
}

// claims is a worker's claim counter, alone on its cache line.
type claims struct {
	atomic.Int64
	_ [56]byte
}

// sleeper is a worker's parking place.
type sleeper struct {
	parked atomic.Bool
	wake   chan struct{}
}

const (
	piecesPerWorker = 4
	spinFor         = 20 * time.Microsecond
	yieldFor        = 250 * time.Microsecond
)

func newPool(workers int) *pool {
	p := &pool{workers: workers, spin: workers <= runtime.GOMAXPROCS(0)}
	for i := 1; i < workers; i++ {
		s := &sleeper{wake: make(chan struct{}, 1)}
		p.sleepers = append(p.sleepers, s)
		p.wg.Add(1)
		go p.work(i, s)
	}
	return p
}

// piece returns the bounds of piece i of job j.
func (j *job) piece(i int) (int, int) {
	return int(int64(i) * int64(j.n) / int64(j.pieces)), int(int64(i+1) * int64(j.n) / int64(j.pieces))
}

// run is worker w's part of j: the pieces of its own run in order, then whatever is left of
// the others' runs.
func (j *job) run(w int) {
	workers, done := len(j.next), int64(0)
	for k := 0; k < workers; k++ {
		v := (w + k) % workers
		first, end := v*j.pieces/workers, (v+1)*j.pieces/workers
		for {
			i := first + int(j.next[v].Add(1)-1)
			if i >= end {
				break
			}
			lo, hi := j.piece(i)
			j.body(lo, hi)
			done++
		}
	}
	if done > 0 {
		j.left.Add(-done)
	}
}

// For runs body over a partition of [0, n) into contiguous pieces on the pool's workers, the
// calling goroutine among them, and returns when all are done. Small n runs serially.
func (p *pool) For(n int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if p.workers <= 1 || n == 1 || !p.mu.TryLock() {
		body(0, n)
		return
	}
	defer p.mu.Unlock()
	j := &job{n: n, pieces: min(n, p.workers*piecesPerWorker), body: body, next: make([]claims, p.workers)}
	j.left.Store(int64(j.pieces))
	p.cur.Store(j)
	p.seq.Add(1)
	for _, s := range p.sleepers {
		if s.parked.Load() && s.parked.CompareAndSwap(true, false) {
			s.wake <- struct{}{}
		}
	}
	j.run(0)
	// wait for the pieces the workers claimed: spin, then yield
	for spins := 0; j.left.Load() > 0; spins++ {
		if spins > 1000 || !p.spin {
			osYield()
		}
	}
}

// work is worker w's loop: wait for the next call, help run it.
func (p *pool) work(w int, s *sleeper) {
	defer p.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	seen := p.seq.Load()
	for {
		seq := p.wait(s, seen)
		if p.quit.Load() {
			return
		}
		seen = seq
		if j := p.cur.Load(); j != nil {
			j.run(w)
		}
	}
}

// wait returns once the job counter differs from seen (or the pool is closing): spinning,
// then yielding, then parked.
func (p *pool) wait(s *sleeper, seen uint64) uint64 {
	start := time.Now()
	for spins := 0; ; spins++ {
		if q := p.seq.Load(); q != seen || p.quit.Load() {
			return q
		}
		if spins&255 != 0 {
			if p.spin {
				continue
			}
		}
		since := time.Since(start)
		switch {
		case p.spin && since < spinFor:
		case since < yieldFor:
			osYield()
		default:
			s.parked.Store(true)
			if q := p.seq.Load(); q != seen || p.quit.Load() {
				if s.parked.CompareAndSwap(true, false) {
					return q
				}
				<-s.wake // For claimed the wake-up: take it
				return p.seq.Load()
			}
			runtime.UnlockOSThread() // a parked worker holds no thread
			<-s.wake
			runtime.LockOSThread()
			start, spins = time.Now(), 0
		}
	}
}

func (p *pool) close() {
	p.closeMu.Do(func() {
		p.quit.Store(true)
		for _, s := range p.sleepers {
			if s.parked.CompareAndSwap(true, false) {
				s.wake <- struct{}{}
			}
		}
		p.wg.Wait()
	})
}
