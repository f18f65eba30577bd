package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"verity/host/engine"
)

// Plain completions, for clients that speak OpenAI's /v1/completions: a session whose verify
// rounds carry no draft, so each round is one decoding step — batched with every other
// session's rounds like any verify — and emits one token. The tokens are those of plain
// decoding with the same sampler, as for any verified session.

// CompletionRequest is the body of POST /v1/completions (OpenAI's fields, plus top_k and seed,
// and a prompt of token ids as well as text).
type CompletionRequest struct {
	Model       string          `json:"model,omitempty"` // ignored: the service serves one model
	Prompt      json.RawMessage `json:"prompt"`          // a string, or an array of token ids
	MaxTokens   *int            `json:"max_tokens,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"` // default 1, as OpenAI's
	TopP        *float64        `json:"top_p,omitempty"`
	TopK        int             `json:"top_k,omitempty"`
	Seed        uint64          `json:"seed,omitempty"`
	Stream      bool            `json:"stream,omitempty"`
}

// Completion is the reply (or, streamed, each chunk) of /v1/completions.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"` // "text_completion"
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *CompletionUsage   `json:"usage,omitempty"` // the whole reply, or a stream's last chunk
}

// CompletionChoice holds the generated text; Tokens (an extension) its token ids.
type CompletionChoice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Tokens       []int32 `json:"tokens"`
	FinishReason *string `json:"finish_reason"` // "stop" (end of generation), "length"; null while streaming
}

// CompletionUsage counts tokens.
type CompletionUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// defaultMaxTokens is OpenAI's default max_tokens.
const defaultMaxTokens = 16

// Complete generates after prompt with sampler smp until an end-of-generation token, maxTokens
// tokens or the end of the context, calling emit with each token (the end-of-generation token
// included, which emit should not show); it returns why it stopped: "stop" or "length". The
// session lives only for the call; ctx ends it early (with ctx's error).
func (sv *Service) Complete(ctx context.Context, prompt []int32, smp Sampler, maxTokens int, emit func(Token) error) (string, error) {
	if maxTokens < 1 {
		return "", fmt.Errorf("%w: max_tokens %d: want at least 1", ErrBad, maxTokens)
	}
	op, err := sv.Open(prompt, smp)
	if err != nil {
		return "", err
	}
	defer sv.Close(op.Session)
	tok, pos := op.Next, op.Position
	for n := 1; ; n++ {
		if err := emit(tok); err != nil {
			return "", err
		}
		if sv.opt.Tokenizer != nil && sv.opt.Tokenizer.IsEOG(tok.ID) {
			return "stop", nil
		}
		if n == maxTokens {
			return "length", nil
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		v, err := sv.Verify(op.Session, Draft{Position: pos})
		if errors.Is(err, ErrTooLarge) || errors.Is(err, engine.ErrContext) {
			return "length", nil // the context is full
		}
		if err != nil {
			return "", err
		}
		tok, pos = v.Next, v.Position
	}
}

// completionPrompt reads a prompt that is a string (tokenized like a session's text) or an
// array of token ids.
func (sv *Service) completionPrompt(raw json.RawMessage) ([]int32, error) {
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		return sv.tokenize(text, nil)
	}
	var ids []int32
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, fmt.Errorf("%w: prompt: want a string or an array of token ids", ErrBad)
	}
	return ids, nil
}

// handleCompletion serves POST /v1/completions, whole or as server-sent events.
func (sv *Service) handleCompletion(w http.ResponseWriter, r *http.Request) {
	var req CompletionRequest
	if !decode(w, r, &req) {
		return
	}
	tk := sv.opt.Tokenizer
	if tk == nil {
		reply(w, nil, fmt.Errorf("%w: completions need the model's tokenizer, which this service does not have", ErrBad))
		return
	}
	prompt, err := sv.completionPrompt(req.Prompt)
	if err != nil {
		reply(w, nil, err)
		return
	}
	smp := Sampler{Temperature: 1, TopP: 1, TopK: req.TopK, Seed: req.Seed}
	if req.Temperature != nil {
		smp.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		smp.TopP = *req.TopP
	}
	maxTokens := defaultMaxTokens
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	id, err := newID()
	if err != nil {
		reply(w, nil, err)
		return
	}
	c := Completion{ID: "cmpl-" + id, Object: "text_completion", Created: time.Now().Unix(), Model: sv.opt.ModelName}
	var text utf8Buffer
	var toks []int32
	piece := func(t Token) string {
		if tk.IsEOG(t.ID) {
			return text.flush()
		}
		p, _ := tk.Piece(t.ID, true)
		return text.add(p)
	}
	if !req.Stream {
		var all string
		reason, err := sv.Complete(r.Context(), prompt, smp, maxTokens, func(t Token) error {
			all += piece(t)
			toks = append(toks, t.ID)
			return nil
		})
		if err != nil {
			reply(w, nil, err)
			return
		}
		all += text.flush()
		c.Choices = []CompletionChoice{{Text: all, Tokens: toks, FinishReason: &reason}}
		c.Usage = &CompletionUsage{len(prompt), len(toks), len(prompt) + len(toks)}
		reply(w, c, nil)
		return
	}
	// Streaming: errors before the first token are ordinary replies; afterwards the stream
	// just ends (the headers are gone).
	flusher, _ := w.(http.Flusher)
	started := false
	send := func(c Completion) error {
		if !started {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			started = true
		}
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	n := 0
	reason, err := sv.Complete(r.Context(), prompt, smp, maxTokens, func(t Token) error {
		n++
		c.Choices = []CompletionChoice{{Text: piece(t), Tokens: []int32{t.ID}}}
		return send(c)
	})
	if err != nil {
		if !started {
			reply(w, nil, err)
		}
		return
	}
	c.Choices = []CompletionChoice{{Text: text.flush(), Tokens: []int32{}, FinishReason: &reason}}
	c.Usage = &CompletionUsage{len(prompt), n, len(prompt) + n}
	if send(c) == nil {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// utf8Buffer holds back the bytes of a character that a token split, so that every text it
// returns is whole UTF-8 (bytes that can never complete a character go out as they are).
type utf8Buffer struct{ pending []byte }

func (u *utf8Buffer) add(p []byte) string {
	b := append(u.pending, p...)
	cut := len(b)
	// Find the start of a trailing incomplete sequence: at most 3 bytes back.
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	u.pending = append([]byte(nil), b[cut:]...)
	return string(b[:cut])
}

func (u *utf8Buffer) flush() string {
	s := string(u.pending)
	u.pending = nil
	return s
}
