package serve

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"verity/host/tokenizer"
)

// HTTPOptions configure the HTTP layer.
type HTTPOptions struct {
	// APIKeys, if any, are the keys a request must carry as "Authorization: Bearer KEY" (all
	// routes but /health, /ready and /metrics); each key is a client of its own.
	APIKeys []string
	// CORSOrigins are the origins browsers may call from ("*": any); none: no CORS headers.
	CORSOrigins []string
	// ClientHeader names the header that identifies a request's client (its first
	// comma-separated value: X-Forwarded-For behind a proxy) where there are no API keys;
	// empty: the connection's remote address.
	ClientHeader string
	// MaxBody bounds a request body in bytes (default: room for a batch of full prompts as
	// token ids, at least 1 MiB).
	MaxBody int64
	// RequestTimeout is a request's generation deadline (0: none).
	RequestTimeout time.Duration
	// WriteTimeout bounds each write to a client: one that stops reading is cut off (0: none).
	WriteTimeout time.Duration
	// Replica, if set, names this server in an X-Verity-Replica header on every reply.
	Replica string
	// Logger gets one structured line per request (nil: none).
	Logger *slog.Logger
}

// SessionHeader carries a new session's id on POST /v1/sessions' reply, so that a load
// balancer can learn which replica holds it.
const SessionHeader = "X-Verity-Session"

// Handler serves the service over HTTP with JSON bodies:
//
//	POST   /v1/sessions               {"prompt": [ids], "sampler": {…}}  → Opened
//	                                  or {"text": "…", …}: tokenized by Options.Tokenizer
//	POST   /v1/sessions/{id}/verify   Draft                               → Verified
//	DELETE /v1/sessions/{id}                                              → 204
//	POST   /v1/completions            CompletionRequest (OpenAI's)        → Completion, or server-sent events
//	POST   /v1/chat/completions       ChatRequest (OpenAI's)              → ChatCompletion, or server-sent events
//	GET    /v1/models, /v1/models/{id}                                    → OpenAI's model list (one), model (with its LoRA adapters)
//	POST   /tokenize, /detokenize                                         → {"tokens"}, {"content"}
//	GET    /v1/stats                                                      → Stats
//	GET    /health, /ready, /metrics, /v1/health
//
// Errors are OpenAI's error object {"error": {"message", "type", "param", "code"}} with 400
// (malformed request, context_length_exceeded, unsupported_parameter), 401 (API key), 404
// (unknown session or route), 405, 408 (a body that did not arrive within the server's read
// timeout), 409 (stale position), 410 (session evicted), 413 (body or draft too large), 429
// (queue full, session limit) and 503 (queue wait bound, draining), the last two with
// Retry-After; 504 past the generation deadline.
func (sv *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", sv.handleOpen)
	mux.HandleFunc("POST /v1/sessions/{id}/verify", func(w http.ResponseWriter, r *http.Request) {
		var d Draft
		if !sv.decode(w, r, &d) {
			return
		}
		out, err := sv.Verify(r.PathValue("id"), d)
		sv.reply(w, out, err)
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := sv.Close(r.PathValue("id")); err != nil {
			sv.reply(w, nil, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/completions", sv.handleCompletion)
	mux.HandleFunc("POST /v1/chat/completions", sv.handleChat)
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) { sv.reply(w, sv.Stats(), nil) })
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		c := sv.e.Program().Config
		h := map[string]any{"arch": c.Arch, "vocab": c.NVocab, "context": sv.e.Context(),
			"max_draft_nodes": sv.opt.MaxNodes, "backend": sv.e.Executor().Name(), "model": sv.opt.ModelName}
		if sv.opt.Tokenizer != nil {
			h["tokenizer"] = sv.opt.Tokenizer.String()
		}
		sv.reply(w, h, nil)
	})
	// Liveness: the process answers. Readiness: the model is loaded (it is, once a Service
	// exists) and the service is not draining.
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		sv.reply(w, map[string]string{"status": "ok"}, nil)
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		if sv.Draining() {
			sv.reply(w, nil, fmt.Errorf("%w: draining", ErrDraining))
			return
		}
		sv.reply(w, map[string]string{"status": "ready"}, nil)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(sv.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		sv.reply(w, map[string]any{"object": "list", "data": []any{sv.modelObject()}}, nil)
	})
	mux.HandleFunc("GET /v1/models/{id...}", func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); id != sv.opt.ModelName {
			sv.reply(w, nil, &APIError{Err: fmt.Errorf("%w: the model %q does not exist (this server serves %q)", ErrNoSession, id, sv.opt.ModelName), Param: "model", Code: "model_not_found"})
			return
		}
		sv.reply(w, sv.modelObject(), nil)
	})
	mux.HandleFunc("POST /tokenize", sv.handleTokenize)
	mux.HandleFunc("POST /detokenize", sv.handleDetokenize)
	return sv.middleware(mux)
}

