// Package engine runs sessions over an executor: each session holds its position and its
// page of the shared K/V cache, and offers prefill, decode, tree verification, commit and
// rollback.
//
// The K/V cache is a pool of physical slots shared by all sessions. A session maps its
// logical positions to slots through a slot table, so committing an accepted draft path or
// rolling back moves table entries, never cache data. Attention always reduces a row's keys
// in logical order — history first, then (for a tree node) its ancestors root first — so the
// logits of a tree node are bit-identical to decoding the path to it one token at a time.
//
// With a prefix cache (Options.PrefixCache, prefix.go), closed sessions' slots stay filled
// until the space is needed, and a new prompt that begins with the same tokens shares them
// (slots are reference-counted and never rewritten with other bits), computing only the rest.
//
// An Engine runs one step at a time; its methods and those of its sessions may be called
// from several goroutines. A session runs one call at a time; a long prefill takes the
// engine one chunk (step) at a time, so other sessions' steps run between its chunks.
package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"verity/host/exec"
	"verity/host/model"
)

// Engine owns an executor, the slot pool of its K/V cache and, for recurrent models, the
// pool of recurrent-state slots.
type Engine struct {
	mu         sync.Mutex
	ex         exec.Runner
	free       []int32 // free physical K/V slots (a stack)
	freeStates []int32 // free recurrent-state slots; slot 0 is the all-zero state, never written
	// References to each K/V and state slot: a session's table, checkpoints and pending tree,
	// and cached prefixes each hold one per slot they use; a slot is free when none does. No
	// slot is written after it is filled, except by a rerun of the same tokens at the same
	// positions (Truncate's replay), which writes the same bits.
	refs, stateRefs []int32
	prefix          *prefixCache // nil without Options.PrefixCache
	recurrent       bool
	chunk           int
	ctx             int
	slots           int           // K/V slots in all
	sessions        atomic.Uint64 // sessions started: their ids
}

// MaxCheckpoints is how many earlier recurrent states a session keeps for rollback (besides
// the zero state at position 0). Truncate replays tokens from the nearest one.
const MaxCheckpoints = 2

// Options configure an engine.
type Options struct {
	// Context is the most positions one session may hold (default: the executor's slot count
	// less MaxRows, so a full session can still verify a tree).
	Context int
	// PrefixCache keeps what closed sessions computed — their K/V entries and, for recurrent
	// models, some of their states — in cache slots no session needs, so that a new session's
	// prompt that begins with the same tokens runs only the rest (prefix.go). The logits are
	// the same bits either way.
	PrefixCache bool
}

// ErrContext is returned when a request would exceed the session's context.
var ErrContext = errors.New("engine: context length exceeded")

// ErrCapacity is returned when the engine's shared K/V cache or recurrent state slots are all
// in use (by other sessions).
var ErrCapacity = errors.New("engine: out of cache slots")

// New returns an engine over ex.
func New(ex exec.Runner, opt Options) (*Engine, error) {
	o := ex.Options()
	if opt.Context == 0 {
		opt.Context = o.NSlots - o.MaxRows
	}
	if opt.Context <= 0 || opt.Context > o.NSlots {
		return nil, fmt.Errorf("engine: context %d does not fit %d cache slots", opt.Context, o.NSlots)
	}
	e := &Engine{ex: ex, chunk: o.MaxRows, ctx: opt.Context, slots: o.NSlots, recurrent: ex.Program().StateLayers > 0,
		refs: make([]int32, o.NSlots)}
	if opt.PrefixCache {
		e.prefix = &prefixCache{}
	}
	for s := o.NSlots - 1; s >= 0; s-- {
		e.free = append(e.free, int32(s))
	}
	if e.recurrent {
		if o.NStates < 2+o.MaxRows {
			return nil, fmt.Errorf("engine: %d recurrent state slots cannot hold a session and a tree of %d nodes", o.NStates, o.MaxRows)
		}
		if err := ex.ClearState(0); err != nil {
			return nil, err
		}
		for s := o.NStates - 1; s >= 1; s-- {
			e.freeStates = append(e.freeStates, int32(s))
		}
		e.stateRefs = make([]int32, o.NStates)
	}
	return e, nil
}

