package megakernel

import (
	"encoding/binary"
	"fmt"

	"verity/device"
)

// Args are the megakernel entry's parameters.
type Args struct {
	Stream device.Ptr // the encoded stream (Encode)
	Done   device.Ptr // uint32 per instruction: its finished parts; zero before the launch
	SMs    int32      // the stream's queues, one thread block each
}

// Kernel is the megakernel entry (ptx/src/megakernel.cu): SMs thread blocks of MaxThreads
// threads and SharedBytes of dynamic shared memory, block k running queue k of the stream. All blocks must be resident at once (no more
// blocks than the device runs together), since a block waits for others' parts. Its twin is
// the VM. It is not an instruction of the table (Kernels).
var Kernel = device.Register(&device.Kernel[Args]{
	EntryName: "megakernel", ModuleName: module,
	Shape: func(a Args) (device.Geometry, error) {
		if a.SMs < 1 || a.SMs > MaxSMs {
			return device.Geometry{}, fmt.Errorf("%d SMs (1…%d allowed)", a.SMs, MaxSMs)
		}
		return device.Geometry{Grid: device.Dim3{X: uint32(a.SMs), Y: 1, Z: 1}, Block: device.Dim3{X: MaxThreads, Y: 1, Z: 1},
			Shared: SharedBytes}, nil
	},
	Twin: func(x *device.Exec, a Args) error {
		h, err := x.U8(a.Stream, 4*headerWords)
		if err != nil {
			return fmt.Errorf("stream header: %w", err)
		}
		w := func(i int) uint64 { return uint64(binary.LittleEndian.Uint32(h[4*i:])) }
		words := headerWords + instrWords*w(3) + w(6) + w(4) + 1 + 2*w(7)
		words += words & 1
		n := 4*words + 8*w(5)
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
		done, err := x.I32(a.Done, len(s.Instrs))
		if err != nil {
			return fmt.Errorf("counters: %w", err)
		}
		if err := (&VM{Mem: x.Mem}).RunSchedule(s); err != nil {
			return err
		}
		for i, in := range s.Instrs {
			done[i] = int32(in.Parts)
		}
		return nil
	},
})
