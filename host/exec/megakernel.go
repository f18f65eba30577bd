package exec

import (
	"errors"
	"fmt"
	"runtime"

	"verity/device"
	"verity/device/cpu"
	"verity/device/kernels"
	"verity/host/model"
	"verity/megakernel"
)

// What an op reads and writes, as megakernel resources: a program buffer, or a layer's K/V
// cache, conv state or SSM state. Step inputs the host writes (tokens, slots, key lists, state
// slots, RoPE tables) are never written by an op, so reading them orders nothing.
const (
	resBuf megakernel.Resource = (iota + 1) << 40
	resKV
	resConv
	resSSM
	resAttn // attention's partials and counters (one scratch for every layer)
)

// Access returns the resources op reads and writes.
func Access(op *model.Op) (reads, writes []megakernel.Resource) {
	for _, b := range op.In {
		reads = append(reads, resBuf|megakernel.Resource(b))
	}
	l := megakernel.Resource(op.Layer)
	switch op.Kind {
	case model.OpKVStore: // Out names the K input; the op writes only the cache
		return reads, []megakernel.Resource{resKV | l}
	case model.OpAttention:
		reads, writes = append(reads, resKV|l, resAttn), append(writes, resAttn)
	case model.OpGDNConv:
		reads, writes = append(reads, resConv|l), append(writes, resConv|l)
	case model.OpGDNScan:
		reads, writes = append(reads, resSSM|l), append(writes, resSSM|l)
	case model.OpSplitGate, model.OpRouter:
		writes = append(writes, resBuf|megakernel.Resource(op.Out2))
	case model.OpMatVec:
		if op.Acc { // Out += W·x reads Out first
			reads = append(reads, resBuf|megakernel.Resource(op.Out))
		}
	}
	return reads, append(writes, resBuf|megakernel.Resource(op.Out))
}

// LaunchAccess is what launch l reads and writes: its op's (Access); of an attention whose
// merge is a launch of its own, the first launch writes only the attention's scratch (partial
// results and counters), not the op's output, and the merge's is the op's.
func LaunchAccess(l Launch) (reads, writes []megakernel.Resource) {
	reads, writes = Access(l.Op)
	if a, ok := l.Args.(kernels.AttentionArgs); ok && a.DeferMerge != 0 && l.Kernel != kernels.AttentionMerge {
		writes = []megakernel.Resource{resAttn}
	}
	return reads, writes
}

// MegakernelRunner runs a megakernel schedule on a backend. Schedules come from
// megakernel.Build, which lays out only valid streams, so runners do not decode them again.
type MegakernelRunner interface {
	// SMs is the number of queues a schedule for this runner has.
	SMs() int
	Run(s *megakernel.Schedule) error
}

// vmRunner runs streams with the megakernel's Go VM over a CPU backend's memory.
type vmRunner struct {
	vm  megakernel.VM
	sms int
}

func (r *vmRunner) SMs() int                         { return r.sms }
func (r *vmRunner) Run(s *megakernel.Schedule) error { return r.vm.RunSchedule(s) }

// multiprocessors is a backend that runs thread blocks concurrently on a known number of
// multiprocessors (a GPU; the PTX interpreter's workers).
type multiprocessors interface {
	Multiprocessors() (int, error)
}

// residentBlocks is a backend that can say how many blocks of a kernel it holds at once.
type residentBlocks interface {
	ResidentBlocks(k device.Spec, args any) (int, error)
}

// sharedOptin is a backend that can say how much shared memory a block may opt in to.
type sharedOptin interface {
	SharedOptin() (int, error)
}