// StatesPerSession is the number of recurrent-state slots a session may hold at once: its
// current state, its checkpoints and one per node of a verified tree.
func StatesPerSession(maxRows int) int { return 1 + MaxCheckpoints + maxRows }

// allocStates takes n free state slots (evicting cached prefixes as needed), each with one
// reference.
func (e *Engine) allocStates(n int) ([]int32, error) {
	for n > len(e.freeStates) && e.prefix.evict(e) {
	}
	if n > len(e.freeStates) {
		return nil, fmt.Errorf("%w: %d recurrent state slots needed, %d free", ErrCapacity, n, len(e.freeStates))
	}
	s := make([]int32, n)
	copy(s, e.freeStates[len(e.freeStates)-n:])
	e.freeStates = e.freeStates[:len(e.freeStates)-n]
	for _, x := range s {
		e.stateRefs[x] = 1
	}
	return s, nil
}

// releaseStates drops one reference to each state slot (the zero state, 0, is not counted).
func (e *Engine) releaseStates(s ...int32) {
	for i := len(s) - 1; i >= 0; i-- {
		if x := s[i]; x > 0 {
			if e.stateRefs[x] <= 0 {
				panic(fmt.Sprintf("engine: state slot %d released with no reference", x))
			}
			if e.stateRefs[x]--; e.stateRefs[x] == 0 {
				e.freeStates = append(e.freeStates, x)
			}
		}
	}
}

// retainStates adds a reference to each state slot.
func (e *Engine) retainStates(s ...int32) {
	for _, x := range s {
		if x > 0 {
			e.stateRefs[x]++
		}
	}
}

// FreeStates is the number of unused recurrent-state slots (0 for attention-only models); slots
// only cached prefixes hold are not counted, though allocation evicts them.
func (e *Engine) FreeStates() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.freeStates)
}

// Program returns the compiled model.
func (e *Engine) Program() *model.Program { return e.ex.Program() }

// Executor returns the executor.
func (e *Engine) Executor() exec.Runner { return e.ex }

// Context is the most positions a session may hold.
func (e *Engine) Context() int { return e.ctx }

// MaxRows is the largest step (prefill chunk, tree size).
func (e *Engine) MaxRows() int { return e.chunk }

// Capacity is the cache's size: its K/V slots and recurrent-state slots (0 for
// attention-only models; the zero state is not counted), in use or not.
func (e *Engine) Capacity() (slots, states int) {
	return e.slots, len(e.stateRefs) - min(1, len(e.stateRefs))
}

// HasPrefixCache reports whether the engine keeps a prefix cache (Options.PrefixCache).
func (e *Engine) HasPrefixCache() bool { return e.prefix != nil }

// CacheBytes is the size of the K/V cache (every attention layer's keys and values for all
// slots) at its element types, and what it would take as float32.
func (e *Engine) CacheBytes() (bytes, f32 int64) {
	p := e.Program()
	per := int64(p.CacheLayers) * int64(e.slots) * int64(p.KVDim)
	return per * int64(p.CacheK.BlockBytes()+p.CacheV.BlockBytes()), per * 8
}

// Sessions is how many sessions of the full context the cache holds at once.
func (e *Engine) Sessions() int { return max(1, (e.slots-e.chunk)/e.ctx) }

// FreeSlots is the number of unused cache slots; slots only cached prefixes hold are not
// counted, though allocation evicts them.
func (e *Engine) FreeSlots() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.free)
}

// alloc takes n free K/V slots (evicting cached prefixes as needed), each with one reference.
func (e *Engine) alloc(n int) ([]int32, error) {
	for n > len(e.free) && e.prefix.evict(e) {
	}
	if n > len(e.free) {
		return nil, fmt.Errorf("%w: %d cache slots needed, %d free", ErrCapacity, n, len(e.free))
	}
	s := make([]int32, n)
	copy(s, e.free[len(e.free)-n:])
	e.free = e.free[:len(e.free)-n]
	for _, x := range s {
		e.refs[x] = 1
	}
	return s, nil
}

