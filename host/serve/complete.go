package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"verity/host/engine"
	"verity/host/tokenizer"
)

// Plain completions, for clients that speak OpenAI's /v1/completions: a session whose verify
// rounds carry no draft, so each round is one decoding step — batched with every other
// session's rounds like any verify — and emits one token. The tokens are those of plain
// decoding with the same sampler, as for any verified session.

// CompletionRequest is the body of POST /v1/completions (OpenAI's fields, plus top_k and seed,
// and a prompt of token ids as well as text).
type CompletionRequest struct {
	Model  string          `json:"model,omitempty"` // ignored: the service serves one model
	Prompt json.RawMessage `json:"prompt"`          // a string, an array of token ids, or an array of those
	// Logprobs asks for each token's log-probability and those of this many (0 … 20) most
	// likely tokens at its position; absent or null: none.
	Logprobs *int `json:"logprobs,omitempty"`
	// BestOf is accepted when it equals n (or is 1); Suffix when empty.
	BestOf *int    `json:"best_of,omitempty"`
	Suffix *string `json:"suffix,omitempty"`
	// With echo (in openAIParams) the text begins with the prompt's — its tokens' texts,
	// special tokens written out — and the log-probabilities with the prompt tokens' (each
	// after the tokens before it; the first's null); max_tokens 0 then scores the prompt alone.
	openAIParams
}

