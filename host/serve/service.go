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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"verity/host/engine"
	"verity/host/tokenizer"
)

// Errors the HTTP layer maps to status codes.
var (
	ErrNoSession = errors.New("serve: no such session")
	ErrStale     = errors.New("serve: draft built on a stale position")
	ErrTooLarge  = errors.New("serve: request too large")
	ErrBad       = errors.New("serve: bad request")
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
	// Tokenizer, if set, lets a new session's prompt be given as text, and serves
	// /v1/completions.
	Tokenizer *tokenizer.Tokenizer
	// ModelName names the model in completions.
	ModelName string
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

	mu       sync.Mutex
	sessions map[string]*session
	stats    Stats
	started  time.Time
}

// Stats are the service's counters since it started.
type Stats struct {
	Sessions int   `json:"sessions"`        // open now
	Opened   int64 `json:"sessions_opened"` // in all
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
}

type session struct {
	mu      sync.Mutex // one request at a time per session
	s       *engine.Session
	sampler Sampler
	next    int32 // the target's chosen next token, not yet in the cache
	used    time.Time
	closed  bool
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
	sv := &Service{e: e, opt: opt, now: time.Now, sessions: map[string]*session{}, started: time.Now(),
		jobs: make(chan *job), quit: make(chan struct{})}
	go sv.batcher()
	return sv
}

// Shutdown stops the batching goroutine; verify calls fail afterwards.
func (sv *Service) Shutdown() { sv.stop.Do(func() { close(sv.quit) }) }

// job is one session's tree waiting for a verify step.
type job struct {
	s      *engine.Session
	tree   engine.Tree
	logits [][]float32
	err    error
	done   chan struct{}
}

// verify runs tree t of session s in the next verify step and returns its nodes' logits.
func (sv *Service) verify(s *engine.Session, t engine.Tree) ([][]float32, error) {
	j := &job{s: s, tree: t, done: make(chan struct{})}
	select {
	case sv.jobs <- j:
	case <-sv.quit:
		return nil, errors.New("serve: the service is shut down")
	}
	<-j.done
	return j.logits, j.err
}

// batcher runs verify steps: it takes a job, adds every other job already waiting while the
// nodes fit one step, runs them together and starts over (a job that does not fit waits for
// the next step).
func (sv *Service) batcher() {
	var held *job
	for {
		first := held
		held = nil
		if first == nil {
			select {
			case first = <-sv.jobs:
			case <-sv.quit:
				return
			}
		}
		batch, nodes := []*job{first}, len(first.tree.Tokens)
	gather:
		for held == nil {
			select {
			case j := <-sv.jobs:
				if nodes+len(j.tree.Tokens) > sv.e.MaxRows() {
					held = j
					break gather
				}
				batch, nodes = append(batch, j), nodes+len(j.tree.Tokens)
			default:
				break gather
			}
		}
		sv.run(batch)
	}
}