// release drops one reference to each K/V slot.
func (e *Engine) release(s []int32) {
	for i := len(s) - 1; i >= 0; i-- {
		x := s[i]
		if e.refs[x] <= 0 {
			panic(fmt.Sprintf("engine: cache slot %d released with no reference", x))
		}
		if e.refs[x]--; e.refs[x] == 0 {
			e.free = append(e.free, x)
		}
	}
}

// retain adds a reference to each K/V slot.
func (e *Engine) retain(s []int32) {
	for _, x := range s {
		e.refs[x]++
	}
}

// NewSession starts an empty session.
func (e *Engine) NewSession() *Session { return &Session{e: e, id: e.sessions.Add(1)} }

// Session is one sequence: its committed tokens' cache slots and, after Verify, the slots of
// the verified tree's nodes until Commit, Truncate or another step discards them.
type Session struct {
	e *Engine
	// mu makes the session's calls one at a time. Lock order: sessions (by increasing id),
	// then the engine.
	mu      sync.Mutex
	id      uint64
	slots   []int32 // logical position → physical slot
	pending *pending
	closed  bool

	// the committed tokens (replayed from a checkpoint by Truncate; a cached prefix's key)
	tokens []int32
	// Recurrent models: the state after the last committed token (slot 0, the zero state, for
	// an empty session) and earlier states kept for rollback; with a prefix cache, also the
	// state before the prompt's last token (the first Prefill's), with a reference of its own
	// (slot 0: none).
	state       int32
	checkpoints []checkpoint
	prompt      checkpoint
	reused      int // positions the prompt took from the prefix cache
}

// Reused is the number of the prompt's positions (the first Prefill's) that came from the
// prefix cache instead of being computed.
func (s *Session) Reused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reused
}

type checkpoint struct {
	pos  int
	slot int32
}

type pending struct {
	tree   Tree
	slots  []int32 // K/V slot per node
	states []int32 // recurrent state per node (after the node)
}

// Len is the number of committed positions.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return len(s.slots)
}

// Tokens returns a copy of the committed tokens (Len of them).
func (s *Session) Tokens() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tokens)
}

// Close releases the session's cache slots.
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if s.closed {
		return
	}
	s.dropPending()
	s.e.prefix.keep(s)
	s.e.release(s.slots)
	s.setState(0)
	for _, c := range s.checkpoints {
		s.e.releaseStates(c.slot)
	}
	s.e.releaseStates(s.prompt.slot)
	s.checkpoints, s.prompt = nil, checkpoint{}
	s.slots, s.tokens, s.closed = nil, nil, true
}

func (s *Session) dropPending() {
	if s.pending != nil {
		s.e.release(s.pending.slots)
		s.e.releaseStates(s.pending.states...)
		s.pending = nil
	}
}

// advance makes slot the session's state at position pos (the current length), keeping the
// previous state as a checkpoint.
func (s *Session) advance(slot int32) {
	if !s.e.recurrent {
		return
	}
	if s.state > 0 && !s.isCheckpoint(s.state) {
		s.checkpoints = append(s.checkpoints, checkpoint{pos: len(s.tokens), slot: s.state})
		if len(s.checkpoints) > MaxCheckpoints {
			old := s.checkpoints[0]
			s.checkpoints = s.checkpoints[1:]
			if old.slot != s.state {
				s.e.releaseStates(old.slot)
			}
		}
	}
	s.state = slot
}

// setState replaces the current state, freeing the old one unless a checkpoint holds it.
func (s *Session) setState(slot int32) {
	if s.state > 0 && s.state != slot && !s.isCheckpoint(s.state) {
		s.e.releaseStates(s.state)
	}
	s.state = slot
}

func (s *Session) isCheckpoint(slot int32) bool {
	for _, c := range s.checkpoints {
		if c.slot == slot {
			return true
		}
	}
	return false
}

func (s *Session) checkTokens(tokens []int32) error {
	if s.closed {
		return errors.New("engine: session is closed")
	}
	nv := s.e.ex.Program().Config.NVocab
	for i, t := range tokens {
		if t < 0 || int(t) >= nv {
			return fmt.Errorf("engine: token %d at index %d is outside the vocabulary of %d", t, i, nv)
		}
	}
	return nil
}

