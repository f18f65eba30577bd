package serve_test

// The service's operations surface over loopback: /metrics, /health and /ready, /tokenize and
// /detokenize, CORS, API keys, request logs, the model's id, client disconnects, per-client
// session caps and the sessions API's default seed.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"verity/host/engine"
	"verity/host/serve"
)

// opsServer serves fixture name's model (with its tokenizer unless o has none and noTok) with
// options o over loopback; the server and the service end with the test.
func opsServer(t *testing.T, name string, lo engine.LoadOptions, o serve.Options) (*serve.Service, string) {
	t.Helper()
	m := load(t, name, lo)
	if o.Tokenizer == nil {
		o.Tokenizer = fixtureTokenizer(t, name)
	}
	sv := serve.New(m.Engine, o)
	t.Cleanup(sv.Shutdown)
	srv := httptest.NewServer(sv.Handler())
	t.Cleanup(srv.Close)
	return sv, srv.URL
}

// call sends method url with body (none if empty) and headers given as name, value pairs; it
// returns the status, the reply's headers and its body.
func call(t *testing.T, method, url, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// apiError reads an OpenAI error object, failing the test if b is not one or leaks Go's
// internals into its message.
func apiError(t *testing.T, b []byte) (typ, param, code string) {
	t.Helper()
	var e serve.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == nil {
		t.Errorf("not an OpenAI error object (%v): %s", err, b)
		return "", "", ""
	}
	for _, leak := range []string{"serve:", "json:", "int32", "struct", "main.", "serve.", "Go value"} {
		if strings.Contains(e.Error.Message, leak) {
			t.Errorf("the error message shows %q: %s", leak, e.Error.Message)
		}
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	return e.Error.Type, param, *e.Error.Code
}

// sample is one series of a Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads url's /metrics.
func scrape(t *testing.T, url string) []sample {
	t.Helper()
	code, h, b := call(t, "GET", url+"/metrics", "")
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %q", code, h.Get("Content-Type"))
	}
	var out []sample
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("/metrics: a line %q", line)
		}
		s := sample{name: line[:i], labels: map[string]string{}, value: v}
		if name, labels, ok := strings.Cut(s.name, "{"); ok {
			s.name = name
			for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					s.labels[k], _ = strconv.Unquote(v)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// metric is the value of the series name with the labels given as name, value pairs (others
// ignored), summed over the series that match; ok is false if none does.
func metric(ss []sample, name string, labels ...string) (v float64, ok bool) {
next:
	for _, s := range ss {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		v, ok = v+s.value, true
	}
	return v, ok
}

// session is a verify session over HTTP at temperature 0 (or smp), opened with its key.
type httpSession struct {
	t    *testing.T
	url  string
	hdr  []string
	id   string
	pos  int
	next int32
	// emitted is every token it emitted: the open's next, then each round's
	emitted []int32
	cached  int
}

func openSession(t *testing.T, url, body string, hdr ...string) (*httpSession, int, []byte) {
	t.Helper()
	code, h, b := call(t, "POST", url+"/v1/sessions", body, hdr...)
	if code != 200 {
		return nil, code, b
	}
	var op serve.Opened
	if err := json.Unmarshal(b, &op); err != nil || h.Get(serve.SessionHeader) != op.Session {
		t.Fatalf("open: %v, header %q: %s", err, h.Get(serve.SessionHeader), b)
	}
	return &httpSession{t: t, url: url, hdr: hdr, id: op.Session, pos: op.Position, next: op.Next.ID,
		emitted: []int32{op.Next.ID}, cached: op.Cached}, code, b
}

// verify runs a round with draft chain (none: a plain step) and returns the accepted count.
func (s *httpSession) verify(chain ...int32) int {
	s.t.Helper()
	parents := make([]int, len(chain))
	for i := range parents {
		parents[i] = i - 1
	}
	body, _ := json.Marshal(serve.Draft{Position: s.pos, Tokens: append([]int32{}, chain...), Parents: parents})
	code, _, b := call(s.t, "POST", s.url+"/v1/sessions/"+s.id+"/verify", string(body), s.hdr...)
	var v serve.Verified
	if code != 200 || json.Unmarshal(b, &v) != nil {
		s.t.Fatalf("verify: %d %s", code, b)
	}
	for _, tok := range append(v.Tokens, v.Next) {
		s.emitted = append(s.emitted, tok.ID)
	}
	s.pos, s.next = v.Position, v.Next.ID
	return len(v.Accepted)
}

func (s *httpSession) close() {
	s.t.Helper()
	if code, _, b := call(s.t, "DELETE", s.url+"/v1/sessions/"+s.id, "", s.hdr...); code != 204 {
		s.t.Fatalf("close: %d %s", code, b)
	}
}

// /metrics after some traffic (sessions with accepted drafts, a request that waited in the
// queue, a prefix-cache hit, a completion, a 404) holds the series the operators need, with
// values that match the traffic; it needs no API key.
func TestMetrics(t *testing.T) {
	for _, c := range []struct {
		name   string
		states bool // a recurrent model: state slots too
	}{
		{"tiny-llama-q8_0", false},
		{"tiny-q35moe-q4_0", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			// a cache of one whole-context session (and the step pool): a second waits
			sv, url := opsServer(t, c.name, engine.LoadOptions{MaxRows: 8, Context: 48, Sessions: 1},
				serve.Options{ModelName: "m", ClientSessions: -1, HTTP: serve.HTTPOptions{APIKeys: []string{"k"}}})
			key := []string{"Authorization", "Bearer k"}
			prompt := `{"prompt": [5, 9, 2, 7, 11, 3], "sampler": {"temperature": 0}}`
			a, code, b := openSession(t, url, prompt, key...)
			if code != 200 {
				t.Fatalf("open: %d %s", code, b)
			}
			for range 5 {
				a.verify()
			}
			greedy := a.emitted
			// a second whole-context session waits for a's space
			waited := make(chan int, 1)
			go func() {
				w, code, _ := openSession(t, url, prompt, key...)
				if w != nil {
					w.close()
				}
				waited <- code
			}()
			var ss []sample
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				ss = scrape(t, url)
				if v, _ := metric(ss, "verity_queue_depth"); v == 1 {
					break
				}
				select {
				case code := <-waited:
					t.Fatalf("the second session did not wait: %d (%+v)", code, sv.Stats().Admission)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("the second session never waited in the queue: %+v", sv.Stats().Admission)
				}
			}
			if v, _ := metric(ss, "verity_cache_slots_reserved"); v < 48 {
				t.Errorf("a whole-context session open: %v cache slots reserved", v)
			}
			if v, _ := metric(ss, "verity_sessions_open"); v != 1 {
				t.Errorf("sessions open: %v", v)
			}
			a.close()
			if code := <-waited; code != 200 {
				t.Fatalf("the waiting session: %d", code)
			}
			// the same prompt again: a prefix-cache hit, and the greedy chain accepted 3 deep
			bs, _, _ := openSession(t, url, prompt, key...)
			if bs.cached == 0 {
				t.Error("the repeated prompt took nothing from the prefix cache")
			}
			if n := bs.verify(greedy[1:4]...); n != 3 {
				t.Errorf("the greedy chain: %d accepted", n)
			}
			bs.close()
			if code, _, b := call(t, "POST", url+"/v1/completions", `{"prompt": [4, 5, 6], "max_tokens": 5, "temperature": 0}`, key...); code != 200 {
				t.Fatalf("completion: %d %s", code, b)
			}
			if code, _, _ := call(t, "GET", url+"/no/such/route", "", key...); code != 404 {
				t.Errorf("an unknown route: %d", code)
			}

			ss = scrape(t, url)
			st := sv.Stats()
			for _, w := range []struct {
				name   string
				labels []string
				min    float64
				max    float64 // 0: no bound
			}{
				{"verity_http_requests_total", []string{"route", "POST /v1/sessions", "code", "200"}, 3, 3},
				{"verity_http_requests_total", []string{"route", "POST /v1/sessions/{id}/verify", "code", "200"}, 6, 6},
				{"verity_http_requests_total", []string{"route", "DELETE /v1/sessions/{id}", "code", "204"}, 3, 3},
				{"verity_http_requests_total", []string{"route", "POST /v1/completions", "code", "200"}, 1, 1},
				{"verity_http_requests_total", []string{"route", "unmatched", "code", "404"}, 1, 1},
				{"verity_http_requests_total", []string{"route", "GET /metrics", "code", "200"}, 1, 0}, // the earlier scrapes
				{"verity_http_request_seconds_count", []string{"route", "POST /v1/sessions"}, 3, 3},
				{"verity_http_request_seconds_sum", []string{"route", "POST /v1/sessions"}, 1e-9, 60},
				{"verity_prompt_tokens_total", nil, 3*6 + 3, 3*6 + 3},
				{"verity_prompt_tokens_cached_total", nil, 1, 3 * 6},
				{"verity_output_tokens_total", []string{"kind", "session"}, 5 + 4, 5 + 4},
				{"verity_output_tokens_total", []string{"kind", "completion"}, 1, 4},
				{"verity_queue_depth", nil, 0, 0},
				{"verity_queue_wait_seconds_count", nil, 1, 0},
				{"verity_queue_wait_seconds_sum", nil, 1e-6, 60},
				{"verity_step_seconds_count", nil, float64(st.Steps), float64(st.Steps)},
				{"verity_step_seconds_sum", nil, 1e-9, 60},
				{"verity_step_rows_count", nil, float64(st.Steps), float64(st.Steps)},
				{"verity_step_rows_sum", nil, float64(st.Rounds + st.Drafted), float64(st.Rounds + st.Drafted)},
				{"verity_step_rounds_sum", nil, float64(st.Rounds), float64(st.Rounds)},
				{"verity_draft_nodes_total", nil, 3, 3},
				{"verity_draft_accepted_total", []string{"depth", "0"}, 1, 1},
				{"verity_draft_accepted_total", []string{"depth", "2"}, 1, 1},
				{"verity_cache_slots", nil, 1, 0},
				{"verity_cache_slots_reserved", nil, 0, 0},
				{"verity_cache_slots_free", nil, 1, 0},
				{"verity_sessions_open", nil, 0, 0},
				{"verity_prefix_cache_hits_total", nil, 1, 0},
				{"verity_prefix_cache_misses_total", nil, 1, 0},
				{"verity_prefix_cache_entries", nil, 1, 0},
				{"verity_ready", nil, 1, 1},
				{"go_goroutines", nil, 1, 0},
				{"process_open_fds", nil, 1, 0},
			} {
				v, ok := metric(ss, w.name, w.labels...)
				if !ok || v < w.min || w.max > 0 && v > w.max || w.max == 0 && w.min == 0 && v != 0 {
					t.Errorf("%s%v = %v (present %v), want %v … %v", w.name, w.labels, v, ok, w.min, w.max)
				}
			}
			for _, s := range []string{"verity_state_slots", "verity_state_slots_reserved", "verity_state_slots_free"} {
				if _, ok := metric(ss, s); ok != c.states {
					t.Errorf("%s present %v, want %v", s, ok, c.states)
				}
			}
			if c.states {
				if v, _ := metric(ss, "verity_state_slots"); v < 1 {
					t.Errorf("verity_state_slots %v", v)
				}
			}
		})
	}
}

