package megakernel_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/megakernel"
	"verity/repack"
)

// chain is a random program of elementwise ops and matvecs over a few buffers, with the
// resources each op reads and writes: enough reuse of buffers for every kind of hazard.
type chain struct {
	b    *cpu.Backend
	bufs []device.Ptr
	init [][]byte
	ops  []megakernel.Op
}

const (
	chainN    = 4096 // floats per buffer
	chainCols = 64   // matvec: 64 rows × 64 columns = 4096 floats
)

func newChain(t testing.TB, seed uint64, nbuf, nops int) *chain {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	c := &chain{b: cpu.New(1)}
	t.Cleanup(func() { c.b.Close() })
	for i := 0; i < nbuf; i++ {
		v := make([]float32, chainN)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		p, err := c.b.Alloc(4 * chainN)
		if err != nil {
			t.Fatal(err)
		}
		c.bufs = append(c.bufs, p)
		c.init = append(c.init, append([]byte(nil), device.F32Bytes(v)...))
	}
	// a weight matrix for the matvecs, in the F32 device layout
	w := make([]float32, chainCols*chainCols)
	for j := range w {
		w[j] = float32(r.NormFloat64() / 8)
	}
	mv, err := kernels.MatVec(dtype.F32)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := repack.Pack(dtype.F32, []int64{chainCols, chainCols}, device.F32Bytes(w))
	if err != nil {
		t.Fatal(err)
	}
	wp, err := c.b.Upload(pk.Data)
	if err != nil {
		t.Fatal(err)
	}
	res := func(i int) megakernel.Resource { return megakernel.Resource(i) }
	for i := 0; i < nops; i++ {
		a, b, y := r.IntN(nbuf), r.IntN(nbuf), r.IntN(nbuf)
		switch r.IntN(3) {
		case 0, 1:
			k := []*device.Kernel[kernels.BinaryArgs]{kernels.Add, kernels.SwiGLU, kernels.SigmoidMul}[r.IntN(3)]
			n := 1 + r.IntN(chainN)
			c.ops = append(c.ops, megakernel.Op{Name: fmt.Sprintf("op%d.%s", i, k.Entry()), Kernel: k,
				Args:  kernels.BinaryArgs{A: c.bufs[a], B: c.bufs[b], Y: c.bufs[y], N: int32(n)},
				Reads: []megakernel.Resource{res(a), res(b)}, Writes: []megakernel.Resource{res(y)}, Bytes: int64(12 * n)})
		default: // y = W · a for 64 columns of a (64 rows each); a must not be y
			if a == y {
				y = (y + 1) % nbuf
			}
			c.ops = append(c.ops, megakernel.Op{Name: fmt.Sprintf("op%d.matvec", i), Kernel: mv,
				Args:  kernels.MatVecArgs{W: wp, X: c.bufs[a], Y: c.bufs[y], Rows: chainCols, Cols: chainCols, N: chainCols},
				Reads: []megakernel.Resource{res(a)}, Writes: []megakernel.Resource{res(y)}, Bytes: int64(len(w)*4 + 2*4*chainN),
				Stream: &megakernel.Stream{Param: 0, Bytes: int64(len(pk.Data))}})
		}
	}
	return c
}

