// Package exec runs a Program on any device.Backend, a kernel launch per op (the eager
// executor). With the CPU backend it is the twin executor; with the CUDA backend the eager GPU
// executor; the same lowering serves both, so their results can be compared op by op.
//
// An Executor owns the device copies of the weights, the step buffers (sized for MaxRows
// rows) and one K/V cache per attention layer of NSlots physical slots. It keeps no session
// state: which slots hold which positions is the caller's business (host/engine), passed in
// each Step. A Pipeline chains Executors that each run a range of the ops on their own
// backend (layers split across devices).
//
// Each op lowers to one kernel launch, but the attention of a step of several rows to two —
// the chunks, then their merge (lowerOp, kernels.AttentionMerge), with the same bits — in a
// megakernel's stream (Lower) and in eager steps on a backend that runs thread blocks on
// multiprocessors (a GPU, the PTX interpreter); the CPU twin's eager steps keep one. By
// default the launches run one by one; with UseMegakernel a step's launches become one
// megakernel stream (package megakernel), run by the Go VM on the CPU backend and by the
// persistent megakernel entry on a GPU or the PTX interpreter, with the same bits. Access and
// LaunchAccess say what each op and launch reads and writes, which orders the stream.
package exec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"verity/device"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/num"
	"verity/host/model"
	"verity/repack"
)

// Options size an Executor.
type Options struct {
	MaxRows int // most rows in one step (prefill chunk or tree size)
	NSlots  int // physical K/V slots per attention layer
	NStates int // recurrent state slots (models with recurrent layers)
	// Ops, if not zero, is the range [Ops[0], Ops[1]) of the Program's ops this executor runs
	// (a pipeline stage, see Pipeline): it holds only those ops' weights, caches and states.
	Ops [2]int
	// Packed holds matrices already in their repack device layout, by tensor name (a mapped
	// packed-weights file, host/packfile): New uploads these bytes instead of repacking the
	// tensor — on a backend that aliases uploads (the CPU twin), the kernels then read them
	// where they are.
	Packed map[string][]byte
}

// Executor runs a Program on a backend.
type Executor struct {
	b       device.Backend
	p       *model.Program
	opt     Options
	weights map[string]device.Ptr // GGUF bytes
	packed  map[string]device.Ptr // matrices in their repack device layout
	// packedBytes are the sizes of packed's layouts
	packedBytes map[string]int64
	bufs        []device.Ptr
	keyCap      int
	kcache      []device.Ptr
	vcache      []device.Ptr
	conv        []device.Ptr // per recurrent layer: [NStates][ConvSize] float32
	ssm         []device.Ptr // per recurrent layer: [NStates][SSMSize] float32
	lo, hi      int          // the ops run: p.Ops[lo:hi]
	ropeBuf     [][]float32
	// ropeMemo keeps each RoPE table's rows of positions 0, 1, … as steps reach them (ropeRows);
	// ropeTab is each table's rows of the current step.
	ropeMemo, ropeTab [][]float32
	closed            bool
	// launcher, if set, runs each step's launches together (SetLauncher).
	launcher Launcher
	stepKeys int // keys of all rows of the current step
	// stepDistinct is about how many cache slots the step's attention reads from memory:
	// rows of one group of kernels.AttnGroup whose key lists start at the same slot (a tree's
	// nodes, a prefill chunk's rows) share their history, read once (distinctKeys).
	stepDistinct int
	partRow      int64 // attnPartRow of the program
	// lowered keeps each step shape's launches (Lower): they depend only on the shape and on
	// the executor's allocations, which change only when the key lists grow (cleared then).
	lowered map[[4]int][]Launch // by (rows, output rows, attention chunks, shared chunks)
	scratch []int32             // the step's key lists and offsets, as written
	// Attention's scratch: each chunk's partial results (grown to the step's need) and the
	// per-row counters its kernel leaves at zero (kernels.AttentionArgs Part and Count).
	attnPart, attnCount device.Ptr
	partCap             int64 // bytes of attnPart
	stepChunks          int   // the most chunks of any row's key list in the current step
	stepShared          int   // the leading chunks every group of rows shares (kernels.AttnShared)
	// Trace, when set, is called after each op with the op and its output buffer's bytes for
	// the step's rows (for op-by-op comparison between executors).
	Trace func(op *model.Op, out []byte) error
	// BeforeOp, when set, is called with each op's index in the Program before the op is
	// launched (a step run op by op, not through a Launcher): the weight prefetcher's clock.
	BeforeOp func(i int)
	// Profile, when set, is called with each op's time: on a backend with a device.Timeline
	// (a GPU), the device time between marks recorded before and after its launch, with no
	// wait between ops (a gap while the device waits for the next launch counts to that op);
	// elsewhere, or with Trace, from its launch to the end of a sync after it (each op alone,
	// launch overhead included). Like Trace, it makes a megakernel executor run op by op.
	Profile func(op *model.Op, d time.Duration)
}

// SetProfile sets Profile (see Profiler).
func (e *Executor) SetProfile(f func(op *model.Op, d time.Duration)) { e.Profile = f }