// openAIParams are the request fields both endpoints share: the sampler's, max_tokens (or
// max_completion_tokens), stream and stream_options, stop strings, n, echo (completions only);
// fields that change nothing here and are ignored (user, store, metadata, service_tier,
// parallel_tool_calls); and fields the service does not honour, accepted only at their
// defaults (penalties zero, logit_bias, tools and functions empty) and otherwise refused with
// unsupported_parameter, so that clients' default bodies work while a setting that would be
// silently dropped is refused.
type openAIParams struct {
	MaxTokens           *int      `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int      `json:"max_completion_tokens,omitempty"` // max_tokens' newer name; wins when both are set
	Temperature         *float64  `json:"temperature,omitempty"`           // default 1, as OpenAI's
	TopP                *float64  `json:"top_p,omitempty"`
	TopK                int       `json:"top_k,omitempty"`
	Seed                *seedSpec `json:"seed,omitempty"` // absent: a random one; negative seeds are their 64 bits
	Stream              bool      `json:"stream,omitempty"`
	// Stop is a string or an array of up to 16: the text ends before the first to occur in it.
	Stop          json.RawMessage `json:"stop,omitempty"`
	N             *int            `json:"n,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	Echo             bool               `json:"echo,omitempty"` // completions only
	PresencePenalty  float64            `json:"presence_penalty,omitempty"`
	FrequencyPenalty float64            `json:"frequency_penalty,omitempty"`
	LogitBias        map[string]float64 `json:"logit_bias,omitempty"`
	// ResponseFormat {"type": "json_object"} is JSON mode (Sampler.JSON); "text" is the default.
	ResponseFormat *struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema,omitempty"`
	} `json:"response_format,omitempty"`
	// ignored
	User              json.RawMessage `json:"user,omitempty"`
	Store             json.RawMessage `json:"store,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	ServiceTier       json.RawMessage `json:"service_tier,omitempty"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls,omitempty"`
	// refused unless null or empty
	Tools        json.RawMessage `json:"tools,omitempty"`
	ToolChoice   json.RawMessage `json:"tool_choice,omitempty"`
	Functions    json.RawMessage `json:"functions,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
}

// seedSpec is a seed as a request gives it: any integer from −2⁶³ to 2⁶⁴−1 (a negative one
// stands for its two's-complement 64 bits).
type seedSpec uint64

func (s *seedSpec) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return paramErr(ErrBad, "seed", "seed: want an integer, got %s", b)
	}
	if u, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
		*s = seedSpec(u)
		return nil
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return paramErr(ErrBad, "seed", "seed %s: want an integer from -9223372036854775808 to 18446744073709551615", n)
	}
	*s = seedSpec(uint64(i))
	return nil
}

// unsupported is the error for a parameter the service does not honour.
func unsupported(param, why string) error {
	return paramErr(ErrUnsupported, param, "%s is not supported%s", param, why)
}

// empty reports whether an optional JSON field is absent, null or empty.
func empty(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null" || s == "[]" || s == "{}"
}

// generation checks the parameters, refusing settings the service does not honour, and
// returns what they ask for (all but the prompts): temperature and top_p default to 1,
// max_tokens to OpenAI's 16, the seed to a random one.
func (x openAIParams) generation() (generation, error) {
	g := generation{n: 1, maxTokens: defaultMaxTokens, stream: x.Stream, echo: x.Echo,
		smp: Sampler{Temperature: 1, TopP: 1, TopK: x.TopK}}
	var err error
	if g.stops, err = stopsOf(x.Stop); err != nil {
		return g, paramErr(ErrBad, "stop", "%v", err)
	}
	if x.N != nil {
		g.n = *x.N
	}
	switch {
	case g.n < 1 || g.n > MaxChoices:
		return g, paramErr(ErrBad, "n", "n = %d: want 1 … %d choices", g.n, MaxChoices)
	case x.PresencePenalty != 0:
		return g, unsupported("presence_penalty", " (it would change plain decoding's tokens)")
	case x.FrequencyPenalty != 0:
		return g, unsupported("frequency_penalty", " (it would change plain decoding's tokens)")
	case len(x.LogitBias) > 0:
		return g, unsupported("logit_bias", " (it would change plain decoding's tokens)")
	case !empty(x.Tools):
		return g, unsupported("tools", ": the service generates text only")
	case !empty(x.ToolChoice) && strings.TrimSpace(string(x.ToolChoice)) != `"none"`:
		return g, unsupported("tool_choice", ": the service generates text only")
	case !empty(x.Functions):
		return g, unsupported("functions", ": the service generates text only")
	case !empty(x.FunctionCall) && strings.TrimSpace(string(x.FunctionCall)) != `"none"`:
		return g, unsupported("function_call", ": the service generates text only")
	}
	// (stream_options without stream is ignored: a whole reply always has the usage)
	g.includeUsage = x.Stream && x.StreamOptions != nil && x.StreamOptions.IncludeUsage
	if x.MaxTokens != nil {
		g.maxTokens = *x.MaxTokens
	}
	if x.MaxCompletionTokens != nil {
		g.maxTokens = *x.MaxCompletionTokens
	}
	if x.Temperature != nil {
		g.smp.Temperature = *x.Temperature
	}
	if x.TopP != nil {
		g.smp.TopP = *x.TopP
	}
	if f := x.ResponseFormat; f != nil {
		switch f.Type {
		case "text":
		case "json_object":
			g.smp.JSON = true
		case "json_schema":
			return g, unsupported("response_format.json_schema", " (json_object is: any JSON object)")
		default:
			return g, paramErr(ErrBad, "response_format", "response_format type %q: want text or json_object", f.Type)
		}
	}
	g.smp.Seed, err = seedOf(x.Seed)
	return g, err
}

// seedOf is a request's seed, or a random one.
func seedOf(seed *seedSpec) (uint64, error) {
	if seed != nil {
		return uint64(*seed), nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// Completion is the reply (or, streamed, each chunk) of /v1/completions.
type Completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"` // "text_completion"
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"` // the server's build
	Choices           []CompletionChoice `json:"choices"`
	// Usage is the whole reply's; streamed, it comes (with stream_options.include_usage) in a
	// last chunk of its own, with no choices.
	Usage *CompletionUsage `json:"usage,omitempty"`
}

// CompletionChoice holds the generated text; Tokens (an extension) its token ids: every token
// generated, the end-of-generation token and those that made up a stop string included.
type CompletionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Tokens       []int32             `json:"tokens"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`      // when asked for
	FinishReason *string             `json:"finish_reason"` // "stop" (end of generation, a stop string), "length"; null while streaming
}