// NewMegakernelRunner returns the megakernel interpreter for backend b with sms queues (0: on
// a GPU as many as it holds at once, up to two per SM; the PTX interpreter's workers; one per
// CPU for the Go VM). The CPU backend runs the Go VM;
// a backend with multiprocessors runs the megakernel entry, one thread block per queue: every
// block must be resident, so sms may not exceed the blocks a GPU holds at once (several per
// SM where registers and shared memory allow) or the PTX interpreter's workers.
func NewMegakernelRunner(b device.Backend, sms int) (MegakernelRunner, error) {
	if sms < 0 || sms > megakernel.MaxSMs {
		return nil, fmt.Errorf("exec: %d megakernel SMs (1…%d allowed)", sms, megakernel.MaxSMs)
	}
	if c, ok := b.(*cpu.Backend); ok {
		if sms == 0 {
			sms = runtime.NumCPU()
		}
		return &vmRunner{vm: megakernel.VM{Mem: c}, sms: sms}, nil
	}
	m, ok := b.(multiprocessors)
	if !ok {
		return nil, fmt.Errorf("exec: no megakernel on %s: %w", b.Name(), device.ErrUnsupported)
	}
	auto := sms == 0
	n, err := m.Multiprocessors()
	if err != nil {
		return nil, fmt.Errorf("exec: megakernel on %s: %w", b.Name(), err)
	}
	if sms == 0 {
		sms = min(n, megakernel.MaxSMs)
	}
	// the blocks' shared memory: the least, or more for staging weights (LaunchShared) where
	// the device lets a block opt in to it and one queue an SM still has every block resident
	shared, more := uint32(megakernel.MinShared), uint32(megakernel.MinShared)
	if o, ok := b.(sharedOptin); ok {
		if optin, err := o.SharedOptin(); err == nil {
			more = megakernel.LaunchShared(int64(optin))
		}
	}
	if r, ok := b.(residentBlocks); ok { // a GPU: can every block be resident at once?
		got, err := r.ResidentBlocks(megakernel.Kernel, megakernel.Args{SMs: int32(sms), Shared: shared})
		if err != nil {
			return nil, fmt.Errorf("exec: megakernel on %s: %w", b.Name(), err)
		}
		if auto {
			// as many queues as the GPU holds, up to two per SM (the megakernel's launch
			// bounds): while one block waits, the other's warps keep the SM's loads in flight
			sms = min(got, 2*n, megakernel.MaxSMs)
		}
		if got < sms {
			return nil, fmt.Errorf("exec: a megakernel of %d blocks on %s, which holds only %d of them at once", sms, b.Name(), got)
		}
		if more > shared && sms <= n {
			if got, err := r.ResidentBlocks(megakernel.Kernel, megakernel.Args{SMs: int32(sms), Shared: more}); err == nil && got >= sms {
				shared = more
			}
		}
	} else if sms > n {
		return nil, fmt.Errorf("exec: a megakernel of %d SMs on %s, which runs %d blocks at once", sms, b.Name(), n)
	} else {
		shared = more
	}
	return &deviceRunner{b: b, sms: sms, qps: (sms + n - 1) / n, machineSMs: n, shared: shared}, nil
}

// deviceRunner runs streams with the megakernel entry, one thread block per queue. It keeps
// the last schedule's stream on the device, with its completion counters: launching the same
// schedule again copies nothing but advances the counters' epoch (megakernel.Args). Each
// launch is waited for; when one fails, the status words the megakernel wrote (in mapped host
// memory where the backend has it, so they survive the fault) say which block gave up where.
type deviceRunner struct {
	b                      device.Backend
	sms                    int
	qps, machineSMs        int    // queues per SM, and the device's SMs
	shared                 uint32 // each block's dynamic shared memory (megakernel.Args)
	spins                  uint32
	stream, counters       device.Ptr
	streamCap, countersCap int64
	loaded                 *megakernel.Schedule // the schedule whose stream is on the device
	maxParts               uint32               // the most parts of one of its instructions
	epoch                  uint32               // launches of it since its counters were zeroed
	status                 device.Ptr
	statusHost             []byte // the status words, when mapped (else read back)
	mapped                 bool
	dirty                  bool // the status words may be non-zero
	// host is the stream of schedule encoded. A schedule that differs from it only in
	// arguments (a patched step's, or the one it was patched from) is encoded over it in
	// place: the changed instructions' words, a few hundred of a step's tens of thousands.
	host    []byte
	encoded *megakernel.Schedule
	zeros   []byte // zero words for the counters
}

func (r *deviceRunner) SMs() int { return r.sms }

// layout is how the runner's queues lie on the device: its SMs and the queues on each.
func (r *deviceRunner) layout() (sms, perSM int) { return r.machineSMs, r.qps }

func (r *deviceRunner) Run(s *megakernel.Schedule) error {
	if err := r.load(s); err != nil {
		return err
	}
	if err := r.statusWords(); err != nil {
		return err
	}
	if uint64(r.epoch+1)*uint64(r.maxParts) >= 1<<32 { // the counters would wrap: start again
		if err := r.zeroCounters(len(s.Instrs)); err != nil {
			return err
		}
	}
	r.epoch++
	spins := r.spins
	if spins == 0 {
		spins = megakernel.DefaultSpins
	}
	err := r.b.Launch(megakernel.Kernel, megakernel.Args{Stream: r.stream, Counters: r.counters, Status: r.status,
		SMs: int32(len(s.Queues)), Epoch: r.epoch, Spins: spins, Shared: r.shared})
	if err == nil {
		err = r.b.Sync()
	}
	if err != nil {
		r.loaded, r.dirty = nil, true // the counters are unknown now: load and zero them again
		return r.explain(s, err)
	}
	return nil
}