// New uploads the program's weights and allocates its buffers and caches.
func New(b device.Backend, p *model.Program, opt Options) (*Executor, error) {
	if opt.MaxRows <= 0 || opt.NSlots <= 0 {
		return nil, fmt.Errorf("exec: MaxRows (%d) and NSlots (%d) must be positive", opt.MaxRows, opt.NSlots)
	}
	e := &Executor{b: b, p: p, opt: opt, weights: map[string]device.Ptr{}, lo: opt.Ops[0], hi: opt.Ops[1]}
	if e.lo == 0 && e.hi == 0 {
		e.hi = len(p.Ops)
	}
	if e.lo < 0 || e.lo >= e.hi || e.hi > len(p.Ops) {
		return nil, fmt.Errorf("exec: op range [%d, %d) outside the program's %d ops", e.lo, e.hi, len(p.Ops))
	}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()
	nd := needsOf(p, e.lo, e.hi)
	matrix, plain, caches, states := nd.matrix, nd.plain, nd.caches, nd.states
	e.packed, e.packedBytes = map[string]device.Ptr{}, map[string]int64{}
	for name, t := range p.Tensors {
		if !matrix[name] && !plain[name] {
			continue // not read by this executor's ops
		}
		if matrix[name] {
			pk, ok := opt.Packed[name]
			if !ok {
				p, err := repack.Pack(t.Type, t.Dims, t.Data)
				if err != nil {
					return nil, fmt.Errorf("exec: repack %s: %w", name, err)
				}
				pk = p.Data
			}
			ptr, err := b.Upload(pk)
			if err != nil {
				return nil, fmt.Errorf("exec: upload %s: %w", name, err)
			}
			e.packed[name] = ptr
			e.packedBytes[name] = int64(len(pk))
			if !plain[name] {
				continue
			}
		}
		ptr, err := b.Upload(t.Data)
		if err != nil {
			return nil, fmt.Errorf("exec: upload %s: %w", name, err)
		}
		e.weights[name] = ptr
	}
	e.bufs = make([]device.Ptr, len(p.Buffers))
	for i, bs := range p.Buffers {
		if bs.Rows == "keys" {
			continue // grown on demand
		}
		ptr, err := b.Alloc(int64(bufRows(p, bs, opt) * bs.RowBytes()))
		if err != nil {
			return nil, fmt.Errorf("exec: allocate %s: %w", bs.Name, err)
		}
		e.bufs[i] = ptr
	}
	if err := e.growKeys(opt.MaxRows * 64); err != nil {
		return nil, err
	}
	e.kcache, e.vcache = make([]device.Ptr, p.CacheLayers), make([]device.Ptr, p.CacheLayers)
	for l := 0; l < p.CacheLayers; l++ {
		if !caches[l] {
			continue
		}
		for _, c := range []struct {
			p *device.Ptr
			t dtype.Type
		}{{&e.kcache[l], p.CacheK}, {&e.vcache[l], p.CacheV}} {
			ptr, err := b.Alloc(int64(opt.NSlots) * int64(p.KVDim) * int64(c.t.BlockBytes()))
			if err != nil {
				return nil, fmt.Errorf("exec: allocate KV cache layer %d (%d slots): %w", l, opt.NSlots, err)
			}
			*c.p = ptr
		}
	}
	if len(caches) > 0 {
		ptr, err := b.Alloc(int64(attnCounters(p, opt)) * 4)
		if err != nil {
			return nil, fmt.Errorf("exec: allocate attention counters: %w", err)
		}
		e.attnCount, e.partRow = ptr, attnPartRow(p)
		if err := e.growPart(int64(opt.MaxRows) * e.partRow * 2); err != nil {
			return nil, err
		}
	}
	if p.StateLayers > 0 {
		if opt.NStates <= 0 {
			return nil, fmt.Errorf("exec: the model has recurrent layers: NStates must be positive")
		}
		e.conv, e.ssm = make([]device.Ptr, p.StateLayers), make([]device.Ptr, p.StateLayers)
		for l := 0; l < p.StateLayers; l++ {
			if !states[l] {
				continue
			}
			cs, err := b.Alloc(int64(opt.NStates) * int64(p.GDN.ConvSize) * 4)
			if err != nil {
				return nil, fmt.Errorf("exec: allocate conv state layer %d (%d slots): %w", l, opt.NStates, err)
			}
			e.conv[l] = cs
			ss, err := b.Alloc(int64(opt.NStates) * int64(p.GDN.SSMSize) * 4)
			if err != nil {
				return nil, fmt.Errorf("exec: allocate SSM state layer %d (%d slots): %w", l, opt.NStates, err)
			}
			e.ssm[l] = ss
		}
	}
	ok = true
	return e, nil
}

// needs is what the ops p.Ops[lo:hi] read beyond the step buffers. Matrices that matvec
// kernels read go up in their device layout (repack); every other use of a tensor (embedding
// rows, norm weights, conv kernels) reads the GGUF bytes. A tied output matrix is both, so it
// is uploaded twice.
type needs struct {
	matrix, plain  map[string]bool // tensors by name
	caches, states map[int]bool    // K/V cache layers, recurrent state layers
}

func needsOf(p *model.Program, lo, hi int) needs {
	nd := needs{map[string]bool{}, map[string]bool{}, map[int]bool{}, map[int]bool{}}
	for _, op := range p.Ops[lo:hi] {
		switch op.Kind {
		case model.OpKVStore, model.OpAttention:
			nd.caches[op.Layer] = true
		case model.OpGDNConv, model.OpGDNScan:
			nd.states[op.Layer] = true
		}
		switch op.Kind {
		case model.OpMatVec, model.OpMoEMatVec, model.OpMoEDown:
			nd.matrix[op.Weight] = true
			continue
		case model.OpMoEGateUp:
			nd.matrix[op.Weight], nd.matrix[op.Weight2] = true, true
			continue
		}
		for _, w := range []string{op.Weight, op.Weight2} {
			if w != "" {
				nd.plain[w] = true
			}
		}
	}
	return nd
}

