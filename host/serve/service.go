// Package serve is the speculative-decoding verify service: sessions over one engine, each
// holding a committed prefix and the target's chosen next token, verified against draft trees
// from any drafter. A verify round runs the pending token and the whole tree in one step,
// walks the tree from the pending token — at each accepted node the target chooses its next
// token with the session's Sampler, and the child drafting that token (if any) is accepted —
// commits the accepted path (its K/V entries and recurrent state from the same step) and
// returns the accepted tokens, the target's new next token and the target's log-probability of
// each. Because verified logits are bit-identical to decoding (width invariance) and the
// sampler's choice at a position depends only on that position, a session emits exactly the
// tokens plain decoding would, whatever the drafts: greedy verification at temperature 0,
// target-sample-and-match above it. A draft that carries the drafter's distributions is judged
// by speculative sampling instead (speculate.go): the emitted tokens then follow the target
// sampler's distribution exactly, and sampled drafts are accepted with probability min(1, p/q).
package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"verity/host/engine"
	"verity/host/tokenizer"
)

// Options configure a Service.
type Options struct {
	// MaxNodes caps the draft nodes of one verify request (default and upper bound: the
	// engine's step size less one, for the pending token).
	MaxNodes int
	// MaxPrompt caps a new session's prompt (default and upper bound: the engine's context
	// less one, for the next token).
	MaxPrompt int
	// IdleTimeout closes sessions unused for this long (0: never).
	IdleTimeout time.Duration
	// EvictAfter: a verify session idle at least this long may be closed (evicted, least
	// recently used first) when a waiting request needs its cache space (default 5 s; < 0:
	// never).
	EvictAfter time.Duration
	// ClientSessions caps the verify sessions one HTTP client holds open (0: the cache's
	// full-length sessions; < 0: no cap). Open's callers are not capped.
	ClientSessions int
	// Admission bounds the queue of requests waiting for cache space.
	Admission AdmissionOptions
	// Tokenizer, if set, lets a new session's prompt be given as text, and serves
	// /v1/completions.
	Tokenizer *tokenizer.Tokenizer
	// ModelName names the model in completions and /v1/models.
	ModelName string
	// Fingerprint is the system_fingerprint of completions (the build's revision).
	Fingerprint string
	// HTTP holds the HTTP layer's settings (Handler).
	HTTP HTTPOptions
	// Adapters are the LoRA adapters merged into the weights, reported by /v1/models and
	// /v1/stats.
	Adapters []Adapter
}

// Adapter describes a LoRA adapter merged into the served model's weights.
type Adapter struct {
	Name    string  `json:"name"`  // its file's name, or general.name
	Scale   float64 `json:"scale"` // the scale it was merged at
	Alpha   float64 `json:"alpha"`
	Ranks   []int   `json:"ranks"`
	Targets int     `json:"targets"` // tensors it adapts
}

// Service holds sessions over one engine. Its methods are safe for concurrent use. Verify
// rounds of different sessions that arrive while a step runs are batched into the next step
// (engine.VerifyBatch: one pass over the weights for all of them, each session's logits
// unchanged), up to the engine's step size in nodes.
type Service struct {
	e    *engine.Engine
	opt  Options
	now  func() time.Time
	jobs chan *job
	quit chan struct{}
	stop sync.Once

	admit *admission
	pool  stepPool
	// perSession is what every session reserves besides its K/V positions: its recurrent
	// states between steps (current, checkpoints, the prompt's) and a one-node tree's.
	perSession cost
	// stopCtx ends every running generation when cancelled (Stop).
	stopCtx  context.Context
	stopGen  context.CancelCauseFunc
	metrics  *metrics
	log      *slog.Logger
	draining bool // guarded by mu

	mu       sync.Mutex
	sessions map[string]*session
	byClient map[string]int       // open verify sessions by client
	evicted  map[string]time.Time // recently evicted sessions' ids, for their next call's error
	evictLog []string             // evicted's ids in order, to bound it
	stats    Stats
	started  time.Time
	// roundHook, if set, runs at the start of every verify round (tests)
	roundHook func()
	// release asks releaser to return freed memory to the system (releaseMemory)
	release chan struct{}
	// openHook, if set, runs in every open once it has its cache space (tests)
	openHook func()
	// opening counts the verify-API sessions being opened (admitted or waiting), which
	// OpenSessions counts: a drain waits for them as for the open ones
	opening atomic.Int64
	// returning counts completions' sessions between a round and their next, which come
	// back at once: the batcher waits a moment for them (linger)
	returning atomic.Int64
	lastStep  atomic.Int64 // the last step's time, in nanoseconds
}