// CompletionLogprobs are /v1/completions' log-probabilities of the tokens the choice shows
// (an echoed prompt's, the generated ones up to a stop string, and an end-of-generation
// token, whose text the choice's leaves out): each token's text (see tokenText), its
// log-probability, the most likely tokens' and where its text begins in the choice's, in
// characters. A non-finite log-probability (from non-finite logits) is null, as is the first
// echoed token's (nothing predicts it).
type CompletionLogprobs struct {
	Tokens        []string `json:"tokens"`
	TokenLogprobs []finite `json:"token_logprobs"`
	TopLogprobs   []TopMap `json:"top_logprobs"`
	TextOffset    []int    `json:"text_offset"`
}

// TopMap is one position's most likely tokens as /v1/completions gives them: a JSON object
// from token text to log-probability, most likely first, with the chosen token's added when
// it is not among them (OpenAI's "logprobs + 1"). Tokens of the same text keep the first
// (likelier) entry.
type TopMap []TopEntry

// TopEntry is one entry of a TopMap.
type TopEntry struct {
	Token   string
	Logprob float64
}

// Get returns the log-probability of a token's text.
func (m TopMap) Get(token string) (float64, bool) {
	for _, e := range m {
		if e.Token == token {
			return e.Logprob, true
		}
	}
	return 0, false
}

// MarshalJSON writes the object in the map's order (nil: null).
func (m TopMap) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	b := []byte{'{'}
	seen := map[string]bool{}
	for _, e := range m {
		if seen[e.Token] {
			continue
		}
		seen[e.Token] = true
		k, err := json.Marshal(e.Token)
		if err != nil {
			return nil, err
		}
		v, err := finite(e.Logprob).MarshalJSON()
		if err != nil {
			return nil, err
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the object, keeping its order.
func (m *TopMap) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("serve: top log-probabilities: want an object, got %s", b)
	}
	out := TopMap{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var v finite
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out = append(out, TopEntry{t.(string), float64(v)})
	}
	*m = out
	return nil
}

// tokenText is a token's text as /v1/completions shows it: its bytes when they are UTF-8,
// else (part of a character, a stray byte) OpenAI's spelling "bytes:\xNN…".
func tokenText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var s strings.Builder
	s.WriteString("bytes:")
	for _, c := range b {
		fmt.Fprintf(&s, "\\x%02x", c)
	}
	return s.String()
}

// CompletionUsage counts tokens.
type CompletionUsage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails PromptTokensDetails `json:"prompt_tokens_details"`
	// Truncated says that a chat's conversation did not fit the context and was fitted to it
	// (the head and the latest turns kept, turns dropped from the middle); absent otherwise.
	Truncated *Truncation `json:"truncated,omitempty"`
}

// PromptTokensDetails: CachedTokens counts the prompt positions taken from the prefix cache
// (for each prompt, its first choice's).
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// defaultMaxTokens is OpenAI's default max_tokens.
const defaultMaxTokens = 16

// Complete generates after prompt with sampler smp until an end-of-generation token, maxTokens
// tokens or the end of the context, calling emit with each token (the end-of-generation token
// included, which emit should not show; emit returns ErrStop to end there, as at a stop
// string); it returns why it stopped: "stop" or "length". The session lives only for the
// call; ctx ends it early (with ctx's error).
func (sv *Service) Complete(ctx context.Context, prompt []int32, smp Sampler, maxTokens int, emit func(Token) error) (string, error) {
	return sv.CompleteDrafted(ctx, prompt, smp, maxTokens, nil, emit)
}

// Drafter proposes a chain of draft tokens to follow tokens (the prompt and every token chosen
// so far, the last one not yet verified); nil or an empty chain drafts nothing.
type Drafter func(tokens []int32) []int32

// CompleteDrafted is Complete with each step verifying draft's chain after the pending token:
// the tokens emitted are the same, in fewer steps where the drafts are accepted.
func (sv *Service) CompleteDrafted(ctx context.Context, prompt []int32, smp Sampler, maxTokens int, draft Drafter, emit func(Token) error) (string, error) {
	return sv.complete(openArgs{ctx: ctx, bounded: true}, prompt, smp, maxTokens, draft, nil, nil, emit)
}