func (sv *Service) modelObject() map[string]any {
	m := map[string]any{"id": sv.opt.ModelName, "object": "model", "created": sv.started.Unix(), "owned_by": "verity"}
	if len(sv.opt.Adapters) > 0 {
		m["adapters"] = sv.opt.Adapters // merged into the weights at load
	}
	return m
}

// handleOpen serves POST /v1/sessions.
func (sv *Service) handleOpen(w http.ResponseWriter, r *http.Request) {
	if sv.Draining() {
		sv.reply(w, nil, ErrDraining)
		return
	}
	var req struct {
		Prompt  []int32       `json:"prompt"`
		Text    *string       `json:"text"`
		Sampler samplerFields `json:"sampler"`
		// MaxTokens, if set, bounds the tokens the session may emit after its prompt: it
		// then reserves only that much of the cache (else its whole context).
		MaxTokens *int `json:"max_tokens"`
	}
	if !sv.decode(w, r, &req) {
		return
	}
	if req.Text != nil {
		ids, err := sv.tokenize(*req.Text, req.Prompt)
		if err != nil {
			sv.reply(w, nil, err)
			return
		}
		req.Prompt = ids
	}
	smp, err := req.Sampler.sampler()
	if err != nil {
		sv.reply(w, nil, err)
		return
	}
	a := openArgs{ctx: r.Context(), client: clientOf(r), bounded: true}
	if req.MaxTokens != nil {
		if *req.MaxTokens < 1 {
			sv.reply(w, nil, paramErr(ErrBad, "max_tokens", "max_tokens %d: want at least 1", *req.MaxTokens))
			return
		}
		if len(req.Prompt)+*req.MaxTokens > sv.e.Context() {
			sv.reply(w, nil, paramErr(ErrContextLength, "max_tokens", "a prompt of %d tokens and max_tokens %d need more than the context's %d positions", len(req.Prompt), *req.MaxTokens, sv.e.Context()))
			return
		}
		a.maxTokens = *req.MaxTokens
	}
	out, err := sv.open(a, req.Prompt, smp, nil)
	if err == nil {
		w.Header().Set(SessionHeader, out.Session)
	}
	sv.reply(w, out, err)
}

// samplerFields is a session's sampler as sent: the seed signed or not, and drawn at random
// when absent (as the OpenAI endpoints draw it).
type samplerFields struct {
	Temperature float64   `json:"temperature"`
	TopK        int       `json:"top_k"`
	TopP        float64   `json:"top_p"`
	Seed        *seedSpec `json:"seed"`
	TopLogprobs int       `json:"top_logprobs"`
	JSON        bool      `json:"json"`
}

func (f samplerFields) sampler() (Sampler, error) {
	seed, err := seedOf(f.Seed)
	return Sampler{Temperature: f.Temperature, TopK: f.TopK, TopP: f.TopP, Seed: seed, TopLogprobs: f.TopLogprobs, JSON: f.JSON}, err
}

