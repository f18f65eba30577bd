package ptxvm_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"verity/device"
	"verity/device/kernels"
	"verity/device/ptxvm"
)

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return b
}

func TestBackend(t *testing.T) {
	none := func(string) (string, error) { return "", fmt.Errorf("no PTX") }
	b := ptxvm.New(ptxvm.Options{Source: none})
	defer b.Close()
	a, _ := b.Upload(f32bytes(1, 2, 3))
	y, _ := b.Alloc(12)
	args := kernels.BinaryArgs{A: a, B: a, Y: y, N: 3}
	if err := b.Launch(kernels.Add, args); !errors.Is(err, device.ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported for a module without PTX", err)
	}
	// with Fallback the twin runs on the same memory
	fb := ptxvm.New(ptxvm.Options{Source: none, Fallback: true})
	defer fb.Close()
	a2, _ := fb.Upload(f32bytes(1, 2, 3))
	y2, _ := fb.Alloc(12)
	if err := fb.Launch(kernels.Add, kernels.BinaryArgs{A: a2, B: a2, Y: y2, N: 3}); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 12)
	if err := fb.Read(out, y2); err != nil || string(out) != string(f32bytes(2, 4, 6)) {
		t.Fatalf("fallback result %v, %v", out, err)
	}
	if runs := fb.TwinRuns(); runs["add_f32"] != 1 {
		t.Fatalf("twin runs %v", runs)
	}
	// the real PTX: a kernel writing into uploaded (read-only) memory faults
	vm := ptxvm.New(ptxvm.Options{})
	defer vm.Close()
	a3, _ := vm.Upload(f32bytes(1, 2, 3))
	err := vm.Launch(kernels.Add, kernels.BinaryArgs{A: a3, B: a3, Y: a3, N: 3})
	if !ptxvm.IsFault(err) || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("got %v, want a read-only fault", err)
	}
	// a bad shape is refused before anything runs
	if err := vm.Launch(kernels.Add, kernels.BinaryArgs{N: 0}); err == nil || ptxvm.IsFault(err) {
		t.Fatalf("got %v, want a refused launch", err)
	}
	if st := vm.Stats(); st.Blocks != 0 || st.ThreadInstructions == 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := vm.Free(a3); err != nil {
		t.Fatal(err)
	}
}