// complete is CompleteDrafted for a session opened with a (its context ends it early, with
// the context's cause); with score, each prompt token first goes to score with its
// log-probability (see open), and maxTokens may be 0: the prompt scored, nothing generated.
// With cached, it sets *cached to the prompt positions taken from the prefix cache before it
// emits anything. The session reserves the prompt and maxTokens positions.
func (sv *Service) complete(a openArgs, prompt []int32, smp Sampler, maxTokens int, draft Drafter, score func(Token), cached *int, emit func(Token) error) (string, error) {
	if maxTokens < 0 || maxTokens == 0 && score == nil {
		return "", paramErr(ErrBad, "max_tokens", "max_tokens %d: want at least 1 (0 only to score an echoed prompt)", maxTokens)
	}
	ctx := a.ctx
	a.internal, a.maxTokens = true, max(1, maxTokens)
	op, err := sv.open(a, prompt, smp, score)
	if err != nil {
		return "", err
	}
	defer sv.Close(op.Session)
	if cached != nil {
		*cached = op.Cached
	}
	if maxTokens == 0 {
		return "length", nil
	}
	limit := min(sv.e.Context(), len(prompt)+a.maxTokens) // the session's positions
	// between rounds the session counts as returning: the batcher lingers for it
	sv.returning.Add(1)
	defer func() { sv.returning.Add(-1) }()
	history := append([]int32(nil), prompt...)
	toks, pos, n := []Token{op.Next}, op.Position, 0
	for {
		for _, tok := range toks {
			if err := emit(tok); errors.Is(err, ErrStop) {
				return "stop", nil
			} else if err != nil {
				return "", err
			}
			history = append(history, tok.ID)
			if n++; sv.opt.Tokenizer != nil && sv.opt.Tokenizer.IsEOG(tok.ID) {
				return "stop", nil
			}
			if n == maxTokens {
				return "length", nil
			}
		}
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		var d Draft
		if draft != nil {
			d.Tokens = draft(history)
			// no further than the session's positions, nor than the tokens still wanted
			if k := min(sv.opt.MaxNodes, maxTokens-n-1, limit-pos); len(d.Tokens) > k {
				d.Tokens = d.Tokens[:max(0, k)]
			}
			for i := range d.Tokens {
				d.Parents = append(d.Parents, i-1) // a chain
			}
		}
		d.Position = pos
		v, err := sv.Verify(op.Session, d) // (not returning while its round waits and runs)
		if errors.Is(err, ErrTooLarge) || errors.Is(err, engine.ErrContext) {
			return "length", nil // the context is full
		}
		if err != nil {
			return "", err
		}
		toks, pos = append(v.Tokens, v.Next), v.Position
	}
}

// PromptLookup drafts up to k tokens by prompt lookup: the most recent earlier occurrence of
// the longest suffix of the tokens (3, 2 or 1 of them), and the tokens that followed it.
func PromptLookup(k int) Drafter {
	return func(tokens []int32) []int32 {
		for g := min(3, len(tokens)-1); g >= 1; g-- {
			suffix := tokens[len(tokens)-g:]
			for i := len(tokens) - g - 1; i >= 0; i-- {
				if slices.Equal(tokens[i:i+g], suffix) {
					return slices.Clone(tokens[i+g : min(i+g+k, len(tokens))])
				}
			}
		}
		return nil
	}
}