// /health is 200 whatever the service does; /ready is 200 while it takes work and 503 (with
// Retry-After) once it drains, while the sessions already open go on. Neither needs a key.
func TestHealthReady(t *testing.T) {
	sv, url := opsServer(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 2},
		serve.Options{HTTP: serve.HTTPOptions{APIKeys: []string{"k"}}})
	key := []string{"Authorization", "Bearer k"}
	s, code, b := openSession(t, url, `{"prompt": [1, 2, 3]}`, key...)
	if code != 200 {
		t.Fatalf("open: %d %s", code, b)
	}
	check := func(draining bool) {
		t.Helper()
		for _, c := range []struct {
			path   string
			status int
			body   string
		}{
			{"/health", 200, `{"status":"ok"}`},
			{"/ready", 200, `{"status":"ready"}`},
		} {
			code, h, b := call(t, "GET", url+c.path, "")
			if draining && c.path == "/ready" {
				if typ, _, ec := apiError(t, b); code != 503 || ec != "shutting_down" || typ != "server_error" || h.Get("Retry-After") == "" {
					t.Errorf("draining: %s: %d %q %s", c.path, code, h.Get("Retry-After"), b)
				}
				continue
			}
			if code != c.status || strings.TrimSpace(string(b)) != c.body {
				t.Errorf("draining %v: %s: %d %s", draining, c.path, code, b)
			}
		}
	}
	check(false)
	sv.Drain()
	check(true)
	if _, code, _ := openSession(t, url, `{"prompt": [1, 2, 3]}`, key...); code != 503 {
		t.Errorf("a new session while draining: %d", code)
	}
	s.verify() // the open one goes on
	s.close()
	check(true)
}

