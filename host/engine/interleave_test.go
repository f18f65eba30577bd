package engine_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"verity/device"
	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/engine"
)

// slowSteps is a CPU backend whose steps each take at least 3 ms (it sleeps in every
// embedding launch) and which reports when the first step of a run starts.
type slowSteps struct {
	*cpu.Backend
	started chan struct{}
	steps   atomic.Int32
}

func (b *slowSteps) Launch(k device.Spec, args any) error {
	if strings.HasPrefix(k.Entry(), "embed_") {
		if b.steps.Add(1) == 1 {
			close(b.started)
		}
		time.Sleep(3 * time.Millisecond)
	}
	return b.Backend.Launch(k, args)
}

// A long prefill takes the engine one chunk at a time: another session's decode, started
// during it, finishes before it does — and both give the bits they give alone.
func TestLongPrefillLetsOthersStep(t *testing.T) {
	f, err := fixtures.Parse("tiny-q35moe-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	b := &slowSteps{Backend: cpu.New(1), started: make(chan struct{})}
	m, err := engine.FromFile(f, b, engine.LoadOptions{MaxRows: 4, Context: 96, Sessions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	nv := m.Program().Config.NVocab
	long := make([]int32, 80) // 20 chunks of 4: at least 60 ms
	for i := range long {
		long[i] = int32((i * 7) % nv)
	}
	// what each gives alone
	alone := m.NewSession()
	wantLong, err := alone.Prefill(long, false)
	if err != nil {
		t.Fatal(err)
	}
	alone.Close()
	other := m.NewSession()
	if _, err := other.Prefill([]int32{1, 2, 3}, false); err != nil {
		t.Fatal(err)
	}
	alone = m.NewSession()
	alone.Prefill([]int32{1, 2, 3}, false)
	wantDecode, err := alone.Decode(5)
	if err != nil {
		t.Fatal(err)
	}
	alone.Close()

	b.steps.Store(0)
	b.started = make(chan struct{})
	a := m.NewSession()
	done := make(chan struct{})
	var gotLong [][]float32
	var longErr error
	go func() {
		defer close(done)
		gotLong, longErr = a.Prefill(long, false)
	}()
	<-b.started
	got, err := other.Decode(5)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("the other session's decode waited for the whole 80-token prefill")
	default:
	}
	<-done
	if longErr != nil {
		t.Fatal(longErr)
	}
	sameBits(t, "decode during a long prefill", got, wantDecode)
	sameBits(t, "a prefill interleaved with another session", gotLong[0], wantLong[0])
}