// Prefill appends tokens, running them in chunks of at most MaxRows rows. It returns the
// logits of every token when all is set, else of the last token only ([1][n_vocab]). On error
// the session is unchanged. With a prefix cache, an empty session's prompt (all unset) that
// begins with a cached prefix takes its K/V entries (and state) and runs only the rest.
func (s *Session) Prefill(tokens []int32, all bool) ([][]float32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.e
	e.mu.Lock()
	if err := s.checkTokens(tokens); err != nil {
		e.mu.Unlock()
		return nil, err
	}
	if len(tokens) == 0 {
		e.mu.Unlock()
		return nil, errors.New("engine: prefill of no tokens")
	}
	if len(s.slots)+len(tokens) > e.ctx {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %d + %d tokens > %d", ErrContext, len(s.slots), len(tokens), e.ctx)
	}
	s.dropPending()
	base := len(s.slots)
	prompt := base == 0
	var hit prefixHit
	if prompt && !all {
		hit = e.prefix.match(e, tokens)
	}
	rest := tokens[hit.n:]
	newSlots, err := e.alloc(len(rest))
	if err != nil {
		hit.release(e)
		e.mu.Unlock()
		return nil, err
	}
	e.mu.Unlock()
	// the chunks take the engine one at a time (the new slots and state are this session's
	// alone until it takes them on below)
	table := append(append(s.slots[:base:base], hit.slots...), newSlots...)
	src := s.state
	if hit.n > 0 && e.recurrent {
		src = hit.state
	}
	// With a prefix cache, a recurrent model's prompt keeps the state before its last token:
	// the furthest a later prompt can start from (its own last token's logits are computed),
	// so that an exact repeat runs one token.
	keepPrompt := prompt && !all && e.prefix != nil && e.recurrent
	mark := -1
	if keepPrompt {
		mark = len(rest) - 2 // -1: the state before rest's last token is src
	}
	out, state, before, err := s.run(rest, base+hit.n, table, src, all, true, mark)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.release(newSlots)
		hit.release(e)
		return nil, err
	}
	s.slots = table
	if prompt {
		s.reused = hit.n
	}
	if hit.n > 0 {
		// the hit's references become the session's: its state is the one before rest's
		s.tokens = append(s.tokens, tokens[:hit.n]...)
		if e.recurrent {
			s.state = hit.state
		}
	}
	s.advance(state)
	s.tokens = append(s.tokens, rest...)
	if keepPrompt { // (a prompt prefilled with all is run in chunks)
		if mark < 0 {
			e.retainStates(before) // src: the zero state (not counted) or the hit's
		}
		s.prompt = checkpoint{pos: len(s.tokens) - 1, slot: before}
	}
	return out, nil
}

// run computes tokens at positions base… whose K/V slots table[base…] holds, in chunks,
// continuing recurrent state src; it returns the logits wanted and the new state's slot (a
// fresh one; src is never written). With mark ≥ 0 (recurrent models, mark < len(tokens)−1) the
// state after tokens[mark] goes to a fresh slot of its own, returned as before; with mark −1,
// before is src. On error any fresh state is released. With lock, run takes the engine's lock
// for each chunk (and the state allocation) itself; else the caller holds it.
func (s *Session) run(tokens []int32, base int, table []int32, src int32, all, lock bool, mark int) (out [][]float32, state, before int32, err error) {
	locked := func(f func()) {
		if lock {
			s.e.mu.Lock()
			defer s.e.mu.Unlock()
		}
		f()
	}
	dst, early := int32(-1), int32(-1) // early: the state rows up to mark write
	before = src
	if s.e.recurrent {
		n := 1
		if mark >= 0 {
			n = 2
		}
		var st []int32
		locked(func() { st, err = s.e.allocStates(n) })
		if err != nil {
			return nil, 0, 0, err
		}
		dst = st[0]
		if mark >= 0 {
			early, before = st[1], st[1]
		}
	}
	release := func() {
		s.e.releaseStates(dst)
		if early > 0 {
			s.e.releaseStates(early)
		}
	}
	nv := s.e.ex.Program().Config.NVocab
	for lo := 0; lo < len(tokens); lo += s.e.chunk {
		hi := min(lo+s.e.chunk, len(tokens))
		st := exec.Step{Tokens: tokens[lo:hi]}
		for r := lo; r < hi; r++ {
			p := base + r
			st.Pos = append(st.Pos, int32(p))
			st.Slots = append(st.Slots, table[p])
			st.Keys = append(st.Keys, table[:p+1])
			if all || r == len(tokens)-1 {
				st.OutRows = append(st.OutRows, int32(r-lo))
			}
			if s.e.recurrent {
				// each row continues the state the row before wrote (src for the first);
				// rows up to mark write early, the rest dst
				from, to := dst, dst
				if r <= mark {
					from, to = early, early
				} else if r == mark+1 && mark >= 0 {
					from = early
				}
				if r == 0 {
					from = src
				}
				st.StateSrc = append(st.StateSrc, from)
				st.StateDst = append(st.StateDst, to)
			}
		}
		var logits []float32
		locked(func() {
			if logits, err = s.e.ex.Run(st); err != nil {
				release()
			}
		})
		if err != nil {
			return nil, 0, 0, err
		}
		for i := range st.OutRows {
			out = append(out, logits[i*nv:(i+1)*nv:(i+1)*nv])
		}
	}
	return out, dst, before, nil
}