// load puts s's stream on the device and zeroes its counters, unless it is there already.
func (r *deviceRunner) load(s *megakernel.Schedule) error {
	if s == r.loaded {
		return nil
	}
	if r.encoded == nil || !s.EncodeOver(r.host, r.encoded) {
		r.host = s.Encode()
	}
	r.encoded, r.loaded = s, nil
	if err := r.grow(&r.stream, &r.streamCap, int64(len(r.host))); err != nil {
		return err
	}
	if err := r.grow(&r.counters, &r.countersCap, int64(4*(1+len(s.Instrs)))); err != nil {
		return err
	}
	if err := r.b.Write(r.stream, r.host); err != nil {
		return err
	}
	if err := r.zeroCounters(len(s.Instrs)); err != nil {
		return err
	}
	r.loaded, r.maxParts = s, 0
	for i := range s.Instrs {
		r.maxParts = max(r.maxParts, uint32(s.Instrs[i].Parts))
	}
	return nil
}

func (r *deviceRunner) zeroCounters(n int) error {
	r.epoch = 0
	if len(r.zeros) < 4*(1+n) {
		r.zeros = make([]byte, 4*(1+n))
	}
	return r.b.Write(r.counters, r.zeros[:4*(1+n)])
}

// statusWords allocates the status words on first use and zeroes them after a failure.
func (r *deviceRunner) statusWords() error {
	const n = 4 * megakernel.StatusWords
	if r.status == 0 {
		if m, ok := r.b.(device.Mapped); ok {
			p, host, err := m.AllocMapped(n)
			if err != nil {
				return fmt.Errorf("exec: megakernel status words: %w", err)
			}
			r.status, r.statusHost, r.mapped = p, host, true
			return nil
		}
		p, err := r.b.Alloc(n)
		if err != nil {
			return fmt.Errorf("exec: megakernel status words: %w", err)
		}
		r.status = p
		return r.b.Write(p, make([]byte, n))
	}
	if !r.dirty {
		return nil
	}
	r.dirty = false
	if r.mapped {
		clear(r.statusHost)
		return nil
	}
	return r.b.Write(r.status, make([]byte, n))
}

// explain adds to a failed launch's error what the status words say, if the megakernel gave up.
func (r *deviceRunner) explain(s *megakernel.Schedule, err error) error {
	words := r.statusHost
	if !r.mapped {
		words = make([]byte, 4*megakernel.StatusWords)
		if rerr := r.b.Read(words, r.status); rerr != nil {
			return fmt.Errorf("%w (and its status words are unreadable: %v)", err, rerr)
		}
	}
	st, ok := megakernel.ParseStatus(words)
	if !ok {
		return err
	}
	return &megakernel.StallError{Status: st, Text: st.Describe(s), Err: err}
}

// grow makes *p hold at least n bytes, reallocating geometrically.
func (r *deviceRunner) grow(p *device.Ptr, capacity *int64, n int64) error {
	if n <= *capacity {
		return nil
	}
	c := max(n, 2**capacity, 4096)
	q, err := r.b.Alloc(c)
	if err != nil {
		return fmt.Errorf("exec: megakernel buffer of %d bytes: %w", c, err)
	}
	if *p != 0 {
		if err := r.b.Free(*p); err != nil {
			return err
		}
	}
	*p, *capacity = q, c
	return nil
}

// Close frees the runner's device buffers.
func (r *deviceRunner) Close() error {
	var errs []error
	for _, p := range []device.Ptr{r.stream, r.counters} {
		if p != 0 {
			errs = append(errs, r.b.Free(p))
		}
	}
	if r.status != 0 {
		if r.mapped {
			errs = append(errs, r.b.(device.Mapped).FreeMapped(r.status))
		} else {
			errs = append(errs, r.b.Free(r.status))
		}
	}
	r.stream, r.counters, r.status, r.streamCap, r.countersCap, r.loaded, r.statusHost = 0, 0, 0, 0, 0, nil, nil
	r.host, r.encoded = nil, nil
	return errors.Join(errs...)
}

