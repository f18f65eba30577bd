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
// An Engine runs one step at a time; its methods and those of its sessions may be called
// from several goroutines.
package engine

import (
	"errors"
	"fmt"
	"sync"

	"verity/host/exec"
	"verity/host/model"
)

// Engine owns an executor and the slot pool of its cache.
type Engine struct {
	mu    sync.Mutex
	ex    *exec.Executor
	free  []int32 // free physical slots (a stack)
	chunk int
	ctx   int
}

// Options configure an engine.
type Options struct {
	// Context is the most positions one session may hold (default: the executor's slot count
	// less MaxRows, so a full session can still verify a tree).
	Context int
}

// ErrContext is returned when a request would exceed the session's context.
var ErrContext = errors.New("engine: context length exceeded")

// New returns an engine over ex.
func New(ex *exec.Executor, opt Options) (*Engine, error) {
	o := ex.Options()
	if opt.Context == 0 {
		opt.Context = o.NSlots - o.MaxRows
	}
	if opt.Context <= 0 || opt.Context > o.NSlots {
		return nil, fmt.Errorf("engine: context %d does not fit %d cache slots", opt.Context, o.NSlots)
	}
	e := &Engine{ex: ex, chunk: o.MaxRows, ctx: opt.Context}
	for s := o.NSlots - 1; s >= 0; s-- {
		e.free = append(e.free, int32(s))
	}
	return e, nil
}

// Program returns the compiled model.
func (e *Engine) Program() *model.Program { return e.ex.Program() }

// Executor returns the executor.
func (e *Engine) Executor() *exec.Executor { return e.ex }

// Context is the most positions a session may hold.
func (e *Engine) Context() int { return e.ctx }

// MaxRows is the largest step (prefill chunk, tree size).
func (e *Engine) MaxRows() int { return e.chunk }

// FreeSlots is the number of unused cache slots.
func (e *Engine) FreeSlots() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.free)
}

func (e *Engine) alloc(n int) ([]int32, error) {
	if n > len(e.free) {
		return nil, fmt.Errorf("engine: %d cache slots needed, %d free", n, len(e.free))
	}
	s := make([]int32, n)
	copy(s, e.free[len(e.free)-n:])
	e.free = e.free[:len(e.free)-n]
	return s, nil
}

func (e *Engine) release(s []int32) {
	for i := len(s) - 1; i >= 0; i-- {
		e.free = append(e.free, s[i])
	}
}

// NewSession starts an empty session.
func (e *Engine) NewSession() *Session { return &Session{e: e} }

// Session is one sequence: its committed tokens' cache slots and, after Verify, the slots of
// the verified tree's nodes until Commit, Truncate or another step discards them.
type Session struct {
	e       *Engine
	slots   []int32 // logical position → physical slot
	pending *pending
	closed  bool
}

type pending struct {
	tree  Tree
	slots []int32 // per node
}

// Len is the number of committed positions.
func (s *Session) Len() int {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	return len(s.slots)
}

// Close releases the session's cache slots.
func (s *Session) Close() {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	s.dropPending()
	s.e.release(s.slots)
	s.slots, s.closed = nil, true
}

func (s *Session) dropPending() {
	if s.pending != nil {
		s.e.release(s.pending.slots)
		s.pending = nil
	}
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
// the session is unchanged.
func (s *Session) Prefill(tokens []int32, all bool) ([][]float32, error) {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if err := s.checkTokens(tokens); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, errors.New("engine: prefill of no tokens")
	}
	if len(s.slots)+len(tokens) > s.e.ctx {
		return nil, fmt.Errorf("%w: %d + %d tokens > %d", ErrContext, len(s.slots), len(tokens), s.e.ctx)
	}
	s.dropPending()
	base := len(s.slots)
	newSlots, err := s.e.alloc(len(tokens))
	if err != nil {
		return nil, err
	}
	table := append(s.slots[:base:base], newSlots...)
	nv := s.e.ex.Program().Config.NVocab
	var out [][]float32
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
		}
		logits, err := s.e.ex.Run(st)
		if err != nil {
			s.e.release(newSlots)
			return nil, err
		}
		for i := range st.OutRows {
			out = append(out, logits[i*nv:(i+1)*nv:(i+1)*nv])
		}
	}
	s.slots = table
	return out, nil
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
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
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
	s.dropPending()
	nodeSlots, err := s.e.alloc(n)
	if err != nil {
		return nil, err
	}
	base := len(s.slots)
	st := exec.Step{Tokens: t.Tokens}
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
	}
	logits, err := s.e.ex.Run(st)
	if err != nil {
		s.e.release(nodeSlots)
		return nil, err
	}
	nv := s.e.ex.Program().Config.NVocab
	out := make([][]float32, n)
	for i := range out {
		out[i] = logits[i*nv : (i+1)*nv : (i+1)*nv]
	}
	s.pending = &pending{tree: Tree{Tokens: append([]int32(nil), t.Tokens...), Parents: append([]int(nil), t.Parents...)}, slots: nodeSlots}
	return out, nil
}

// Commit accepts a root-to-node path of the last verified tree (node indices, path[0] = 0,
// each next node a child of the previous): its tokens join the session, the other nodes are
// dropped. An empty path drops the whole tree.
func (s *Session) Commit(path []int) error {
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
	var drop []int32
	for i, sl := range s.pending.slots {
		if !keep[i] {
			drop = append(drop, sl)
		}
	}
	s.e.release(drop)
	s.pending = nil
	return nil
}

// Truncate rolls the session back to its first n positions (and drops any verified tree).
func (s *Session) Truncate(n int) error {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if n < 0 || n > len(s.slots) {
		return fmt.Errorf("engine: truncate to %d positions of %d", n, len(s.slots))
	}
	s.dropPending()
	s.e.release(s.slots[n:])
	s.slots = s.slots[:n]
	return nil
}