// Stats are the service's counters since it started.
type Stats struct {
	Sessions int   `json:"sessions"`        // open now
	Opened   int64 `json:"sessions_opened"` // in all
	Evicted  int64 `json:"sessions_evicted"`
	Rounds   int64 `json:"verify_rounds"`
	// Undrafted counts the rounds that carried no draft: plain decoding steps (completions,
	// a drafter with nothing to propose).
	Undrafted int64 `json:"undrafted_rounds"`
	Steps     int64 `json:"verify_steps"`   // engine steps that ran them (batched rounds share one)
	Drafted   int64 `json:"draft_nodes"`    // draft nodes verified
	Accepted  int64 `json:"accepted_nodes"` // draft nodes accepted
	// AcceptedAt[d] counts rounds that accepted a draft token at depth d (0: the first token
	// after the next one), so AcceptedAt[d]/(Rounds−Undrafted) is the acceptance rate at that
	// position.
	AcceptedAt []int64 `json:"accepted_at_depth"`
	// PrefixCache counts the engine's prefix cache's work (zero without one).
	PrefixCache engine.PrefixStats `json:"prefix_cache"`
	// Admission describes the queue and the cache's reservations.
	Admission AdmissionStats `json:"admission"`
	// Adapters are the LoRA adapters merged into the weights (Options.Adapters).
	Adapters []Adapter `json:"adapters,omitempty"`
	// KVCache is the K/V cache: its element types and size.
	KVCache KVCacheStats `json:"kv_cache"`
}

// KVCacheStats describe the engine's K/V cache: its element types (f32, f16, bf16), its size
// in bytes, and what the same cache would take as float32 (so SavedBytes = F32Bytes − Bytes).
type KVCacheStats struct {
	TypeK      string `json:"type_k"`
	TypeV      string `json:"type_v"`
	Bytes      int64  `json:"bytes"`
	F32Bytes   int64  `json:"f32_bytes"`
	SavedBytes int64  `json:"saved_bytes"`
}

type session struct {
	mu      sync.Mutex // one request at a time per session
	s       *engine.Session
	sampler Sampler
	next    int32 // the target's chosen next token, not yet in the cache
	used    time.Time
	closed  bool
	client  string
	// limit is the most committed positions the session may reach; reserved the cache it
	// holds (limit K/V slots and perSession)
	limit    int
	reserved cost
	// internal: a completion's session, never expired nor evicted (its request runs it)
	internal bool
	// JSON mode (sampler.JSON): the vocabulary's texts, and the recogniser's state after every
	// emitted token, next included
	vocab *jsonVocab
	json  jsonState
}

// constrain returns the logits the sampler chooses from after the tokens that led to state st:
// logits itself, or in JSON mode the tokens that cannot follow masked out.
func (ss *session) constrain(logits []float32, st jsonState) ([]float32, error) {
	if ss.vocab == nil {
		return logits, nil
	}
	return ss.vocab.mask(logits, st)
}

// New returns a service over e.
func New(e *engine.Engine, opt Options) *Service {
	limit := e.MaxRows() - 1
	if opt.MaxNodes <= 0 || opt.MaxNodes > limit {
		opt.MaxNodes = limit
	}
	if opt.MaxPrompt <= 0 || opt.MaxPrompt > e.Context()-1 {
		opt.MaxPrompt = e.Context() - 1 // room for the next token
	}
	if opt.EvictAfter == 0 {
		opt.EvictAfter = 5 * time.Second
	}
	if opt.ClientSessions == 0 {
		opt.ClientSessions = e.Sessions()
	}
	sv := &Service{e: e, opt: opt, now: time.Now, sessions: map[string]*session{}, started: time.Now(),
		byClient: map[string]int{}, evicted: map[string]time.Time{},
		jobs: make(chan *job), quit: make(chan struct{}), release: make(chan struct{}, 1)}
	// The cache less one step's nodes is for reservations; the step's nodes are the step
	// pool, from which verify trees take what their sessions did not reserve.
	slots, states := e.Capacity()
	step := cost{kv: e.MaxRows()}
	if states > 0 {
		// a tree's nodes' states come from the step pool; between steps a session holds its
		// current state, its checkpoints and, with a prefix cache, its prompt's
		step.states = e.MaxRows()
		sv.perSession.states = 1 + engine.MaxCheckpoints
		if e.HasPrefixCache() {
			sv.perSession.states++
		}
	}
	sv.pool = stepPool{free: step, size: step, signal: make(chan struct{}, 1)}
	sv.admit = newAdmission(cost{kv: max(0, slots-step.kv), states: max(0, states-step.states)}, opt.Admission)
	sv.stopCtx, sv.stopGen = context.WithCancelCause(context.Background())
	sv.log = opt.HTTP.Logger
	if sv.log == nil {
		sv.log = slog.New(slog.DiscardHandler)
	}
	sv.metrics = newMetrics(sv)
	sv.admit.onWait = sv.metrics.queueWait
	go sv.batcher()
	go sv.releaser()
	return sv
}