// Megakernel is a Launcher that compiles each step into a megakernel stream and runs it. A
// step's schedule depends only on its launches (kernels and arguments), which for a given
// shape — rows, output rows — stay the same from step to step: the host writes what changes
// (tokens, positions, key lists) into buffers the kernels read. So schedules are kept, the
// last few, and a step whose launches equal a kept schedule's runs it again without building
// or copying anything (and the device runner finds its stream already on the device).
type Megakernel struct {
	e     *Executor
	r     MegakernelRunner
	cfg   megakernel.Config
	cache []compiled // most recently used first
	// Last is the schedule of the last step (for reports: parts, estimate).
	Last *megakernel.Schedule
	// Builds counts the schedules built (steps that found none to reuse); Patched, the
	// schedules made from a kept one whose launches differed only in their arguments.
	Builds, Patched int
	// spare is room for the instruction tables of schedules patched from the last one built,
	// allocated with it (keptSchedules−1 tables): a patch copies its table into the next one
	// instead of allocating tens of KB, which costs more than the rest of the patch where the
	// heap must grow or fault pages in for it. Each table is handed out once, never reused.
	spare []megakernel.Instr
}

// compiled is a schedule and the launches it was built from: the slice handed over, which
// neither the executor nor a launcher modifies (Launcher).
type compiled struct {
	ls    []Launch
	s     *megakernel.Schedule
	built []int // each instruction's blocks when its schedule was built (placed)
}

// keptSchedules is how many schedules a Megakernel keeps: a session alternates a few step
// shapes (a tree verify, a decode, a prefill chunk).
const keptSchedules = 8

// UseMegakernel makes e run every step as one megakernel stream on r (see SetLauncher).
func (e *Executor) UseMegakernel(r MegakernelRunner) *Megakernel {
	cfg := megakernel.Config{SMs: r.SMs()}
	if l, ok := r.(interface{ layout() (int, int) }); ok { // a device: place for its SMs
		mc := megakernel.H200
		mc.SMs, cfg.QueuesPerSM = l.layout()
		cfg.Machine = &mc
	}
	m := &Megakernel{e: e, r: r, cfg: cfg}
	e.SetLauncher(m)
	return m
}

