package cpu

import "sync"

// pool is a fixed set of worker goroutines serving parallel-for calls.
type pool struct {
	workers int
	jobs    chan func()
	once    sync.Once
}

func newPool(workers int) *pool {
	p := &pool{workers: workers}
	if workers > 1 {
		p.jobs = make(chan func())
		for i := 0; i < workers-1; i++ {
			go func() {
				for f := range p.jobs {
					f()
				}
			}()
		}
	}
	return p
}

// For splits [0, n) into up to `workers` contiguous chunks and runs body on each, the calling
// goroutine taking the first. Small n runs serially.
func (p *pool) For(n int, body func(lo, hi int)) {
	if n <= 0 {
		return
	}
	chunks := p.workers
	if chunks > n {
		chunks = n
	}
	if chunks <= 1 || p.jobs == nil {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Add(chunks - 1)
	for c := 1; c < chunks; c++ {
		lo, hi := c*n/chunks, (c+1)*n/chunks
		p.jobs <- func() { defer wg.Done(); body(lo, hi) }
	}
	body(0, n/chunks)
	wg.Wait()
}

func (p *pool) close() {
	p.once.Do(func() {
		if p.jobs != nil {
			close(p.jobs)
		}
	})
}
