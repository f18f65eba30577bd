package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MaxChoices bounds an OpenAI request's choices: its prompts times n. They run as sessions
// of their own, as many at once as the cache holds full sessions (Engine.Sessions).
const MaxChoices = 64

// generation is what an OpenAI request asks to generate: n choices after each prompt (choice
// p·n + j: prompt p sampled with smp's seed plus j), each ending before the first of stops;
// with echo each begins with its prompt (TextStream.Echo).
type generation struct {
	prompts [][]int32
	// added[p]: how many of prompt p's first and last tokens the tokenizer added to a text
	// prompt (BOS, EOS), which an echo leaves out (nil: none)
	added        [][2]int
	smp          Sampler
	maxTokens, n int
	stream, echo bool
	includeUsage bool // streamed: a last chunk with the usage
	stops        []string
	truncated    *Truncation // a chat fitted to the context (FitChat); nil: whole
}

// release is a piece of one choice's output: text, the generated token ids it covers (one
// per token chunk; none for the echo and the end), the shown tokens whose text begins in it
// (TextStream's pieces), and the finish reason (nil until the choice's end).
type release struct {
	text   string
	toks   []int32
	pieces []Piece
	reason *string
}

// respond runs g's choices side by side — their sessions' rounds share verify steps — and
// replies, whole or as server-sent events (a chunk per token of any choice, each choice's
// last one with its finish reason, with stream_options.include_usage a chunk with the usage
// and no choices, then [DONE]; an error after the first chunk is an event with OpenAI's error
// object that ends the stream). The first choice waits its turn in the admission queue (and
// a refusal there is the reply); the others follow it as the cache has room. choice shapes
// one choice of a reply or chunk; wrap makes the reply or chunk of choices from the common
// fields in c.
func respond[C any](sv *Service, w http.ResponseWriter, r *http.Request, g generation,
	choice func(i int, out release) C, wrap func(c Completion, choices []C) any) {
	nc := len(g.prompts) * g.n
	if len(g.prompts) == 0 || nc > MaxChoices {
		sv.reply(w, nil, paramErr(ErrBad, "n", "%d prompts × n = %d: want 1 … %d choices", len(g.prompts), nc, MaxChoices))
		return
	}
	id, err := newID()
	if err != nil {
		sv.reply(w, nil, err)
		return
	}
	c := Completion{ID: "cmpl-" + id, Created: time.Now().Unix(), Model: sv.opt.ModelName, SystemFingerprint: sv.opt.Fingerprint}
	promptTokens := 0
	for _, p := range g.prompts {
		promptTokens += len(p)
	}
	cached := make([]int, nc) // each choice's prompt positions from the prefix cache
	usage := func(generated int) *CompletionUsage {
		u := &CompletionUsage{PromptTokens: promptTokens, CompletionTokens: generated, TotalTokens: promptTokens + generated, Truncated: g.truncated}
		for p := range g.prompts {
			u.PromptTokensDetails.CachedTokens += cached[p*g.n]
		}
		return u
	}
	ctx, cancel := sv.requestCtx(r)
	defer cancel()

	var mu sync.Mutex // guards what the choices share: the writer, the counts, the first error
	var firstErr error
	generated := 0
	var send func(i int, out release) error
	var whole []release // one per choice, accumulated when not streaming
	var texts []strings.Builder
	started := false
	flusher, _ := w.(http.Flusher)
	event := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			started = true
		}
		sv.writeDeadline(w)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	if g.stream {
		send = func(i int, out release) error {
			mu.Lock()
			defer mu.Unlock()
			generated += len(out.toks)
			return event(wrap(c, []C{choice(i, out)}))
		}
	} else {
		whole, texts = make([]release, nc), make([]strings.Builder, nc)
		send = func(i int, out release) error { // each choice writes only its own entries
			texts[i].WriteString(out.text)
			whole[i].toks = append(whole[i].toks, out.toks...)
			whole[i].pieces = append(whole[i].pieces, out.pieces...)
			whole[i].reason = out.reason
			return nil
		}
	}
	admitted := make(chan struct{}) // the first choice has its cache space
	var wg sync.WaitGroup
	for i := range nc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := openArgs{ctx: ctx, client: clientOf(r), bounded: i == 0}
			if i == 0 {
				a.admitted = func() { close(admitted) }
			} else {
				select {
				case <-admitted:
				case <-ctx.Done():
					return
				}
			}
			err := sv.runChoice(a, g, i, &cached[i], func(out release) error { return send(i, out) })
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = context.Cause(ctx) // the client left, the deadline passed or the server stops
	}
	if firstErr != nil {
		if errors.Is(firstErr, context.Canceled) && r.Context().Err() != nil {
			return // the client left: nobody reads a reply
		}
		if !started {
			sv.reply(w, nil, firstErr)
		} else {
			event(bodyOf(firstErr))
		}
		return
	}
	if g.stream {
		if g.includeUsage {
			cc := c
			cc.Usage = usage(generated)
			event(wrap(cc, []C{}))
		}
		sv.writeDeadline(w)
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	choices := make([]C, nc)
	for i, out := range whole {
		out.text = texts[i].String()
		generated += len(out.toks)
		if out.toks == nil {
			out.toks = []int32{}
		}
		choices[i] = choice(i, out)
	}
	c.Usage = usage(generated)
	sv.reply(w, wrap(c, choices), nil)
}

// runChoice generates choice i of g (j of its prompt's n), setting *cached (see complete) and
// handing out each token's release as it comes, then the end's (with the finish reason). An
// echo is the prompt as the client gave it: without the BOS or EOS the tokenizer added to a
// text prompt.
func (sv *Service) runChoice(a openArgs, g generation, i int, cached *int, out func(release) error) error {
	p, j := i/g.n, i%g.n
	prompt := g.prompts[p]
	smp := g.smp
	smp.Seed += uint64(j)
	ts := NewTextStream(sv.opt.Tokenizer, g.stops)
	var lead, trail int
	if p < len(g.added) {
		lead, trail = g.added[p][0], g.added[p][1]
	}
	var scored []Token
	var score func(Token)
	if g.echo {
		score = func(t Token) { scored = append(scored, t) }
	}
	// The echoed prompt goes out first, once the prompt has run.
	echoed := false
	echo := func() error {
		if !g.echo || echoed {
			return nil
		}
		echoed = true
		text, pieces := ts.Echo(scored[lead : len(scored)-trail])
		return out(release{text: text, toks: []int32{}, pieces: pieces})
	}
	reason, err := sv.complete(a, prompt, smp, g.maxTokens, nil, score, cached, func(t Token) error {
		if err := echo(); err != nil {
			return err
		}
		text, pieces, stopped := ts.Add(t)
		if err := out(release{text: text, toks: []int32{t.ID}, pieces: pieces}); err != nil {
			return err
		}
		if stopped {
			return ErrStop
		}
		return nil
	})
	if err == nil {
		err = echo()
	}
	if err != nil {
		return err
	}
	text, pieces := ts.End()
	return out(release{text: text, toks: []int32{}, pieces: pieces, reason: &reason})
}