// Shutdown stops the batching goroutine; verify calls fail afterwards.
func (sv *Service) Shutdown() {
	sv.stop.Do(func() {
		sv.stopGen(ErrDraining)
		close(sv.quit)
	})
}

// Drain makes the service refuse new sessions and completions (ErrDraining, and /ready says
// so) while those it runs go on; sessions already open still verify.
func (sv *Service) Drain() {
	sv.mu.Lock()
	sv.draining = true
	sv.mu.Unlock()
	sv.admit.drain()
}

// Draining reports whether Drain was called.
func (sv *Service) Draining() bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.draining
}

// Stop ends every running generation with ErrDraining: a stream gets an error event, a
// whole reply the error (the end of a drain's grace period).
func (sv *Service) Stop() { sv.stopGen(ErrDraining) }

// stepPool is the cache a verify step's trees take beyond their sessions' reservations,
// given back when the sessions commit.
type stepPool struct {
	mu     sync.Mutex
	free   cost
	size   cost
	signal chan struct{} // a release happened
}

func (p *stepPool) release(c cost) {
	if c == (cost{}) {
		return
	}
	p.mu.Lock()
	p.free = p.free.plus(c)
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// job is one session's tree waiting for a verify step; over is what it takes from the step
// pool.
type job struct {
	s    *engine.Session
	tree engine.Tree
	over cost
	// internal: a completion's round, whose session returns at once (Service.returning)
	internal bool
	logits   [][]float32
	err      error
	done     chan struct{}
}

// verify runs tree t of session s in the next verify step and returns its nodes' logits;
// the caller gives over back to the step pool once the session has committed (or at once
// on error).
func (sv *Service) verify(s *engine.Session, t engine.Tree, over cost, internal bool) ([][]float32, error) {
	j := &job{s: s, tree: t, over: over, internal: internal, done: make(chan struct{})}
	if internal {
		sv.returning.Add(-1) // until the batcher has run it
	}
	select {
	case sv.jobs <- j:
	case <-sv.quit:
		if internal {
			sv.returning.Add(1)
		}
		return nil, fmt.Errorf("%w: the service is shut down", ErrDraining)
	}
	<-j.done
	return j.logits, j.err
}

// batcher runs verify steps: it takes the jobs waiting, in arrival order, while their nodes
// fit one step and what they take from the step pool is free, runs them together and starts
// over; a job that does not fit goes first in a later step (any single job fits an empty
// pool: a step's trees are at most a step's rows).
func (sv *Service) batcher() {
	var queue []*job
	for {
		if len(queue) == 0 {
			select {
			case j := <-sv.jobs:
				queue = append(queue, j)
			case <-sv.quit:
				return
			}
		}
	gather:
		for {
			select {
			case j := <-sv.jobs:
				queue = append(queue, j)
			default:
				break gather
			}
		}
		var batch []*job
		nodes := 0
		sv.pool.mu.Lock()
		free := sv.pool.free
		rest := queue[:0]
		for _, j := range queue {
			if n := len(j.tree.Tokens); nodes+n <= sv.e.MaxRows() && j.over.fits(free) {
				batch, nodes, free = append(batch, j), nodes+n, free.minus(j.over)
			} else {
				rest = append(rest, j)
			}
		}
		sv.pool.free = free
		sv.pool.mu.Unlock()
		queue = rest
		if len(batch) > 0 && len(rest) == 0 && nodes < sv.e.MaxRows() {
			batch = sv.linger(batch, nodes, &queue)
		}
		if len(batch) == 0 { // the pool is out until the last step's sessions commit
			select {
			case <-sv.pool.signal:
			case j := <-sv.jobs:
				queue = append(queue, j)
			case <-sv.quit:
				return
			}
			continue
		}
		sv.run(batch)
	}
}

// linger waits a moment — a quarter of the last step's time, at most 2 ms — for the
// completions whose last round has just ended to send their next one, so that they share a
// step rather than each taking one; the jobs that arrive join the batch while they fit, the
// others go to queue.
func (sv *Service) linger(batch []*job, nodes int, queue *[]*job) []*job {
	if sv.returning.Load() <= 0 {
		return batch
	}
	wait := min(time.Duration(sv.lastStep.Load())/4, 2*time.Millisecond)
	if wait <= 0 {
		return batch
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for sv.returning.Load() > 0 {
		select {
		case j := <-sv.jobs:
			sv.pool.mu.Lock()
			if n := len(j.tree.Tokens); len(*queue) == 0 && nodes+n <= sv.e.MaxRows() && j.over.fits(sv.pool.free) {
				sv.pool.free = sv.pool.free.minus(j.over)
				batch, nodes = append(batch, j), nodes+n
			} else {
				*queue = append(*queue, j)
			}
			sv.pool.mu.Unlock()
		case <-t.C:
			return batch
		case <-sv.quit:
			return batch
		}
	}
	return batch
}

// run verifies a batch in one step; if that fails with more than one job, each is run alone,
// so that one bad request cannot fail the others.
func (sv *Service) run(batch []*job) {
	ss, ts := make([]*engine.Session, len(batch)), make([]engine.Tree, len(batch))
	rows := 0
	for i, j := range batch {
		ss[i], ts[i] = j.s, j.tree
		rows += len(j.tree.Tokens)
	}
	start := time.Now()
	out, err := sv.e.VerifyBatch(ss, ts)
	if err != nil && len(batch) > 1 {
		for _, j := range batch {
			sv.run([]*job{j})
		}
		return
	}
	if err == nil {
		sv.lastStep.Store(int64(time.Since(start)))
		sv.metrics.step(time.Since(start), rows, len(batch))
		sv.mu.Lock()
		sv.stats.Steps++
		sv.mu.Unlock()
	}
	for i, j := range batch {
		if err != nil {
			j.err = err
		} else {
			j.logits = out[i]
		}
		if j.internal {
			sv.returning.Add(1)
		}
		close(j.done)
	}
}

// Token is a token with the target's log-probability of it at its position.
type Token struct {
	ID      int32   `json:"id"`
	Logprob float64 `json:"logprob"`
	// Top holds the most likely tokens at the position and their log-probabilities, most
	// likely first, when the session's sampler asks for them (Sampler.TopLogprobs).
	Top []TopLogprob `json:"top_logprobs,omitempty"`
}

// TopLogprob is one of the most likely tokens at a position.
type TopLogprob struct {
	ID      int32   `json:"id"`
	Logprob float64 `json:"logprob"`
}

// Opened is the reply to Open.
type Opened struct {
	Session  string `json:"session"`
	Position int    `json:"position"` // tokens so far: the prompt and Next
	Next     Token  `json:"next"`     // the target's first token after the prompt
	// Cached is how many of the prompt's positions came from the prefix cache.
	Cached int `json:"cached"`
}

// Open starts a session: it prefills the prompt and chooses the target's next token. It may
// reach the whole context, and waits for the cache space that needs while other requests
// hold it (at most the admission queue's wait bound).
func (sv *Service) Open(prompt []int32, smp Sampler) (Opened, error) {
	return sv.open(openArgs{ctx: context.Background(), bounded: true}, prompt, smp, nil)
}

// openArgs say how a session is opened: for whom, how far it may go and how long it may wait.
type openArgs struct {
	ctx    context.Context
	client string
	// maxTokens, if > 0, bounds the tokens the session may emit after its prompt (and so its
	// reservation); else it may reach the context.
	maxTokens int
	// bounded: a new request, which waits at most the wait bound and is refused on drain
	// (else a later choice of an admitted one)
	bounded bool
	// internal: a completion's session (never expired nor evicted, not counted against the
	// client's sessions)
	internal bool
	// admitted, if set, is called once the session has its cache space
	admitted func()
}

// open is Open; with score, it also gives score each prompt token with its log-probability
// after the tokens before it (the first token's is NaN: nothing predicts it), in order.
func (sv *Service) open(a openArgs, prompt []int32, smp Sampler, score func(Token)) (Opened, error) {
	if err := smp.Check(); err != nil {
		return Opened{}, paramErr(ErrBad, "sampler", "sampler: %v", err)
	}
	if len(prompt) == 0 {
		return Opened{}, paramErr(ErrBad, "prompt", "empty prompt")
	}
	if len(prompt) > sv.opt.MaxPrompt {
		return Opened{}, paramErr(ErrContextLength, "prompt", "a prompt of %d tokens: this model's context holds at most %d (and the next token)", len(prompt), sv.opt.MaxPrompt)
	}
	if err := sv.checkTokens("prompt", prompt); err != nil {
		return Opened{}, err
	}
	ss := &session{sampler: smp, client: a.client, internal: a.internal, limit: sv.e.Context()}
	if a.maxTokens > 0 {
		ss.limit = min(ss.limit, len(prompt)+a.maxTokens)
	}
	if smp.JSON {
		if sv.opt.Tokenizer == nil {
			return Opened{}, paramErr(ErrBad, "response_format", "JSON mode needs the model's tokenizer")
		}
		ss.vocab = jsonVocabOf(sv.opt.Tokenizer)
	}
	sv.expire()
	if !a.internal {
		if err := sv.countSession(a.client, 1); err != nil {
			return Opened{}, err
		}
		// until it is in sv.sessions, or has failed
		sv.opening.Add(1)
		defer sv.opening.Add(-1)
	}
	ss.reserved = sv.perSession.plus(cost{kv: ss.limit})
	if err := sv.admit.acquire(a.ctx, a.client, ss.reserved, a.bounded, sv.evictIdle); err != nil {
		if !a.internal {
			sv.countSession(a.client, -1)
		}
		return Opened{}, err
	}
	fail := func(err error) (Opened, error) {
		sv.admit.release(ss.reserved)
		if !a.internal {
			sv.countSession(a.client, -1)
		}
		return Opened{}, err
	}
	if a.admitted != nil {
		a.admitted()
	}
	sv.mu.Lock()
	hook := sv.openHook
	sv.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err := a.ctx.Err(); err != nil { // admitted as the request ended
		return fail(context.Cause(a.ctx))
	}
	s := sv.e.NewSession()
	last, err := sv.prefill(s, prompt, smp, score)
	if err == nil {
		last, err = ss.constrain(last, ss.json)
	}
	if err != nil {
		s.Close()
		return fail(err)
	}
	next := smp.Choose(last, len(prompt))
	id, err := newID()
	if err != nil {
		s.Close()
		return fail(err)
	}
	ss.s, ss.next, ss.used = s, next, sv.now()
	if ss.vocab != nil {
		ss.json = ss.vocab.advance(ss.json, next)
	}
	sv.mu.Lock()
	sv.sessions[id] = ss
	sv.stats.Opened++
	sv.mu.Unlock()
	sv.metrics.opened(len(prompt), s.Reused())
	return Opened{Session: id, Position: len(prompt) + 1, Next: smp.token(last, next), Cached: s.Reused()}, nil
}

// countSession adds d to client's open verify sessions, refusing one past the cap.
func (sv *Service) countSession(client string, d int) error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if d > 0 && client != "" && sv.opt.ClientSessions > 0 && sv.byClient[client] >= sv.opt.ClientSessions {
		return &APIError{Err: fmt.Errorf("%w: this client has %d sessions open, the most it may; close one (DELETE /v1/sessions/{id})", ErrQueueFull, sv.byClient[client]), Code: "session_limit"}
	}
	if sv.byClient[client] += d; sv.byClient[client] <= 0 {
		delete(sv.byClient, client)
	}
	return nil
}

// prefill runs prompt in session s and returns the logits after its last token. With score,
// it runs the prompt a step at a time keeping every position's logits, and gives score each
// prompt token with its log-probability (those bits do not depend on the chunking: width
// invariance).
func (sv *Service) prefill(s *engine.Session, prompt []int32, smp Sampler, score func(Token)) ([]float32, error) {
	if score == nil {
		l, err := s.Prefill(prompt, false)
		if err != nil {
			return nil, err
		}
		return l[0], nil
	}
	score(Token{ID: prompt[0], Logprob: math.NaN()})
	var last []float32
	for i, step := 0, sv.e.MaxRows(); i < len(prompt); i += step {
		chunk := prompt[i:min(i+step, len(prompt))]
		l, err := s.Prefill(chunk, true)
		if err != nil {
			return nil, err
		}
		for j := range chunk {
			if next := i + j + 1; next < len(prompt) {
				score(smp.token(l[j], prompt[next]))
			}
		}
		last = l[len(l)-1]
	}
	return last, nil
}

// Draft is a verify request: draft tokens continuing after the session's next token, as a
// forest — a node with parent −1 directly follows the next token, every other node's parent
// is an earlier node. Position must be the session's current position (prompt, accepted
// tokens and the next token), which rejects drafts built on an outdated continuation.
//
// Dists, if given, are the drafter's distributions, one per node that can have children:
// Dists[0] is the one the roots were drawn from, Dists[i+1] the one node i's children were
// drawn from (without replacement, in draft order; a chain draws one). Verification is then
// speculative sampling (speculate.go) instead of target-sample-and-match.
type Draft struct {
	Position int     `json:"position"`
	Tokens   []int32 `json:"tokens"`
	Parents  []int   `json:"parents"`
	Dists    []Dist  `json:"dists,omitempty"`
}

// Verified is the reply to Verify.
type Verified struct {
	Accepted []int   `json:"accepted"` // the accepted draft nodes, root first
	Tokens   []Token `json:"tokens"`   // their tokens
	Next     Token   `json:"next"`     // the target's token after the last accepted one
	Position int     `json:"position"` // the new position
	Drafted  int     `json:"drafted"`  // draft nodes verified
}

// Verify runs one verification round of session id.
func (sv *Service) Verify(id string, d Draft) (Verified, error) {
	ss, err := sv.get(id)
	if err != nil {
		return Verified{}, err
	}
	sv.mu.Lock()
	hook := sv.roundHook
	sv.mu.Unlock()
	if hook != nil {
		hook()
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return Verified{}, sv.gone(id)
	}
	ss.used = sv.now()
	base := ss.s.Len() // committed positions; the next token goes at base
	if d.Position != base+1 {
		return Verified{}, paramErr(ErrStale, "position", "the session is at position %d, the draft was built at %d", base+1, d.Position)
	}
	n := len(d.Tokens)
	if n > sv.opt.MaxNodes {
		return Verified{}, paramErr(ErrTooLarge, "tokens", "%d draft nodes, at most %d", n, sv.opt.MaxNodes)
	}
	if len(d.Parents) != n {
		return Verified{}, paramErr(ErrBad, "parents", "%d tokens but %d parents", n, len(d.Parents))
	}
	if err := sv.checkTokens("tokens", d.Tokens); err != nil {
		return Verified{}, err
	}
	// engine node 0 is the next token; draft node i is engine node i+1
	t := engine.Tree{Tokens: append([]int32{ss.next}, d.Tokens...), Parents: make([]int, n+1)}
	t.Parents[0] = -1
	children := make([][]int, n+1)
	depth, deepest := make([]int, n+1), 0
	for i, p := range d.Parents {
		if p < -1 || p >= i {
			return Verified{}, paramErr(ErrBad, "parents", "draft node %d has parent %d; a parent is −1 or an earlier node", i, p)
		}
		t.Parents[i+1] = p + 1
		children[p+1] = append(children[p+1], i+1)
		depth[i+1] = depth[p+1] + 1
		deepest = max(deepest, depth[i+1])
	}
	if base+deepest+1 > ss.limit {
		return Verified{}, fmt.Errorf("%w: the session is at %d positions, and a draft %d deep reaches past its %d (its max_tokens or the context)", engine.ErrContext, base+1, deepest, ss.limit)
	}
	dists, err := sv.checkDists(d.Dists, t.Tokens, children)
	if err != nil {
		return Verified{}, err
	}
	// The tree's nodes beyond the session's reservation (and, for a recurrent model, their
	// states) come from the step pool until the commit below.
	over := cost{kv: max(0, base+n+1-ss.limit)}
	if sv.perSession.states > 0 {
		over.states = n + 1
	}
	defer sv.pool.release(over)
	logits, err := sv.verify(ss.s, t, over, ss.internal)
	if err != nil {
		return Verified{}, err
	}
	out := Verified{Accepted: []int{}, Tokens: []Token{}, Drafted: n}
	path, cur := []int{0}, 0
	st := ss.json // JSON mode: the state after the path's tokens
	for {
		pos := base + len(path)
		l, err := ss.constrain(logits[cur], st)
		if err != nil && cur == 0 {
			ss.s.Commit(nil) // drop the tree: the session stays as it was
			return Verified{}, err
		}
		if err != nil {
			// Nothing can follow the last accepted token: it becomes the next token instead,
			// as plain decoding would have emitted it, and the next round fails as that would.
			last := len(out.Tokens) - 1
			out.Next = out.Tokens[last]
			out.Accepted, out.Tokens, path = out.Accepted[:last], out.Tokens[:last], path[:len(path)-1]
			break
		}
		var tok int32
		c := -1
		if dists != nil && len(children[cur]) > 0 {
			kids := make([]int32, len(children[cur]))
			for i, ch := range children[cur] {
				kids[i] = t.Tokens[ch]
			}
			var j int
			if j, tok = speculate(ss.sampler.Dist(l), dists[cur], kids, ss.sampler.acceptRNG(pos)); j >= 0 {
				c = children[cur][j]
			}
		} else {
			tok = ss.sampler.Choose(l, pos)
			for _, ch := range children[cur] {
				if t.Tokens[ch] == tok {
					c = ch
					break
				}
			}
		}
		if ss.vocab != nil {
			st = ss.vocab.advance(st, tok)
		}
		if c < 0 {
			out.Next = ss.sampler.token(l, tok)
			break
		}
		out.Accepted = append(out.Accepted, c-1)
		out.Tokens = append(out.Tokens, ss.sampler.token(l, tok))
		path, cur = append(path, c), c
	}
	if err := ss.s.Commit(path); err != nil {
		return Verified{}, err
	}
	ss.next, ss.json = out.Next.ID, st
	out.Position = base + len(path) + 1
	sv.mu.Lock()
	sv.stats.Rounds++
	if n == 0 {
		sv.stats.Undrafted++
	}
	sv.stats.Drafted += int64(n)
	sv.stats.Accepted += int64(len(out.Accepted))
	for d := range out.Accepted {
		if d == len(sv.stats.AcceptedAt) {
			sv.stats.AcceptedAt = append(sv.stats.AcceptedAt, 0)
		}
		sv.stats.AcceptedAt[d]++
	}
	sv.mu.Unlock()
	sv.metrics.round(n, len(out.Accepted), ss.internal)
	return out, nil
}

// Close ends session id and frees its cache.
func (sv *Service) Close(id string) error {
	sv.mu.Lock()
	ss, ok := sv.sessions[id]
	delete(sv.sessions, id)
	sv.mu.Unlock()
	if !ok {
		return sv.gone(id)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sv.end(ss)
	return nil
}

// end closes ss, which its caller holds and has taken out of sv.sessions, and gives back
// its reservation.
func (sv *Service) end(ss *session) {
	if ss.closed {
		return
	}
	ss.closed = true
	ss.s.Close()
	sv.admit.release(ss.reserved)
	if !ss.internal {
		sv.countSession(ss.client, -1)
	}
}

// gone is the error for a session id that is not open: evicted, or unknown.
func (sv *Service) gone(id string) error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if _, ok := sv.evicted[id]; ok {
		return fmt.Errorf("%w: session %s was closed while idle to free cache space for other requests; open a new one (a prompt that begins with its tokens takes them from the prefix cache)", ErrEvicted, id)
	}
	return paramErr(ErrNoSession, "session", "no open session %q", id)
}

// maxEvicted bounds the evicted sessions' ids kept for their next call's error.
const maxEvicted = 4096

// evictIdle closes the least recently used verify session idle at least EvictAfter, and
// reports whether there was one.
func (sv *Service) evictIdle() bool {
	if sv.opt.EvictAfter < 0 {
		return false
	}
	now := sv.now()
	sv.mu.Lock()
	var lru *session
	var lruID string
	var lruUsed time.Time
	for id, ss := range sv.sessions {
		if ss.internal || !ss.mu.TryLock() { // a session in a request is not idle
			continue
		}
		if !ss.closed && now.Sub(ss.used) >= sv.opt.EvictAfter && (lru == nil || ss.used.Before(lruUsed)) {
			lru, lruID, lruUsed = ss, id, ss.used
		}
		ss.mu.Unlock()
	}
	sv.mu.Unlock()
	if lru == nil {
		return false
	}
	lru.mu.Lock()
	defer lru.mu.Unlock()
	if lru.closed || sv.now().Sub(lru.used) < sv.opt.EvictAfter { // used since: leave it
		return true
	}
	sv.mu.Lock()
	delete(sv.sessions, lruID)
	sv.evicted[lruID] = now
	sv.evictLog = append(sv.evictLog, lruID)
	if len(sv.evictLog) > maxEvicted {
		delete(sv.evicted, sv.evictLog[0])
		sv.evictLog = sv.evictLog[1:]
	}
	sv.stats.Evicted++
	sv.mu.Unlock()
	sv.metrics.evicted()
	sv.end(lru)
	sv.log.Info("session evicted", "session", lruID, "client", lru.client, "idle", now.Sub(lru.used).Round(time.Millisecond))
	return true
}

// OpenSessions is the number of verify-API sessions open or being opened (completions' own
// not counted): an open admitted before a drain began is work in flight, whose session its
// client will use and close.
func (sv *Service) OpenSessions() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	n := int(sv.opening.Load())
	for _, ss := range sv.sessions {
		if !ss.internal {
			n++
		}
	}
	return n
}