func (c *chain) reset(t *testing.T) {
	for i, p := range c.bufs {
		if err := c.b.Write(p, c.init[i]); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *chain) read(t *testing.T) [][]byte {
	out := make([][]byte, len(c.bufs))
	for i, p := range c.bufs {
		out[i] = make([]byte, 4*chainN)
		if err := c.b.Read(out[i], p); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// eager runs the ops one launch at a time.
func (c *chain) eager(t *testing.T) [][]byte {
	c.reset(t)
	for _, op := range c.ops {
		if err := c.b.Launch(op.Kernel, op.Args); err != nil {
			t.Fatal(err)
		}
	}
	return c.read(t)
}

// The VM gives the eager executor's bits for random programs with every kind of hazard, on
// any number of SMs, through an encoded and decoded stream.
func TestVMEqualsEager(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		c := newChain(t, seed, 2+int(seed%4), 30)
		want := c.eager(t)
		for _, sms := range []int{1, 2, 3, 8, 33} {
			s, err := megakernel.Build(c.ops, megakernel.Config{SMs: sms, PartBytes: 4096})
			if err != nil {
				t.Fatal(err)
			}
			checkSchedule(t, s, c.ops)
			c.reset(t)
			vm := megakernel.VM{Mem: c.b}
			if err := vm.Run(s.Encode()); err != nil {
				t.Fatal(err)
			}
			for i, got := range c.read(t) {
				if !bytes.Equal(got, want[i]) {
					t.Fatalf("seed %d, %d SMs: buffer %d differs from the eager run", seed, sms, i)
				}
			}
		}
	}
}

// checkSchedule checks a schedule's invariants: every part queued once, queues in program
// order, and each instruction depending (directly or through others) on every earlier one it
// conflicts with.
func checkSchedule(t *testing.T, s *megakernel.Schedule, ops []megakernel.Op) {
	t.Helper()
	seen := map[[2]int32]bool{}
	for k, q := range s.Queues {
		for j, it := range q {
			if j > 0 && it.Instr < q[j-1].Instr {
				t.Fatalf("queue %d is not in program order", k)
			}
			if seen[[2]int32{it.Instr, it.Part}] {
				t.Fatalf("part %d of %d queued twice", it.Part, it.Instr)
			}
			seen[[2]int32{it.Instr, it.Part}] = true
		}
	}
	n := 0
	for _, in := range s.Instrs {
		n += in.Parts
	}
	if len(seen) != n {
		t.Fatalf("%d parts queued, %d exist", len(seen), n)
	}
	// reach[i][j]: i waits (transitively) for j
	reach := make([]map[int]bool, len(s.Instrs))
	for i, in := range s.Instrs {
		reach[i] = map[int]bool{}
		for _, d := range in.Deps {
			reach[i][d] = true
			for e := range reach[d] {
				reach[i][e] = true
			}
		}
	}
	has := func(rs []megakernel.Resource, r megakernel.Resource) bool {
		for _, x := range rs {
			if x == r {
				return true
			}
		}
		return false
	}
	for i := range ops {
		for j := 0; j < i; j++ {
			conflict := false
			for _, w := range ops[j].Writes {
				conflict = conflict || has(ops[i].Reads, w) || has(ops[i].Writes, w)
			}
			for _, w := range ops[i].Writes {
				conflict = conflict || has(ops[j].Reads, w)
			}
			if conflict && !reach[i][j] {
				t.Fatalf("instruction %d conflicts with %d but does not wait for it", i, j)
			}
		}
	}
}

// Independent instructions share the machine: two unrelated chains of matvecs on 2 SMs run
// side by side (the estimate is about half of running everything on one SM), and a part count
// follows the bytes an op moves.
func TestScheduleOverlapsIndependentWork(t *testing.T) {
	c := newChain(t, 99, 4, 0)
	mv, _ := kernels.MatVec(dtype.F32)
	var w []megakernel.Op
	for i := 0; i < 8; i++ { // op i updates chain i%2's resource: two chains of four
		r := []megakernel.Resource{megakernel.Resource(i % 2)}
		w = append(w, megakernel.Op{Name: fmt.Sprint("mv", i), Kernel: mv,
			Args:  kernels.MatVecArgs{W: c.bufs[0], X: c.bufs[1+i%2], Y: c.bufs[3], Rows: chainCols, Cols: chainCols, N: 1},
			Reads: r, Writes: r, Bytes: 1 << 20})
	}
	one, err := megakernel.Build(w, megakernel.Config{SMs: 1, PartBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	two, err := megakernel.Build(w, megakernel.Config{SMs: 2, PartBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if st := two.Stats(); st.Instrs != 8 || st.Parts != 8 || st.Levels != 4 || st.Deps != 6 {
		t.Errorf("two chains of four: stats %+v", st)
	}
	if r := two.EstimateUS / one.EstimateUS; r < 0.495 || r > 0.52 { // a wake-up per level besides
		t.Errorf("two independent chains on 2 SMs: estimate %.1f µs, on 1 SM %.1f µs (ratio %.3f, want 0.5)", two.EstimateUS, one.EstimateUS, r)
	}
	for i, in := range two.Instrs {
		if in.Parts != 1 {
			t.Errorf("instruction %d: %d parts, want 1 (one part per GiB)", i, in.Parts)
		}
	}
	split, err := megakernel.Build(w[:1], megakernel.Config{SMs: 8, PartBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if p := split.Instrs[0].Parts; p != 4 { // 1 MiB in 256 KiB parts, on 16 blocks
		t.Errorf("1 MiB matvec: %d parts, want 4", p)
	}
}

// Decode inverts Encode, and refuses every truncation and many corruptions of a stream with
// an error (never a panic).
func TestStreamRoundTripAndCorruption(t *testing.T) {
	c := newChain(t, 5, 3, 20)
	s, err := megakernel.Build(c.ops, megakernel.Config{SMs: 5, PartBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	enc := s.Encode()
	back, err := megakernel.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Encode(), enc) {
		t.Fatal("Decode(Encode(s)).Encode() differs")
	}
	for i := range back.Instrs {
		if back.Instrs[i].Kernel != s.Instrs[i].Kernel || fmt.Sprint(back.Instrs[i].Deps) != fmt.Sprint(s.Instrs[i].Deps) {
			t.Fatalf("instruction %d decoded as %+v, encoded %+v", i, back.Instrs[i], s.Instrs[i])
		}
	}
	for n := 0; n < len(enc); n++ {
		if _, err := megakernel.Decode(enc[:n]); err == nil {
			t.Fatalf("a stream truncated to %d of %d bytes decoded", n, len(enc))
		}
	}
	bad := []struct {
		word int
		val  uint32
		want string
	}{
		{0, 0, "not a stream"},
		{1, 1, "version"},
		{2, 0, "kernel table"},
		{4, 0, "SMs"},
		{9, 1, "header says"},                       // the prefetch ranges
		{10, 1 << 20, "outside the table"},          // instruction 0's kernel
		{10 + 5, 0, "threads"},                      // instruction 0's threads per block
		{10 + 5, 16, "the kernel launches"},         // threads per block not the kernel's
		{10 + 3, 1 << 20, "the kernel launches"},    // grid not the kernel's
		{10 + 6, 0, "parts"},                        // instruction 0's parts
		{10 + 9, 1 << 10, "prefetch"},               // a prefetch parameter that does not exist
		{10 + 12*len(s.Instrs) + 1, 77, "recorded"}, // the first dependency's part count (instruction 1's, when it has one)
	}
	for _, b := range bad {
		e := append([]byte(nil), enc...)
		binary.LittleEndian.PutUint32(e[4*b.word:], b.val)
		if _, err := megakernel.Decode(e); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("word %d = %d: error %v, want one about %q", b.word, b.val, err, b.want)
		}
	}
	// prefetch sizes without a parameter
	e := append([]byte(nil), enc...)
	binary.LittleEndian.PutUint32(e[4*(10+9):], 0)
	binary.LittleEndian.PutUint32(e[4*(10+10):], 64)
	if _, err := megakernel.Decode(e); err == nil || !strings.Contains(err.Error(), "without a parameter") {
		t.Errorf("prefetch sizes without a parameter: %v", err)
	}
	// an item whose blocks are not its part's
	nDeps := 0
	for _, in := range s.Instrs {
		nDeps += len(in.Deps)
	}
	e = append([]byte(nil), enc...)
	item := 10 + 12*len(s.Instrs) + 2*nDeps + len(s.Queues) + 1
	binary.LittleEndian.PutUint32(e[4*(item+3):], 1<<20)
	if _, err := megakernel.Decode(e); err == nil || !strings.Contains(err.Error(), "has blocks") {
		t.Errorf("an item's blocks: %v", err)
	}
	// prefetch ranges that are not the window's: an item's count, the first range's end
	e = append([]byte(nil), enc...)
	binary.LittleEndian.PutUint32(e[4*(item+5):], binary.LittleEndian.Uint32(e[4*(item+5):])+1)
	if _, err := megakernel.Decode(e); err == nil || !strings.Contains(err.Error(), "prefetch") {
		t.Errorf("an item's prefetch ranges: %v", err)
	}
	// an item's dependencies that are not its instruction's: the first item's count
	e = append([]byte(nil), enc...)
	binary.LittleEndian.PutUint32(e[4*(item+7):], binary.LittleEndian.Uint32(e[4*(item+7):])+1)
	if _, err := megakernel.Decode(e); err == nil || !strings.Contains(err.Error(), "dependencies") {
		t.Errorf("an item's dependencies: %v", err)
	}
	if ranges := item + megakernel.ItemWords*s.Items(); binary.LittleEndian.Uint32(enc[4*9:]) > 0 {
		e = append([]byte(nil), enc...)
		binary.LittleEndian.PutUint32(e[4*(ranges+2):], binary.LittleEndian.Uint32(e[4*(ranges+2):])-1)
		if _, err := megakernel.Decode(e); err == nil || !strings.Contains(err.Error(), "window asks") {
			t.Errorf("a prefetch range: %v", err)
		}
	} else {
		t.Error("the stream prefetches nothing")
	}
	// a queue out of program order: swap the first two items of the longest queue
	for k, q := range s.Queues {
		if len(q) >= 2 && q[0].Instr != q[1].Instr {
			s2 := *s
			s2.Queues = append([][]megakernel.Item(nil), s.Queues...)
			s2.Queues[k] = append([]megakernel.Item{q[1], q[0]}, q[2:]...)
			if _, err := megakernel.Decode(s2.Encode()); err == nil || !strings.Contains(err.Error(), "program order") {
				t.Errorf("a queue out of order: error %v", err)
			}
			break
		}
	}
}

// A failing part stops the run with the error of the lowest failing instruction.
func TestVMReportsErrors(t *testing.T) {
	c := newChain(t, 3, 2, 6)
	ops := append([]megakernel.Op(nil), c.ops...)
	ops = append(ops, megakernel.Op{Name: "bad", Kernel: kernels.Add,
		Args: kernels.BinaryArgs{A: c.bufs[0], B: c.bufs[1], Y: c.bufs[0] + 1<<30, N: 16}})
	s, err := megakernel.Build(ops, megakernel.Config{SMs: 3})
	if err != nil {
		t.Fatal(err)
	}
	vm := megakernel.VM{Mem: c.b}
	err = vm.Run(s.Encode())
	if err == nil || !strings.Contains(err.Error(), "instruction 6") {
		t.Fatalf("error %v, want one naming instruction 6", err)
	}
	if _, err := megakernel.Build(ops, megakernel.Config{SMs: 0}); err == nil {
		t.Error("Build accepted 0 SMs")
	}
	if _, err := megakernel.Build(nil, megakernel.Config{SMs: 1}); err == nil {
		t.Error("Build accepted a step with no ops")
	}
}

func FuzzDecode(f *testing.F) {
	c := newChain(f, 11, 3, 8)
	s, _ := megakernel.Build(c.ops, megakernel.Config{SMs: 4, PartBytes: 4096})
	f.Add(s.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := megakernel.Decode(b)
		if err != nil {
			return
		}
		if !bytes.Equal(s.Encode(), b) {
			t.Fatal("a stream that decodes does not re-encode to itself")
		}
	})
}

// A schedule whose instructions take other grids and parameters (a patched step's) re-encodes
// from the old stream to exactly what Encode writes; a prefetching instruction's other grid
// re-encodes so too, or is refused when it changes how many ranges an item prefetches;
// anything else is refused.
func TestReencode(t *testing.T) {
	c := newChain(t, 5, 3, 20)
	s, err := megakernel.Build(c.ops, megakernel.Config{SMs: 5, PartBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	prev := s.Encode()
	regrid := func(prefetching bool) *megakernel.Schedule {
		p := *s
		p.Instrs = slices.Clone(s.Instrs)
		n := 0
		for i := range p.Instrs {
			in := &p.Instrs[i]
			if (in.Prefetch.Param >= 0) != prefetching || n == 3 {
				continue
			}
			n++
			in.GridX += in.GridX/3 + 1 // more blocks, the same parts
			in.Params = slices.Clone(in.Params)
			in.Params[0] ^= 0x100
		}
		if n == 0 {
			t.Fatalf("no instruction with prefetching %v", prefetching)
		}
		return &p
	}
	p := *regrid(false)
	got, ok := p.Reencode(prev, s)
	if !ok || !bytes.Equal(got, p.Encode()) {
		t.Fatalf("Reencode: ok %v, equal to Encode %v", ok, bytes.Equal(got, p.Encode()))
	}
	pf := regrid(true)
	if got, ok := pf.Reencode(prev, s); ok && !bytes.Equal(got, pf.Encode()) {
		t.Fatal("Reencode of prefetching instructions' grids is not Encode's")
	}
	if same, ok := s.Reencode(prev, s); !ok || !bytes.Equal(same, prev) {
		t.Fatal("Reencode of the schedule itself differs")
	}
	q := p
	q.Queues = slices.Clone(p.Queues)
	q.Queues[0] = slices.Clone(q.Queues[0])
	r := p
	r.Instrs = slices.Clone(p.Instrs)
	r.Instrs[1].Parts++
	for name, x := range map[string]*megakernel.Schedule{"other queues": &q, "other parts": &r} {
		if _, ok := x.Reencode(prev, s); ok {
			t.Errorf("%s: re-encoded", name)
		}
	}
	if _, ok := p.Reencode(prev[:len(prev)-8], s); ok {
		t.Error("a short stream: re-encoded")
	}
}

// A schedule rebound to new arguments (a patched step's) encodes over the old stream to
// exactly what Encode writes for it, and back; its instructions are those a fresh Build of
// the new arguments makes, but for the parts and placement it keeps; the stream decodes.
func TestRebindEncodesAsBuilt(t *testing.T) {
	c := newChain(t, 11, 4, 30)
	cfg := megakernel.Config{SMs: 5, PartBytes: 4096}
	base, err := megakernel.Build(c.ops, cfg)
	if err != nil {
		t.Fatal(err)
	}
	prev := base.Encode()
	var binary, matvec []int // the ops of each kind
	for i, op := range c.ops {
		if _, ok := op.Args.(kernels.BinaryArgs); ok {
			binary = append(binary, i)
		} else {
			matvec = append(matvec, i)
		}
	}
	grow := func(a any) any { // a fifth more elements: a larger grid
		b := a.(kernels.BinaryArgs)
		b.N = min(b.N+b.N/5+256, chainN)
		return b
	}
	move := func(a any) any { // another output buffer: other parameters, the same grid
		b := a.(kernels.BinaryArgs)
		b.Y = c.bufs[(slices.Index(c.bufs, b.Y)+1)%len(c.bufs)]
		return b
	}
	shrink := func(a any) any { // fewer rows: a smaller grid, its prefetch per block the same bytes' share
		m := a.(kernels.MatVecArgs)
		m.Rows -= 8
		return m
	}
	for _, tc := range []struct {
		name   string
		ops    []int
		change func(any) any
		regrid bool // some grid changes
	}{
		{"none", nil, nil, false},
		{"one grid", binary[:1], grow, true},
		{"every grid", binary, grow, true},
		{"addresses", binary[len(binary)/2:], move, false},
		{"prefetching grids", matvec, shrink, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := *base
			p.Instrs = slices.Clone(base.Instrs)
			ops := slices.Clone(c.ops)
			for _, i := range tc.ops {
				ops[i].Args = tc.change(ops[i].Args)
				if err := p.Rebind(i, ops[i].Args); err != nil {
					t.Fatal(err)
				}
			}
			regrid := false
			for i := range p.Instrs {
				regrid = regrid || p.Instrs[i].Blocks() != base.Instrs[i].Blocks()
			}
			if regrid != tc.regrid {
				t.Fatalf("grids changed: %v, want %v", regrid, tc.regrid)
			}
			want := p.Encode()
			stream := slices.Clone(prev)
			if !p.EncodeOver(stream, base) || !bytes.Equal(stream, want) {
				t.Fatal("encoded over the old stream, it is not Encode's")
			}
			if re, ok := p.Reencode(prev, base); !ok || !bytes.Equal(re, want) {
				t.Fatal("Reencode is not Encode's")
			}
			if !base.EncodeOver(stream, &p) || !bytes.Equal(stream, prev) {
				t.Fatal("encoded back over the new stream, it is not the old one")
			}
			if _, err := megakernel.Decode(want); err != nil {
				t.Fatal(err)
			}
			fresh, err := megakernel.Build(ops, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i := range p.Instrs {
				a, b := p.Instrs[i], fresh.Instrs[i]
				if a.Kernel != b.Kernel || !slices.Equal(a.Params, b.Params) || a.GridX != b.GridX || a.GridY != b.GridY ||
					a.Threads != b.Threads || a.Prefetch != b.Prefetch || !slices.Equal(a.Deps, b.Deps) {
					t.Fatalf("instruction %d: rebound %+v, built %+v", i, a, b)
				}
			}
			if !bytes.Equal(base.Encode(), prev) {
				t.Fatal("rebinding a copy changed the schedule it was copied from")
			}
		})
	}

	// what is not a rebinding is refused, the instruction or stream left as it was
	p := *base
	p.Instrs = slices.Clone(base.Instrs)
	i := binary[0]
	few := c.ops[i].Args.(kernels.BinaryArgs)
	few.N = 1 // one block, for more parts
	if p.Instrs[i].Parts > 1 {
		if err := p.Rebind(i, few); err == nil {
			t.Error("rebound to fewer blocks than parts")
		}
	}
	if err := p.Rebind(i, c.ops[matvec[0]].Args); err == nil {
		t.Error("rebound to another kernel's arguments")
	}
	if err := p.Rebind(len(p.Instrs), c.ops[i].Args); err == nil {
		t.Error("rebound an instruction that does not exist")
	}
	if !bytes.Equal(p.Encode(), prev) {
		t.Error("a refused rebinding changed the schedule")
	}
	parts := p
	parts.Instrs = slices.Clone(p.Instrs)
	parts.Instrs[i].Parts++
	queues := p
	queues.Queues = slices.Clone(p.Queues)
	queues.Queues[0] = slices.Clone(queues.Queues[0])
	for name, x := range map[string]*megakernel.Schedule{"other parts": &parts, "other queues": &queues} {
		stream := slices.Clone(prev)
		if x.EncodeOver(stream, base) || !bytes.Equal(stream, prev) {
			t.Errorf("%s: encoded over the stream, or changed it", name)
		}
	}
	if p.EncodeOver(slices.Clone(prev[:len(prev)-8]), base) {
		t.Error("encoded over a short stream")
	}
}
