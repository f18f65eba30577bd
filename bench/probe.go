package bench

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Bandwidth measures the host memory copy rate in bytes per second: workers goroutines each
// copy their own slice of a buffer much larger than the caches, repeatedly, and the best of
// several rounds counts (a copy reads and writes each byte, so 2·n bytes move per copy of n).
func Bandwidth(bytes int, workers int, rounds int) float64 {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if rounds <= 0 {
		rounds = 5
	}
	src := make([]byte, bytes)
	dst := make([]byte, bytes)
	for i := range src {
		src[i] = byte(i)
	}
	best := 0.0
	for r := 0; r < rounds; r++ {
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			lo, hi := bytes*w/workers, bytes*(w+1)/workers
			wg.Add(1)
			go func() {
				defer wg.Done()
				copy(dst[lo:hi], src[lo:hi])
			}()
		}
		wg.Wait()
		if bw := 2 * float64(bytes) / time.Since(start).Seconds(); bw > best {
			best = bw
		}
	}
	runtime.KeepAlive(dst)
	// The buffers are garbage now: hand their pages back to the system, so a probe does not
	// stay in the process's resident memory beside the model it measures.
	src, dst = nil, nil
	debug.FreeOSMemory()
	return best
}