// An open admitted before a drain began is in flight: OpenSessions counts it, so that the
// drain waits for the session it opens (which its client then closes) instead of stopping
// the server under it.
func TestDrainWaitsForOpening(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 2})
	sv := serve.New(m.Engine, serve.Options{})
	defer sv.Shutdown()
	entered, release := make(chan struct{}), make(chan struct{})
	serve.SetOpenHook(sv, func() { close(entered); <-release })
	opened := make(chan error, 1)
	var op serve.Opened
	go func() {
		var err error
		op, err = sv.Open([]int32{1, 2, 3}, serve.Sampler{})
		opened <- err
	}()
	<-entered
	sv.Drain()
	if n := sv.OpenSessions(); n != 1 {
		t.Errorf("draining with an open admitted: %d sessions open, want 1", n)
	}
	close(release)
	if err := <-opened; err != nil {
		t.Fatalf("the open admitted before the drain: %v", err)
	}
	if n := sv.OpenSessions(); n != 1 {
		t.Errorf("after the open: %d sessions open", n)
	}
	if _, err := sv.Verify(op.Session, serve.Draft{Position: op.Position}); err != nil {
		t.Errorf("its session while draining: %v", err)
	}
	if err := sv.Close(op.Session); err != nil || sv.OpenSessions() != 0 {
		t.Errorf("closed: %v, %d open", err, sv.OpenSessions())
	}
}

