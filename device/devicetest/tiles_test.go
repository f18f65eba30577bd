package devicetest_test

import (
	"fmt"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/devicetest"
)

// Every twin can run in parts (the megakernel's Go VM runs an op's parts on different
// virtual SMs): it calls Exec.For once, and the body for indices [lo, hi) writes only bytes
// that no other part writes. Running each of K parts on its own copy of the inputs must
// change disjoint bytes whose union is exactly what the whole twin writes, with its values.
func TestTwinsRunInParts(t *testing.T) {
	for _, k := range device.Kernels() {
		cs := devicetest.Cases(k.Entry())
		if cs == nil {
			continue
		}
		t.Run(k.Entry(), func(t *testing.T) {
			for _, c := range cs {
				if err := checkParts(k, c); err != nil {
					t.Errorf("case %s: %v", c.Name, err)
				}
			}
		})
	}
}

func checkParts(k device.Spec, c devicetest.Case) error {
	whole, _, err := runPart(k, c, 0, 1)
	if err != nil {
		return err
	}
	for _, parts := range []int{2, 3, 7} {
		owner := make([][]int, len(c.Buffers))
		for i, b := range c.Buffers {
			owner[i] = make([]int, len(b.Data))
			for j := range owner[i] {
				owner[i][j] = -1
			}
		}
		for p := 0; p < parts; p++ {
			got, calls, err := runPart(k, c, p, parts)
			if err != nil {
				return fmt.Errorf("part %d of %d: %w", p, parts, err)
			}
			if calls > 1 {
				return fmt.Errorf("the twin calls Exec.For %d times", calls)
			}
			for i, b := range c.Buffers {
				for j := range b.Data {
					if got[i][j] == b.Data[j] {
						continue
					}
					if o := owner[i][j]; o >= 0 {
						return fmt.Errorf("%d parts: parts %d and %d both write byte %d of %s", parts, o, p, j, b.Name)
					}
					owner[i][j] = p
					if got[i][j] != whole[i][j] {
						return fmt.Errorf("%d parts: part %d writes %#02x to byte %d of %s, the whole twin %#02x", parts, p, got[i][j], j, b.Name, whole[i][j])
					}
				}
			}
		}
		for i, b := range c.Buffers {
			for j := range b.Data {
				if whole[i][j] != b.Data[j] && owner[i][j] < 0 {
					return fmt.Errorf("%d parts: no part writes byte %d of %s", parts, j, b.Name)
				}
			}
		}
	}
	return nil
}

// runPart runs part p of n of the twin on fresh buffers and returns their contents and how
// many times the twin called For.
func runPart(k device.Spec, c devicetest.Case, p, n int) ([][]byte, int, error) {
	b := cpu.New(1)
	defer b.Close()
	ptrs := make([]device.Ptr, len(c.Buffers))
	for i, buf := range c.Buffers {
		ptr, err := b.Alloc(int64(len(buf.Data)) + 1)
		if err != nil {
			return nil, 0, err
		}
		if err := b.Write(ptr, buf.Data); err != nil {
			return nil, 0, err
		}
		ptrs[i] = ptr
	}
	calls := 0
	x := &device.Exec{Mem: b, Workers: 1, For: func(m int, body func(lo, hi int)) {
		calls++
		if lo, hi := device.Part(m, p, n); lo < hi {
			body(lo, hi)
		}
	}}
	if err := k.RunTwin(x, c.Args(ptrs)); err != nil {
		return nil, 0, err
	}
	out := make([][]byte, len(c.Buffers))
	for i, buf := range c.Buffers {
		out[i] = make([]byte, len(buf.Data))
		if err := b.Read(out[i], ptrs[i]); err != nil {
			return nil, 0, err
		}
	}
	return out, calls, nil
}
