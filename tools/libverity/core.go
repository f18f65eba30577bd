package main

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"verity/device"
	"verity/device/backend"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/lora"
	"verity/host/serve"
	"verity/host/tokenizer"
)

// The library's work, free of cgo: models and sessions behind integer handles, and each
// C function's checks and actions. lib.go converts between C and these functions.

// code is a status the C functions return (lib.go maps each to its VERITY_* constant).
type code int

const (
	codeOK code = iota
	codeArgument
	codeStructSize
	codeHandle
	codeBuffer
	codeBusy
	codeIO
	codeModel
	codeUnsupported
	codeContext
	codeCapacity
	codeState
	codeInternal
)

// apiError is an error with the status it returns.
type apiError struct {
	code code
	err  error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

// fail returns an error of code c.
func fail(c code, format string, args ...any) error {
	return &apiError{code: c, err: fmt.Errorf(format, args...)}
}

// wrap gives err code c unless it already has a code (or is engine's context or capacity
// error, which have theirs).
func wrap(c code, err error) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	switch {
	case errors.Is(err, engine.ErrContext):
		c = codeContext
	case errors.Is(err, engine.ErrCapacity):
		c = codeCapacity
	}
	return &apiError{code: c, err: err}
}

// codeOf is the status of err (nil: codeOK; an error without one: codeInternal).
func codeOf(err error) code {
	if err == nil {
		return codeOK
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code
	}
	return codeInternal
}

// Cache element types (VERITY_CACHE_*).
const (
	cacheDefault = iota
	cacheF32
	cacheF16
	cacheBF16
)

// openOptions are verity_open_options.
type openOptions struct {
	backend                    string
	threads, context, sessions int
	maxRows                    int
	cacheK, cacheV             int
	prefixCache, megakernel    bool
	adapterPaths               []string
	adapterScales              []float64
	chatTemplate               string
	haveChatTemplate           bool
}

// Bounds on the options: past these a value is a mistake, not a request.
const (
	maxThreads  = 4096
	maxSessions = 1 << 16
	maxRowsMax  = 4096
)

// model is an open model.
type model struct {
	id       uint64
	m        *engine.Model
	tk       *tokenizer.Tokenizer
	backends []device.Backend
	threads  int // the CPU threads of its backends (0 for GPUs only)
	params   uint64
	// guarded by the registry's lock
	inflight int // calls running on the model or its sessions
	sessions map[uint64]*session
}

// session is an open session of a model.
type session struct {
	id    uint64
	model *model
	s     *engine.Session
	// guarded by the registry's lock
	busy bool // a call is running on it
	// set and read only by the call holding the session (busy)
	verified bool // a verified tree awaits commit

	mu    sync.Mutex // guards stats
	stats stats
}

// stats are verity_stats.
type stats struct {
	prefillSeconds, decodeSeconds     float64
	prefillTokens, decodeTokens       int // computed by the last call (cached ones not counted)
	promptTokens, cachedTokens        int
	generatedTokens, truncatedMessage int
	finish                            int
}

// Finish reasons (VERITY_FINISH_*).
const (
	finishNone = iota
	finishStop
	finishLength
	finishCallback
)

// registry holds the open models and sessions. Handles count up from 1 and are never
// reused, so a closed one stays invalid.
type registry struct {
	mu       sync.Mutex
	last     uint64
	models   map[uint64]*model
	sessions map[uint64]*session
}

var reg = &registry{models: map[uint64]*model{}, sessions: map[uint64]*session{}}

// newID returns a fresh handle (the caller holds r.mu).
func (r *registry) newID() uint64 {
	r.last++
	return r.last
}

// useModel returns model id for a call, which must call done when it ends; a model with
// calls running cannot close.
func (r *registry) useModel(id uint64) (*model, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.models[id]
	if !ok {
		return nil, nil, fail(codeHandle, "no open model has handle %d", id)
	}
	m.inflight++
	return m, func() {
		r.mu.Lock()
		m.inflight--
		r.mu.Unlock()
	}, nil
}

