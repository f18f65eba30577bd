package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"verity/host/tokenizer"
)

// MaxChoices bounds an OpenAI request's n: each choice is a session of its own.
const MaxChoices = 8

// generation is what an OpenAI request asks to generate: n choices after prompt, choice i
// sampled with smp's seed plus i, each ending before the first of stops; with echo each
// begins with the prompt (see echoPieces).
type generation struct {
	prompt       []int32
	smp          Sampler
	maxTokens, n int
	stream, echo bool
	stops        []string
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
// last one with its finish reason, the usage on the last of all, then [DONE]). choice shapes
// one choice of a reply or chunk; wrap makes the reply or chunk of choices from the common
// fields in c.
func respond[C any](sv *Service, w http.ResponseWriter, r *http.Request, g generation,
	choice func(i int, out release) C, wrap func(c Completion, choices []C) any) {
	id, err := newID()
	if err != nil {
		reply(w, nil, err)
		return
	}
	c := Completion{ID: "cmpl-" + id, Created: time.Now().Unix(), Model: sv.opt.ModelName}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	var mu sync.Mutex // guards what the choices share: the writer, the counts, the first error
	var firstErr error
	generated, running := 0, g.n
	var send func(i int, out release) error
	var whole []release // one per choice, accumulated when not streaming
	var texts []strings.Builder
	started := false
	if g.stream {
		flusher, _ := w.(http.Flusher)
		send = func(i int, out release) error {
			mu.Lock()
			defer mu.Unlock()
			generated += len(out.toks)
			cc := c
			if out.reason != nil {
				if running--; running == 0 {
					cc.Usage = &CompletionUsage{len(g.prompt), generated, len(g.prompt) + generated}
				}
			}
			b, err := json.Marshal(wrap(cc, []C{choice(i, out)}))
			if err != nil {
				return err
			}
			if !started {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Cache-Control", "no-cache")
				started = true
			}
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		}
	} else {
		whole, texts = make([]release, g.n), make([]strings.Builder, g.n)
		send = func(i int, out release) error { // each choice writes only its own entries
			texts[i].WriteString(out.text)
			whole[i].toks = append(whole[i].toks, out.toks...)
			whole[i].pieces = append(whole[i].pieces, out.pieces...)
			whole[i].reason = out.reason
			return nil
		}
	}
	var wg sync.WaitGroup
	for i := range g.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sv.runChoice(ctx, g, i, func(out release) error { return send(i, out) }); err != nil {
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
	if firstErr != nil {
		// Before the first chunk an error is an ordinary reply; afterwards the stream just
		// ends (the headers are gone).
		if !started {
			reply(w, nil, firstErr)
		}
		return
	}
	if g.stream {
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	choices := make([]C, g.n)
	for i, out := range whole {
		out.text = texts[i].String()
		generated += len(out.toks)
		if out.toks == nil {
			out.toks = []int32{}
		}
		choices[i] = choice(i, out)
	}
	c.Usage = &CompletionUsage{len(g.prompt), generated, len(g.prompt) + generated}
	reply(w, wrap(c, choices), nil)
}

// runChoice generates choice i of g, handing out each token's release as it comes, then the
// end's (with the finish reason).
func (sv *Service) runChoice(ctx context.Context, g generation, i int, out func(release) error) error {
	tk := sv.opt.Tokenizer
	smp := g.smp
	smp.Seed += uint64(i)
	ts := NewTextStream(tk, g.stops)
	var scored []Token
	var score func(Token)
	if g.echo {
		score = func(t Token) { scored = append(scored, t) }
	}
	promptChars, echoed := 0, false
	// shift moves generated pieces' offsets past the echoed prompt's characters.
	shift := func(ps []Piece) []Piece {
		for i := range ps {
			ps[i].Offset += promptChars
		}
		return ps
	}
	// The echoed prompt goes out first, once the prompt has run.
	echo := func() error {
		if !g.echo || echoed {
			return nil
		}
		echoed = true
		text, ps, n := echoPieces(tk, scored)
		promptChars = n
		return out(release{text: text, toks: []int32{}, pieces: ps})
	}
	reason, err := sv.complete(ctx, g.prompt, smp, g.maxTokens, nil, score, func(t Token) error {
		if err := echo(); err != nil {
			return err
		}
		text, pieces, stopped, err := ts.Add(t)
		if err == nil {
			err = out(release{text: text, toks: []int32{t.ID}, pieces: shift(pieces)})
		}
		if err == nil && stopped {
			err = ErrStop
		}
		return err
	})
	if err == nil {
		err = echo()
	}
	if err != nil {
		return err
	}
	text, pieces := ts.End()
	return out(release{text: text, toks: []int32{}, pieces: shift(pieces), reason: &reason})
}

// echoPieces are an echoed prompt's scored tokens as text: each token's text (special tokens
// written out, so that the text and the tokens agree) at its offset in characters. It returns
// the text, the pieces and the text's length in characters.
func echoPieces(tk *tokenizer.Tokenizer, toks []Token) (string, []Piece, int) {
	var text []byte
	pieces := make([]Piece, len(toks))
	for i, t := range toks {
		p, _ := tk.Piece(t.ID, true)
		pieces[i] = Piece{Token: t, Bytes: p, start: len(text)}
		text = append(text, p...)
	}
	var cc charCounter
	for i := range pieces {
		pieces[i].Offset = cc.at(text, pieces[i].start)
	}
	return string(text), pieces, cc.at(text, len(text))
}
