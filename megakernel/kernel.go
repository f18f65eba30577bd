package megakernel

import (
	"encoding/binary"
	"fmt"

	"verity/device"
)

// Args are the megakernel entry's parameters.
type Args struct {
	Stream device.Ptr // the encoded stream (Encode)
	// Counters are 1 + instructions uint32 words, zero before the first launch of a stream:
	// word 0 is claimed by the first block to give up, word 1 + i counts instruction i's
	// finished parts over all launches. A launch waits for epoch × parts and adds parts, so
	// the counters need no reset between launches of one stream (Epoch 1, 2, …).
	Counters device.Ptr
	// Status is StatusWords uint32 words, zero before the launch: why the launch gave up, if
	// it did (see Status). Memory the host reads directly (device.Mapped) survives the fault.
	Status device.Ptr
	SMs    int32  // the stream's queues, one thread block each
	Epoch  uint32 // this launch's number since the counters were zeroed, from 1
	Spins  uint32 // polls of one counter before a block gives up (DefaultSpins)
	// Shared is the dynamic shared memory each block is launched with, a multiple of 16 of at
	// least MinShared. The bodies share its start; what lies beyond a matvec's
	// needs (StageBytes) holds weights staged while the block waits (megakernel.cu).
	Shared uint32
}

// BookBytes is the book at the end of a block's dynamic shared memory (megakernel.cu): the
// staging's words (the wait's end and each copying warp's rounds: 32 bytes), then the queue's
// first CachedItems item records, each with up to ItemDeps of its dependencies, copied there
// when the launch starts so that an item's start reads its record and dependencies from shared
// memory rather than making two dependent trips to the L2.
const BookBytes = 32 + CachedItems*4*ItemSlotWords

// CachedItems is the item records a block keeps in shared memory (a queue's later items are
// read from the stream), ItemDeps the dependencies kept with each (an item's further ones
// likewise), and ItemSlotWords a kept item's words: its record and ItemDeps (instruction,
// parts) pairs.
const (
	CachedItems   = 256
	ItemDeps      = 4
	ItemSlotWords = ItemWords + 2*ItemDeps
)

// MinShared is the least dynamic shared memory a block is launched with: the bodies' buffer
// and the book.
const MinShared = (SharedBytes+15)&^15 + BookBytes

// StageBytes is the weights a block launched with shared bytes of dynamic shared memory can
// stage while it waits (shared less the book).
func StageBytes(shared int64) int64 { return max(0, shared-BookBytes) }

// LaunchShared is the dynamic shared memory to launch with on a device whose blocks may opt in
// to optin bytes (0: not known): the opt-in less L1Room, and never less than MinShared.
func LaunchShared(optin int64) uint32 {
	return uint32(max(MinShared, (optin-L1Room)&^15))
}

// L1Room is the opt-in maximum's part a launch leaves to the L1, which shares the SM's memory
// with shared memory: the driver carves shared memory in steps (on sm_90 0, 8, … 164, 196 or 228
// KB an SM; on sm_80 up to 164), so an H200 block's 195 KiB and its 1 KiB reserved take the 196
// KB step and leave the L1 60 KB, where the bodies' activations (a bf16 matvec8's 8 columns of
// 2048: 32 KB) stay; 227 KiB would take the 228 KB step and leave it 28.
const L1Room = 32 << 10

// HotPolls is the polls of a counter a wait makes back to back, a trip to the L2 each, before
// it sleeps between polls (megakernel.cu): a block has nothing else to do while it waits, and a
// poll that follows the last at once sees a release sooner than one after a sleep, so the
// hand-offs of a step's critical path (most waits are shorter than these polls, ~8 µs) cost
// half a trip's wait, not half a sleep's.
const HotPolls = 64

// DefaultSpins bounds one dependency wait: the first polls come back to back, the rest sleep
// 256 ns between polls, so 2^22 polls take a few seconds on a GPU (each poll is also a round
// trip to L2) — longer than any step, much shorter than a GPU check's time limits.
const DefaultSpins = 1 << 22

// StatusWords is the size of the status the megakernel writes when it gives up.
const StatusWords = 8

// Why a launch gave up (the first status word).
const (
	Stalled = 1 // a dependency wait ran out of polls: a block that never came
	Refused = 2 // the stream, launch shape or counters' epoch is not one this kernel runs
)

// Status is what the megakernel writes when it gives up, in the status words' order.
type Status struct {
	Why   uint32
	Block uint32 // the thread block (queue) that gave up
	Item  uint32 // its item, an index into the stream's items
	Instr uint32 // the item's instruction and part
	Part  uint32
	// Counter is the instruction whose counter the block waited for; Seen the value it read
	// last and Need the value it waited for (epoch × that instruction's parts).
	Counter, Seen, Need uint32
}

