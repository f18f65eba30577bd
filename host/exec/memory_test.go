package exec_test

import (
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/exec"
	"verity/host/model"
)

// counting is a CPU backend that adds up what is allocated and uploaded.
type counting struct {
	*cpu.Backend
	bytes int64
}

func (c *counting) Alloc(n int64) (device.Ptr, error) {
	c.bytes += n
	return c.Backend.Alloc(n)
}

func (c *counting) Upload(data []byte) (device.Ptr, error) {
	c.bytes += int64(len(data))
	return c.Backend.Upload(data)
}

// Memory is exactly what New allocates and uploads, for whole programs and for pipeline
// stages.
func TestMemoryIsWhatNewAllocates(t *testing.T) {
	for _, name := range []string{"tiny-llama-tied-f32", "small-llama-q4_k_m", "tiny-q35moe-q8_0"} {
		f, err := fixtures.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := model.Build(f)
		if err != nil {
			t.Fatal(err)
		}
		opt := exec.Options{MaxRows: 8, NSlots: 40}
		if p.StateLayers > 0 {
			opt.NStates = 5
		}
		cuts, err := exec.BlockCuts(p, []int{1})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][2]int{{0, 0}, {0, cuts[0]}, {cuts[0], len(p.Ops)}} {
			o := opt
			o.Ops = r
			want, err := exec.Memory(p, o)
			if err != nil {
				t.Fatal(err)
			}
			b := &counting{Backend: cpu.New(1)}
			e, err := exec.New(b, p, o)
			if err != nil {
				t.Fatal(err)
			}
			if b.bytes != want {
				t.Errorf("%s ops %v: New allocated %d bytes, Memory says %d", name, r, b.bytes, want)
			}
			e.Close()
			b.Close()
		}
	}
}