// /tokenize and /detokenize round-trip text (the BOS the model asks for added by default,
// special tokens' text recognised unless parse_special is false) and refuse bad input with
// OpenAI's error object.
func TestTokenize(t *testing.T) {
	const name = "tiny-llama-q8_0"
	tk := fixtureTokenizer(t, name)
	m := load(t, name, engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 1})
	nv := m.Program().Config.NVocab
	sv := serve.New(m.Engine, serve.Options{Tokenizer: tk})
	defer sv.Shutdown()
	srv := httptest.NewServer(sv.Handler())
	defer srv.Close()
	tokenize := func(body string) []int32 {
		t.Helper()
		code, _, b := call(t, "POST", srv.URL+"/tokenize", body)
		var out struct{ Tokens []int32 }
		if code != 200 || json.Unmarshal(b, &out) != nil || out.Tokens == nil {
			t.Fatalf("tokenize %s: %d %s", body, code, b)
		}
		return out.Tokens
	}
	detokenize := func(toks []int32) string {
		t.Helper()
		code, _, b := call(t, "POST", srv.URL+"/detokenize", `{"tokens": `+ids(toks)+`}`)
		var out struct{ Content *string }
		if code != 200 || json.Unmarshal(b, &out) != nil || out.Content == nil {
			t.Fatalf("detokenize %v: %d %s", toks, code, b)
		}
		return *out.Content
	}
	special := "<|begin_of_text|>"
	for _, text := range []string{"Hello world", "", "  two  spaces\nand a line", "héllo wörld ✓", special + "after a special"} {
		q, _ := json.Marshal(text)
		plain := tokenize(`{"content": ` + string(q) + `, "add_special": false}`)
		if got := detokenize(plain); got != text {
			t.Errorf("%q: tokens %v detokenize to %q", text, plain, got)
		}
		whole := tokenize(`{"content": ` + string(q) + `}`)
		if len(whole) != len(plain)+1 || whole[0] != tk.BOS() || !slices.Equal(whole[1:], plain) {
			t.Errorf("%q: by default %v, without special tokens %v: want the BOS first", text, whole, plain)
		}
		if strings.HasPrefix(text, special) {
			if plain[0] != tk.BOS() {
				t.Errorf("%q: the special token's text was not recognised: %v", text, plain)
			}
			if lit := tokenize(`{"content": ` + string(q) + `, "add_special": false, "parse_special": false}`); lit[0] == tk.BOS() || detokenize(lit) != text {
				t.Errorf("%q with parse_special false: %v", text, lit)
			}
		}
	}
	for _, c := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/tokenize", `{}`, 400, "content"},
		{"/tokenize", `{"content": null}`, 400, "content"},
		{"/tokenize", `{"content": 5}`, 400, "content"},
		{"/tokenize", `{"content": "x", "add_special": "yes"}`, 400, "add_special"},
		{"/tokenize", `{"content": "x", "extra": 1}`, 400, "extra"},
		{"/tokenize", `{"content": "x"} {"content": "y"}`, 400, ""},
		{"/tokenize", `["x"]`, 400, ""},
		{"/tokenize", `not json`, 400, ""},
		{"/tokenize", ``, 400, ""},
		{"/detokenize", `{"tokens": [-1]}`, 400, "tokens"},
		{"/detokenize", fmt.Sprintf(`{"tokens": [1, %d]}`, nv), 400, "tokens"},
		{"/detokenize", `{"tokens": [1.5]}`, 400, "tokens"},
		{"/detokenize", `{"tokens": "abc"}`, 400, "tokens"},
		{"/detokenize", `{"tokens": [3000000000]}`, 400, "tokens"},
		{"/detokenize", `{"content": "x"}`, 400, "content"},
	} {
		code, _, b := call(t, "POST", srv.URL+c.path, c.body)
		typ, param, _ := apiError(t, b)
		if code != c.status || typ != "invalid_request_error" || param != c.param {
			t.Errorf("%s %s: %d, type %q, param %q: %s", c.path, c.body, code, typ, param, b)
		}
	}
	if code, h, b := call(t, "GET", srv.URL+"/tokenize", ""); code != 405 || h.Get("Allow") != "POST" {
		t.Errorf("GET /tokenize: %d, Allow %q: %s", code, h.Get("Allow"), b)
	}
	// without a tokenizer: a clear 400
	bare := serve.New(m.Engine, serve.Options{})
	defer bare.Shutdown()
	bsrv := httptest.NewServer(bare.Handler())
	defer bsrv.Close()
	for _, c := range [][2]string{{"/tokenize", `{"content": "x"}`}, {"/detokenize", `{"tokens": [1]}`}} {
		code, _, b := call(t, "POST", bsrv.URL+c[0], c[1])
		if _, _, ec := apiError(t, b); code != 400 || ec != "invalid_request" {
			t.Errorf("no tokenizer: %s: %d %s", c[0], code, b)
		}
	}
}

