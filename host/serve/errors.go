package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"verity/host/engine"
)

// Errors the HTTP layer maps to status codes and OpenAI error objects.
var (
	ErrNoSession = errors.New("serve: no such session")
	ErrStale     = errors.New("serve: draft built on a stale position")
	ErrTooLarge  = errors.New("serve: request too large")
	ErrBad       = errors.New("serve: bad request")
	// ErrContextLength: a prompt (with what it asks to generate, for a session's max_tokens)
	// longer than the context.
	ErrContextLength = errors.New("serve: context length exceeded")
	// ErrUnsupported: a standard parameter the service does not honour, set to something other
	// than its default.
	ErrUnsupported = errors.New("serve: unsupported parameter")
	// ErrEvicted: the session was closed to free cache space for other requests while idle.
	ErrEvicted = errors.New("serve: session evicted")
	// ErrQueueFull: the admission queue (or the client's share of it, or the client's open
	// sessions) is at its bound.
	ErrQueueFull = errors.New("serve: too many requests waiting")
	// ErrQueueTimeout: a request waited the whole wait bound for cache space.
	ErrQueueTimeout = errors.New("serve: timed out waiting for cache space")
	// ErrDraining: the service is shutting down and takes no new sessions or completions.
	ErrDraining = errors.New("serve: shutting down")
	// ErrDeadline: a request ran past its generation deadline.
	ErrDeadline = errors.New("serve: generation deadline passed")
	// ErrUnauthorized: a missing or unknown API key.
	ErrUnauthorized = errors.New("serve: invalid API key")
)

// APIError is an error with its place in OpenAI's error object: the request parameter it is
// about and a machine-readable code.
type APIError struct {
	Err    error  // a sentinel above (or an engine error) and the text: errors.Is sees through
	Param  string // the parameter at fault, if one is
	Code   string // overrides the sentinel's code
	Status int    // overrides the sentinel's status
}

func (e *APIError) Error() string { return e.Err.Error() }
func (e *APIError) Unwrap() error { return e.Err }

// paramErr returns err (wrapping sentinel) about request parameter param.
func paramErr(sentinel error, param, format string, args ...any) error {
	return &APIError{Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...), Param: param}
}

// ErrorBody is OpenAI's error object: {"error": {"message", "type", "param", "code"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an ErrorBody. Param and Code are null when they do not apply.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// errorClass is what a sentinel means on the wire.
type errorClass struct {
	err        error
	status     int
	typ, code  string
	retryAfter bool // the request may succeed later: the reply carries Retry-After
}

var errorClasses = []errorClass{
	{ErrUnauthorized, http.StatusUnauthorized, "authentication_error", "invalid_api_key", false},
	{ErrEvicted, http.StatusGone, "invalid_request_error", "session_evicted", false},
	{ErrNoSession, http.StatusNotFound, "invalid_request_error", "session_not_found", false},
	{ErrStale, http.StatusConflict, "invalid_request_error", "stale_position", false},
	{ErrContextLength, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", false},
	{engine.ErrContext, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", false},
	{ErrTooLarge, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", false},
	{ErrUnsupported, http.StatusBadRequest, "invalid_request_error", "unsupported_parameter", false},
	{ErrQueueFull, http.StatusTooManyRequests, "rate_limit_error", "queue_full", true},
	{ErrQueueTimeout, http.StatusServiceUnavailable, "server_error", "queue_timeout", true},
	{ErrDraining, http.StatusServiceUnavailable, "server_error", "shutting_down", true},
	{engine.ErrCapacity, http.StatusServiceUnavailable, "server_error", "cache_full", true},
	{ErrDeadline, http.StatusGatewayTimeout, "server_error", "generation_timeout", false},
	{ErrBad, http.StatusBadRequest, "invalid_request_error", "invalid_request", false},
}

// classOf finds err's class (a server error by default).
func classOf(err error) errorClass {
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c
		}
	}
	return errorClass{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error"}
}

// statusOf is the HTTP status of an error.
func statusOf(err error) int { return classOf(err).status }

// bodyOf is err's OpenAI error object. The message is the error's text without the package
// prefixes of the sentinels it wraps.
func bodyOf(err error) ErrorBody {
	c := classOf(err)
	d := ErrorDetail{Message: messageOf(err, c), Type: c.typ}
	code := c.code
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.Param != "" {
			d.Param = &ae.Param
		}
		if ae.Code != "" {
			code = ae.Code
		}
	}
	d.Code = &code
	return ErrorBody{Error: d}
}

// messageOf is err's text as a client reads it: "serve: bad request: empty prompt" becomes
// "empty prompt"; an internal error says only that it is one.
func messageOf(err error, c errorClass) string {
	if c.err == nil {
		return "internal error: " + strings.TrimPrefix(err.Error(), "serve: ")
	}
	msg := err.Error()
	for _, p := range []string{c.err.Error() + ": ", "engine: batch entry 0: "} {
		if i := strings.Index(msg, p); i >= 0 {
			msg = msg[i+len(p):]
		}
	}
	msg = strings.TrimPrefix(msg, "engine: ")
	if msg == c.err.Error() { // the sentinel alone
		msg = strings.TrimPrefix(msg, "serve: ")
		msg = strings.TrimPrefix(msg, "engine: ")
	}
	return msg
}

// retryAfter is the Retry-After a refused request gets, in seconds.
const retryAfter = 1

// writeError writes err as an OpenAI error object with its status (and Retry-After where
// waiting may help).
func writeError(w http.ResponseWriter, err error) {
	c := classOf(err)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status != 0 {
		c.status = ae.Status
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if c.retryAfter {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	if c.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="verity"`)
	}
	w.WriteHeader(c.status)
	b, _ := json.Marshal(bodyOf(err))
	w.Write(append(b, '\n'))
}

// jsonError rewrites an encoding/json error as a request error without Go's type names.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var ae *APIError
	switch {
	case errors.As(err, &ae): // a field's own check (seedSpec)
		return err
	case errors.As(err, &syn):
		return fmt.Errorf("%w: the body is not valid JSON (at byte %d): %s", ErrBad, syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := strings.ReplaceAll(typ.Field, "openAIParams.", "") // (an embedded struct's name)
		if field == "" {
			return fmt.Errorf("%w: the body must be a JSON object, not %s", ErrBad, typ.Value)
		}
		return paramErr(ErrBad, field, "%s: want %s, got %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return &APIError{Err: fmt.Errorf("%w: unrecognized request argument supplied: %s", ErrBad, name), Param: name, Code: "unknown_parameter"}
	case errors.Is(err, errTrailing):
		return fmt.Errorf("%w: %v", ErrBad, err)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if msg == "unexpected EOF" || msg == "EOF" {
		msg = "the body ends before its JSON does"
	}
	return fmt.Errorf("%w: %s", ErrBad, msg)
}

// jsonKind names a Go kind as JSON: "a number", "a string", …
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "string":
		return "a string"
	case k == "bool":
		return "true or false"
	case k == "slice", k == "array":
		return "an array"
	case k == "struct", k == "map":
		return "an object"
	}
	return "another type"
}

var errTrailing = errors.New("data after the JSON body")