// completionPrompts reads OpenAI's prompt: a string (tokenized like a session's text), an
// array of token ids, or an array of either (a batch of prompts, as evaluation harnesses
// send them). It returns the prompts' tokens and, for each, how many first and last tokens
// the tokenizer added to a text (BOS, EOS).
func (sv *Service) completionPrompts(raw json.RawMessage) ([][]int32, [][2]int, error) {
	if empty(raw) && strings.TrimSpace(string(raw)) != "[]" {
		return nil, nil, paramErr(ErrBad, "prompt", "prompt is required: a string, an array of token ids, or an array of those")
	}
	one := func(raw json.RawMessage) ([]int32, [2]int, bool, error) {
		var text string
		if err := json.Unmarshal(raw, &text); err == nil {
			ids, err := sv.tokenize(text, nil)
			var added [2]int
			if tk := sv.opt.Tokenizer; err == nil {
				if tk.AddsBOS() && len(ids) > 0 && ids[0] == tk.BOS() {
					added[0] = 1
				}
				if tk.AddsEOS() && len(ids) > added[0] && ids[len(ids)-1] == tk.EOS() {
					added[1] = 1
				}
			}
			return ids, added, true, err
		}
		var ids []int32
		if err := json.Unmarshal(raw, &ids); err == nil {
			return ids, [2]int{}, true, nil
		}
		return nil, [2]int{}, false, nil
	}
	if ids, added, ok, err := one(raw); ok {
		return [][]int32{ids}, [][2]int{added}, err
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(raw, &batch); err == nil {
		out, adds := make([][]int32, len(batch)), make([][2]int, len(batch))
		for i, r := range batch {
			ids, added, ok, err := one(r)
			if !ok {
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("prompt %d: %w", i, err) // (err wraps its sentinel)
			}
			out[i], adds[i] = ids, added
			if i == len(batch)-1 {
				return out, adds, nil
			}
		}
	}
	return nil, nil, paramErr(ErrBad, "prompt", "prompt: want a string, an array of token ids, or an array of those")
}

// openAIRequest decodes an OpenAI request into req (whose shared parameters are p), checks
// them and that the service has a tokenizer, and returns the generation they ask for (all
// but the prompts); on failure it has replied.
func (sv *Service) openAIRequest(w http.ResponseWriter, r *http.Request, req any, p *openAIParams) (generation, bool) {
	if sv.Draining() {
		sv.reply(w, nil, ErrDraining)
		return generation{}, false
	}
	if !sv.decode(w, r, req) {
		return generation{}, false
	}
	g, err := p.generation()
	if err == nil && sv.opt.Tokenizer == nil {
		err = fmt.Errorf("%w: completions need the model's tokenizer, which this service does not have", ErrBad)
	}
	if err != nil {
		sv.reply(w, nil, err)
		return generation{}, false
	}
	return g, true
}

// topLogprobs checks a request's count of top log-probabilities.
func topLogprobs(n int) error {
	if n < 0 || n > MaxTopLogprobs {
		return paramErr(ErrBad, "top_logprobs", "top log-probabilities %d: want 0 … %d", n, MaxTopLogprobs)
	}
	return nil
}

// handleCompletion serves POST /v1/completions, whole or as server-sent events.
func (sv *Service) handleCompletion(w http.ResponseWriter, r *http.Request) {
	var req CompletionRequest
	g, ok := sv.openAIRequest(w, r, &req, &req.openAIParams)
	if !ok {
		return
	}
	switch {
	case req.BestOf != nil && *req.BestOf != 1 && *req.BestOf != g.n:
		sv.reply(w, nil, unsupported("best_of", " (other than n: every choice is returned)"))
		return
	case req.Suffix != nil && *req.Suffix != "":
		sv.reply(w, nil, unsupported("suffix", ""))
		return
	}
	if req.Logprobs != nil {
		if err := topLogprobs(*req.Logprobs); err != nil {
			sv.reply(w, nil, err)
			return
		}
		g.smp.TopLogprobs = *req.Logprobs
	}
	var err error
	if g.prompts, g.added, err = sv.completionPrompts(req.Prompt); err != nil {
		sv.reply(w, nil, err)
		return
	}
	tk := sv.opt.Tokenizer
	respond(sv, w, r, g, func(i int, out release) CompletionChoice {
		ch := CompletionChoice{Index: i, Text: out.text, Tokens: out.toks, FinishReason: out.reason}
		if req.Logprobs != nil {
			lp := &CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []finite{}, TopLogprobs: []TopMap{}, TextOffset: []int{}}
			for _, p := range out.pieces {
				var top TopMap // null for an echoed prompt's first token
				if !math.IsNaN(p.Logprob) || len(p.Top) > 0 {
					top = TopMap{}
					chosen := false
					for _, t := range p.Top {
						top = append(top, TopEntry{tokenText(pieceBytes(tk, t.ID)), t.Logprob})
						chosen = chosen || t.ID == p.ID
					}
					if !chosen {
						top = append(top, TopEntry{tokenText(p.Bytes), p.Logprob})
					}
				}
				lp.Tokens = append(lp.Tokens, tokenText(p.Bytes))
				lp.TokenLogprobs = append(lp.TokenLogprobs, finite(p.Logprob))
				lp.TopLogprobs = append(lp.TopLogprobs, top)
				lp.TextOffset = append(lp.TextOffset, p.Offset)
			}
			ch.Logprobs = lp
		}
		return ch
	}, func(c Completion, choices []CompletionChoice) any {
		c.Object, c.Choices = "text_completion", choices
		return c
	})
}