// Decode appends one token and returns its logits.
func (s *Session) Decode(token int32) ([]float32, error) {
	l, err := s.Prefill([]int32{token}, false)
	if err != nil {
		return nil, err
	}
	return l[0], nil
}

// Tree is a draft token tree: node 0 is the root (Parents[0] = −1) and continues the
// session; every other node's parent has a smaller index.
type Tree struct {
	Tokens  []int32
	Parents []int
}

// Depths returns each node's depth (root 0), checking the tree's shape.
func (t Tree) Depths() ([]int, error) {
	n := len(t.Tokens)
	if n == 0 {
		return nil, errors.New("engine: empty tree")
	}
	if len(t.Parents) != n {
		return nil, fmt.Errorf("engine: tree has %d tokens but %d parents", n, len(t.Parents))
	}
	if t.Parents[0] != -1 {
		return nil, fmt.Errorf("engine: tree node 0 must be the root (parent -1), has parent %d", t.Parents[0])
	}
	d := make([]int, n)
	for i := 1; i < n; i++ {
		p := t.Parents[i]
		if p < 0 || p >= i {
			return nil, fmt.Errorf("engine: tree node %d has parent %d; parents must precede their children (no cycles, one root)", i, p)
		}
		d[i] = d[p] + 1
	}
	return d, nil
}