// Close frees what the megakernel's runner holds on the device.
func (m *Megakernel) Close() error {
	if c, ok := m.r.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// LaunchStep runs the step's schedule, building it if no kept one has these launches.
func (m *Megakernel) LaunchStep(ls []Launch) error {
	s, err := m.lookup(ls)
	if err != nil {
		return err
	}
	m.Last = s
	return m.r.Run(s)
}

// lookup returns the kept schedule of launches ls, or builds and keeps one.
func (m *Megakernel) lookup(ls []Launch) (*megakernel.Schedule, error) {
	for i, c := range m.cache {
		if c.matches(ls) {
			copy(m.cache[1:i+1], m.cache[:i])
			m.cache[0] = c
			return c.s, nil
		}
	}
	c, ok := m.patch(ls)
	if ok {
		m.Patched++
	} else {
		s, err := schedule(ls, m.e.stepDistinct, m.e.packedBytes, m.cfg)
		if err != nil {
			return nil, err
		}
		m.Builds++
		m.spare = make([]megakernel.Instr, (keptSchedules-1)*len(s.Instrs))
		clear(m.spare) // its pages touched now, not by the patches
		m.spare = m.spare[:0]
		c = compiled{ls: ls, s: s, built: make([]int, len(ls))}
		for i := range s.Instrs {
			c.built[i] = s.Instrs[i].Blocks()
		}
	}
	m.keep(c)
	return c.s, nil
}

// patch makes the schedule of launches ls from a kept one whose launches run the same ops
// with the same kernels and differ only in arguments — an attention's chunk count as its key
// lists grow (every AttnChunk positions), an address after a buffer moved. Its dependencies
// and queues stay right: they come from the ops, and each instruction's parts still cut its
// grid into even shares whatever the grid's size. Only the placement, made for the block
// counts at the build, ages; so an instruction whose blocks have moved by more than a quarter
// from those and by more than a block a part (a part's share of a small grid grows by one:
// an attention whose merge is its own launch goes from the one block of no chunk to one a KV
// head), or fell below its parts, makes the step build afresh (ok false).
func (m *Megakernel) patch(ls []Launch) (c compiled, ok bool) {
next:
	for _, k := range m.cache {
		if len(k.ls) != len(ls) || k.built == nil {
			continue
		}
		for i := range ls {
			if ls[i].Kernel != k.ls[i].Kernel || ls[i].Op != k.ls[i].Op {
				continue next
			}
		}
		var s *megakernel.Schedule // a copy of k's, once an argument differs
		for i := range ls {
			if ls[i].Args == k.ls[i].Args {
				continue
			}
			if s == nil {
				cp := *k.s
				cp.Instrs = m.instrTable(len(k.s.Instrs))
				copy(cp.Instrs, k.s.Instrs)
				s = &cp
			}
			if s.Rebind(i, ls[i].Args) != nil {
				continue next
			}
			if d := abs64(int64(s.Instrs[i].Blocks() - k.built[i])); 4*d > int64(k.built[i]) && d > int64(s.Instrs[i].Parts) {
				continue next
			}
		}
		if s == nil { // the same arguments (matches would have found it)
			s = k.s
		}
		return compiled{ls: ls, s: s, built: k.built}, true
	}
	return compiled{}, false
}

// instrTable returns room for n instructions, from spare while it lasts.
func (m *Megakernel) instrTable(n int) []megakernel.Instr {
	if cap(m.spare)-len(m.spare) < n {
		m.spare = make([]megakernel.Instr, 0, (keptSchedules-1)*n)
	}
	t := m.spare[len(m.spare) : len(m.spare)+n : len(m.spare)+n]
	m.spare = m.spare[:len(m.spare)+n]
	return t
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// keep puts c first among the kept schedules, dropping the least recently used.
func (m *Megakernel) keep(c compiled) {
	if len(m.cache) < keptSchedules {
		m.cache = append(m.cache, compiled{})
	}
	copy(m.cache[1:], m.cache)
	m.cache[0] = c
}

// matches reports whether ls are the launches c was built from. Arguments are flat structs of
// numbers and addresses (device.Params), so == compares them field by field.
func (c *compiled) matches(ls []Launch) bool {
	if len(ls) != len(c.ls) {
		return false
	}
	if len(ls) > 0 && &ls[0] == &c.ls[0] {
		return true // the same slice: neither side modifies it
	}
	for i := range ls {
		if ls[i].Kernel != c.ls[i].Kernel || ls[i].Args != c.ls[i].Args {
			return false
		}
	}
	return true
}

// stepKeysRead bounds the keys op reads in a step of rows rows attending to keys keys in all: a
// sliding window reads at most its window per row.
func stepKeysRead(op *model.Op, rows, keys int) int {
	if op.Kind == model.OpAttention && op.Window > 0 {
		return min(keys, rows*op.Window)
	}
	return keys
}

// schedule compiles a step's launches for the megakernel; packed are the sizes of the
// matrices' device layouts, and keys the distinct cache slots the step's attention reads
// from memory (stepDistinct): rows that share a history read it once.
func schedule(ls []Launch, keys int, packed map[string]int64, cfg megakernel.Config) (*megakernel.Schedule, error) {
	if len(ls) == 0 {
		return nil, errors.New("megakernel: a step with no launches")
	}
	ops := make([]megakernel.Op, len(ls))
	for i, l := range ls {
		reads, writes := LaunchAccess(l)
		ops[i] = megakernel.Op{Name: l.Op.Name, Kernel: l.Kernel, Args: l.Args, Reads: reads, Writes: writes,
			Bytes: l.Op.WeightBytes + int64(l.Rows)*l.Op.BytesPerRow + int64(stepKeysRead(l.Op, l.Rows, keys))*l.Op.BytesPerKey}
		if l.Kernel == kernels.AttentionMerge {
			// the op's bytes are its first launch's; the merge reads what that launch and
			// this step's K/V stores left in the L2, and its output is the op's
			ops[i].Name += ".merge"
			ops[i].Bytes = 0
		}
		if n := packed[l.Op.Weight]; l.Op.Kind == model.OpMatVec && n > 0 { // its weights (parameter W) in row order, as its blocks are
			ops[i].Stream = &megakernel.Stream{Param: 0, Bytes: n}
		}
	}
	return megakernel.Build(ops, cfg)
}

// Schedule compiles a step of rows rows (outs of them wanting logits) whose rows attend to
// keys keys in all into a megakernel schedule, without running it (for planning and reports).
func (e *Executor) Schedule(rows, outs, keys int, cfg megakernel.Config) (*megakernel.Schedule, error) {
	if rows < 1 || rows > e.opt.MaxRows || outs < 0 || outs > rows || keys < rows {
		return nil, fmt.Errorf("exec: a step of %d rows, %d output rows and %d keys (1 … %d rows)", rows, outs, keys, e.opt.MaxRows)
	}
	was, wasShared := e.stepChunks, e.stepShared
	e.stepChunks = kernels.AttnChunks(keys/rows + rows) // about a tree's longest key list
	e.stepShared = (keys/rows - 1) / kernels.AttnChunk  // a history of keys/rows − 1 slots, its whole chunks
	ls, err := e.Lower(rows, outs)
	e.stepChunks, e.stepShared = was, wasShared
	if err != nil {
		return nil, err
	}
	// the rows taken as one tree (or prefill chunk) over a shared history: its slots and the rows'
	return schedule(ls, min(keys, keys/rows+rows), e.packedBytes, cfg)
}