// CORS is off by default (no Access-Control-* header, a preflight not answered as one); with
// origins configured, their requests carry the headers a browser needs and their preflights
// are answered (without an API key: browsers send none), others' are not.
func TestCORS(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 1})
	const a, b, evil = "https://a.example", "https://b.example:8443", "https://evil.example"
	for _, c := range []struct {
		name    string
		origins []string
		method  string // OPTIONS: a preflight
		path    string
		origin  string
		key     bool
		status  int
		allow   string // the Access-Control-Allow-Origin wanted ("": no Access-Control-* at all)
	}{
		{"off", nil, "GET", "/v1/models", a, true, 200, ""},
		{"off, preflight", nil, "OPTIONS", "/v1/chat/completions", a, false, 405, ""},
		{"any", []string{"*"}, "GET", "/v1/models", a, true, 200, a},
		{"any, preflight", []string{"*"}, "OPTIONS", "/v1/chat/completions", b, false, 204, b},
		{"any, no origin", []string{"*"}, "GET", "/v1/models", "", true, 200, ""},
		{"any, no key", []string{"*"}, "GET", "/v1/models", a, false, 401, a},
		{"listed", []string{a, b}, "GET", "/v1/models", b, true, 200, b},
		{"listed, preflight", []string{a, b}, "OPTIONS", "/v1/sessions/x/verify", a, false, 204, a},
		{"unlisted", []string{a, b}, "GET", "/v1/models", evil, true, 200, ""},
		{"unlisted, preflight", []string{a, b}, "OPTIONS", "/v1/completions", evil, false, 405, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sv := serve.New(m.Engine, serve.Options{HTTP: serve.HTTPOptions{APIKeys: []string{"k"}, CORSOrigins: c.origins}})
			defer sv.Shutdown()
			srv := httptest.NewServer(sv.Handler())
			defer srv.Close()
			var hdr []string
			if c.origin != "" {
				hdr = append(hdr, "Origin", c.origin)
			}
			if c.key {
				hdr = append(hdr, "Authorization", "Bearer k")
			}
			if c.method == "OPTIONS" {
				hdr = append(hdr, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
			}
			code, h, body := call(t, c.method, srv.URL+c.path, "", hdr...)
			if code != c.status {
				t.Errorf("status %d, want %d: %s", code, c.status, body)
			}
			if c.allow == "" {
				for k := range h {
					if strings.HasPrefix(k, "Access-Control-") {
						t.Errorf("%s: %q", k, h.Get(k))
					}
				}
				return
			}
			if h.Get("Access-Control-Allow-Origin") != c.allow || !slices.Contains(h.Values("Vary"), "Origin") {
				t.Errorf("Allow-Origin %q, Vary %q", h.Get("Access-Control-Allow-Origin"), h.Values("Vary"))
			}
			if c.method == "OPTIONS" {
				methods, headers := h.Get("Access-Control-Allow-Methods"), strings.ToLower(h.Get("Access-Control-Allow-Headers"))
				if !strings.Contains(methods, "POST") || !strings.Contains(methods, "DELETE") ||
					!strings.Contains(headers, "authorization") || !strings.Contains(headers, "content-type") || h.Get("Access-Control-Max-Age") == "" {
					t.Errorf("preflight: methods %q, headers %q, max age %q", methods, headers, h.Get("Access-Control-Max-Age"))
				}
			} else if exp := h.Get("Access-Control-Expose-Headers"); !strings.Contains(exp, "X-Request-Id") || !strings.Contains(exp, "Retry-After") {
				t.Errorf("Expose-Headers %q", exp)
			}
		})
	}
}

// Several API keys: each is accepted (and is a client of its own), anything else is 401 with
// an authentication_error, on every route but the probes.
func TestAPIKeys(t *testing.T) {
	_, url := opsServer(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 4},
		serve.Options{ClientSessions: 1, HTTP: serve.HTTPOptions{APIKeys: []string{"sk-one", "sk-two", "sk-three"}}})
	for _, c := range []struct {
		auth   string
		status int
	}{
		{"Bearer sk-one", 200},
		{"Bearer sk-two", 200},
		{"Bearer sk-three", 200},
		{"bearer sk-one", 200},
		{"BEARER  sk-two ", 200},
		{"", 401},
		{"Bearer ", 401},
		{"Bearer sk-four", 401},
		{"Bearer sk-one2", 401},
		{"Bearer sk-on", 401},
		{"Basic sk-one", 401},
		{"sk-one", 401},
	} {
		var hdr []string
		if c.auth != "" {
			hdr = []string{"Authorization", c.auth}
		}
		code, _, b := call(t, "GET", url+"/v1/models", "", hdr...)
		if code != c.status {
			t.Errorf("%q: %d, want %d", c.auth, code, c.status)
		}
		if code == 401 {
			if typ, _, ec := apiError(t, b); typ != "authentication_error" || ec != "invalid_api_key" {
				t.Errorf("%q: %s", c.auth, b)
			}
		}
	}
	// each key is its own client: one session each under a cap of one
	for _, k := range []string{"sk-one", "sk-two"} {
		if _, code, b := openSession(t, url, `{"prompt": [1, 2]}`, "Authorization", "Bearer "+k); code != 200 {
			t.Errorf("%s's first session: %d %s", k, code, b)
		}
	}
	if _, code, _ := openSession(t, url, `{"prompt": [1, 2]}`, "Authorization", "Bearer sk-one"); code != 429 {
		t.Errorf("sk-one's second session: %d", code)
	}
	for _, p := range []string{"/health", "/ready", "/metrics"} {
		if code, _, _ := call(t, "GET", url+p, ""); code != 200 {
			t.Errorf("%s without a key: %d", p, code)
		}
	}
}

// syncBuffer is a log destination the handler and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines waits (at most 2 s) for at least n lines and returns them: a request's line is
// written after its reply.
func (s *syncBuffer) lines(t *testing.T, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		text := s.b.String()
		s.mu.Unlock()
		lines := strings.Split(strings.TrimSpace(text), "\n")
		if text == "" {
			lines = nil
		}
		if len(lines) >= n || time.Now().After(deadline) {
			return lines
		}
	}
}