// useSession returns session id for a call that runs on it, one at a time: a second call
// while one runs (from another thread, or from a callback of the first) gets codeBusy.
func (r *registry) useSession(id uint64) (*session, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		return nil, nil, fail(codeHandle, "no open session has handle %d", id)
	}
	if s.busy {
		return nil, nil, fail(codeBusy, "session %d is running another call (on another thread, or the one whose callback this is)", id)
	}
	s.busy = true
	s.model.inflight++
	return s, func() {
		r.mu.Lock()
		s.busy = false
		s.model.inflight--
		r.mu.Unlock()
	}, nil
}

// peekSession returns session id for a call that only reads it (stats), allowed while
// another call runs on it.
func (r *registry) peekSession(id uint64) (*session, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	if !ok {
		return nil, nil, fail(codeHandle, "no open session has handle %d", id)
	}
	s.model.inflight++
	return s, func() {
		r.mu.Lock()
		s.model.inflight--
		r.mu.Unlock()
	}, nil
}

// openModel loads the model at path.
func openModel(path string, o openOptions) (id uint64, err error) {
	switch {
	case path == "":
		return 0, fail(codeArgument, "no model path")
	case o.threads < 0 || o.threads > maxThreads:
		return 0, fail(codeArgument, "threads %d: want 0 (one per CPU) … %d", o.threads, maxThreads)
	case o.context < 0:
		return 0, fail(codeArgument, "context %d: want 0 (the default) or more", o.context)
	case o.sessions < 0 || o.sessions > maxSessions:
		return 0, fail(codeArgument, "sessions %d: want 0 (one) … %d", o.sessions, maxSessions)
	case o.maxRows < 0 || o.maxRows > maxRowsMax:
		return 0, fail(codeArgument, "max_rows %d: want 0 (64) … %d", o.maxRows, maxRowsMax)
	}
	for _, c := range []struct {
		name string
		t    int
	}{{"cache_type_k", o.cacheK}, {"cache_type_v", o.cacheV}} {
		switch c.t {
		case cacheDefault, cacheF32, cacheF16, cacheBF16:
		default:
			return 0, fail(codeArgument, "%s %d: want a VERITY_CACHE_* value", c.name, c.t)
		}
	}
	for i, p := range o.adapterPaths {
		if p == "" {
			return 0, fail(codeArgument, "adapter %d: no path", i)
		}
		if s := o.adapterScales[i]; math.IsNaN(s) || math.IsInf(s, 0) {
			return 0, fail(codeArgument, "adapter %d: scale %v is not finite", i, s)
		}
	}
	bes, err := backend.OpenList(o.backend, o.threads)
	if errors.Is(err, device.ErrNotBuilt) {
		return 0, wrap(codeUnsupported, err)
	} else if err != nil {
		return 0, wrap(codeArgument, err)
	}
	defer func() {
		if err != nil {
			backend.CloseAll(bes)
		}
	}()
	f, err := gguf.Open(path)
	if err != nil {
		return 0, wrap(codeIO, err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	tk, err := tokenizer.Load(f)
	if err != nil {
		return 0, wrap(codeModel, err)
	}
	if o.haveChatTemplate {
		if tk, err = tk.WithChatTemplate(o.chatTemplate); err != nil {
			return 0, wrap(codeArgument, err)
		}
	}
	var uses []lora.Use
	defer func() {
		for _, u := range uses {
			u.Adapter.Close()
		}
	}()
	for i, p := range o.adapterPaths {
		a, err := lora.Open(p)
		if err != nil {
			return 0, wrap(codeIO, fmt.Errorf("adapter %d: %w", i, err))
		}
		uses = append(uses, lora.Use{Adapter: a, Scale: o.adapterScales[i]})
	}
	cacheType := func(c int) dtype.Type {
		switch c {
		case cacheF32:
			return dtype.F32
		case cacheF16:
			return dtype.F16
		case cacheBF16:
			return dtype.BF16
		}
		return backend.DefaultCacheType(bes)
	}
	m, err := engine.FromFileSplit(f, bes, nil, engine.LoadOptions{MaxRows: o.maxRows, Context: o.context, Sessions: o.sessions,
		PrefixCache: o.prefixCache, Megakernel: o.megakernel, Adapters: uses, CacheK: cacheType(o.cacheK), CacheV: cacheType(o.cacheV)})
	if err != nil {
		return 0, wrap(codeModel, err)
	}
	mod := &model{m: m, tk: tk, backends: bes, sessions: map[uint64]*session{}}
	for _, t := range f.Tensors {
		mod.params += uint64(t.Elements())
	}
	for _, b := range bes {
		if !strings.HasPrefix(b.Name(), "cuda") {
			mod.threads = o.threads
			if mod.threads == 0 {
				mod.threads = runtime.GOMAXPROCS(0) // as cpu.New and ptxvm count them
			}
		}
	}
	reg.mu.Lock()
	mod.id = reg.newID()
	reg.models[mod.id] = mod
	reg.mu.Unlock()
	return mod.id, nil
}

// closeModel closes model id and its sessions.
func closeModel(id uint64) error {
	reg.mu.Lock()
	m, ok := reg.models[id]
	if !ok {
		reg.mu.Unlock()
		return fail(codeHandle, "no open model has handle %d", id)
	}
	if m.inflight > 0 {
		reg.mu.Unlock()
		return fail(codeBusy, "model %d has %d calls running (on other threads, or the one whose callback this is)", id, m.inflight)
	}
	delete(reg.models, id)
	for sid := range m.sessions {
		delete(reg.sessions, sid)
	}
	reg.mu.Unlock()
	for _, s := range m.sessions {
		s.s.Close()
	}
	err := m.m.Close()
	backend.CloseAll(m.backends)
	return wrap(codeIO, err)
}

// modelInfo is verity_model_info.
type modelInfo struct {
	architecture, name, chatFormat, tokenizer, preTokenizer, backend string
	parameters                                                       uint64
	context, trainContext, vocab, tokenizerVocab                     int
	layers, embedding, experts, expertsUsed, maxRows, sessions       int
	bos, eos, adapters, threads                                      int
}

func modelInfoOf(id uint64) (modelInfo, error) {
	m, done, err := reg.useModel(id)
	if err != nil {
		return modelInfo{}, err
	}
	defer done()
	c := m.m.Program().Config
	info := modelInfo{architecture: c.Arch, name: c.Name, chatFormat: m.tk.ChatTemplate(), tokenizer: m.tk.Model(),
		preTokenizer: m.tk.PreTokenizer(), backend: m.m.Executor().Name(), parameters: m.params,
		context: m.m.Context(), trainContext: c.NCtx, vocab: c.NVocab, tokenizerVocab: m.tk.NVocab(),
		layers: c.NLayer, embedding: c.NEmbd, experts: c.MoE.Experts, expertsUsed: c.MoE.Used,
		maxRows: m.m.MaxRows(), sessions: m.m.Sessions(), bos: int(m.tk.BOS()), eos: int(m.tk.EOS()), threads: m.threads}
	if m.m.LoRA != nil {
		info.adapters = len(m.m.LoRA.Adapters)
	}
	return info, nil
}

// tokenize returns the tokens of text.
func tokenize(id uint64, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	m, done, err := reg.useModel(id)
	if err != nil {
		return nil, err
	}
	defer done()
	return m.tk.Encode(text, tokenizer.Options{AddSpecial: addSpecial, ParseSpecial: parseSpecial}), nil
}

// detokenize returns the text of tokens.
func detokenize(id uint64, toks []int32, special bool) (string, error) {
	m, done, err := reg.useModel(id)
	if err != nil {
		return "", err
	}
	defer done()
	s, err := m.tk.Decode(toks, special)
	return s, wrap(codeArgument, err)
}

// openSession starts an empty session of model id.
func openSession(id uint64) (uint64, error) {
	m, done, err := reg.useModel(id)
	if err != nil {
		return 0, err
	}
	defer done()
	s := &session{model: m, s: m.m.NewSession()}
	reg.mu.Lock()
	s.id = reg.newID()
	reg.sessions[s.id] = s
	m.sessions[s.id] = s
	reg.mu.Unlock()
	return s.id, nil
}

// closeSession ends session id and frees its cache.
func closeSession(id uint64) error {
	reg.mu.Lock()
	s, ok := reg.sessions[id]
	if !ok {
		reg.mu.Unlock()
		return fail(codeHandle, "no open session has handle %d", id)
	}
	if s.busy {
		reg.mu.Unlock()
		return fail(codeBusy, "session %d is running a call (on another thread, or the one whose callback this is)", id)
	}
	delete(reg.sessions, id)
	delete(s.model.sessions, id)
	reg.mu.Unlock()
	s.s.Close()
	return nil
}

// checkTokens reports a token outside the model's vocabulary.
func (m *model) checkTokens(what string, toks []int32) error {
	nv := m.m.Program().Config.NVocab
	for i, t := range toks {
		if t < 0 || int(t) >= nv {
			return fail(codeArgument, "%s[%d] = %d is outside the vocabulary of %d", what, i, t, nv)
		}
	}
	return nil
}

// prefill appends toks to session id and returns the last one's logits when want.
// logitsCap is the room for them (floats); it is checked before anything runs.
func prefill(id uint64, toks []int32, want bool, logitsCap int) ([]float32, error) {
	s, done, err := reg.useSession(id)
	if err != nil {
		return nil, err
	}
	defer done()
	m := s.model
	nv := m.m.Program().Config.NVocab
	switch {
	case len(toks) == 0:
		return nil, fail(codeArgument, "no tokens")
	case want && logitsCap < nv:
		return nil, fail(codeBuffer, "the logits need %d floats, the buffer holds %d", nv, logitsCap)
	}
	if err := m.checkTokens("tokens", toks); err != nil {
		return nil, err
	}
	start := time.Now()
	l, err := s.s.Prefill(toks, false)
	if err != nil {
		return nil, wrap(codeArgument, err)
	}
	s.verified = false
	s.mu.Lock()
	s.stats.prefillTokens, s.stats.prefillSeconds = len(toks), time.Since(start).Seconds()
	s.stats.decodeTokens, s.stats.decodeSeconds = 0, 0
	s.mu.Unlock()
	return l[0], nil
}

// verifyTree runs a draft tree after session id's tokens and returns each node's logits
// (when logitsCap ≥ 0: the room, in floats) and argmax (when argmaxCap ≥ 0), keeping the
// nodes for commit.
func verifyTree(id uint64, toks, parents []int32, logitsCap, argmaxCap int) ([][]float32, []int32, error) {
	s, done, err := reg.useSession(id)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	m := s.model
	n, nv := len(toks), m.m.Program().Config.NVocab
	switch {
	case n == 0:
		return nil, nil, fail(codeArgument, "an empty tree")
	case n > m.m.MaxRows():
		return nil, nil, fail(codeArgument, "a tree of %d nodes: at most %d (the model's max_rows)", n, m.m.MaxRows())
	case logitsCap >= 0 && logitsCap < n*nv:
		return nil, nil, fail(codeBuffer, "the logits of %d nodes need %d floats, the buffer holds %d", n, n*nv, logitsCap)
	case argmaxCap >= 0 && argmaxCap < n:
		return nil, nil, fail(codeBuffer, "the argmax of %d nodes needs %d entries, the buffer holds %d", n, n, argmaxCap)
	}
	if err := m.checkTokens("tokens", toks); err != nil {
		return nil, nil, err
	}
	t := engine.Tree{Tokens: toks, Parents: make([]int, n)}
	for i, p := range parents {
		t.Parents[i] = int(p)
	}
	if _, err := t.Depths(); err != nil {
		return nil, nil, wrap(codeArgument, err)
	}
	start := time.Now()
	logits, err := s.s.Verify(t)
	if err != nil {
		s.verified = false // the engine dropped the previous tree
		return nil, nil, wrap(codeArgument, err)
	}
	s.verified = true
	s.mu.Lock()
	s.stats.prefillTokens, s.stats.prefillSeconds = n, time.Since(start).Seconds()
	s.stats.decodeTokens, s.stats.decodeSeconds = 0, 0
	s.mu.Unlock()
	var argmax []int32
	if argmaxCap >= 0 {
		argmax = make([]int32, n)
		for i, l := range logits {
			argmax[i] = int32(kernels.ArgmaxRow(l))
		}
	}
	return logits, argmax, nil
}

// commit accepts a root-first path of the last verified tree.
func commit(id uint64, path []int32) error {
	s, done, err := reg.useSession(id)
	if err != nil {
		return err
	}
	defer done()
	if !s.verified {
		return fail(codeState, "session %d has no verified tree to commit (verity_verify_tree first; a prefill, rollback or generation drops it)", id)
	}
	p := make([]int, len(path))
	for i, x := range path {
		p[i] = int(x)
	}
	if err := s.s.Commit(p); err != nil {
		return wrap(codeArgument, err) // the tree is kept: another path may be committed
	}
	s.verified = false
	return nil
}

// rollback keeps the first n positions of session id and drops any verified tree.
func rollback(id uint64, n int) error {
	s, done, err := reg.useSession(id)
	if err != nil {
		return err
	}
	defer done()
	if l := s.s.Len(); n < 0 || n > l {
		return fail(codeArgument, "rollback to %d positions: the session holds %d", n, l)
	}
	if err := s.s.Truncate(n); err != nil {
		return wrap(codeInternal, err)
	}
	s.verified = false
	return nil
}

// sessionTokens returns session id's committed tokens.
func sessionTokens(id uint64) ([]int32, error) {
	s, done, err := reg.useSession(id)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.s.Tokens(), nil
}

// genOptions are verity_generate_options.
type genOptions struct {
	smp       serve.Sampler
	maxTokens int // 0: to the end of the context
	reserve   int // positions kept for the answer when the chat is fitted (0: see generateChat)
	stops     []string
}

// generateChat writes msgs in the model's chat template into session id — keeping the
// session's tokens that begin the prompt, computing the rest — and generates the answer,
// giving emit its text as it comes, in whole UTF-8 characters; emit returns true to stop.
//
// A chat that does not fit the context less the positions reserved for the answer (reserve,
// else max_tokens, else a quarter of the context) loses its oldest turns after the leading
// system messages — a user turn and the assistant's answer to it, together — until it fits;
// the last message is always kept.
func generateChat(id uint64, msgs []tokenizer.Message, o genOptions, emit func(string) bool) (int, error) {
	s, done, err := reg.useSession(id)
	if err != nil {
		return 0, err
	}
	defer done()
	m := s.model
	switch {
	case len(msgs) == 0:
		return 0, fail(codeArgument, "no messages")
	case o.maxTokens < 0:
		return 0, fail(codeArgument, "max_tokens %d: want 0 (to the end of the context) or more", o.maxTokens)
	case o.reserve < 0:
		return 0, fail(codeArgument, "reserve %d: want 0 (the default) or more", o.reserve)
	}
	if err := o.smp.Check(); err != nil {
		return 0, fail(codeArgument, "sampler: %v", err)
	}
	if err := serve.CheckStops(o.stops); err != nil {
		return 0, fail(codeArgument, "stops: %v", err)
	}
	for i, msg := range msgs {
		if msg.Role == "" {
			return 0, fail(codeArgument, "message %d has no role", i)
		}
	}
	ctx := m.m.Context()
	reserve := o.reserve
	if reserve == 0 {
		reserve = o.maxTokens
	}
	if reserve == 0 {
		reserve = ctx / 4
	}
	reserve = max(1, min(reserve, ctx-1))
	prompt, dropped, err := fitChat(m.tk, msgs, ctx-reserve)
	if err != nil {
		return 0, err
	}
	if err := m.checkTokens("prompt", prompt); err != nil {
		return 0, wrap(codeModel, err) // (the tokenizer's vocabulary is larger than the model's)
	}
	// keep the session's tokens that begin the prompt, all but its last (whose logits are
	// needed)
	cur := s.s.Tokens()
	keep := 0
	for keep < min(len(cur), len(prompt)-1) && cur[keep] == prompt[keep] {
		keep++
	}
	s.verified = false
	if err := s.s.Truncate(keep); err != nil {
		return 0, wrap(codeInternal, err)
	}
	start := time.Now()
	l, err := s.s.Prefill(prompt[keep:], false)
	if err != nil {
		return 0, wrap(codeArgument, err)
	}
	cached := keep
	if keep == 0 {
		cached = s.s.Reused() // from the engine's prefix cache
	}
	st := stats{promptTokens: len(prompt), cachedTokens: cached, truncatedMessage: dropped,
		prefillTokens: len(prompt) - cached, prefillSeconds: time.Since(start).Seconds()}
	record := func() {
		s.mu.Lock()
		s.stats = st
		s.mu.Unlock()
	}
	record()
	logits := l[0]
	ts := serve.NewTextStream(m.tk, o.stops)
	send := func(text string) bool { // true: the callback stops generation
		return text != "" && emit(strings.ToValidUTF8(text, string(utf8.RuneError)))
	}
	decodeStart := time.Now()
	finish := finishLength
	for pos := len(prompt); ; pos++ {
		tok := o.smp.Choose(logits, pos)
		st.generatedTokens++
		text, _, stopped := ts.Add(serve.Token{ID: tok})
		if send(text) {
			finish = finishCallback
			break
		}
		if stopped || m.tk.IsEOG(tok) {
			finish = finishStop
			break
		}
		if st.generatedTokens == o.maxTokens || s.s.Len()+1 > ctx {
			break
		}
		if logits, err = s.s.Decode(tok); err != nil {
			st.decodeSeconds = time.Since(decodeStart).Seconds()
			record()
			return 0, wrap(codeInternal, err)
		}
		st.decodeTokens++
		st.decodeSeconds = time.Since(decodeStart).Seconds()
		record()
	}
	if finish != finishCallback {
		if rest, _ := ts.End(); send(rest) {
			finish = finishCallback
		}
	}
	st.finish = finish
	record()
	return finish, nil
}

// fitChat encodes msgs (EncodeChat), leaving out the oldest turns after the leading system
// messages until the prompt has at most budget tokens (see generateChat); it returns the
// prompt and how many messages it left out.
func fitChat(tk *tokenizer.Tokenizer, msgs []tokenizer.Message, budget int) ([]int32, int, error) {
	head := 0
	for head < len(msgs)-1 && msgs[head].Role == "system" {
		head++
	}
	kept := slices.Clone(msgs)
	for {
		prompt, err := tk.EncodeChat(kept, nil)
		switch {
		case errors.Is(err, tokenizer.ErrChatContent):
			return nil, 0, wrap(codeUnsupported, err)
		case err != nil && tk.ChatTemplate() == "":
			return nil, 0, fail(codeUnsupported, "%v (give one with verity_open_options.chat_template)", err)
		case err != nil:
			return nil, 0, wrap(codeArgument, err)
		case len(prompt) == 0:
			return nil, 0, fail(codeArgument, "the chat has no tokens")
		case len(prompt) <= budget:
			return prompt, len(msgs) - len(kept), nil
		case len(kept) == head+1:
			return nil, 0, fail(codeContext, "%v: the system messages and the last message take %d tokens; the context less the answer's reserve holds %d",
				engine.ErrContext, len(prompt), budget)
		}
		// leave out the oldest turn: a message, and an answer to it
		n := 1
		if head+1 < len(kept)-1 && kept[head+1].Role == "assistant" {
			n = 2
		}
		kept = slices.Delete(kept, head, head+n)
	}
}

// statsOf returns session id's statistics.
func statsOf(id uint64) (stats, int, int, int, error) {
	s, done, err := reg.peekSession(id)
	if err != nil {
		return stats{}, 0, 0, 0, err
	}
	defer done()
	s.mu.Lock()
	st := s.stats
	s.mu.Unlock()
	return st, s.s.Len(), s.model.m.Context(), s.model.threads, nil
}