// Stats returns the service's counters.
func (sv *Service) Stats() Stats {
	prefix := sv.e.PrefixStats() // not under sv.mu: the engine's lock waits for a running step
	adm := sv.admit.stats()
	adm.StepPoolSize = sv.pool.size.kv
	sv.mu.Lock()
	defer sv.mu.Unlock()
	s := sv.stats
	s.Sessions = len(sv.sessions)
	s.AcceptedAt = append([]int64{}, sv.stats.AcceptedAt...)
	s.PrefixCache = prefix
	s.Admission = adm
	s.Adapters = sv.opt.Adapters
	p := sv.e.Program()
	n, f32 := sv.e.CacheBytes()
	s.KVCache = KVCacheStats{TypeK: p.CacheK.String(), TypeV: p.CacheV.String(), Bytes: n, F32Bytes: f32, SavedBytes: f32 - n}
	return s
}

func (sv *Service) get(id string) (*session, error) {
	sv.expire()
	sv.mu.Lock()
	ss, ok := sv.sessions[id]
	sv.mu.Unlock()
	if !ok {
		return nil, sv.gone(id)
	}
	return ss, nil
}

// expire closes sessions idle for longer than IdleTimeout.
func (sv *Service) expire() {
	if sv.opt.IdleTimeout <= 0 {
		return
	}
	now := sv.now()
	var idle []string
	sv.mu.Lock()
	for id, ss := range sv.sessions {
		if !ss.internal && ss.mu.TryLock() {
			if now.Sub(ss.used) > sv.opt.IdleTimeout {
				idle = append(idle, id)
			}
			ss.mu.Unlock()
		}
	}
	sv.mu.Unlock()
	for _, id := range idle {
		sv.closeIfIdle(id, now)
	}
}