// run verifies a batch in one step; if that fails with more than one job, each is run alone,
// so that one bad request cannot fail the others.
func (sv *Service) run(batch []*job) {
	ss, ts := make([]*engine.Session, len(batch)), make([]engine.Tree, len(batch))
	for i, j := range batch {
		ss[i], ts[i] = j.s, j.tree
	}
	out, err := sv.e.VerifyBatch(ss, ts)
	if err != nil && len(batch) > 1 {
		for _, j := range batch {
			sv.run([]*job{j})
		}
		return
	}
	if err == nil {
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

// Open starts a session: it prefills the prompt and chooses the target's next token.
func (sv *Service) Open(prompt []int32, smp Sampler) (Opened, error) {
	return sv.open(prompt, smp, nil)
}

// open is Open; with score, it also gives score each prompt token with its log-probability
// after the tokens before it (the first token's is NaN: nothing predicts it), in order.
func (sv *Service) open(prompt []int32, smp Sampler, score func(Token)) (Opened, error) {
	if err := smp.Check(); err != nil {
		return Opened{}, fmt.Errorf("%w: sampler: %v", ErrBad, err)
	}
	if len(prompt) == 0 {
		return Opened{}, fmt.Errorf("%w: empty prompt", ErrBad)
	}
	if len(prompt) > sv.opt.MaxPrompt {
		return Opened{}, fmt.Errorf("%w: prompt of %d tokens, at most %d", ErrTooLarge, len(prompt), sv.opt.MaxPrompt)
	}
	if err := sv.checkTokens("prompt", prompt); err != nil {
		return Opened{}, err
	}
	ss := &session{sampler: smp}
	if smp.JSON {
		if sv.opt.Tokenizer == nil {
			return Opened{}, fmt.Errorf("%w: JSON mode needs the model's tokenizer", ErrBad)
		}
		ss.vocab = jsonVocabOf(sv.opt.Tokenizer)
	}
	sv.expire()
	s := sv.e.NewSession()
	last, err := sv.prefill(s, prompt, smp, score)
	if err == nil {
		last, err = ss.constrain(last, ss.json)
	}
	if err != nil {
		s.Close()
		return Opened{}, err
	}
	next := smp.Choose(last, len(prompt))
	id, err := newID()
	if err != nil {
		s.Close()
		return Opened{}, err
	}
	ss.s, ss.next, ss.used = s, next, sv.now()
	if ss.vocab != nil {
		ss.json = ss.vocab.advance(ss.json, next)
	}
	sv.mu.Lock()
	sv.sessions[id] = ss
	sv.stats.Opened++
	sv.mu.Unlock()
	return Opened{Session: id, Position: len(prompt) + 1, Next: smp.token(last, next), Cached: s.Reused()}, nil
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
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return Verified{}, ErrNoSession
	}
	ss.used = sv.now()
	base := ss.s.Len() // committed positions; the next token goes at base
	if d.Position != base+1 {
		return Verified{}, fmt.Errorf("%w: the session is at position %d, the draft was built at %d", ErrStale, base+1, d.Position)
	}
	n := len(d.Tokens)
	if n > sv.opt.MaxNodes {
		return Verified{}, fmt.Errorf("%w: %d draft nodes, at most %d", ErrTooLarge, n, sv.opt.MaxNodes)
	}
	if len(d.Parents) != n {
		return Verified{}, fmt.Errorf("%w: %d tokens but %d parents", ErrBad, n, len(d.Parents))
	}
	if err := sv.checkTokens("draft", d.Tokens); err != nil {
		return Verified{}, err
	}
	// engine node 0 is the next token; draft node i is engine node i+1
	t := engine.Tree{Tokens: append([]int32{ss.next}, d.Tokens...), Parents: make([]int, n+1)}
	t.Parents[0] = -1
	children := make([][]int, n+1)
	for i, p := range d.Parents {
		if p < -1 || p >= i {
			return Verified{}, fmt.Errorf("%w: draft node %d has parent %d; a parent is −1 or an earlier node", ErrBad, i, p)
		}
		t.Parents[i+1] = p + 1
		children[p+1] = append(children[p+1], i+1)
	}
	dists, err := sv.checkDists(d.Dists, t.Tokens, children)
	if err != nil {
		return Verified{}, err
	}
	logits, err := sv.verify(ss.s, t)
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
	return out, nil
}

// Close ends session id and frees its cache.
func (sv *Service) Close(id string) error {
	sv.mu.Lock()
	ss, ok := sv.sessions[id]
	delete(sv.sessions, id)
	sv.mu.Unlock()
	if !ok {
		return ErrNoSession
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	ss.s.Close()
	return nil
}

// Stats returns the service's counters.
func (sv *Service) Stats() Stats {
	prefix := sv.e.PrefixStats() // not under sv.mu: the engine's lock waits for a running step
	sv.mu.Lock()
	defer sv.mu.Unlock()
	s := sv.stats
	s.Sessions = len(sv.sessions)
	s.AcceptedAt = append([]int64{}, sv.stats.AcceptedAt...)
	s.PrefixCache = prefix
	return s
}

func (sv *Service) get(id string) (*session, error) {
	sv.expire()
	sv.mu.Lock()
	defer sv.mu.Unlock()
	ss, ok := sv.sessions[id]
	if !ok {
		return nil, ErrNoSession
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
		if ss.mu.TryLock() {
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
	ss.closed = true
	ss.s.Close()
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
			return fmt.Errorf("%w: %s token %d is %d, outside the vocabulary of %d", ErrBad, what, i, t, nv)
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