// Every request gets one structured log line (text or JSON) with its method, route, status,
// duration and request id (the client's X-Request-Id, else the one the reply carries).
func TestRequestLog(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 1})
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf syncBuffer
			h := slog.Handler(slog.NewTextHandler(&buf, nil))
			if format == "json" {
				h = slog.NewJSONHandler(&buf, nil)
			}
			sv := serve.New(m.Engine, serve.Options{HTTP: serve.HTTPOptions{Logger: slog.New(h)}})
			defer sv.Shutdown()
			srv := httptest.NewServer(sv.Handler())
			defer srv.Close()
			reqs := []struct {
				method, path, body, id string
				status                 int
				route                  string
			}{
				{"GET", "/v1/models", "", "req-1", 200, "GET /v1/models"},
				{"POST", "/v1/sessions", `{"prompt": []}`, "", 400, "POST /v1/sessions"},
				{"DELETE", "/v1/sessions/abc", "", "req 2 is not sane", 404, "DELETE /v1/sessions/{id}"},
				{"GET", "/nowhere", "", "", 404, "unmatched"},
				{"PUT", "/v1/models", "", "", 405, "unmatched"},
			}
			ids := make([]string, len(reqs))
			for i, r := range reqs {
				var hdr []string
				if r.id != "" {
					hdr = []string{"X-Request-Id", r.id}
				}
				code, h, _ := call(t, r.method, srv.URL+r.path, r.body, hdr...)
				ids[i] = h.Get("X-Request-Id")
				if code != r.status || ids[i] == "" || r.id == "req-1" && ids[i] != r.id || r.id != "" && r.id != "req-1" && ids[i] == r.id {
					t.Errorf("%s %s: %d, X-Request-Id %q", r.method, r.path, code, ids[i])
				}
			}
			lines := buf.lines(t, len(reqs))
			if len(lines) != len(reqs) {
				t.Fatalf("%d requests, %d log lines:\n%s", len(reqs), len(lines), strings.Join(lines, "\n"))
			}
			for i, r := range reqs {
				f := logFields(t, format, lines[i])
				want := map[string]string{"msg": "request", "level": "INFO", "method": r.method, "path": r.path,
					"route": r.route, "status": strconv.Itoa(r.status), "request_id": ids[i]}
				for k, v := range want {
					if f[k] != v {
						t.Errorf("line %d: %s = %q, want %q: %s", i, k, f[k], v, lines[i])
					}
				}
				for _, k := range []string{"time", "duration", "client", "remote"} {
					if f[k] == "" {
						t.Errorf("line %d: no %s: %s", i, k, lines[i])
					}
				}
				if format == "json" {
					if d, err := strconv.ParseInt(f["duration"], 10, 64); err != nil || d < 0 {
						t.Errorf("line %d: duration %q", i, f["duration"])
					}
				} else if _, err := time.ParseDuration(f["duration"]); err != nil {
					t.Errorf("line %d: duration %q", i, f["duration"])
				}
			}
		})
	}
}

// logFields reads a slog line's top-level fields as text.
func logFields(t *testing.T, format, line string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if format == "json" {
		// numbers as written: a float64 would print a duration of a millisecond or more
		// (1000000 ns) as 1e+06
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	for rest := line; rest != ""; {
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			t.Fatalf("not key=value: %s", line)
		}
		if strings.HasPrefix(v, `"`) {
			q, err := strconv.QuotedPrefix(v)
			if err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			out[k], _ = strconv.Unquote(q)
			rest = strings.TrimPrefix(v[len(q):], " ")
			continue
		}
		v, rest, _ = strings.Cut(v, " ")
		out[k] = v
	}
	return out
}

// The model's id (Options.ModelName, --alias) is what /v1/models, /v1/models/{id} and every
// completion and chat reply, whole or streamed, name.
func TestModelAlias(t *testing.T) {
	const alias = "team/verity-tiny:v2"
	_, url := opsServer(t, "tiny-qwen3-q8_0", engine.LoadOptions{MaxRows: 8, Context: 64, Sessions: 2}, serve.Options{ModelName: alias})
	var list struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	code, _, b := call(t, "GET", url+"/v1/models", "")
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Data) != 1 || list.Data[0].ID != alias || list.Object != "list" {
		t.Errorf("/v1/models: %d %s", code, b)
	}
	var one struct{ ID, Object string }
	code, _, b = call(t, "GET", url+"/v1/models/"+alias, "")
	if code != 200 || json.Unmarshal(b, &one) != nil || one.ID != alias || one.Object != "model" {
		t.Errorf("/v1/models/%s: %d %s", alias, code, b)
	}
	for _, other := range []string{"tiny-qwen3-q8_0", "team", "team/verity-tiny"} {
		code, _, b := call(t, "GET", url+"/v1/models/"+other, "")
		if _, param, ec := apiError(t, b); code != 404 || ec != "model_not_found" || param != "model" {
			t.Errorf("/v1/models/%s: %d %s", other, code, b)
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt": "Hi", "max_tokens": 3, "model": "whatever"}`},
		{"/v1/completions", `{"prompt": "Hi", "max_tokens": 3, "stream": true}`},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}`},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "stream": true}`},
	} {
		code, _, b := call(t, "POST", url+c.path, c.body)
		if code != 200 {
			t.Fatalf("%s %s: %d %s", c.path, c.body, code, b)
		}
		objs := [][]byte{b}
		if strings.Contains(c.body, `"stream": true`) {
			objs = nil
			for _, ev := range strings.Split(string(b), "\n") {
				if d, ok := strings.CutPrefix(ev, "data: "); ok && d != "[DONE]" {
					objs = append(objs, []byte(d))
				}
			}
		}
		for _, o := range objs {
			var r struct{ Model string }
			if json.Unmarshal(o, &r) != nil || r.Model != alias {
				t.Errorf("%s %s: model %q in %s", c.path, c.body, r.Model, o)
			}
		}
	}
}