// Matrices lists the tensors the ops p.Ops[lo:hi] read as matrices (uploaded in their repack
// device layout, see Options.Packed), each once, in the order the ops first read them.
func Matrices(p *model.Program, lo, hi int) []string {
	seen := map[string]bool{}
	var out []string
	for _, op := range p.Ops[lo:hi] {
		var ws []string
		switch op.Kind {
		case model.OpMatVec, model.OpMoEMatVec, model.OpMoEDown:
			ws = []string{op.Weight}
		case model.OpMoEGateUp:
			ws = []string{op.Weight, op.Weight2}
		}
		for _, w := range ws {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}

// Memory returns the bytes New(b, p, opt) allocates and uploads: the weights of the ops it
// runs (matrices in device layout), its step buffers with the initial key lists, and its
// K/V caches and recurrent states. Pipeline planning (package split) sizes stages with it.
func Memory(p *model.Program, opt Options) (int64, error) {
	lo, hi := opt.Ops[0], opt.Ops[1]
	if lo == 0 && hi == 0 {
		hi = len(p.Ops)
	}
	if lo < 0 || lo >= hi || hi > len(p.Ops) {
		return 0, fmt.Errorf("exec: op range [%d, %d) outside the program's %d ops", lo, hi, len(p.Ops))
	}
	nd := needsOf(p, lo, hi)
	var n int64
	for name, t := range p.Tensors {
		if nd.matrix[name] {
			l, err := repack.NewLayout(t.Type, t.Dims)
			if err != nil {
				return 0, err
			}
			n += l.Size()
		}
		if nd.plain[name] {
			n += int64(len(t.Data))
		}
	}
	for _, bs := range p.Buffers {
		n += int64(bufRows(p, bs, opt) * bs.RowBytes())
	}
	n += int64(len(nd.caches)) * int64(opt.NSlots) * int64(p.KVDim) * int64(p.CacheK.BlockBytes()+p.CacheV.BlockBytes())
	if len(nd.caches) > 0 {
		n += int64(attnCounters(p, opt))*4 + int64(opt.MaxRows)*attnPartRow(p)*2
	}
	n += int64(len(nd.states)) * int64(opt.NStates) * int64(p.GDN.ConvSize+p.GDN.SSMSize) * 4
	return n, nil
}

// CacheBytes returns the bytes of the K/V caches New allocates for opt: every attention layer's
// keys and values, at the program's cache types.
func CacheBytes(p *model.Program, opt Options) int64 {
	lo, hi := opt.Ops[0], opt.Ops[1]
	if lo == 0 && hi == 0 || lo < 0 || lo >= hi || hi > len(p.Ops) {
		lo, hi = 0, len(p.Ops)
	}
	nd := needsOf(p, lo, hi)
	return int64(len(nd.caches)) * int64(opt.NSlots) * int64(p.KVDim) * int64(p.CacheK.BlockBytes()+p.CacheV.BlockBytes())
}

// attnCounters is the number of attention counters (kernels.AttentionArgs.Count) for opt: one
// per row and KV head of the widest attention.
func attnCounters(p *model.Program, opt Options) int {
	n := 1
	for _, op := range p.Ops {
		if op.Kind == model.OpAttention {
			n = max(n, op.KVHeads)
		}
	}
	return opt.MaxRows * n
}

// distinctKeys is about how many cache slots the attention of rows with key lists keys reads
// from memory: within each group of kernels.AttnGroup rows, the rows whose lists start at the same
// slot are taken to share their keys (the longest of them counted once), as the kernel shares
// a chunk between rows that hold the same slots; other rows count whole.
func distinctKeys(keys [][]int32) int {
	n := 0
	for g := 0; g < len(keys); g += kernels.AttnGroup {
		var first [kernels.AttnGroup]int32
		var longest [kernels.AttnGroup]int
		m := 0
		for _, k := range keys[g:min(g+kernels.AttnGroup, len(keys))] {
			if len(k) == 0 {
				continue
			}
			i := 0
			for i < m && first[i] != k[0] {
				i++
			}
			if i == m {
				first[i], m = k[0], m+1
			}
			longest[i] = max(longest[i], len(k))
		}
		for _, l := range longest[:m] {
			n += l
		}
	}
	return n
}

// attnPartRow is the bytes of one chunk's partial results of one row, for the widest
// attention (kernels.AttentionArgs.Part).
func attnPartRow(p *model.Program) int64 {
	var n int64
	for _, op := range p.Ops {
		if op.Kind == model.OpAttention {
			n = max(n, int64(op.Heads)*int64(kernels.AttnPartWords(op.HeadDim))*4)
		}
	}
	return n
}

// growPart makes the attention partials hold at least n bytes, growing geometrically.
func (e *Executor) growPart(n int64) error {
	if n <= e.partCap {
		return nil
	}
	n = max(n, 2*e.partCap)
	ptr, err := e.b.Alloc(n)
	if err != nil {
		return fmt.Errorf("exec: allocate attention partials (%d bytes): %w", n, err)
	}
	if e.attnPart != 0 {
		if err := e.b.Free(e.attnPart); err != nil {
			e.b.Free(ptr)
			return err
		}
	}
	e.attnPart, e.partCap = ptr, n
	clear(e.lowered) // the attention launches name the partials
	return nil
}

// bufRows is the number of rows New allocates for step buffer bs.
func bufRows(p *model.Program, bs model.BufSpec, opt Options) int {
	switch bs.Rows {
	case "keys":
		return opt.MaxRows * 64 // grown on demand from here
	case "keyoff":
		return opt.MaxRows + 1
	case "moe":
		return opt.MaxRows * p.Used
	}
	return opt.MaxRows
}

// ClearState zeroes recurrent state slot s (the state of an empty sequence).
func (e *Executor) ClearState(s int32) error {
	if s < 0 || int(s) >= e.opt.NStates {
		return fmt.Errorf("exec: state slot %d outside %d", s, e.opt.NStates)
	}
	for l := range e.conv {
		if e.conv[l] == 0 {
			continue // a layer of another pipeline stage
		}
		for _, c := range []struct {
			p    device.Ptr
			size int
		}{{e.conv[l], e.p.GDN.ConvSize}, {e.ssm[l], e.p.GDN.SSMSize}} {
			if err := e.b.Write(c.p+device.Ptr(int64(s)*int64(c.size)*4), make([]byte, 4*c.size)); err != nil {
				return err
			}
		}
	}
	return nil
}

// CopyState copies recurrent state slot src to dst.
func (e *Executor) CopyState(dst, src int32) error {
	if src < 0 || int(src) >= e.opt.NStates || dst < 0 || int(dst) >= e.opt.NStates {
		return fmt.Errorf("exec: state slots %d, %d outside %d", src, dst, e.opt.NStates)
	}
	for l := range e.conv {
		if e.conv[l] == 0 {
			continue // a layer of another pipeline stage
		}
		for _, c := range []struct {
			p    device.Ptr
			size int
		}{{e.conv[l], e.p.GDN.ConvSize}, {e.ssm[l], e.p.GDN.SSMSize}} {
			buf := make([]byte, 4*c.size)
			if err := e.b.Read(buf, c.p+device.Ptr(int64(src)*int64(c.size)*4)); err != nil {
				return err
			}
			if err := e.b.Write(c.p+device.Ptr(int64(dst)*int64(c.size)*4), buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// growKeys makes the key-list buffer hold at least n keys, growing it geometrically (steps'
// key counts rise with every position; a reallocation synchronises a GPU). The new buffer is
// allocated before the old one is freed, so a failure leaves the old one in place.
func (e *Executor) growKeys(n int) error {
	if n <= e.keyCap {
		return nil
	}
	n = max(n, 2*e.keyCap)
	ptr, err := e.b.Alloc(int64(n) * 4)
	if err != nil {
		return fmt.Errorf("exec: allocate key lists (%d keys): %w", n, err)
	}
	if old := e.bufs[e.p.Keys]; old != 0 {
		if err := e.b.Free(old); err != nil {
			e.b.Free(ptr)
			return err
		}
	}
	e.bufs[e.p.Keys], e.keyCap = ptr, n
	clear(e.lowered) // the launches that read the key lists change
	return nil
}

// Program returns the program being executed.
func (e *Executor) Program() *model.Program { return e.p }

// Backend returns the backend.
func (e *Executor) Backend() device.Backend { return e.b }

// Options returns the sizes the executor was built with.
func (e *Executor) Options() Options { return e.opt }

// Close frees everything on the device.
func (e *Executor) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	if m, ok := e.launcher.(*Megakernel); ok {
		errs = append(errs, m.Close())
	}
	free := func(p device.Ptr) {
		if p != 0 {
			errs = append(errs, e.b.Free(p))
		}
	}
	for _, p := range e.weights {
		free(p)
	}
	for _, p := range e.packed {
		free(p)
	}
	for _, p := range e.bufs {
		free(p)
	}
	for _, p := range e.kcache {
		free(p)
	}
	for _, p := range e.vcache {
		free(p)
	}
	free(e.attnPart)
	free(e.attnCount)
	for _, p := range e.conv {
		free(p)
	}
	for _, p := range e.ssm {
		free(p)
	}
	return errors.Join(errs...)
}

// Step is one pass of the program over a batch of rows.
type Step struct {
	Tokens  []int32   // token per row
	Pos     []int32   // position per row (RoPE)
	Slots   []int32   // physical cache slot each row's K and V are written to
	Keys    [][]int32 // per row: the cache slots it attends to, in logical order (its own slot last)
	OutRows []int32   // rows whose logits are wanted, in output order
	// Recurrent models: each row continues the state in slot StateSrc[r] and leaves its own
	// in StateDst[r]. Rows run in order, so a row may read the slot an earlier row wrote
	// (a prefill chunk chains its rows through one slot; a tree node reads its parent's).
	StateSrc, StateDst []int32
}

// check refuses a malformed step with the first of its faults in this order: the row count
// and the fields' lengths; row by row, its token, position, slot, and key list (not empty,
// every key a slot of the cache); the state slots; the output rows. With keys false it does
// not look at the keys' slots, which the caller must then validate before using them
// (writeInputs does as it gathers them, and reports keyError's error, which is check's); its
// error is still a full check's: before a fault it found it reports a bad key of an earlier
// row, if any.
func (s *Step) check(p *model.Program, opt Options, keys bool) error {
	at, err := s.fault(p, opt, keys)
	if err != nil && !keys {
		if kerr := keyError(s.Keys[:at], 0, opt.NSlots); kerr != nil {
			return kerr
		}
	}
	return err
}

// fault is check's first fault, with the number of rows whose keys come before it.
func (s *Step) fault(p *model.Program, opt Options, keys bool) (int, error) {
	n := len(s.Tokens)
	if n == 0 || n > opt.MaxRows {
		return 0, fmt.Errorf("exec: step of %d rows (1…%d allowed)", n, opt.MaxRows)
	}
	if len(s.Pos) != n || len(s.Slots) != n || len(s.Keys) != n {
		return 0, fmt.Errorf("exec: step has %d tokens but %d positions, %d slots, %d key lists", n, len(s.Pos), len(s.Slots), len(s.Keys))
	}
	for r, t := range s.Tokens {
		if t < 0 || int(t) >= p.Config.NVocab {
			return r, fmt.Errorf("exec: row %d: token %d outside vocabulary of %d", r, t, p.Config.NVocab)
		}
		if s.Pos[r] < 0 {
			return r, fmt.Errorf("exec: row %d: negative position %d", r, s.Pos[r])
		}
		if s.Slots[r] < 0 || int(s.Slots[r]) >= opt.NSlots {
			return r, fmt.Errorf("exec: row %d: slot %d outside cache of %d", r, s.Slots[r], opt.NSlots)
		}
		if len(s.Keys[r]) == 0 {
			return r, fmt.Errorf("exec: row %d attends to no keys", r)
		}
		if keys {
			if err := keyError(s.Keys[r:r+1], r, opt.NSlots); err != nil {
				return r, err
			}
		}
	}
	if p.StateLayers > 0 {
		if len(s.StateSrc) != n || len(s.StateDst) != n {
			return n, fmt.Errorf("exec: step of %d rows has %d source and %d destination state slots", n, len(s.StateSrc), len(s.StateDst))
		}
		for r := 0; r < n; r++ {
			if s.StateSrc[r] < 0 || int(s.StateSrc[r]) >= opt.NStates || s.StateDst[r] < 0 || int(s.StateDst[r]) >= opt.NStates {
				return n, fmt.Errorf("exec: row %d: state slots %d → %d outside %d", r, s.StateSrc[r], s.StateDst[r], opt.NStates)
			}
		}
	}
	if len(s.OutRows) > n {
		return n, fmt.Errorf("exec: %d output rows for a step of %d", len(s.OutRows), n)
	}
	for _, r := range s.OutRows {
		if r < 0 || int(r) >= n {
			return n, fmt.Errorf("exec: output row %d outside step of %d", r, n)
		}
	}
	return n, nil
}

// Run executes one step and returns the logits of the output rows, [len(OutRows)][NVocab].
func (e *Executor) Run(s Step) ([]float32, error) {
	if err := e.Launch(s); err != nil {
		return nil, err
	}
	outs := len(s.OutRows)
	if outs == 0 || e.hi < len(e.p.Ops) { // no output rows, or an earlier pipeline stage
		return nil, e.b.Sync()
	}
	logits := make([]float32, outs*e.p.Config.NVocab)
	if err := e.ReadLogits(logits); err != nil {
		return nil, err
	}
	return logits, nil
}

// ReadLogits reads the last step's logits, len(dst)/NVocab output rows of them.
func (e *Executor) ReadLogits(dst []float32) error {
	return e.b.Read(device.F32Bytes(dst), e.bufs[e.p.Logits])
}

// Logits is the device buffer the last step's logits are in, [output rows][NVocab] float32.
func (e *Executor) Logits() device.Ptr { return e.bufs[e.p.Logits] }

// Launch executes one step, leaving its logits on the device (Logits, ReadLogits); on a
// backend that runs asynchronously they may still be being computed.
func (e *Executor) Launch(s Step) error {
	if e.closed {
		return errors.New("exec: executor is closed")
	}
	if err := s.check(e.p, e.opt, false); err != nil { // the keys' slots: writeInputs
		return err
	}
	if err := e.writeInputs(&s); err != nil {
		return err
	}
	rows, outs := len(s.Tokens), len(s.OutRows)
	byOp := e.Trace != nil || e.Profile != nil
	if e.launcher != nil && !byOp {
		if err := e.runLauncher(rows, outs); err != nil {
			return err
		}
	}
	// A profile times each op on the device's timeline where the backend has one (events
	// recorded between launches: no wait between ops), else from its launch to a sync after it.
	var tl device.Timeline
	var marks []device.Mark
	var timed []*model.Op
	if e.Profile != nil {
		if err := e.b.Sync(); err != nil { // the inputs' copies are not the first op's time
			return err
		}
		if t, ok := e.b.(device.Timeline); ok && e.Trace == nil {
			m, err := t.Mark()
			if err != nil {
				return err
			}
			tl, marks = t, []device.Mark{m}
			defer func() { tl.ReleaseMarks(marks...) }()
		}
	}
	for i := e.lo; i < e.hi && (e.launcher == nil || byOp); i++ {
		op := &e.p.Ops[i]
		if outs == 0 && e.outStage(op) {
			continue
		}
		if e.BeforeOp != nil {
			e.BeforeOp(i)
		}
		start := time.Now()
		ls, err := e.eagerLaunches(i, rows, outs)
		if err != nil {
			return err
		}
		for _, l := range ls {
			if err == nil {
				err = e.b.Launch(l.Kernel, l.Args)
			}
		}
		switch {
		case err == nil && tl != nil:
			var m device.Mark
			if m, err = tl.Mark(); err == nil {
				marks, timed = append(marks, m), append(timed, op)
			}
		case err == nil && e.Profile != nil:
			if err = e.b.Sync(); err == nil {
				e.Profile(op, time.Since(start))
			}
		}
		if err != nil {
			return fmt.Errorf("exec: op %d %s (%s): %w", i, op.Name, op.Kind, err)
		}
		if e.Trace != nil {
			buf := make([]byte, e.opRows(op, rows, outs)*e.p.Buffers[op.Out].RowBytes())
			if err := e.b.Read(buf, e.bufs[op.Out]); err != nil {
				return err
			}
			if err := e.Trace(op, buf); err != nil {
				return err
			}
		}
	}
	for i, op := range timed {
		d, err := tl.Elapsed(marks[i], marks[i+1])
		if err != nil {
			return fmt.Errorf("exec: timing %s: %w", op.Name, err)
		}
		e.Profile(op, d)
	}
	return nil
}

// Launch is one kernel launch of a step: the op it computes and what it lowers to.
type Launch struct {
	Index  int       // the op's index in the Program
	Op     *model.Op // the op
	Rows   int       // rows the op runs on in this step (step rows, output rows, or routed slots)
	Kernel device.Spec
	Args   any
}

// Launcher runs all the launches of a step together — the megakernel: one persistent launch
// interpreting them as an instruction stream — instead of one backend launch per op. The
// launches are in program order and each must see the memory every earlier one left, as if
// run one by one. A step of the same shape as an earlier one may hand over the very same
// slice again (the executor keeps them, and does not modify one it has handed over): a
// launcher must not modify it either.
type Launcher interface {
	LaunchStep(ls []Launch) error
}

// SetLauncher makes Run hand each step's launches to l (nil: launch op by op). A step with a
// Trace set still runs op by op, so that each op's output can be read.
func (e *Executor) SetLauncher(l Launcher) { e.launcher = l }

// Lower returns the launches of a step of rows rows and outs output rows, in program order.
func (e *Executor) Lower(rows, outs int) ([]Launch, error) {
	ls := make([]Launch, 0, e.hi-e.lo)
	for i := e.lo; i < e.hi; i++ {
		op := &e.p.Ops[i]
		if outs == 0 && e.outStage(op) {
			continue
		}
		var err error
		if ls, err = e.lowerOp(ls, i, rows, outs); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// eagerLaunches is op i's launches run one by one: on a backend that runs thread blocks on
// multiprocessors (a GPU, the PTX interpreter) an attention's merge spread over a launch of its
// own as the megakernel's is (lowerOp), on the CPU the one launch whose twin merges each row as
// it goes.
func (e *Executor) eagerLaunches(i, rows, outs int) ([]Launch, error) {
	if _, sms := e.b.(multiprocessors); sms {
		return e.lowerOp(nil, i, rows, outs)
	}
	op := &e.p.Ops[i]
	k, args, err := e.lower(op, rows, outs)
	if err != nil {
		return nil, fmt.Errorf("exec: op %d %s (%s): %w", i, op.Name, op.Kind, err)
	}
	return []Launch{{Index: i, Op: op, Rows: e.opRows(op, rows, outs), Kernel: k, Args: args}}, nil
}

// lowerOp appends op i's launches to ls: one, or for an attention of several rows two — the
// chunks, their merge deferred, then the merge (AttentionMerge) on a block per row and KV
// head, with each row's own last chunk. Rows that share chunks (a tree's nodes over their
// history, AttentionArgs.Shared) would otherwise merge on one block per group of rows and KV
// head, every row's partial results read by one SM, at the end of the launch; the split
// depends on the rows alone, so that a kept schedule's launches stay the same as the shared
// chunks come and go.
func (e *Executor) lowerOp(ls []Launch, i, rows, outs int) ([]Launch, error) {
	op := &e.p.Ops[i]
	k, args, err := e.lower(op, rows, outs)
	if err != nil {
		return nil, fmt.Errorf("exec: op %d %s (%s): %w", i, op.Name, op.Kind, err)
	}
	n := e.opRows(op, rows, outs)
	if a, ok := args.(kernels.AttentionArgs); ok && a.Rows > 1 {
		a.DeferMerge = 1
		return append(ls, Launch{Index: i, Op: op, Rows: n, Kernel: k, Args: a},
			Launch{Index: i, Op: op, Rows: n, Kernel: kernels.AttentionMerge, Args: a}), nil
	}
	return append(ls, Launch{Index: i, Op: op, Rows: n, Kernel: k, Args: args}), nil
}

func (e *Executor) runLauncher(rows, outs int) error {
	shape := [4]int{rows, outs, e.stepChunks, e.stepShared}
	ls, ok := e.lowered[shape]
	if !ok {
		var err error
		if ls, err = e.lowerShape(shape); err != nil {
			return err
		}
		if e.lowered == nil {
			e.lowered = map[[4]int][]Launch{}
		}
		e.lowered[shape] = ls
	}
	if err := e.launcher.LaunchStep(ls); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}

// lowerShape is the launches of a launcher's step of shape (rows, output rows, attention
// chunks, shared chunks) for the current step. Only the attention's launches depend on the
// chunk counts, so when a kept shape differs from it in those alone its launches are copied and the
// attention's lowered again — a step's dozens of attention launches in place of its hundreds
// (a new chunk count comes every AttnChunk positions). The copy shares the other launches'
// arguments, which a launcher compares with its kept ones.
func (e *Executor) lowerShape(shape [4]int) ([]Launch, error) {
	rows, outs := shape[0], shape[1]
	for k, kept := range e.lowered {
		if k[0] != rows || k[1] != outs {
			continue
		}
		ls := slices.Clone(kept)
		for i := 0; i < len(ls); {
			l := ls[i]
			j := i + 1 // the op's launches: i … j−1
			for j < len(ls) && ls[j].Index == l.Index {
				j++
			}
			if l.Op.Kind == model.OpAttention {
				now, err := e.lowerOp(nil, l.Index, rows, outs)
				if err != nil {
					return nil, err
				}
				if len(now) != j-i { // the merge deferred in one and not the other
					return e.Lower(rows, outs)
				}
				copy(ls[i:j], now)
			}
			i = j
		}
		return ls, nil
	}
	return e.Lower(rows, outs)
}

// attnOutAct is the element type attention writes into buffer b: its activations' format if
// the attention was fused with their conversion (model's fuseAttentionConvert), else float32.
func attnOutAct(b model.BufSpec) kernels.Act {
	if b.Kind == model.ActBuf {
		return b.Act
	}
	return kernels.ActF32
}

// sharedFor is the shared chunks of the step's attention op (AttentionArgs.Shared): none for a
// sliding window, whose rows' windows start at different slots of a tree's history, or at the
// same slot only where the rows are the same.
func (e *Executor) sharedFor(op *model.Op) int {
	if op.Window > 0 {
		return 0
	}
	return e.stepShared
}

// opRows is the number of rows op computes in a step.
func (e *Executor) opRows(op *model.Op, rows, outs int) int {
	switch e.p.Buffers[op.Out].Rows {
	case "out":
		return outs
	case "moe":
		return rows * e.p.Used
	}
	return rows
}

// Buffer is the device address of program buffer b (0 if the executor holds none).
func (e *Executor) Buffer(b model.Buf) device.Ptr { return e.bufs[b] }

// outStage reports whether op belongs to the head (runs on output rows only).
func (e *Executor) outStage(op *model.Op) bool { return e.p.Buffers[op.Out].Rows == "out" }

// writeInputs writes step s's inputs to the device. It first gathers the rows' key lists
// into one (the scratch, a staging copy and nothing else) and validates their slots in the
// same pass: a step with a bad key is refused with Step.check's error before anything is
// written or allocated on the device, or recorded of the step, so nothing of it is launched
// and the executor is as it was.
func (e *Executor) writeInputs(s *Step) error {
	p, b := e.p, e.b
	total, chunks := 0, 1
	for _, k := range s.Keys {
		total += len(k)
		chunks = max(chunks, kernels.AttnChunks(len(k)))
	}
	need := total + len(s.Keys) + 1
	if cap(e.scratch) < need {
		e.scratch = make([]int32, need)
	}
	keys, off := e.scratch[:total], e.scratch[total:need]
	off[0] = 0
	for r, k := range s.Keys { // the rows' key lists one after another, and where each starts
		if !copyKeys(keys[off[r]:], k, e.opt.NSlots) {
			return keyError(s.Keys[r:r+1], r, e.opt.NSlots)
		}
		off[r+1] = off[r] + int32(len(k))
	}
	if err := b.Write(e.bufs[p.Tokens], device.I32Bytes(s.Tokens)); err != nil {
		return err
	}
	if err := b.Write(e.bufs[p.Slots], device.I32Bytes(s.Slots)); err != nil {
		return err
	}
	e.stepKeys, e.stepChunks, e.stepDistinct = total, chunks, distinctKeys(s.Keys)
	e.stepShared = kernels.AttnShared(s.Keys, 0)
	if err := e.growKeys(total); err != nil {
		return err
	}
	if e.attnCount != 0 {
		if err := e.growPart(int64(len(s.Keys)) * int64(chunks) * e.partRow); err != nil {
			return err
		}
	}
	if err := b.Write(e.bufs[p.Keys], device.I32Bytes(keys)); err != nil {
		return err
	}
	if err := b.Write(e.bufs[p.KeyOff], device.I32Bytes(off)); err != nil {
		return err
	}
	if len(s.OutRows) > 0 {
		if err := b.Write(e.bufs[p.OutRows], device.I32Bytes(s.OutRows)); err != nil {
			return err
		}
	}
	if p.StateLayers > 0 {
		if err := b.Write(e.bufs[p.StateSrc], device.I32Bytes(s.StateSrc)); err != nil {
			return err
		}
		if err := b.Write(e.bufs[p.StateDst], device.I32Bytes(s.StateDst)); err != nil {
			return err
		}
	}
	for i, t := range p.Ropes {
		if err := b.Write(e.bufs[t.Buf], device.F32Bytes(e.ropeRows(i, s.Pos))); err != nil {
			return err
		}
	}
	return nil
}

// ropeMemoPositions bounds the positions whose RoPE rows an executor keeps (per table: 64
// positions of 128 pairs take 64 KiB).
const ropeMemoPositions = 1 << 16

// ropeRows is RoPE table i's rows for positions pos (RopeTable.Fill's), from rows kept per
// position: each is computed once, in blocks of 256 positions as the steps reach them.
func (e *Executor) ropeRows(i int, pos []int32) []float32 {
	t := e.p.Ropes[i]
	if len(e.ropeMemo) != len(e.p.Ropes) {
		e.ropeMemo, e.ropeTab = make([][]float32, len(e.p.Ropes)), make([][]float32, len(e.p.Ropes))
	}
	tab := e.ropeTab[i][:0]
	for _, p := range pos {
		if p < 0 || p >= ropeMemoPositions {
			row := make([]float32, t.NRot)
			t.Fill(row, []int32{p})
			tab = append(tab, row...)
			continue
		}
		memo := e.ropeMemo[i]
		if have := int32(len(memo) / t.NRot); p >= have {
			const block = 256
			to := min((p/block+1)*block, ropeMemoPositions)
			ps := make([]int32, to-have)
			for j := range ps {
				ps[j] = have + int32(j)
			}
			memo = slices.Grow(memo, len(ps)*t.NRot)[:int(to)*t.NRot]
			t.Fill(memo[int(have)*t.NRot:], ps)
			e.ropeMemo[i] = memo
		}
		tab = append(tab, memo[int(p)*t.NRot:int(p+1)*t.NRot]...)
	}
	e.ropeTab[i] = tab
	return tab
}

// lower gives the kernel and arguments that compute op for a step of rows rows and outs
// output rows.
func (e *Executor) lower(op *model.Op, rows, outs int) (device.Spec, any, error) {
	p := e.p
	n := e.opRows(op, rows, outs)
	in := func(i int) device.Ptr { return e.bufs[op.In[i]] }
	out := e.bufs[op.Out]
	switch op.Kind {
	case model.OpEmbed:
		t := p.Tensors[op.Weight]
		k, err := kernels.Embed(t.Type)
		if err != nil {
			return nil, nil, err
		}
		return k, kernels.EmbedArgs{Table: e.weights[op.Weight], Tokens: in(0), Out: out,
			Rows: int32(n), Cols: int32(op.Cols), Vocab: int32(t.Dims[1])}, nil
	case model.OpRMSNorm:
		if bs := p.Buffers[op.Out]; bs.Kind == model.ActBuf { // fused with the conversion
			k, err := kernels.RMSNormAct(bs.Act)
			if err != nil {
				return nil, nil, err
			}
			return k, kernels.RMSNormActArgs{X: in(0), W: e.weights[op.Weight], Out: out,
				Rows: int32(n), Width: int32(op.Width), Eps: op.Eps}, nil
		}
		return kernels.RMSNorm, kernels.RMSNormArgs{X: in(0), W: e.weights[op.Weight], Y: out,
			Groups: int32(n * op.Groups), Width: int32(op.Width), Eps: op.Eps}, nil
	case model.OpConvert:
		bs := p.Buffers[op.Out]
		return kernels.Convert(bs.Act), kernels.ConvertArgs{X: in(0), Out: out, Cols: int32(bs.Width), N: int32(n)}, nil
	case model.OpMatVec:
		t := p.Tensors[op.Weight]
		k, err := kernels.MatVecFor(t.Type, n)
		if err != nil {
			return nil, nil, err
		}
		acc := int32(0)
		if op.Acc {
			acc = 1
		}
		return k, kernels.MatVecArgs{W: e.packed[op.Weight], X: in(0), Y: out,
			Rows: int32(op.Rows), Cols: int32(op.Cols), N: int32(n), Acc: acc}, nil
	case model.OpRope:
		return kernels.Rope, kernels.RopeArgs{X: in(0), CosSin: in(1), Rows: int32(n),
			Heads: int32(op.Heads), HeadDim: int32(op.HeadDim), NRot: int32(op.NRot), Mode: op.RopeMode}, nil
	case model.OpKVStore:
		if len(op.In) == 3 { // the keys' RoPE fused in
			return kernels.RopeKVStore, kernels.RopeKVStoreArgs{K: in(0), V: in(1), CosSin: in(2), Slots: e.bufs[p.Slots],
				KCache: e.kcache[op.Layer], VCache: e.vcache[op.Layer], Rows: int32(n), KVDim: int32(p.KVDim), NSlots: int32(e.opt.NSlots),
				Heads: int32(op.Heads), HeadDim: int32(op.HeadDim), NRot: int32(op.NRot), Mode: op.RopeMode,
				KType: int32(p.CacheK), VType: int32(p.CacheV)}, nil
		}
		return kernels.KVStore, kernels.KVStoreArgs{K: in(0), V: in(1), Slots: e.bufs[p.Slots],
			KCache: e.kcache[op.Layer], VCache: e.vcache[op.Layer], Rows: int32(n), KVDim: int32(p.KVDim), NSlots: int32(e.opt.NSlots),
			KType: int32(p.CacheK), VType: int32(p.CacheV)}, nil
	case model.OpAttention:
		return kernels.Attention, kernels.AttentionArgs{Q: in(0), KCache: e.kcache[op.Layer], VCache: e.vcache[op.Layer],
			Keys: e.bufs[p.Keys], KeyOff: e.bufs[p.KeyOff], Out: out, Part: e.attnPart, Count: e.attnCount,
			Rows: int32(n), NHead: int32(op.Heads), NKV: int32(op.KVHeads), HeadDim: int32(op.HeadDim),
			NSlots: int32(e.opt.NSlots), Chunks: int32(max(1, e.stepChunks)), KType: int32(p.CacheK), VType: int32(p.CacheV),
			Scale: op.Scale, Window: int32(op.Window), SoftCap: op.SoftCap, Shared: int32(e.sharedFor(op)),
			OutAct: int32(attnOutAct(p.Buffers[op.Out]))}, nil
	case model.OpBias:
		return kernels.AddBias, kernels.BiasArgs{X: in(0), Bias: e.weights[op.Weight], Y: out, Rows: int32(n), Width: int32(op.Width)}, nil
	case model.OpAdd:
		return kernels.Add, kernels.BinaryArgs{A: in(0), B: in(1), Y: out, N: int32(n * p.Buffers[op.Out].Width)}, nil
	case model.OpSwiGLU, model.OpSigmoidMul, model.OpGeGLU:
		if bs := p.Buffers[op.Out]; bs.Kind == model.ActBuf { // fused with the conversion
			fused := map[model.OpKind]func(kernels.Act) (*device.Kernel[kernels.BinaryActArgs], error){
				model.OpSwiGLU: kernels.SwiGLUAct, model.OpSigmoidMul: kernels.SigmoidMulAct, model.OpGeGLU: kernels.GeGLUAct,
			}[op.Kind]
			k, err := fused(bs.Act)
			if err != nil {
				return nil, nil, err
			}
			return k, kernels.BinaryActArgs{A: in(0), B: in(1), Out: out, Rows: int32(n), Width: int32(op.Width)}, nil
		}
		k := map[model.OpKind]*device.Kernel[kernels.BinaryArgs]{
			model.OpSwiGLU: kernels.SwiGLU, model.OpSigmoidMul: kernels.SigmoidMul, model.OpGeGLU: kernels.GeGLU,
		}[op.Kind]
		return k, kernels.BinaryArgs{A: in(0), B: in(1), Y: out, N: int32(n * p.Buffers[op.Out].Width)}, nil
	case model.OpScale:
		return kernels.Scale, kernels.UnaryArgs{X: in(0), Y: out, N: int32(n * p.Buffers[op.Out].Width), C: op.Scale}, nil
	case model.OpSoftCap:
		return kernels.SoftCap, kernels.UnaryArgs{X: in(0), Y: out, N: int32(n * p.Buffers[op.Out].Width), C: op.SoftCap}, nil
	case model.OpGather:
		return kernels.Gather, kernels.GatherArgs{X: in(0), Idx: in(1), Out: out,
			Rows: int32(n), Width: int32(p.Buffers[op.Out].Width), SrcRows: int32(rows)}, nil
	case model.OpSplitGate:
		return kernels.SplitGate, kernels.SplitGateArgs{X: in(0), Q: out, G: e.bufs[op.Out2],
			Rows: int32(n), Heads: int32(op.Heads), D: int32(op.HeadDim)}, nil
	case model.OpGDNConv:
		g := op.GDN
		return kernels.GDNConv, kernels.GDNConvArgs{X: in(0), W: e.weights[op.Weight], State: e.conv[op.Layer],
			Src: e.bufs[p.StateSrc], Dst: e.bufs[p.StateDst], Y: out, Rows: int32(n), C: int32(g.C), K: int32(g.K), NStates: int32(e.opt.NStates)}, nil
	case model.OpGDNScan:
		g := op.GDN
		return kernels.GDNScan, kernels.GDNScanArgs{QKV: in(0), Beta: in(1), Alpha: in(2), A: e.weights[op.Weight],
			DtBias: e.weights[op.Weight2], State: e.ssm[op.Layer], Src: e.bufs[p.StateSrc], Dst: e.bufs[p.StateDst], Out: out,
			Rows: int32(n), NK: int32(g.NK), NV: int32(g.NV), D: int32(g.D), NStates: int32(e.opt.NStates), Eps: op.Eps}, nil
	case model.OpGatedNorm:
		return kernels.GatedNorm, kernels.GatedNormArgs{X: in(0), Z: in(1), W: e.weights[op.Weight], Y: out,
			Rows: int32(n), Heads: int32(op.Heads), D: int32(op.HeadDim), Eps: op.Eps}, nil
	case model.OpRouter:
		return kernels.Router, kernels.RouterArgs{Logits: in(0), Ids: out, Weights: e.bufs[op.Out2],
			Rows: int32(n), NExpert: int32(op.Experts), K: int32(op.Used)}, nil
	case model.OpMoEMatVec:
		t := p.Tensors[op.Weight]
		k, err := kernels.MoEMatVec(t.Type)
		if err != nil {
			return nil, nil, err
		}
		per := int32(0)
		if op.PerSlot {
			per = 1
		}
		return k, kernels.MoEMatVecArgs{W: e.packed[op.Weight], X: in(0), Ids: in(1), Y: out,
			N: int32(rows), K: int32(op.Used), Out: int32(op.Rows), Cols: int32(op.Cols), NExpert: int32(op.Experts), XPerSlot: per}, nil
	case model.OpMoEGateUp:
		k, err := kernels.MoEGateUp(p.Tensors[op.Weight].Type)
		if err != nil {
			return nil, nil, err
		}
		return k, kernels.MoEGateUpArgs{WGate: e.packed[op.Weight], WUp: e.packed[op.Weight2], X: in(0), Ids: in(1), Y: out,
			N: int32(rows), K: int32(op.Used), Out: int32(op.Rows), Cols: int32(op.Cols), NExpert: int32(op.Experts)}, nil
	case model.OpMoEDown:
		k, err := kernels.MoEDown(p.Tensors[op.Weight].Type)
		if err != nil {
			return nil, nil, err
		}
		a := kernels.MoEDownArgs{W: e.packed[op.Weight], X: in(0), Ids: in(1), Weights: in(2),
			Out: out, N: int32(n), K: int32(op.Used), Rows: int32(op.Rows), Cols: int32(op.Cols), NExpert: int32(op.Experts)}
		if len(op.In) == 5 { // the shared expert and its gate
			a.Shared, a.Gate = in(3), in(4)
		}
		return k, a, nil
	}
	return nil, nil, fmt.Errorf("unknown op kind %d", op.Kind)
}

// WriteKV writes the keys and values of cache slots slot … slot+n−1 of attention layer layer,
// n = len(k)/KVDim rows of KVDim values each (k and v alike), in the cache's element types
// (rounded to nearest even, as the K/V store rounds).
func (e *Executor) WriteKV(layer, slot int, k, v []float32) error {
	kp, vp, err := e.kvRange(layer, slot, k, v)
	if err != nil || len(k) == 0 {
		return err
	}
	if err := e.b.Write(kp, cacheBytes(e.p.CacheK, k)); err != nil {
		return err
	}
	return e.b.Write(vp, cacheBytes(e.p.CacheV, v))
}

// ReadKV reads cache slots slot … slot+n−1 of attention layer layer into k and v, n =
// len(k)/KVDim, widened exactly from the cache's element types.
func (e *Executor) ReadKV(layer, slot int, k, v []float32) error {
	kp, vp, err := e.kvRange(layer, slot, k, v)
	if err != nil || len(k) == 0 {
		return err
	}
	for _, c := range []struct {
		t   dtype.Type
		p   device.Ptr
		dst []float32
	}{{e.p.CacheK, kp, k}, {e.p.CacheV, vp, v}} {
		b := make([]byte, len(c.dst)*c.t.BlockBytes())
		if err := e.b.Read(b, c.p); err != nil {
			return err
		}
		for i := range c.dst {
			switch c.t {
			case dtype.F16:
				c.dst[i] = num.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
			case dtype.BF16:
				c.dst[i] = num.BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
			default:
				c.dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		}
	}
	return nil
}

// cacheBytes is x in cache element type t: float32, or f16/bf16 rounded to nearest even.
func cacheBytes(t dtype.Type, x []float32) []byte {
	if t == dtype.F32 {
		return device.F32Bytes(x)
	}
	b := make([]byte, 2*len(x))
	for i, f := range x {
		h := num.F32ToBF16(f)
		if t == dtype.F16 {
			h = num.F32ToF16(f)
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// kvRange checks a WriteKV or ReadKV and returns where its rows lie: [NSlots][KVDim] elements
// of the cache's types per layer.
func (e *Executor) kvRange(layer, slot int, k, v []float32) (kp, vp device.Ptr, err error) {
	d := e.p.KVDim
	if layer < 0 || layer >= len(e.kcache) || e.kcache[layer] == 0 {
		return 0, 0, fmt.Errorf("exec: layer %d has no K/V cache here", layer)
	}
	if len(k) != len(v) || d == 0 || len(k)%d != 0 {
		return 0, 0, fmt.Errorf("exec: %d keys and %d values are not whole rows of %d", len(k), len(v), d)
	}
	n := len(k) / d
	if slot < 0 || slot+n > e.opt.NSlots {
		return 0, 0, fmt.Errorf("exec: cache slots %d … %d outside %d", slot, slot+n-1, e.opt.NSlots)
	}
	return e.kcache[layer] + device.Ptr(slot*d*e.p.CacheK.BlockBytes()), e.vcache[layer] + device.Ptr(slot*d*e.p.CacheV.BlockBytes()), nil
}