// handleTokenize serves POST /tokenize: {"content": text, "add_special", "parse_special"}
// (both default true: as prompts are tokenized) → {"tokens": [ids]}.
func (sv *Service) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Content      *string `json:"content"`
		AddSpecial   *bool   `json:"add_special"`
		ParseSpecial *bool   `json:"parse_special"`
	}
	if !sv.decode(w, r, &req) {
		return
	}
	tk := sv.opt.Tokenizer
	switch {
	case tk == nil:
		sv.reply(w, nil, fmt.Errorf("%w: this service has no tokenizer", ErrBad))
		return
	case req.Content == nil:
		sv.reply(w, nil, paramErr(ErrBad, "content", "content is required"))
		return
	}
	o := tokenizer.Options{AddSpecial: req.AddSpecial == nil || *req.AddSpecial, ParseSpecial: req.ParseSpecial == nil || *req.ParseSpecial}
	ids := tk.Encode(*req.Content, o)
	if ids == nil {
		ids = []int32{}
	}
	sv.reply(w, map[string]any{"tokens": ids}, nil)
}

// handleDetokenize serves POST /detokenize: {"tokens": [ids]} → {"content": text}
// (special tokens written out).
func (sv *Service) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tokens []int32 `json:"tokens"`
	}
	if !sv.decode(w, r, &req) {
		return
	}
	tk := sv.opt.Tokenizer
	if tk == nil {
		sv.reply(w, nil, fmt.Errorf("%w: this service has no tokenizer", ErrBad))
		return
	}
	if err := sv.checkTokens("tokens", req.Tokens); err != nil {
		sv.reply(w, nil, err)
		return
	}
	var b []byte
	for _, id := range req.Tokens {
		b = append(b, pieceBytes(tk, id)...)
	}
	sv.reply(w, map[string]any{"content": strings.ToValidUTF8(string(b), "\uFFFD")}, nil)
}

// tokenize turns a session's text prompt into ids as a chat client's prompt is tokenized: BOS
// where the model asks for it, and special tokens written in the text (a chat template's
// <|im_start|>, …) recognised.
func (sv *Service) tokenize(text string, ids []int32) ([]int32, error) {
	if ids != nil {
		return nil, paramErr(ErrBad, "text", "give prompt or text, not both")
	}
	tk := sv.opt.Tokenizer
	if tk == nil {
		return nil, paramErr(ErrBad, "text", "this service has no tokenizer: give the prompt as token ids")
	}
	if err := sv.checkTextSize(text); err != nil {
		return nil, err
	}
	return tk.Encode(text, tokenizer.Options{AddSpecial: true, ParseSpecial: true}), nil
}

// checkTextSize refuses a prompt's text before the work of encoding it when it cannot fit the
// prompt limit: no token covers more than MaxPieceBytes of text.
func (sv *Service) checkTextSize(text string) error {
	if limit := sv.opt.MaxPrompt * sv.opt.Tokenizer.MaxPieceBytes(); len(text) > limit {
		return paramErr(ErrContextLength, "prompt", "a text of %d bytes is more than a prompt of at most %d tokens can hold", len(text), sv.opt.MaxPrompt)
	}
	return nil
}

// maxBody is the body limit: HTTPOptions.MaxBody, or room for MaxChoices/4 full prompts as
// token ids (about 8 bytes each), at least 1 MiB.
func (sv *Service) maxBody() int64 {
	if b := sv.opt.HTTP.MaxBody; b > 0 {
		return b
	}
	return max(1<<20, int64(sv.opt.MaxPrompt)*8*MaxChoices/4)
}

