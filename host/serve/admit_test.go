package serve

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// The admission queue serves clients in turn, each in arrival order, never lets a later
// request pass one that does not fit, refuses past its bounds, and on drain refuses the new
// requests waiting while later choices of admitted ones still wait.
func TestAdmission(t *testing.T) {
	a := newAdmission(cost{kv: 10}, AdmissionOptions{MaxQueue: 6, ClientQueue: 4, MaxWait: time.Minute})
	ctx := context.Background()
	if err := a.acquire(ctx, "hog", cost{kv: 10}, true, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	wait := func(client string, kv int, name string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.acquire(ctx, client, cost{kv: kv}, true, nil); err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			a.release(cost{kv: kv})
		}()
		for deadline := time.Now().Add(time.Second); a.stats().Queued == 0 || !queued(a, name, client); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never queued", name)
			}
		}
	}
	// client a sends three, b one, c one: turns go a, b, c, a, a
	wait("a", 6, "a1")
	wait("a", 6, "a2")
	wait("a", 6, "a3")
	wait("b", 6, "b1")
	wait("c", 6, "c1")
	a.release(cost{kv: 10})
	wg.Wait()
	if want := []string{"a1", "b1", "c1", "a2", "a3"}; !slices.Equal(order, want) {
		t.Errorf("admitted %v, want %v", order, want)
	}
	// bounds: the client's share, then the whole queue
	if err := a.acquire(ctx, "x", cost{kv: 10}, true, nil); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithCancel(ctx)
	for range 4 {
		go a.acquire(tctx, "y", cost{kv: 1}, true, nil)
	}
	for a.stats().Queued < 4 {
		time.Sleep(time.Millisecond)
	}
	if err := a.acquire(ctx, "y", cost{kv: 1}, true, nil); !errors.Is(err, ErrQueueFull) {
		t.Errorf("past the client's share: %v", err)
	}
	go a.acquire(tctx, "z", cost{kv: 1}, true, nil)
	go a.acquire(tctx, "z", cost{kv: 1}, true, nil)
	for a.stats().Queued < 6 {
		time.Sleep(time.Millisecond)
	}
	if err := a.acquire(ctx, "w", cost{kv: 1}, true, nil); !errors.Is(err, ErrQueueFull) {
		t.Errorf("past the queue: %v", err)
	}
	cancel()
	for a.stats().Queued > 0 {
		time.Sleep(time.Millisecond)
	}
	// the wait bound
	b := newAdmission(cost{kv: 1}, AdmissionOptions{MaxWait: 20 * time.Millisecond})
	b.acquire(ctx, "x", cost{kv: 1}, true, nil)
	if err := b.acquire(ctx, "y", cost{kv: 1}, true, nil); !errors.Is(err, ErrQueueTimeout) {
		t.Errorf("past the wait bound: %v", err)
	}
	// drain: a new request waiting is refused, a later choice waits on and is admitted
	done := make(chan error, 2)
	go func() { done <- b.acquire(ctx, "y", cost{kv: 1}, true, nil) }()
	go func() { done <- b.acquire(ctx, "y", cost{kv: 1}, false, nil) }()
	for b.stats().Queued < 2 {
		time.Sleep(time.Millisecond)
	}
	b.drain()
	if err := <-done; !errors.Is(err, ErrDraining) {
		t.Errorf("a new request on drain: %v", err)
	}
	b.release(cost{kv: 1})
	if err := <-done; err != nil {
		t.Errorf("a later choice on drain: %v", err)
	}
	if err := b.acquire(ctx, "y", cost{kv: 1}, true, nil); !errors.Is(err, ErrDraining) {
		t.Errorf("after drain: %v", err)
	}
}

// queued reports whether client has a waiter (the one just started).
func queued(a *admission, name, client string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := map[string]int{"a1": 1, "a2": 2, "a3": 3}[name]
	if n == 0 {
		n = 1
	}
	return len(a.queues[client]) >= n
}
