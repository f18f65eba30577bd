package serve_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"verity/host/engine"
	"verity/host/serve"
)

// Many completions at once on a cache that holds a few of them: every one is admitted in
// turn (none refused), emits what it emits alone, and the rounds of those running share
// steps — on a recurrent model as on an attention-only one (the state slots a batch needs
// are reserved: a step never fails for want of them).
func TestCompletionsQueueAndBatch(t *testing.T) {
	for _, name := range []string{"tiny-llama-q8_0", "tiny-q35moe-q4_0"} {
		t.Run(name, func(t *testing.T) {
			const clients, tokens = 32, 12
			m := load(t, name, engine.LoadOptions{MaxRows: 32, Context: 64, Sessions: 2})
			sv := serve.New(m.Engine, serve.Options{})
			defer sv.Shutdown()
			prompt := func(k int) []int32 { return []int32{1, 2, 3, int32(4 + k%7), int32(5 + k)} }
			alone := map[int][]int32{}
			for k := range clients {
				alone[k], _ = completion(t, sv, prompt(k), serve.Sampler{Temperature: 0.8, Seed: uint64(k)}, tokens, nil)
			}
			// How many rounds share a step depends on how the clients' goroutines are scheduled
			// against the step loop (on a busy machine they can lag it), so the load runs up to
			// three times and the best sharing is judged; every run's outputs are checked.
			var rounds, steps int64
			var st serve.Stats
			for range 3 {
				before := sv.Stats()
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for k := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var got []int32
						_, err := sv.Complete(context.Background(), prompt(k), serve.Sampler{Temperature: 0.8, Seed: uint64(k)}, tokens, func(tok serve.Token) error {
							got = append(got, tok.ID)
							return nil
						})
						if err == nil && !slices.Equal(got, alone[k]) {
							err = fmt.Errorf("client %d: %v under load, %v alone", k, got, alone[k])
						}
						errs <- err
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						t.Error(err)
					}
				}
				st = sv.Stats()
				rounds, steps = st.Rounds-before.Rounds, st.Steps-before.Steps
				t.Logf("%d rounds in %d steps: %.2f rounds per step", rounds, steps, float64(rounds)/float64(steps))
				if float64(rounds) >= 1.5*float64(steps) {
					break
				}
			}
			if float64(rounds) < 1.5*float64(steps) {
				t.Errorf("%d rounds in %d steps: the running completions did not share steps", rounds, steps)
			}
			if st.Admission.SlotsUsed != 0 || st.Admission.Queued != 0 {
				t.Errorf("after the load: %+v", st.Admission)
			}
		})
	}
}

// An idle verify session is evicted, least recently used first, when a waiting request needs
// its cache space; its next call says so (ErrEvicted, 410).
func TestEviction(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 2})
	sv := serve.New(m.Engine, serve.Options{EvictAfter: time.Minute, Admission: serve.AdmissionOptions{MaxWait: time.Second}})
	defer sv.Shutdown()
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	serve.SetClock(sv, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	tick := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	a, err := sv.Open([]int32{1, 2, 3}, serve.Sampler{})
	if err != nil {
		t.Fatal(err)
	}
	tick(10 * time.Second)
	b, err := sv.Open([]int32{4, 5, 6}, serve.Sampler{})
	if err != nil {
		t.Fatal(err)
	}
	// the cache is full; neither is idle long enough: a third waits out the wait bound
	if _, err := sv.Open([]int32{7}, serve.Sampler{}); !errors.Is(err, serve.ErrQueueTimeout) {
		t.Fatalf("a third session: %v", err)
	}
	tick(55 * time.Second) // a has idled 65 s, b 55 s
	c, err := sv.Open([]int32{7}, serve.Sampler{})
	if err != nil {
		t.Fatalf("after a idled out: %v", err)
	}
	if _, err := sv.Verify(a.Session, serve.Draft{Position: a.Position}); !errors.Is(err, serve.ErrEvicted) {
		t.Errorf("the evicted session: %v", err)
	}
	for _, op := range []serve.Opened{b, c} {
		if _, err := sv.Verify(op.Session, serve.Draft{Position: op.Position}); err != nil {
			t.Errorf("session %s: %v", op.Session, err)
		}
	}
	if st := sv.Stats(); st.Evicted != 1 || st.Sessions != 2 {
		t.Errorf("stats %+v", st)
	}
}
