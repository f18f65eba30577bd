package cpu

import (
	"errors"
	"sync/atomic"
	"testing"

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
