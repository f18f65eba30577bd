package exec_test

import (
	"fmt"
	"testing"
	"time"

	"verity/device"
	"verity/device/cpu"
	"verity/fixtures"
	"verity/host/exec"
	"verity/host/model"
)

// timeline is a CPU backend with a device.Timeline whose marks are the launches counted so
// far (each launch takes one "microsecond" of device time), and which counts its syncs.
type timeline struct {
	*cpu.Backend
	launches, syncs int
	marks           map[device.Mark]int
	next            device.Mark
}

func (b *timeline) Launch(k device.Spec, args any) error {
	b.launches++
	return b.Backend.Launch(k, args)
}

func (b *timeline) Sync() error {
	b.syncs++
	return b.Backend.Sync()
}

func (b *timeline) Mark() (device.Mark, error) {
	b.next++
	b.marks[b.next] = b.launches
	return b.next, nil
}

func (b *timeline) Elapsed(x, y device.Mark) (time.Duration, error) {
	ax, ok1 := b.marks[x]
	ay, ok2 := b.marks[y]
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("mark %d or %d unknown or released", x, y)
	}
	return time.Duration(ay-ax) * time.Microsecond, nil
}

func (b *timeline) ReleaseMarks(ms ...device.Mark) error {
	for _, m := range ms {
		delete(b.marks, m)
	}
	return nil
}

// On a backend with a timeline, a profiled step times each op between the marks around its
// launch — every op once, in program order — without a sync between ops, and releases its
// marks; the logits are those of an unprofiled step.
func TestProfileOnTimeline(t *testing.T) {
	f, err := fixtures.Parse("tiny-llama-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	b := &timeline{Backend: cpu.New(1), marks: map[device.Mark]int{}}
	defer b.Close()
	e, err := exec.New(b, p, exec.Options{MaxRows: 4, NSlots: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	step := exec.Step{Tokens: []int32{1, 2}, Pos: []int32{0, 1}, Slots: []int32{0, 1}, Keys: [][]int32{{0}, {0, 1}}, OutRows: []int32{1}}
	want, err := e.Run(step)
	if err != nil {
		t.Fatal(err)
	}
	var ops []*model.Op
	e.SetProfile(func(op *model.Op, d time.Duration) {
		if d != time.Microsecond {
			t.Errorf("%s: %v, want the one launch's 1µs", op.Name, d)
		}
		ops = append(ops, op)
	})
	b.syncs = 0
	got, err := e.Run(step)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != len(p.Ops) {
		t.Fatalf("%d ops timed, the program has %d", len(ops), len(p.Ops))
	}
	for i, op := range ops {
		if op != &p.Ops[i] {
			t.Fatalf("op %d timed is %s, want %s", i, op.Name, p.Ops[i].Name)
		}
	}
	if b.syncs > 1 || len(b.marks) != 0 {
		t.Errorf("%d syncs (want at most the one before the first op), %d marks left", b.syncs, len(b.marks))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("logit %d: %v profiled, %v not", i, got[i], want[i])
		}
	}
}
