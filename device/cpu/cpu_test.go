package cpu

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"verity/device"
)

func TestMemory(t *testing.T) {
	b := New(2)
	defer b.Close()
	p, err := b.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := b.Alloc(8)
	if p%256 != 0 || q%256 != 0 || q <= p+100 {
		t.Fatalf("allocations %#x, %#x not aligned and apart", p, q)
	}
	if err := b.Write(p+90, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	var oor *device.OutOfRangeError
	if err := b.Write(p+95, make([]byte, 10)); !errors.As(err, &oor) {
		t.Errorf("write past the end: %v", err)
	}
	if _, err := b.Bytes(p+100, 1); err == nil {
		t.Error("read in the gap after an allocation accepted")
	}
	if _, err := b.Bytes(1, 1); err == nil {
		t.Error("read below every allocation accepted")
	}
	ro, _ := b.Upload([]byte{1, 2, 3})
	if err := b.Write(ro, []byte{9}); err == nil {
		t.Error("write to uploaded data accepted")
	}
	got := make([]byte, 3)
	if err := b.Read(got, ro); err != nil || got[2] != 3 {
		t.Errorf("read uploaded data: %v %v", got, err)
	}
	if err := b.Free(p + 1); err == nil {
		t.Error("free of an interior pointer accepted")
	}
	if err := b.Free(p); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Bytes(p, 1); err == nil {
		t.Error("read after free accepted")
	}
	if b.Allocated() != 8 {
		t.Errorf("Allocated = %d, want 8", b.Allocated())
	}
	if _, err := b.Alloc(-1); err == nil {
		t.Error("negative allocation accepted")
	}
}

func TestPoolCoversEveryIndexOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 7} {
		b := New(workers)
		for _, n := range []int{0, 1, 3, 100} {
			seen := make([]int32, n)
			b.pool.For(n, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&seen[i], 1)
				}
			})
			for i, s := range seen {
				if s != 1 {
					t.Fatalf("workers=%d n=%d: index %d visited %d times", workers, n, i, s)
				}
			}
		}
		b.Close()
	}
}

// TestPoolDoesNotHoldTheWorld: a caller yielding while it waits for a worker must let the
// runtime stop it (a garbage collection stops every goroutine, the worker first perhaps): a
// yield the runtime could not interrupt held collections for hundreds of milliseconds.
func TestPoolDoesNotHoldTheWorld(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two processors")
	}
	p := newPool(2)
	defer p.close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // calls whose pieces take a while: the caller waits for the worker's
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			p.For(2, func(lo, hi int) {
				for t0 := time.Now(); time.Since(t0) < time.Duration(lo+1)*200*time.Microsecond; {
				}
			})
		}
	}()
	var worst time.Duration
	var ms runtime.MemStats
	for range 20 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		worst = max(worst, time.Duration(ms.PauseNs[(ms.NumGC+255)%256])) // the last one's stops
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	<-done
	t.Logf("longest pause of 20 collections beside a yielding pool: %v", worst)
	// (the raw yield held it for 0.27–2.3 s; a loaded machine can add tens of milliseconds)
	if worst > 200*time.Millisecond {
		t.Errorf("a collection stopped the world for %v beside a yielding pool", worst)
	}
}
