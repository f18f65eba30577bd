package exec_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/ptxvm"
	"verity/fixtures"
	"verity/host/exec"
	"verity/host/model"
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

// Steps of a shape seen before run the schedule built for it then: the Go VM's logits equal
// the eager executor's, step after step, and only a new shape builds a schedule; key lists
// that outgrow their buffer (which moves it, step 4) patch a kept schedule with the new
// addresses, and so does a new chunk the rows share (the attention's grid grows by a block
// per KV head); a grid grown too far from the one placed builds anew (step 8: rows whose
// lists share no chunk, a block per row and chunk).
func TestMegakernelKeepsSchedules(t *testing.T) {
	f, err := fixtures.Parse("tiny-llama-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	opt := exec.Options{MaxRows: 4, NSlots: 96}
	var es [2]*exec.Executor
	for i := range es {
		b := cpu.New(1)
		defer b.Close()
		if es[i], err = exec.New(b, p, opt); err != nil {
			t.Fatal(err)
		}
		defer es[i].Close()
	}
	r, err := exec.NewMegakernelRunner(es[1].Backend(), 3)
	if err != nil {
		t.Fatal(err)
	}
	m := es[1].UseMegakernel(r)
	pos := int32(60) // the first step's 250 keys fit the key lists' first buffer of 256, the fifth's 278 do not
	step := func(rows int, rotated bool) exec.Step {
		var s exec.Step
		for i := 0; i < rows; i++ {
			s.Tokens = append(s.Tokens, int32(7*int(pos)%p.Config.NVocab))
			s.Pos = append(s.Pos, pos)
			s.Slots = append(s.Slots, pos)
			keys := make([]int32, pos+1)
			for k := range keys {
				keys[k] = int32(k)
				if rotated { // row i's list starts at slot i
					keys[k] = int32((k + i) % len(keys))
				}
			}
			s.Keys = append(s.Keys, keys)
			s.OutRows = append(s.OutRows, int32(i))
			pos++
		}
		return s
	}
	for i, c := range []struct {
		rows            int
		rotated         bool
		builds, patched int
	}{{4, false, 1, 0}, {1, false, 2, 0}, {1, false, 2, 0}, {1, false, 2, 0}, {4, false, 2, 1}, {4, false, 2, 1}, {1, false, 2, 2}, {1, false, 2, 2},
		{4, true, 3, 2}} {
		s := step(c.rows, c.rotated)
		want, err := es[0].Run(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := es[1].Run(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(device.F32Bytes(got), device.F32Bytes(want)) {
			t.Fatalf("step %d: the megakernel's logits differ from the eager executor's", i)
		}
		if m.Builds != c.builds || m.Patched != c.patched {
			t.Errorf("step %d (%d rows): %d schedules built and %d patched, want %d and %d", i, c.rows, m.Builds, m.Patched, c.builds, c.patched)
		}
	}
}

// A key list that grows past a chunk boundary changes the attention's grid (one more chunk in
// six): the step patches the kept schedule with the new arguments instead of building one,
// and the Go VM's logits still equal the eager executor's.
func TestMegakernelPatchesGrowingAttention(t *testing.T) {
	f, err := fixtures.Parse("tiny-llama-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	opt := exec.Options{MaxRows: 2, NSlots: 512}
	var es [2]*exec.Executor
	for i := range es {
		b := cpu.New(1)
		defer b.Close()
		if es[i], err = exec.New(b, p, opt); err != nil {
			t.Fatal(err)
		}
		defer es[i].Close()
	}
	r, err := exec.NewMegakernelRunner(es[1].Backend(), 3)
	if err != nil {
		t.Fatal(err)
	}
	m := es[1].UseMegakernel(r)
	for pos := int32(316); pos < 324; pos += 2 { // two rows of a chain: 317 … 324 keys, 5 then 6 chunks
		var s exec.Step
		for i := int32(0); i < 2; i++ {
			s.Tokens = append(s.Tokens, (7*(pos+i))%int32(p.Config.NVocab))
			s.Pos = append(s.Pos, pos+i)
			s.Slots = append(s.Slots, pos+i)
			keys := make([]int32, pos+i+1)
			for k := range keys {
				keys[k] = int32(k)
			}
			s.Keys = append(s.Keys, keys)
			s.OutRows = append(s.OutRows, i)
		}
		want, err := es[0].Run(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := es[1].Run(s)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(device.F32Bytes(got), device.F32Bytes(want)) {
			t.Fatalf("position %d: the megakernel's logits differ from the eager executor's", pos)
		}
	}
	if m.Builds != 1 || m.Patched < 1 { // a patch at the sixth chunk (and one where the key lists' buffer moves)
		t.Errorf("%d schedules built and %d patched, want 1 and some", m.Builds, m.Patched)
	}
}

// A device runner given a schedule that differs from one it ran only in an instruction's
// arguments (as a patched step's does) makes its stream from the old one, and the kernels see
// the new arguments: on the PTX interpreter, the second add writes where its new argument says.
func TestMegakernelRunnerReencodes(t *testing.T) {
	b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: 2, NoRaceCheck: true}})
	defer b.Close()
	const n = 512
	var p [4]device.Ptr
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	for i := range p {
		var err error
		if p[i], err = b.Alloc(4 * n); err != nil {
			t.Fatal(err)
		}
		if err := b.Write(p[i], device.F32Bytes(x)); err != nil {
			t.Fatal(err)
		}
	}
	args := []kernels.BinaryArgs{{A: p[0], B: p[0], Y: p[1], N: n}, {A: p[1], B: p[0], Y: p[2], N: n}}
	ops := []megakernel.Op{
		{Name: "y", Kernel: kernels.Add, Args: args[0], Reads: []megakernel.Resource{1}, Writes: []megakernel.Resource{2}, Bytes: 12 * n},
		{Name: "z", Kernel: kernels.Add, Args: args[1], Reads: []megakernel.Resource{1, 2}, Writes: []megakernel.Resource{3}, Bytes: 12 * n},
	}
	r, err := exec.NewMegakernelRunner(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	s, err := megakernel.Build(ops, megakernel.Config{SMs: 2, PartBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(s); err != nil {
		t.Fatal(err)
	}
	moved := *s
	moved.Instrs = slices.Clone(s.Instrs)
	a := args[1]
	a.Y = p[3]
	ps, err := device.Params(a)
	if err != nil {
		t.Fatal(err)
	}
	moved.Instrs[1].Params = nil
	for _, q := range ps {
		moved.Instrs[1].Params = append(moved.Instrs[1].Params, q.Bits)
	}
	if _, ok := moved.Reencode(s.Encode(), s); !ok {
		t.Fatal("the moved schedule does not re-encode from the first")
	}
	if err := r.Run(&moved); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n)
	if err := b.Read(got, p[3]); err != nil {
		t.Fatal(err)
	}
	for i, v := range device.AsF32(got) {
		if v != 3*x[i] {
			t.Fatalf("element %d: %v, want %v", i, v, 3*x[i])
		}
	}
}

// A megakernel step runs each SwiGLU fused with its conversion as the eager executor does, one
// instruction whose blocks are the pieces of its rows (kernels.RowActSegment values each), not
// a block per row; the logits stay the eager executor's (TestMegakernelKeepsSchedules).
func TestMegakernelRunsFusedGatesByPieces(t *testing.T) {
	f, err := fixtures.Parse("tiny-llama-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	fused, width := 0, 0
	for _, op := range p.Ops {
		if op.Kind == model.OpSwiGLU && p.Buffers[op.Out].Kind == model.ActBuf {
			fused++
			width = op.Width
		}
	}
	if fused == 0 {
		t.Fatal("the fixture's program fuses no SwiGLU with its conversion")
	}
	b := cpu.New(1)
	defer b.Close()
	e, err := exec.New(b, p, exec.Options{MaxRows: 4, NSlots: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const rows = 2
	s, err := e.Schedule(rows, rows, 8, megakernel.Config{SMs: 4})
	if err != nil {
		t.Fatal(err)
	}
	kinds := megakernel.Kernels()
	entries := map[string]int{}
	pieces := (width + kernels.RowActSegment - 1) / kernels.RowActSegment
	for _, in := range s.Instrs {
		entry := kinds[in.Kernel].Entry()
		entries[entry]++
		if entry == "swiglu_act_q8_0" && (in.GridX != pieces || in.GridY != rows) {
			t.Errorf("%s: a grid of %d×%d blocks, want %d pieces × %d rows", in.Name, in.GridX, in.GridY, pieces, rows)
		}
	}
	if n := entries["swiglu_act_q8_0"]; n != fused {
		t.Errorf("%d fused swiglu_act_q8_0 instructions, want %d", n, fused)
	}
	if n := entries["swiglu_f32"]; n != 0 {
		t.Errorf("%d swiglu_f32 instructions, want none", n)
	}
}

// Along a session whose key lists grow across chunk boundaries — steps of a few shapes, the
// attention's chunk count rising — the launches kept for each shape (a new chunk count's
// made from another's) are those lowered afresh; every patched schedule's stream, which the
// device runner encodes over the last one it loaded, is exactly what Encode writes for the
// schedule; and the schedule's instructions are those built afresh from the same launches
// but for their parts and placement.
func TestMegakernelPatchedStreamsAreEncoded(t *testing.T) {
	f, err := fixtures.Parse("tiny-llama-q8_0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		rows     []int // the steps' rows, in turn
		from, to int32 // the first step's history, and the last's at most
		patched  int   // at least
	}{
		{"chain of 2", []int{2}, 250, 330, 1},
		{"trees of 4 and decodes", []int{4, 1}, 300, 420, 2},
		{"trees of 3, 2 and 1", []int{3, 2, 1}, 120, 260, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := exec.New(&null{}, p, exec.Options{MaxRows: 4, NSlots: 512})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			r, err := exec.NewMegakernelRunner(e.Backend(), 16)
			if err != nil {
				t.Fatal(err)
			}
			m := e.UseMegakernel(r)
			pos := tc.from
			for n := 0; pos+4 <= tc.to; n++ {
				rows := tc.rows[n%len(tc.rows)]
				if err := e.Launch(chainStep(int(pos), rows)); err != nil {
					t.Fatal(err)
				}
				pos += int32(rows)
				if err := exec.LoweredAfresh(e); err != nil {
					t.Fatalf("step %d: %v", n, err)
				}
				if got := exec.RunnerStream(r); !bytes.Equal(got, m.Last.Encode()) {
					t.Fatalf("step %d: the runner's stream is not the schedule's encoding", n)
				}
				fresh, err := exec.Rebuilt(m)
				if err != nil {
					t.Fatal(err)
				}
				for i := range fresh.Instrs {
					a, b := m.Last.Instrs[i], fresh.Instrs[i]
					if a.Kernel != b.Kernel || !slices.Equal(a.Params, b.Params) || a.GridX != b.GridX || a.GridY != b.GridY ||
						a.Threads != b.Threads || a.Prefetch != b.Prefetch || !slices.Equal(a.Deps, b.Deps) {
						t.Fatalf("step %d: instruction %d %s is not the one built afresh", n, i, a.Name)
					}
				}
			}
			if m.Patched < tc.patched {
				t.Errorf("%d schedules built and %d patched, want at least %d patched", m.Builds, m.Patched, tc.patched)
			}
		})
	}
}

// A matvec whose block waits stages as much of its weights as the block's shared memory holds
// (the interpreter's 36 KiB, less than the part's 128 KiB) and reads the rest from global
// memory: its result equals the eager launch's bit for bit, and the body read staged rows.
func TestMegakernelStagesPartOfAPart(t *testing.T) {
	// the weak mode's seeded interleaving of the blocks on one goroutine, so that whether the
	// matvec's block waits for the add (and stages) does not depend on the machine's load
	b := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: 2, NoRaceCheck: true, Weak: &ptxvm.Weak{Seed: 17}}})
	defer b.Close()
	const rows, cols, n = 64, 512, 1 << 17 // 128 KiB of float32 weights; a long add before them
	r := rand.New(rand.NewPCG(5, 9))
	alloc := func(vals int, fill bool) device.Ptr {
		p, err := b.Alloc(int64(4 * vals))
		if err != nil {
			t.Fatal(err)
		}
		if fill {
			v := make([]float32, vals)
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			if err := b.Write(p, device.F32Bytes(v)); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	a, x, w, y := alloc(n, true), alloc(n, false), alloc(rows*cols, true), alloc(rows, false)
	a2, z := alloc(2*n, true), alloc(2*n, false)
	mv, err := kernels.MatVec(dtype.F32)
	if err != nil {
		t.Fatal(err)
	}
	mvArgs := kernels.MatVecArgs{W: w, X: x, Y: y, Rows: rows, Cols: cols, N: 1}
	ops := []megakernel.Op{
		{Name: "x", Kernel: kernels.Add, Args: kernels.BinaryArgs{A: a, B: a, Y: x, N: n}, Reads: []megakernel.Resource{1}, Writes: []megakernel.Resource{2}, Bytes: 12 * n},
		// z: twice x's work, but the same bytes to the placement, which puts the two on
		// different queues and the matvec, which waits for both, after x on x's: the
		// matvec's block then waits for z there (and stages) however the blocks interleave
		{Name: "z", Kernel: kernels.Add, Args: kernels.BinaryArgs{A: a2, B: a2, Y: z, N: 2 * n}, Reads: []megakernel.Resource{5}, Writes: []megakernel.Resource{6}, Bytes: 12 * n},
		{Name: "y", Kernel: mv, Args: mvArgs, Reads: []megakernel.Resource{2, 3, 6}, Writes: []megakernel.Resource{4}, Bytes: 4 * rows * cols,
			Stream: &megakernel.Stream{Param: 0, Bytes: 4 * rows * cols}},
	}
	s, err := megakernel.Build(ops, megakernel.Config{SMs: 2, PartBytes: 1 << 30, MinPartUS: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	if mi := s.Instrs[2]; mi.Parts != 1 || mi.Prefetch.Param != 0 || len(mi.Deps) != 2 {
		t.Fatalf("the matvec: %+v", mi)
	}
	if q := s.Queues; len(q) != 2 || len(q[0]) != 2 || q[0][0].Instr != 0 || q[0][1].Instr != 2 || len(q[1]) != 1 {
		t.Fatalf("the queues: %+v, want x and the matvec on one, z on the other", q)
	}
	runner, err := exec.NewMegakernelRunner(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	// the eager launches' result
	if err := b.Launch(kernels.Add, ops[0].Args); err != nil {
		t.Fatal(err)
	}
	if err := b.Launch(kernels.Add, ops[1].Args); err != nil {
		t.Fatal(err)
	}
	if err := b.Launch(mv, mvArgs); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 4*rows)
	if err := b.Read(want, y); err != nil {
		t.Fatal(err)
	}
	// the megakernel's, until a run's matvec waited (a seed's order may start its block
	// after the add is done)
	var staged int64
	for run := 0; run < 3 && staged == 0; run++ {
		if err := b.Write(y, make([]byte, 4*rows)); err != nil {
			t.Fatal(err)
		}
		before := b.Stats().GenericShared
		if err := runner.Run(s); err != nil {
			t.Fatal(err)
		}
		staged = b.Stats().GenericShared - before
		got := make([]byte, 4*rows)
		if err := b.Read(got, y); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("run %d: the megakernel's matvec differs from the eager launch", run)
		}
	}
	if staged == 0 || staged >= rows*cols/4 { // lanes' 16-byte loads: some rows staged, not all
		t.Errorf("%d lanes' loads of staged weights, want some of the part's %d", staged, rows*cols/4)
	}
	t.Logf("%d lanes' loads of staged weights", staged)
}