// pieceBytes is a token's text (special tokens as written; the ids come from the model, and
// one beyond the tokenizer's vocabulary has none).
func pieceBytes(tk *tokenizer.Tokenizer, id int32) []byte {
	p, _ := tk.Piece(id, true)
	return p
}

// ChatRequest is the body of POST /v1/chat/completions (OpenAI's fields, plus top_k and seed).
type ChatRequest struct {
	Model    string              `json:"model,omitempty"` // ignored
	Messages []tokenizer.Message `json:"messages"`
	// Logprobs asks for each token's log-probability, and TopLogprobs (0 … 20) for those of
	// the most likely tokens at its position.
	Logprobs    bool `json:"logprobs,omitempty"`
	TopLogprobs *int `json:"top_logprobs,omitempty"`
	// ChatTemplateKwargs are further variables for the model's Jinja chat template (e.g.
	// {"enable_thinking": false}), as llama.cpp's and vLLM's servers take them.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`
	openAIParams
}

// ChatCompletion is the reply (object "chat.completion") or a streamed chunk
// ("chat.completion.chunk", with Delta instead of Message) of /v1/chat/completions.
type ChatCompletion struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	SystemFingerprint string           `json:"system_fingerprint"`
	Choices           []ChatChoice     `json:"choices"`
	Usage             *CompletionUsage `json:"usage,omitempty"`
	// Truncated (in the reply and every chunk) says that the conversation was fitted to the
	// context: what was dropped from its middle.
	Truncated *Truncation `json:"truncated,omitempty"`
}

// ChatChoice holds the assistant's message (or a streamed piece of it) and its token ids.
type ChatChoice struct {
	Index        int                `json:"index"`
	Message      *tokenizer.Message `json:"message,omitempty"`
	Delta        *tokenizer.Message `json:"delta,omitempty"`
	Tokens       []int32            `json:"tokens"`
	Logprobs     *ChatLogprobs      `json:"logprobs"` // when asked for
	FinishReason *string            `json:"finish_reason"`
}

// ChatLogprobs are /v1/chat/completions' log-probabilities of the tokens whose text the
// message shows (as CompletionLogprobs'), in OpenAI's shape.
type ChatLogprobs struct {
	Content []ChatLogprob `json:"content"`
}

