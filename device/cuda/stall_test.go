//go:build cuda

package cuda_test

import (
	"errors"
	"os"
	"testing"

	"verity/device"
	"verity/device/kernels"
	"verity/host/exec"
	"verity/megakernel"
)

// TestMegakernelGivesUp launches a stream whose first item waits for its second: a block gives
// up after its polls, and the error names it from the status words in mapped host memory,
// written before the trap ended the context. The trap poisons the context (and, the CUDA
// documentation says, the process), so the test runs only when VERITY_MEGAKERNEL_STALL=1, in
// a process of its own (the GPU check's megakernel-stall phase).
func TestMegakernelGivesUp(t *testing.T) {
	if os.Getenv("VERITY_MEGAKERNEL_STALL") != "1" {
		t.Skip("set VERITY_MEGAKERNEL_STALL=1 to run it (it ends the process's CUDA context)")
	}
	b := open(t)
	const n = 1 << 16
	var p [3]device.Ptr
	for i := range p {
		var err error
		if p[i], err = b.Alloc(4 * n); err != nil {
			t.Fatal(err)
		}
	}
	ops := []megakernel.Op{
		{Name: "y", Kernel: kernels.Add, Args: kernels.BinaryArgs{A: p[0], B: p[0], Y: p[1], N: n}, Reads: []megakernel.Resource{1}, Writes: []megakernel.Resource{2}, Bytes: 12 * n},
		{Name: "z", Kernel: kernels.Add, Args: kernels.BinaryArgs{A: p[1], B: p[0], Y: p[2], N: n}, Reads: []megakernel.Resource{1, 2}, Writes: []megakernel.Resource{3}, Bytes: 12 * n},
	}
	r, err := exec.NewMegakernelRunner(b, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := megakernel.Build(ops, megakernel.Config{SMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(s); err != nil { // the good order first: it runs
		t.Fatal(err)
	}
	q := s.Queues[0]
	bad := *s
	bad.Queues = [][]megakernel.Item{{q[len(q)-1]}}
	for _, it := range q[:len(q)-1] {
		bad.Queues[0] = append(bad.Queues[0], it)
	}
	err = r.Run(&bad)
	var stall *megakernel.StallError
	if !errors.As(err, &stall) {
		t.Fatalf("%v, want a StallError", err)
	}
	if st := stall.Status; st.Why != megakernel.Stalled || st.Instr != 1 || st.Counter != 0 {
		t.Errorf("status %+v", st)
	}
	t.Log(err)
}
