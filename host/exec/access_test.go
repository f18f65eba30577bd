package exec_test

import (
	"bytes"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/exec"
	"verity/host/model"
)

// accessChecker runs a step's launches one by one and checks each against Access: the
// memory a launch changes belongs to resources it declares written, and every address it is
// given is a weight, a step input the host writes, or a resource it declares.
type accessChecker struct {
	t *testing.T
	e *exec.Executor
}

func (c *accessChecker) LaunchStep(ls []exec.Launch) error {
	e := c.e
	mutable, weights, inputs := exec.Mutable(e), exec.Weights(e), exec.Inputs(e)
	for _, l := range ls {
		reads, writes := exec.Access(l.Op)
		declared := map[device.Ptr]bool{}
		written := map[device.Ptr]bool{}
		for _, r := range reads {
			for _, p := range exec.ResourcePtrs(e, r) {
				declared[p] = true
			}
		}
		for _, r := range writes {
			for _, p := range exec.ResourcePtrs(e, r) {
				declared[p], written[p] = true, true
			}
		}
		ps, err := device.Params(l.Args)
		if err != nil {
			return err
		}
		for _, p := range ps {
			ptr := device.Ptr(p.Bits)
			if _, ok := mutable[ptr]; p.Kind != device.U64 || !ok {
				continue // not an address, or a weight or input (read-only)
			}
			if !declared[ptr] && !inputs[ptr] && !weights[ptr] {
				c.t.Errorf("op %s: argument %s is %s, which Access does not declare", l.Op.Name, p.Name, mutable[ptr])
			}
		}
		before := c.snapshot(mutable)
		if err := e.Backend().Launch(l.Kernel, l.Args); err != nil {
			return err
		}
		for p, after := range c.snapshot(mutable) {
			if !bytes.Equal(before[p], after) && !written[p] {
				c.t.Errorf("op %s (%s) changed %s, which Access does not declare written", l.Op.Name, l.Op.Kind, mutable[p])
			}
		}
	}
	return nil
}

func (c *accessChecker) snapshot(mutable map[device.Ptr]string) map[device.Ptr][]byte {
	out := map[device.Ptr][]byte{}
	b := c.e.Backend().(*cpu.Backend)
	for p := range mutable {
		n, err := b.Size(p)
		if err != nil {
			c.t.Fatal(err)
		}
		buf := make([]byte, n)
		if err := b.Read(buf, p); err != nil {
			c.t.Fatal(err)
		}
		out[p] = buf
	}
	return out
}

// Access declares everything each op of every architecture touches: run op by op, no launch
// changes memory outside the resources it declares written, nor is given an address outside
// its declared resources, the step inputs and the weights. The megakernel's dependencies rest
// on this.
func TestAccessIsComplete(t *testing.T) {
	for _, name := range []string{"tiny-llama-tied-f32", "tiny-qwen3-q8_0", "tiny-q35moe-q8_0"} {
		t.Run(name, func(t *testing.T) {
			f, err := fixtures.Parse(name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := model.Build(f)
			if err != nil {
				t.Fatal(err)
			}
			b := cpu.New(1)
			defer b.Close()
			e, err := exec.New(b, p, exec.Options{MaxRows: 4, NSlots: 8, NStates: 6})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			e.SetLauncher(&accessChecker{t: t, e: e})
			// two steps: a 3-row prefill, then a 2-node tree after it
			steps := []exec.Step{
				{Tokens: []int32{1, 2, 3}, Pos: []int32{0, 1, 2}, Slots: []int32{0, 1, 2},
					Keys: [][]int32{{0}, {0, 1}, {0, 1, 2}}, OutRows: []int32{2},
					StateSrc: []int32{0, 1, 2}, StateDst: []int32{1, 2, 3}},
				{Tokens: []int32{4, 5}, Pos: []int32{3, 3}, Slots: []int32{3, 4},
					Keys: [][]int32{{0, 1, 2, 3}, {0, 1, 2, 4}}, OutRows: []int32{0, 1},
					StateSrc: []int32{3, 3}, StateDst: []int32{4, 5}},
			}
			for _, s := range steps {
				if p.StateLayers == 0 {
					s.StateSrc, s.StateDst = nil, nil
				}
				if _, err := e.Run(s); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