// Verify runs every node of the tree in one step and returns each node's logits: node i's
// are bit-identical to decoding the path root…i after the session's history. The session's
// committed state is unchanged; the nodes' cache entries are kept until Commit picks a path.
func (s *Session) Verify(t Tree) ([][]float32, error) {
	out, err := s.e.VerifyBatch([]*Session{s}, []Tree{t})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// VerifyBatch verifies a tree for each of several sessions in one step (one pass over the
// weights): out[k] holds session k's node logits, bit-identical to what Verify gives it alone
// (rows never depend on the other rows of their step). The trees' nodes together must fit the
// step size, and a session may appear once. Each session's previous unconfirmed tree is
// dropped; on error the sessions' committed state is unchanged.
func (e *Engine) VerifyBatch(ss []*Session, ts []Tree) ([][][]float32, error) {
	if len(ss) != len(ts) || len(ss) == 0 {
		return nil, fmt.Errorf("engine: %d sessions and %d trees", len(ss), len(ts))
	}
	for k, s := range ss {
		if s.e != e {
			return nil, fmt.Errorf("engine: session %d belongs to another engine", k)
		}
	}
	order := slices.Clone(ss)
	slices.SortFunc(order, func(a, b *Session) int { return cmp.Compare(a.id, b.id) })
	order = slices.Compact(order) // a repeated session is refused below
	for _, s := range order {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	total := 0
	seen := map[*Session]bool{}
	for k, s := range ss {
		if s.closed {
			return nil, fmt.Errorf("engine: session %d is closed", k)
		}
		if seen[s] {
			return nil, fmt.Errorf("engine: session %d appears twice in one batch", k)
		}
		seen[s] = true
		total += len(ts[k].Tokens)
	}
	if total > e.chunk {
		return nil, fmt.Errorf("engine: trees of %d nodes in all exceed the step size %d", total, e.chunk)
	}
	for _, s := range ss {
		s.dropPending()
	}
	vs := make([]*verifyRows, len(ss))
	release := func() {
		for _, v := range vs {
			if v != nil {
				e.release(v.slots)
				e.releaseStates(v.states...)
			}
		}
	}
	var st exec.Step
	for k, s := range ss {
		v, err := s.prepareVerify(ts[k])
		if err != nil {
			release()
			return nil, fmt.Errorf("engine: batch entry %d: %w", k, err)
		}
		vs[k] = v
		off := int32(len(st.Tokens))
		st.Tokens = append(st.Tokens, v.step.Tokens...)
		st.Pos = append(st.Pos, v.step.Pos...)
		st.Slots = append(st.Slots, v.step.Slots...)
		st.Keys = append(st.Keys, v.step.Keys...)
		st.StateSrc = append(st.StateSrc, v.step.StateSrc...)
		st.StateDst = append(st.StateDst, v.step.StateDst...)
		for _, r := range v.step.OutRows {
			st.OutRows = append(st.OutRows, r+off)
		}
	}
	logits, err := e.ex.Run(st)
	if err != nil {
		release()
		return nil, err
	}
	nv := e.ex.Program().Config.NVocab
	out := make([][][]float32, len(ss))
	row := 0
	for k, s := range ss {
		n := len(ts[k].Tokens)
		out[k] = make([][]float32, n)
		for i := range out[k] {
			out[k][i] = logits[row*nv : (row+1)*nv : (row+1)*nv]
			row++
		}
		t := ts[k]
		s.pending = &pending{tree: Tree{Tokens: append([]int32(nil), t.Tokens...), Parents: append([]int(nil), t.Parents...)},
			slots: vs[k].slots, states: vs[k].states}
	}
	return out, nil
}

// verifyRows is one session's part of a verify step: its rows, and the cache and state slots
// allocated for its nodes.
type verifyRows struct {
	step   exec.Step
	slots  []int32
	states []int32
}

// prepareVerify checks tree t against the session and allocates its nodes' slots (the caller
// holds e.mu and has dropped the session's pending tree).
func (s *Session) prepareVerify(t Tree) (*verifyRows, error) {
	depth, err := t.Depths()
	if err != nil {
		return nil, err
	}
	if err := s.checkTokens(t.Tokens); err != nil {
		return nil, err
	}
	n := len(t.Tokens)
	if n > s.e.chunk {
		return nil, fmt.Errorf("engine: tree of %d nodes exceeds the step size %d", n, s.e.chunk)
	}
	maxDepth := 0
	for _, d := range depth {
		maxDepth = max(maxDepth, d)
	}
	if len(s.slots)+maxDepth+1 > s.e.ctx {
		return nil, fmt.Errorf("%w: %d positions + tree depth %d > %d", ErrContext, len(s.slots), maxDepth+1, s.e.ctx)
	}
	nodeSlots, err := s.e.alloc(n)
	if err != nil {
		return nil, err
	}
	var nodeStates []int32
	if s.e.recurrent {
		if nodeStates, err = s.e.allocStates(n); err != nil {
			s.e.release(nodeSlots)
			return nil, err
		}
	}
	base := len(s.slots)
	v := &verifyRows{step: exec.Step{Tokens: t.Tokens}, slots: nodeSlots, states: nodeStates}
	st := &v.step
	for i := 0; i < n; i++ {
		// keys: history, then the ancestors root first, then the node itself
		chain := make([]int32, depth[i]+1)
		for j, k := i, depth[i]; k >= 0; j, k = t.Parents[j], k-1 {
			chain[k] = nodeSlots[j]
		}
		keys := make([]int32, 0, base+len(chain))
		keys = append(append(keys, s.slots...), chain...)
		st.Pos = append(st.Pos, int32(base+depth[i]))
		st.Slots = append(st.Slots, nodeSlots[i])
		st.Keys = append(st.Keys, keys)
		st.OutRows = append(st.OutRows, int32(i))
		if s.e.recurrent {
			// a node continues its parent's state (the session's for the root)
			from := s.state
			if i > 0 {
				from = nodeStates[t.Parents[i]]
			}
			st.StateSrc = append(st.StateSrc, from)
			st.StateDst = append(st.StateDst, nodeStates[i])
		}
	}
	return v, nil
}

// Commit accepts a root-to-node path of the last verified tree (node indices, path[0] = 0,
// each next node a child of the previous): its tokens join the session, the other nodes are
// dropped. An empty path drops the whole tree.
func (s *Session) Commit(path []int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if s.pending == nil {
		return errors.New("engine: commit without a verified tree")
	}
	t := s.pending.tree
	for i, node := range path {
		if node < 0 || node >= len(t.Tokens) {
			return fmt.Errorf("engine: path entry %d: node %d is not in the tree of %d nodes", i, node, len(t.Tokens))
		}
		want := -1
		if i > 0 {
			want = path[i-1]
		}
		if t.Parents[node] != want {
			return fmt.Errorf("engine: path entry %d: node %d's parent is %d, not %d", i, node, t.Parents[node], want)
		}
	}
	keep := make(map[int]bool, len(path))
	for _, node := range path {
		keep[node] = true
		s.slots = append(s.slots, s.pending.slots[node])
	}
	var drop, dropStates []int32
	for i, sl := range s.pending.slots {
		if !keep[i] {
			drop = append(drop, sl)
		}
	}
	if s.e.recurrent {
		last := -1
		if len(path) > 0 {
			last = path[len(path)-1]
		}
		for i, st := range s.pending.states {
			if i != last {
				dropStates = append(dropStates, st)
			}
		}
		if last >= 0 {
			s.advance(s.pending.states[last]) // before the tokens: it records the old state's position
		}
	}
	for _, node := range path {
		s.tokens = append(s.tokens, t.Tokens[node])
	}
	s.e.release(drop)
	s.e.releaseStates(dropStates...)
	s.pending = nil
	return nil
}

// Truncate rolls the session back to its first n positions (and drops any verified tree).
// For recurrent models the state at position n is rebuilt exactly: the nearest kept state at
// or before n is restored and the tokens after it are run again (chunking never changes
// bits, so the result equals the state the session had at n). On error the session is
// unchanged.
func (s *Session) Truncate(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if n < 0 || n > len(s.slots) {
		return fmt.Errorf("engine: truncate to %d positions of %d", n, len(s.slots))
	}
	s.dropPending()
	if s.e.recurrent && n < len(s.slots) {
		from := checkpoint{pos: 0, slot: 0}
		for _, c := range s.checkpoints {
			if c.pos <= n && c.pos >= from.pos {
				from = c
			}
		}
		fromPrompt := false
		if p := s.prompt; p.slot > 0 && p.pos <= n && p.pos > from.pos {
			from, fromPrompt = p, true
		}
		state := from.slot
		if n > from.pos {
			// the replay also writes the K/V entries of positions from.pos…n−1 again: the same
			// bits into the same slots (which other sessions or cached prefixes may share)
			var err error
			if _, state, _, err = s.run(s.tokens[from.pos:n], from.pos, s.slots, from.slot, false, false, -1); err != nil {
				return err
			}
		} else if fromPrompt {
			s.e.retainStates(state) // the session's own reference, besides the prompt's
		}
		// release every slot the session no longer refers to, each once: dropped checkpoints
		// and the old current state, unless kept or now current
		var keep []checkpoint
		drop := map[int32]bool{s.state: true}
		for _, c := range s.checkpoints {
			if c.pos <= n {
				keep = append(keep, c)
			} else {
				drop[c.slot] = true
			}
		}
		delete(drop, state)
		for _, c := range keep {
			delete(drop, c.slot)
		}
		for slot := range drop {
			s.e.releaseStates(slot)
		}
		s.checkpoints = keep
		s.state = state
		if s.prompt.slot > 0 && s.prompt.pos > n {
			s.e.releaseStates(s.prompt.slot)
			s.prompt = checkpoint{}
		}
	}
	s.e.release(s.slots[n:])
	s.slots, s.tokens = s.slots[:n], s.tokens[:n]
	return nil
}
