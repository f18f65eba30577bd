package serve

import (
	"context"
	"sync"
	"time"
)

// Admission. Every session — a verify-API session or one choice of a completion — holds a
// reservation of cache space for as long as it is open: K/V slots for the most positions it
// may reach (a completion's prompt and max_tokens, a verify session's context or max_tokens)
// and the recurrent-state slots it holds between steps. The reservations never exceed the
// cache (less one step's worth, the step pool, from which a verify step takes its trees'
// nodes beyond their sessions' reservations), so an admitted session never finds the cache
// full: what it needs is always free or held only by the prefix cache, which gives it up.
//
// A request whose reservation does not fit waits in the admission queue: one FIFO per client,
// served round robin (a client with many requests waiting does not delay one with a single
// request more than by one turn), each turn's head admitted only when it fits — later
// requests never pass it, so a large request is not starved by small ones. Past the queue's
// bound (or the client's share) a request is refused at once (429); past the wait bound it
// is refused then (503); both with Retry-After. While requests wait, idle verify sessions
// are closed least recently used first (evicted) to make room.

// cost is an amount of cache: K/V slots and recurrent-state slots.
type cost struct{ kv, states int }

func (c cost) fits(free cost) bool { return c.kv <= free.kv && c.states <= free.states }
func (c cost) plus(d cost) cost    { return cost{c.kv + d.kv, c.states + d.states} }
func (c cost) minus(d cost) cost   { return cost{c.kv - d.kv, c.states - d.states} }

// AdmissionOptions bound the admission queue.
type AdmissionOptions struct {
	// MaxQueue is the most requests waiting at once (default 256); ClientQueue the most of one
	// client (default MaxQueue/4, at least MaxChoices).
	MaxQueue, ClientQueue int
	// MaxWait is the longest a request waits for cache space before it is refused with 503
	// (default 30 s).
	MaxWait time.Duration
}

type admission struct {
	mu       sync.Mutex
	capacity cost
	free     cost
	queues   map[string][]*waiter // by client, FIFO
	ring     []string             // clients with waiters, in turn order
	turn     int                  // ring index of the client whose head goes next
	queued   int
	opt      AdmissionOptions
	draining bool
	onWait   func(d time.Duration) // a wait ended in admission (metrics)
}

type waiter struct {
	need    cost
	client  string
	bounded bool          // a new request (refused on drain), not a later choice of an admitted one
	ready   chan struct{} // closed when granted or refused
	granted bool
	err     error
}

func newAdmission(capacity cost, opt AdmissionOptions) *admission {
	if opt.MaxQueue <= 0 {
		opt.MaxQueue = 256
	}
	if opt.ClientQueue <= 0 {
		opt.ClientQueue = max(opt.MaxQueue/4, MaxChoices)
	}
	if opt.MaxWait <= 0 {
		opt.MaxWait = 30 * time.Second
	}
	return &admission{capacity: capacity, free: capacity, queues: map[string][]*waiter{}, opt: opt}
}