// A client that goes away mid-generation — a stream it stops reading after the first chunk, a
// whole reply it stops waiting for — ends the generation: its session closes and its cache
// space is free within moments, long before max_tokens.
func TestClientDisconnectStopsGeneration(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 256, Sessions: 1})
	sv := serve.New(m.Engine, serve.Options{Tokenizer: fixtureTokenizer(t, "tiny-llama-q8_0")})
	defer sv.Shutdown()
	srv := httptest.NewServer(sv.Handler())
	defer srv.Close()
	serve.SetRoundHook(sv, func() { time.Sleep(5 * time.Millisecond) }) // 200 rounds: over a second
	const maxTokens = 200
	for _, c := range []struct {
		path, body string
		stream     bool
	}{
		{"/v1/completions", `{"prompt": [1, 2, 3], "max_tokens": 200, "temperature": 0.7, "seed": 1, "stream": true}`, true},
		{"/v1/completions", `{"prompt": [1, 2, 3], "max_tokens": 200, "temperature": 0.7, "seed": 1}`, false},
		{"/v1/completions", `{"prompt": [1, 2, 3], "max_tokens": 200, "temperature": 0.7, "seed": 1, "n": 3, "stream": true}`, true},
	} {
		before := sv.Stats()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		// a whole reply's headers come only at its end: the request runs aside
		replied := make(chan *http.Response, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				resp = nil
			}
			replied <- resp
		}()
		var resp *http.Response
		if c.stream {
			if resp = <-replied; resp == nil || !bufio.NewScanner(resp.Body).Scan() {
				t.Fatalf("%s: no first event", c.path)
			}
		}
		for deadline := time.Now().Add(5 * time.Second); sv.Stats().Rounds < before.Rounds+5; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s stream %v: no rounds ran", c.path, c.stream)
			}
		}
		cancel()
		if !c.stream {
			resp = <-replied
		}
		if resp != nil {
			resp.Body.Close()
		}
		if !c.stream && resp != nil {
			t.Errorf("%s: a whole reply after the client left: %d", c.path, resp.StatusCode)
		}
		gone := time.Now()
		for {
			st := sv.Stats()
			if st.Sessions == 0 && st.Admission.SlotsUsed == 0 {
				if n := st.Rounds - before.Rounds; n >= maxTokens/2 {
					t.Errorf("%s stream %v: %d rounds ran for a client that left", c.path, c.stream, n)
				}
				t.Logf("%s stream %v: ended %v after the client left, %d rounds", c.path, c.stream, time.Since(gone).Round(time.Millisecond), st.Rounds-before.Rounds)
				break
			}
			if time.Since(gone) > time.Second {
				t.Fatalf("%s stream %v: a second after the client left: %+v", c.path, c.stream, st)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// A client may hold --client-sessions verify sessions (by its header, or its API key); one
// more is refused with 429 session_limit and Retry-After, while other clients, and the
// client's completions, go on; closing one makes room.
func TestClientSessionCap(t *testing.T) {
	_, url := opsServer(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32, Sessions: 8},
		serve.Options{ClientSessions: 2, HTTP: serve.HTTPOptions{ClientHeader: "X-Client"}})
	a, b := []string{"X-Client", "a"}, []string{"X-Client", "b, 10.0.0.1"}
	held := map[string][]*httpSession{}
	for _, c := range []struct {
		who    []string
		close  bool // close the client's last session instead
		status int
	}{
		{a, false, 200},
		{a, false, 200},
		{a, false, 429},
		{b, false, 200},
		{b, false, 200},
		{[]string{"X-Client", "b"}, false, 429}, // the header's first value names the client
		{a, true, 0},
		{a, false, 200},
		{a, false, 429},
	} {
		who := c.who[1]
		if c.close {
			n := len(held[who])
			held[who][n-1].close()
			held[who] = held[who][:n-1]
			continue
		}
		s, code, body := openSession(t, url, `{"prompt": [1, 2, 3]}`, c.who...)
		if code != c.status {
			t.Fatalf("%v: %d, want %d: %s", c.who, code, c.status, body)
		}
		if s != nil {
			held[who] = append(held[who], s)
			continue
		}
		code, h, body := call(t, "POST", url+"/v1/sessions", `{"prompt": [1, 2, 3]}`, c.who...)
		if typ, _, ec := apiError(t, body); code != 429 || ec != "session_limit" || typ != "rate_limit_error" || h.Get("Retry-After") == "" {
			t.Errorf("%v past the cap: %d, Retry-After %q: %s", c.who, code, h.Get("Retry-After"), body)
		}
		// its completions are not capped
		if code, _, body := call(t, "POST", url+"/v1/completions", `{"prompt": [1, 2], "max_tokens": 2}`, c.who...); code != 200 {
			t.Errorf("%v: a completion at the cap: %d %s", c.who, code, body)
		}
	}
}

// The sessions API draws a random seed where the request gives none (as the OpenAI endpoints
// do): two sessions sampling the same prompt then differ; with the same seed (signed or not)
// they are equal.
func TestSessionSeed(t *testing.T) {
	_, url := opsServer(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 64, Sessions: 2}, serve.Options{})
	run := func(seed string) []int32 {
		t.Helper()
		smp := `"temperature": 1.5`
		if seed != "" {
			smp += `, "seed": ` + seed
		}
		s, code, b := openSession(t, url, `{"prompt": [7, 3, 9], "sampler": {`+smp+`}}`)
		if code != 200 {
			t.Fatalf("open: %d %s", code, b)
		}
		for len(s.emitted) < 24 {
			s.verify()
		}
		s.close()
		return s.emitted[:24]
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"", "", false},
		{"42", "42", true},
		{"-7", "-7", true},
		{"-1", "18446744073709551615", true}, // the same 64 bits
		{"1", "2", false},
	} {
		x, y := run(c.a), run(c.b)
		if slices.Equal(x, y) != c.same {
			t.Errorf("seeds %q and %q: %v and %v (want the same: %v)", c.a, c.b, x, y, c.same)
		}
	}
}