// closeIfIdle closes session id if it is still idle at now: a request may have used it since
// expire looked.
func (sv *Service) closeIfIdle(id string, now time.Time) {
	sv.mu.Lock()
	ss, ok := sv.sessions[id]
	sv.mu.Unlock()
	if !ok {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed || now.Sub(ss.used) <= sv.opt.IdleTimeout {
		return
	}
	sv.mu.Lock()
	delete(sv.sessions, id)
	sv.mu.Unlock()
	sv.end(ss)
}

// checkDists checks a draft's distributions against its tree (engine nodes: tokens, children)
// and returns them normalised, or nil if there are none.
func (sv *Service) checkDists(ds []Dist, tokens []int32, children [][]int) ([]Dist, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	if len(ds) != len(tokens) {
		return nil, fmt.Errorf("%w: %d distributions for %d draft nodes (want one more: the roots' first)", ErrBad, len(ds), len(tokens)-1)
	}
	out := make([]Dist, len(ds))
	for i, d := range ds {
		q, err := d.normalise(sv.e.Program().Config.NVocab)
		if err != nil {
			return nil, fmt.Errorf("%w: distribution %d: %v", ErrBad, i, err)
		}
		seen := map[int32]bool{}
		for _, ch := range children[i] {
			x := tokens[ch]
			if seen[x] {
				return nil, fmt.Errorf("%w: children of distribution %d repeat token %d (they are drawn without replacement)", ErrBad, i, x)
			}
			seen[x] = true
			if q.prob(x) <= 0 {
				return nil, fmt.Errorf("%w: draft node %d has token %d, which distribution %d gives no probability", ErrBad, ch-1, x, i)
			}
		}
		out[i] = q
	}
	return out, nil
}

// checkTokens reports a token outside the vocabulary.
func (sv *Service) checkTokens(what string, toks []int32) error {
	nv := sv.e.Program().Config.NVocab
	for i, t := range toks {
		if t < 0 || int(t) >= nv {
			return paramErr(ErrBad, what, "%s token %d is %d, outside the vocabulary of %d", what, i, t, nv)
		}
	}
	return nil
}

func newID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