// ParseStatus reads the status words; ok is false if the launch did not give up.
func ParseStatus(b []byte) (st Status, ok bool) {
	if len(b) < 4*StatusWords {
		return st, false
	}
	w := func(i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }
	st = Status{w(0), w(1), w(2), w(3), w(4), w(5), w(6), w(7)}
	return st, st.Why != 0
}

// Describe explains the status in the terms of schedule s (nil: indices only).
func (st Status) Describe(s *Schedule) string {
	name := func(i uint32) string {
		if s != nil && int(i) < len(s.Instrs) {
			return fmt.Sprintf("instruction %d (%s)", i, s.Instrs[i].Name)
		}
		return fmt.Sprintf("instruction %d", i)
	}
	switch st.Why {
	case Stalled:
		var parts string
		if s != nil && int(st.Counter) < len(s.Instrs) {
			parts = fmt.Sprintf(" of %d parts per launch", s.Instrs[st.Counter].Parts)
		}
		return fmt.Sprintf("block %d gave up at item %d, part %d of %s: it waited for %s, whose counter stayed at %d, short of %d%s",
			st.Block, st.Item, st.Part, name(st.Instr), name(st.Counter), st.Seen, st.Need, parts)
	case Refused:
		return fmt.Sprintf("block %d refused the stream (stream version %d, kernel version %d; or another kernel table, shape, shared memory or epoch)",
			st.Block, st.Seen, st.Need)
	}
	return fmt.Sprintf("status %d (unknown)", st.Why)
}

// StallError is a launch that gave up, with the status it wrote.
type StallError struct {
	Status Status
	Text   string // Status.Describe of the launch's schedule
	Err    error  // the launch's own error (the trap)
}

func (e *StallError) Error() string { return "megakernel: " + e.Text + ": " + e.Err.Error() }
func (e *StallError) Unwrap() error { return e.Err }

// Kernel is the megakernel entry (ptx/src/megakernel.cu): SMs thread blocks of MaxThreads
// threads and SharedBytes of dynamic shared memory, block k running queue k of the stream.
// All blocks must be resident at once (no more blocks than the device runs together), since
// a block waits for others' parts. Its twin is the VM. It is not an instruction of the table
// (Kernels).
var Kernel = device.Register(&device.Kernel[Args]{
	EntryName: "megakernel", ModuleName: module,
	Shape: func(a Args) (device.Geometry, error) {
		if a.SMs < 1 || a.SMs > MaxSMs {
			return device.Geometry{}, fmt.Errorf("%d SMs (1…%d allowed)", a.SMs, MaxSMs)
		}
		sh := a.Shared
		if sh < MinShared || sh%16 != 0 {
			return device.Geometry{}, fmt.Errorf("%d bytes of shared memory (a multiple of 16, at least %d)", a.Shared, MinShared)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.SMs), Y: 1, Z: 1}, Block: device.Dim3{X: MaxThreads, Y: 1, Z: 1},
			Shared: sh}, nil
	},
	Twin: func(x *device.Exec, a Args) error {
		h, err := x.U8(a.Stream, 4*headerWords)
		if err != nil {
			return fmt.Errorf("stream header: %w", err)
		}
		w := func(i int) uint64 { return uint64(binary.LittleEndian.Uint32(h[4*i:])) }
		n := 4*streamWords(w(3), w(6), w(4), w(7), w(9)) + 8*w(5)
		if n > maxStream {
			return fmt.Errorf("stream of %d bytes (at most %d)", n, maxStream)
		}
		b, err := x.U8(a.Stream, int64(n))
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		s, err := Decode(b)
		if err != nil {
			return err
		}
		if len(s.Queues) != int(a.SMs) {
			return fmt.Errorf("stream for %d SMs launched on %d", len(s.Queues), a.SMs)
		}
		if a.Epoch == 0 {
			return fmt.Errorf("epoch 0 (launches count from 1)")
		}
		counters, err := x.I32(a.Counters, 1+len(s.Instrs))
		if err != nil {
			return fmt.Errorf("counters: %w", err)
		}
		for i, in := range s.Instrs { // the counters must stand where the last launch left them
			if want := int64(a.Epoch-1) * int64(in.Parts); int64(uint32(counters[1+i])) != want {
				return fmt.Errorf("instruction %d's counter is %d before launch %d of %d parts", i, uint32(counters[1+i]), a.Epoch, in.Parts)
			}
		}
		if err := (&VM{Mem: x.Mem}).RunSchedule(s); err != nil {
			return err
		}
		for i, in := range s.Instrs {
			counters[1+i] = int32(uint32(a.Epoch) * uint32(in.Parts))
		}
		return nil
	},
})