// acquire reserves need for client, waiting its turn while the cache is short; evict, if
// set, is called while waiting to free space (it reports whether it freed any). bounded
// waits at most the wait bound; otherwise only ctx ends the wait (a later choice of an
// admitted request). The reservation is given back with release.
func (a *admission) acquire(ctx context.Context, client string, need cost, bounded bool, evict func() bool) error {
	a.mu.Lock()
	switch {
	case a.draining && bounded:
		a.mu.Unlock()
		return ErrDraining
	case !need.fits(a.capacity):
		a.mu.Unlock()
		return paramErr(ErrContextLength, "", "the request needs %d cache positions, more than the cache's %d", need.kv, a.capacity.kv)
	case a.queued == 0 && need.fits(a.free):
		a.free = a.free.minus(need)
		a.mu.Unlock()
		return nil
	case bounded && (a.queued >= a.opt.MaxQueue || len(a.queues[client]) >= a.opt.ClientQueue):
		a.mu.Unlock()
		return ErrQueueFull
	}
	w := &waiter{need: need, client: client, bounded: bounded, ready: make(chan struct{})}
	if len(a.queues[client]) == 0 {
		a.ring = append(a.ring, client)
	}
	a.queues[client] = append(a.queues[client], w)
	a.queued++
	a.dispatch()
	a.mu.Unlock()

	start := time.Now()
	var deadline <-chan time.Time
	if bounded {
		t := time.NewTimer(a.opt.MaxWait)
		defer t.Stop()
		deadline = t.C
	}
	poll := time.NewTicker(100 * time.Millisecond) // sessions become evictable as they idle
	defer poll.Stop()
	for {
		if evict != nil {
			for !w.done() && evict() {
			}
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			a.refuse(w, ctx.Err())
		case <-deadline:
			a.refuse(w, ErrQueueTimeout)
		case <-poll.C:
			continue
		}
		break
	}
	<-w.ready
	if w.granted && a.onWait != nil {
		a.onWait(time.Since(start))
	}
	return w.err
}

func (w *waiter) done() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// refuse takes w out of the queue with err, unless it was granted meanwhile.
func (a *admission) refuse(w *waiter, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.done() {
		return
	}
	q := a.queues[w.client]
	for i, x := range q {
		if x == w {
			a.queues[w.client] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	a.queued--
	if len(a.queues[w.client]) == 0 {
		a.dropClient(w.client)
	}
	w.err = err
	close(w.ready)
	a.dispatch() // the head may have been the one that did not fit
}

// release gives back a reservation and admits the waiters it makes room for.
func (a *admission) release(c cost) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.free = a.free.plus(c)
	a.dispatch()
}

// dispatch admits waiters in turn while the next one's reservation fits (the caller holds
// a.mu).
func (a *admission) dispatch() {
	for len(a.ring) > 0 {
		if a.turn >= len(a.ring) {
			a.turn = 0
		}
		client := a.ring[a.turn]
		w := a.queues[client][0]
		if !w.need.fits(a.free) {
			return
		}
		a.free = a.free.minus(w.need)
		a.queues[client] = a.queues[client][1:]
		a.queued--
		w.granted = true
		close(w.ready)
		if len(a.queues[client]) == 0 {
			a.dropClient(client) // the next client moves into this turn
		} else {
			a.turn++
		}
	}
}

func (a *admission) dropClient(client string) {
	delete(a.queues, client)
	for i, c := range a.ring {
		if c == client {
			a.ring = append(a.ring[:i:i], a.ring[i+1:]...)
			if i < a.turn {
				a.turn--
			}
			return
		}
	}
}

// drain refuses every waiting new request and every later one with ErrDraining; the later
// choices of admitted requests still wait their turn.
func (a *admission) drain() {
	a.mu.Lock()
	var refused []*waiter
	a.draining = true
	for _, q := range a.queues {
		for _, w := range q {
			if w.bounded {
				refused = append(refused, w)
			}
		}
	}
	a.mu.Unlock()
	for _, w := range refused {
		a.refuse(w, ErrDraining)
	}
}

// AdmissionStats describe the queue and the reservations.
type AdmissionStats struct {
	Queued       int `json:"queued"`
	Slots        int `json:"cache_slots"`          // K/V slots sessions may reserve
	SlotsUsed    int `json:"cache_slots_reserved"` // reserved now
	States       int `json:"state_slots,omitempty"`
	StatesUsed   int `json:"state_slots_reserved,omitempty"`
	StepPoolSize int `json:"step_pool"` // slots kept for verify trees beyond reservations
}

func (a *admission) stats() AdmissionStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AdmissionStats{Queued: a.queued, Slots: a.capacity.kv, SlotsUsed: a.capacity.kv - a.free.kv,
		States: a.capacity.states, StatesUsed: a.capacity.states - a.free.states}
}