// With a read timeout (http.Server.ReadTimeout, --read-timeout), a body that never finishes
// or trickles in is answered 408 and its connection closed at the timeout, rather than held;
// a whole body lifts the deadline, so that a reply that takes longer than the timeout (a
// slow completion, whole or streamed) is not cut by it.
func TestReadTimeout(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 64, Sessions: 1})
	sv := serve.New(m.Engine, serve.Options{Tokenizer: fixtureTokenizer(t, "tiny-llama-q8_0")})
	defer sv.Shutdown()
	const timeout = 300 * time.Millisecond
	srv := httptest.NewUnstartedServer(sv.Handler())
	srv.Config.ReadTimeout = timeout
	srv.Start()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	body := `{"prompt": [1, 2, 3], "max_tokens": 20, "temperature": 0}`
	head := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
	serve.SetRoundHook(sv, func() { time.Sleep(30 * time.Millisecond) }) // 19 rounds: twice the timeout
	for _, c := range []struct {
		name   string
		length int           // Content-Length
		send   string        // what is sent of the body
		gap    time.Duration // between its bytes (0: at once)
		status int
	}{
		{"never finished", len(body) + 10, body, 0, 408},
		{"cut mid-object", len(body), body[:20], 0, 408},
		{"trickled", len(body), body, 50 * time.Millisecond, 408},
		{"whole, a slow reply", len(body), body, 0, 200},
		{"whole, streamed", len(body) + 16, strings.Replace(body, "}", `, "stream": true}`, 1), 0, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, head, c.length)
			go func() {
				for i := 0; i < len(c.send); i++ {
					if c.gap == 0 {
						conn.Write([]byte(c.send[i:]))
						return
					}
					if _, err := conn.Write([]byte{c.send[i]}); err != nil {
						return
					}
					time.Sleep(c.gap)
				}
			}()
			conn.SetReadDeadline(start.Add(5 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no reply after %v: %v", time.Since(start), err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != c.status {
				t.Fatalf("%d (%v) after %v: %s", resp.StatusCode, err, time.Since(start), b)
			}
			took := time.Since(start)
			if c.status == 200 {
				if took < timeout || !strings.Contains(string(b), `"finish_reason":"length"`) {
					t.Errorf("after %v (the timeout %v): %s", took, timeout, b)
				}
				return
			}
			// (the server's clock for the timeout starts when it accepts the connection, which
			// can be a little before the client's start)
			if _, _, code := apiError(t, b); code != "request_timeout" || took < timeout-50*time.Millisecond || took > timeout+2*time.Second {
				t.Errorf("code %q after %v: %s", code, took, b)
			}
			// and the connection is closed, not kept for another request: an end of stream, or a
			// reset when the server closed with bytes of the trickled body still unread (the
			// client goes on sending them after the 408)
			if n, err := br.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("after the 408: %q, %v; want EOF or a reset", n, err)
			}
		})
	}
}

// A request whose body is large has its decoded form returned to the system once it ends (the
// runtime would keep the pages for minutes); small ones do not ask for it, and many large ones
// at once cost one release.
func TestLargeBodyMemoryReleased(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 64, Sessions: 1})
	sv := serve.New(m.Engine, serve.Options{Tokenizer: fixtureTokenizer(t, "tiny-llama-q8_0"), HTTP: serve.HTTPOptions{MaxBody: 8 << 20}})
	defer sv.Shutdown()
	var released atomic.Int32
	serve.SetFreeOSMemory(t, func() { released.Add(1) })
	srv := httptest.NewServer(sv.Handler())
	defer srv.Close()
	post := func(ids int) int {
		body := `{"prompt": [` + strings.Repeat("5, ", ids) + `5], "max_tokens": 1}`
		resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(3); code != 200 {
		t.Fatalf("a small prompt: %d", code)
	}
	time.Sleep(300 * time.Millisecond)
	if n := released.Load(); n != 0 {
		t.Fatalf("a small body released memory %d times", n)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := post(1 << 20); code != 400 { // 3 MB of token ids, past the context
				t.Errorf("a large prompt: %d", code)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := released.Load(); n < 1 || n > 2 {
		t.Errorf("four large bodies at once: %d releases, want 1 (or 2 if one ended after the first began)", n)
	}
}