// ChatLogprob is one token: its text, the text's bytes, its log-probability (null if not
// finite) and the most likely tokens'.
type ChatLogprob struct {
	Token       string           `json:"token"`
	Logprob     finite           `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []ChatTopLogprob `json:"top_logprobs"`
}

// ChatTopLogprob is one of the most likely tokens at a position.
type ChatTopLogprob struct {
	Token   string `json:"token"`
	Logprob finite `json:"logprob"`
	Bytes   []int  `json:"bytes"`
}

// byteList is b as JSON numbers, as OpenAI gives a token's bytes.
func byteList(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// handleChat serves POST /v1/chat/completions: the messages in the model's chat template
// (tokenizer.Chat), then as a completion.
func (sv *Service) handleChat(w http.ResponseWriter, r *http.Request) {
	var req ChatRequest
	g, ok := sv.openAIRequest(w, r, &req, &req.openAIParams)
	if !ok {
		return
	}
	if req.Echo {
		sv.reply(w, nil, fmt.Errorf("%w: echo is for /v1/completions", ErrBad))
		return
	}
	if req.TopLogprobs != nil {
		err := topLogprobs(*req.TopLogprobs)
		if err == nil && *req.TopLogprobs > 0 && !req.Logprobs {
			err = fmt.Errorf("%w: top_logprobs needs logprobs: true", ErrBad)
		}
		if err != nil {
			sv.reply(w, nil, err)
			return
		}
		g.smp.TopLogprobs = *req.TopLogprobs
	}
	if err := checkRoles(req.Messages); err != nil {
		sv.reply(w, nil, err)
		return
	}
	tk := sv.opt.Tokenizer
	// a conversation longer than the context keeps its head and latest turns, with room
	// for the answer: max_tokens, at most half the context
	limit := sv.e.Context()
	reserve := min(max(1, g.maxTokens), limit/2)
	fit, err := FitChat(req.Messages, func(msgs []tokenizer.Message) ([]int32, error) {
		text, err := tk.Chat(msgs, req.ChatTemplateKwargs)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBad, err)
		}
		if err := sv.checkTextSize(text); err != nil {
			return nil, err
		}
		// Special tokens come only from the template: a message cannot spell <|im_end|> to
		// close its turn (tokenizer.ChatTokens; a template that branches on contents is
		// encoded whole).
		prompt, _, err := tk.ChatTokens(msgs, req.ChatTemplateKwargs)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBad, err)
		}
		return prompt, nil
	}, limit-reserve)
	if err != nil {
		sv.reply(w, nil, err)
		return
	}
	g.prompts, g.truncated = [][]int32{fit.Tokens}, fit.Truncation()
	respond(sv, w, r, g, func(i int, out release) ChatChoice {
		m := &tokenizer.Message{Role: "assistant", Content: out.text}
		ch := ChatChoice{Index: i, Tokens: out.toks, FinishReason: out.reason}
		if req.Stream {
			ch.Delta = m
		} else {
			ch.Message = m
		}
		if req.Logprobs {
			ch.Logprobs = &ChatLogprobs{Content: []ChatLogprob{}}
			for _, p := range out.pieces {
				if tk.IsEOG(p.ID) { // the message's tokens only
					continue
				}
				lp := ChatLogprob{Token: string(p.Bytes), Logprob: finite(p.Logprob), Bytes: byteList(p.Bytes), TopLogprobs: []ChatTopLogprob{}}
				for _, t := range p.Top {
					b := pieceBytes(tk, t.ID)
					lp.TopLogprobs = append(lp.TopLogprobs, ChatTopLogprob{Token: string(b), Logprob: finite(t.Logprob), Bytes: byteList(b)})
				}
				ch.Logprobs.Content = append(ch.Logprobs.Content, lp)
			}
		}
		return ch
	}, func(c Completion, choices []ChatChoice) any {
		cc := ChatCompletion{ID: "chatcmpl-" + c.ID[len("cmpl-"):], Object: "chat.completion", Created: c.Created, Model: c.Model,
			SystemFingerprint: c.SystemFingerprint, Choices: choices, Usage: c.Usage, Truncated: g.truncated}
		if req.Stream {
			cc.Object = "chat.completion.chunk"
		}
		return cc
	})
}

// checkRoles checks a chat's messages: at least one, each of role system, developer (which
// chat templates know as system), user or assistant. Tool messages are refused: the service
// runs no tools.
func checkRoles(msgs []tokenizer.Message) error {
	if len(msgs) == 0 {
		return paramErr(ErrBad, "messages", "messages: want at least one message")
	}
	for i := range msgs {
		switch msgs[i].Role {
		case "system", "user", "assistant":
		case "developer":
			msgs[i].Role = "system"
		case "tool", "function":
			return paramErr(ErrUnsupported, fmt.Sprintf("messages[%d].role", i), "messages[%d]: role %q is not supported (the service runs no tools)", i, msgs[i].Role)
		default:
			return paramErr(ErrBad, fmt.Sprintf("messages[%d].role", i), "messages[%d]: role %q: want system, developer, user or assistant", i, msgs[i].Role)
		}
	}
	return nil
}
