package exec_test

import (
	"errors"
	"testing"

	"verity/device"
	"verity/device/kernels"
	"verity/device/ptxvm"
	"verity/host/exec"
	"verity/megakernel"
)

// A megakernel launch that gives up comes back as a StallError naming the block, the item and
// the counter it waited for, from the status words the kernel wrote before it trapped; the
// runner then loads the stream again, and a good schedule runs.
func TestMegakernelRunnerExplainsAStall(t *testing.T) {
	b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: 1, NoRaceCheck: true}})
	defer b.Close()
	const n = 256
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
	exec.SetSpins(r, 20)
	good, err := megakernel.Build(ops, megakernel.Config{SMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	bad := *good
	q := good.Queues[0]
	bad.Queues = [][]megakernel.Item{{q[1], q[0]}}
	for round := 0; round < 2; round++ {
		err = r.Run(&bad)
		var stall *megakernel.StallError
		if !errors.As(err, &stall) {
			t.Fatalf("round %d: %v, want a StallError", round, err)
		}
		if st := stall.Status; st.Why != megakernel.Stalled || st.Instr != 1 || st.Counter != 0 || st.Need != 1 {
			t.Errorf("round %d: status %+v", round, st)
		}
		for range 3 { // the same schedule again and again: counters advance by epochs
			if err := r.Run(good); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	t.Log(err)
}