// decode reads the request body as exactly one JSON object into v (no unknown fields, nothing
// after it); on failure it has replied. The connection's read deadline, which bounds the
// body, is lifted once the whole body is read (a long reply must not be cut by it); not on
// failure, so that the rest of a body the client never finishes is not waited for (net/http
// reads it before the reply: the deadline ends that read, and the connection closes).
func (sv *Service) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	limit := sv.maxBody()
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errTrailing
			var tooBig *http.MaxBytesError
			if errors.As(terr, &tooBig) || timedOut(terr) {
				err = terr
			}
		}
	}
	if err == nil {
		http.NewResponseController(w).SetReadDeadline(time.Time{})
		return true
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		sv.reply(w, nil, paramErr(ErrTooLarge, "", "a body over %d bytes", limit))
	case timedOut(err):
		sv.reply(w, nil, &APIError{Err: fmt.Errorf("%w: the request's body did not arrive within the server's read timeout", ErrBad),
			Code: "request_timeout", Status: http.StatusRequestTimeout})
	case errors.Is(err, io.EOF):
		sv.reply(w, nil, fmt.Errorf("%w: the body is empty: want a JSON object", ErrBad))
	default:
		sv.reply(w, nil, jsonError(err))
	}
	return false
}

// timedOut reports whether err is a read that ran past the connection's deadline.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// reply writes v as JSON, or err as an error object.
func (sv *Service) reply(w http.ResponseWriter, v any, err error) {
	sv.writeDeadline(w)
	if err != nil {
		writeError(w, err)
		return
	}
	b, err := json.Marshal(v)
	if err != nil { // nothing written yet: the client gets an error, not an empty 200
		writeError(w, fmt.Errorf("serve: encode reply: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// writeDeadline gives the next write to w the write timeout.
func (sv *Service) writeDeadline(w http.ResponseWriter) {
	if d := sv.opt.HTTP.WriteTimeout; d > 0 {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
	}
}

// requestCtx is a generation's context: the request's, ended by the generation deadline
// (ErrDeadline) and by Stop (ErrDraining), whose causes context.Cause gives.
func (sv *Service) requestCtx(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(r.Context())
	stop := context.AfterFunc(sv.stopCtx, func() { cancel(context.Cause(sv.stopCtx)) })
	var timer *time.Timer
	if d := sv.opt.HTTP.RequestTimeout; d > 0 {
		timer = time.AfterFunc(d, func() { cancel(fmt.Errorf("%w: %v", ErrDeadline, d)) })
	}
	return ctx, func() {
		stop()
		if timer != nil {
			timer.Stop()
		}
		cancel(context.Canceled)
	}
}

type clientKey struct{}

// clientOf is the client a request counts against (the middleware sets it).
func clientOf(r *http.Request) string {
	c, _ := r.Context().Value(clientKey{}).(string)
	return c
}

// middleware wraps the routes: a request id (X-Request-Id, the client's if it sent a sane
// one), OpenAI-shaped 404 and 405, the API key, CORS, the client's identity, metrics and a
// log line per request; a panic becomes a 500.
func (sv *Service) middleware(mux *http.ServeMux) http.Handler {
	o := sv.opt.HTTP
	keys := map[[32]byte]string{}
	for _, k := range o.APIKeys {
		h := sha256.Sum256([]byte(k))
		keys[h] = "key:" + hex.EncodeToString(h[:4])
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !saneID(id) {
			id, _ = newID()
		}
		w.Header().Set("X-Request-Id", id)
		if o.Replica != "" {
			w.Header().Set("X-Verity-Replica", o.Replica)
		}
		sw := &statusWriter{ResponseWriter: w}
		client := ""
		body := &countingBody{ReadCloser: r.Body}
		r.Body = body
		defer func() {
			if body.n >= bigBody {
				sv.releaseMemory()
			}
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				sv.log.Error("panic", "request_id", id, "path", r.URL.Path, "panic", fmt.Sprint(p))
				if sw.code == 0 {
					writeError(sw, fmt.Errorf("serve: the request failed"))
				}
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			code := sw.code
			if code == 0 {
				code = http.StatusOK
			}
			d := time.Since(start)
			sv.metrics.request(route, code, d)
			sv.log.Info("request", "request_id", id, "method", r.Method, "path", r.URL.Path, "route", route,
				"status", code, "bytes", sw.bytes, "duration", d.Round(time.Microsecond), "client", client,
				"remote", r.RemoteAddr)
		}()
		if cors(sw, r, o.CORSOrigins) {
			return
		}
		client = sv.identify(r, keys) // (for the log line of a 404 or 405 as well)
		// OpenAI-shaped 404 and 405 for paths and methods no route takes
		if _, pattern := mux.Handler(r); pattern == "" {
			var allow []string
			for _, m := range []string{"GET", "POST", "DELETE"} {
				rr := r.Clone(r.Context())
				rr.Method = m
				if _, p := mux.Handler(rr); p != "" {
					allow = append(allow, m)
				}
			}
			if len(allow) > 0 {
				sw.Header().Set("Allow", strings.Join(allow, ", "))
				sv.reply(sw, nil, &APIError{Err: fmt.Errorf("%w: %s is not allowed on %s (only %s)", ErrBad, r.Method, r.URL.Path, strings.Join(allow, ", ")),
					Code: "method_not_allowed", Status: http.StatusMethodNotAllowed})
				return
			}
			sv.reply(sw, nil, &APIError{Err: fmt.Errorf("%w: no route %s %s", ErrNoSession, r.Method, r.URL.Path), Code: "not_found"})
			return
		}
		if client == "" {
			sv.reply(sw, nil, fmt.Errorf("%w: send \"Authorization: Bearer KEY\" with one of the server's API keys", ErrUnauthorized))
			return
		}
		inner := r.WithContext(context.WithValue(r.Context(), clientKey{}, client))
		mux.ServeHTTP(sw, inner)
		r.Pattern = inner.Pattern // the route, for the metrics and the log
	})
}

// identify is the request's client ("" when an API key is wanted and missing).
func (sv *Service) identify(r *http.Request, keys map[[32]byte]string) string {
	switch r.URL.Path {
	case "/health", "/ready", "/metrics":
		return "probe"
	}
	if len(keys) > 0 {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer") // (a scheme is case-insensitive: RFC 9110)
		h := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		for k, name := range keys { // constant time in the key
			if ok && subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
				return name
			}
		}
		return ""
	}
	if hd := sv.opt.HTTP.ClientHeader; hd != "" {
		if v := r.Header.Get(hd); v != "" {
			first, _, _ := strings.Cut(v, ",")
			return strings.TrimSpace(first)
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// cors answers a browser's CORS preflight and marks allowed origins' replies; true when it
// has replied.
func cors(w http.ResponseWriter, r *http.Request, origins []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(origins) == 0 || !(slices.Contains(origins, "*") || slices.Contains(origins, origin)) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After, "+SessionHeader)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

// saneID reports whether a client's request id may be echoed: 1 to 128 printable ASCII
// characters.
func saneID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// bigBody is the size of a request body after which the server returns freed memory to the
// system once the request is done: the decoded body (a long token list is several times its
// bytes) is garbage then, but the runtime would keep its pages for minutes.
const bigBody = 1 << 20

// countingBody counts the bytes read from a request body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// freeOSMemory is debug.FreeOSMemory (tests count its calls).
var freeOSMemory = debug.FreeOSMemory

// releaseMemory asks releaser for a release of freed memory; asks while one is under way
// make one more, not one each.
func (sv *Service) releaseMemory() {
	select {
	case sv.release <- struct{}{}:
	default:
	}
}

// releaser returns freed memory to the system (debug.FreeOSMemory: a collection, then the
// free pages) shortly after the request that asked has ended, at most once a second, until
// the service shuts down.
func (sv *Service) releaser() {
	for {
		select {
		case <-sv.quit:
			return
		case <-sv.release:
		}
		time.Sleep(100 * time.Millisecond) // the asking request's handler has returned
		freeOSMemory()
		time.Sleep(900 * time.Millisecond)
	}
}

// statusWriter records a reply's status and size.
type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
