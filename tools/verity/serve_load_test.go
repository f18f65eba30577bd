package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The load tests drive `verity serve` over loopback as production clients would: many at
// once, mixing verify sessions, completions and streams, half of them asking more than the
// cache holds at once. Every request must be answered or refused with a documented status,
// every output must equal the same request's alone, and the server's RSS must stay flat.
// They run briefly by default; VERITY_LOAD_SECONDS=60 runs them for a minute.

// loadSeconds is how long each load test drives its servers.
func loadSeconds(t *testing.T, short float64) time.Duration {
	if s := os.Getenv("VERITY_LOAD_SECONDS"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			t.Fatalf("VERITY_LOAD_SECONDS=%q", s)
		}
		return time.Duration(v * float64(time.Second))
	}
	return time.Duration(short * float64(time.Second))
}

// TestServeReplica is not a test: a load test runs the test binary again with
// VERITY_SERVE_ARGS set to serve as one replica (a process of its own, to be signalled and
// measured).
func TestServeReplica(t *testing.T) {
	args := os.Getenv("VERITY_SERVE_ARGS")
	if args == "" {
		t.Skip("runs only as a load test's replica")
	}
	root := newRoot()
	root.SetArgs(strings.Split(args, "\x1f"))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "verity:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// replica is a `verity serve` process.
type replica struct {
	name, addr string
	cmd        *exec.Cmd
	done       chan error // the process's exit
	log        string
}

// freeAddr is a loopback address with a free port.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startReplica starts `verity serve --model model` with args and waits until it is ready.
func startReplica(t *testing.T, name, model string, args ...string) *replica {
	t.Helper()
	r := &replica{name: name, addr: freeAddr(t), done: make(chan error, 1), log: filepath.Join(t.TempDir(), name+".log")}
	all := append([]string{"serve", "--model", model, "--addr", r.addr, "--replica", name}, args...)
	r.cmd = exec.Command(os.Args[0], "-test.run=^TestServeReplica$")
	r.cmd.Env = append(os.Environ(), "VERITY_SERVE_ARGS="+strings.Join(all, "\x1f"))
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	waitReady(t, "http://"+r.addr, r.done)
	return r
}

// waitReady polls url's /ready until it answers 200 (at most a minute).
func waitReady(t *testing.T, url string, exited <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("%s exited before it was ready: %v", url, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not ready after a minute", url)
		}
	}
}

// rss is a process's resident set in bytes (0 where /proc cannot tell).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// loadReplicaArgs size a replica for the load: a cache of two full 64-position sessions, so
// that most requests wait their turn.
var loadReplicaArgs = []string{"--context", "64", "--sessions", "2", "--step", "16", "--evict-after", "500ms",
	"--client-header", "X-Client", "--client-sessions", "4", "--queue-wait", "20s", "--grace", "20s", "--log-requests=false"}

// A task is one unit of client work with a deterministic outcome: a verify session's whole
// script, or one completion. big tasks ask more than the cache holds at once.
type task struct {
	session bool
	prompt  []int32
	seed    int
	tokens  int  // to emit (a session's) or max_tokens
	n       int  // completion choices
	stream  bool // completion
	bounded bool // a session opened with max_tokens (else it reserves its whole context)
}

func loadTasks() (small, big []task) {
	r := rand.New(rand.NewPCG(1, 2))
	prompt := func(n int) []int32 {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(3 + r.IntN(300))
		}
		return p
	}
	for i := range 6 {
		small = append(small, task{session: true, prompt: prompt(4 + i), seed: i, tokens: 16, bounded: true},
			task{prompt: prompt(5 + i), seed: 10 + i, tokens: 12, n: 1, stream: i%2 == 0})
		big = append(big, task{session: true, prompt: prompt(8 + i), seed: 20 + i, tokens: 40},
			task{prompt: prompt(16 + i), seed: 30 + i, tokens: 40, n: 4, stream: i%2 == 1})
	}
	return small, big
}

// outcome is what a task produced: its emitted token ids (each choice's, for a completion)
// and log-probabilities, as text to compare.
type outcome string

// loadHooks hear of a load's work, with the replica that did it (X-Verity-Replica); each may
// be nil.
type loadHooks struct {
	open   func(replica string, began time.Time) // a session opened or a completion begun then was served
	verify func(replica string)                  // a verify round answered
	// a session opened; what it returns (if not nil) is called when the session has ended
	// (closed, or given up)
	session func(replica string) (ended func())
}

// loadClient runs tasks against a server and checks every reply's status.
type loadClient struct {
	base  string
	id    string
	http  *http.Client
	lb    bool // behind the load balancer: a session on a replica that stopped is gone (404)
	hooks loadHooks
	stats *loadStats
}

type loadStats struct {
	mu        sync.Mutex
	byStatus  map[int]int
	refused   int // 429 and 503, retried
	evicted   int // 410: the session started over
	lost      int // 404 behind the balancer: the session's replica no longer had it (started over)
	requests  atomic.Int64
	failures  []string
	completed int
}

func (s *loadStats) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) < 20 {
		s.failures = append(s.failures, fmt.Sprintf(format, args...))
	}
}

func (s *loadStats) status(code int) {
	s.mu.Lock()
	s.byStatus[code]++
	s.mu.Unlock()
	s.requests.Add(1)
}

// errRestart says a session is gone (evicted, or its replica stopped) and its task starts over.
var errRestart = fmt.Errorf("the session is gone")

// post sends a JSON body and returns the status, reply headers and body (a stream's events
// joined); a documented refusal (429, 503 with Retry-After) is waited out and retried.
func (c *loadClient) post(ctx context.Context, path string, body any) (int, http.Header, []byte, error) {
	b, _ := json.Marshal(body)
	for {
		req, _ := http.NewRequestWithContext(ctx, "POST", c.base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Client", c.id)
		resp, err := c.http.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, nil, nil, fmt.Errorf("%s: reading the reply: %w", path, err)
		}
		c.stats.status(resp.StatusCode)
		if resp.StatusCode == 429 || resp.StatusCode == 503 {
			code := errorCodeOf(out)
			if resp.Header.Get("Retry-After") == "" || !slices.Contains([]string{"queue_full", "queue_timeout", "shutting_down", "session_limit"}, code) {
				return 0, nil, nil, fmt.Errorf("%s: %d without Retry-After or with code %q: %s", path, resp.StatusCode, code, out)
			}
			c.stats.mu.Lock()
			c.stats.refused++
			c.stats.mu.Unlock()
			select {
			case <-ctx.Done():
				return 0, nil, nil, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		return resp.StatusCode, resp.Header, out, nil
	}
}

func errorCodeOf(b []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(b, &e)
	return e.Error.Code
}

// run runs a task to its outcome, starting a session's script over when the session is gone.
func (c *loadClient) run(ctx context.Context, tk task) (outcome, error) {
	for {
		var out outcome
		var err error
		if tk.session {
			out, err = c.session(ctx, tk)
		} else {
			out, err = c.completion(ctx, tk)
		}
		if err != errRestart {
			return out, err
		}
	}
}

// session opens a session, verifies rounds with drafts that depend only on what it has
// emitted (prompt lookup, a deterministic random tree, nothing) until it has emitted
// tk.tokens, and closes it.
func (c *loadClient) session(ctx context.Context, tk task) (outcome, error) {
	open := map[string]any{"prompt": tk.prompt, "sampler": map[string]any{"temperature": 0.8, "seed": tk.seed}}
	if tk.bounded {
		open["max_tokens"] = tk.tokens + 8
	}
	began := time.Now()
	code, h, body, err := c.post(ctx, "/v1/sessions", open)
	if err != nil {
		return "", err
	}
	if code != 200 {
		return "", fmt.Errorf("open: %d %s", code, body)
	}
	replica := h.Get("X-Verity-Replica")
	if c.hooks.open != nil {
		c.hooks.open(replica, began)
	}
	if c.hooks.session != nil {
		if ended := c.hooks.session(replica); ended != nil {
			defer ended()
		}
	}
	var op struct {
		Session  string `json:"session"`
		Position int    `json:"position"`
		Next     struct {
			ID      int32   `json:"id"`
			Logprob float64 `json:"logprob"`
		} `json:"next"`
	}
	if err := json.Unmarshal(body, &op); err != nil || h.Get("X-Verity-Session") != op.Session {
		return "", fmt.Errorf("open: %v, header %q, body %s", err, h.Get("X-Verity-Session"), body)
	}
	var out strings.Builder
	history := append(slices.Clone(tk.prompt), op.Next.ID)
	fmt.Fprintf(&out, "%d:%v ", op.Next.ID, op.Next.Logprob)
	emitted, pos := 1, op.Position
	r := rand.New(rand.NewPCG(uint64(tk.seed), 7))
	for round := 0; emitted < tk.tokens; round++ {
		d := map[string]any{"position": pos}
		toks, parents := []int32{}, []int{}
		switch round % 3 {
		case 0: // prompt lookup: what followed the last token's latest earlier occurrence
			last := history[len(history)-1]
			for i := len(history) - 2; i >= 0; i-- {
				if history[i] == last {
					for j := i + 1; j < len(history)-1 && len(toks) < 4; j++ {
						toks, parents = append(toks, history[j]), append(parents, len(toks)-1)
					}
					break
				}
			}
		case 1: // a random tree
			toks, parents = []int32{int32(r.IntN(300)), int32(r.IntN(300)), int32(r.IntN(300))}, []int{-1, -1, 0}
		}
		d["tokens"], d["parents"] = toks, parents
		code, vh, body, err := c.post(ctx, "/v1/sessions/"+op.Session+"/verify", d)
		if err != nil {
			return "", err
		}
		if code == 200 && c.hooks.verify != nil {
			c.hooks.verify(vh.Get("X-Verity-Replica"))
		}
		switch {
		case code == 410:
			c.stats.mu.Lock()
			c.stats.evicted++
			c.stats.mu.Unlock()
			return "", errRestart
		case code == 404 && c.lb:
			c.stats.mu.Lock()
			c.stats.lost++
			c.stats.mu.Unlock()
			return "", errRestart
		case code != 200:
			return "", fmt.Errorf("verify: %d %s", code, body)
		}
		var v struct {
			Tokens []struct {
				ID      int32   `json:"id"`
				Logprob float64 `json:"logprob"`
			} `json:"tokens"`
			Next struct {
				ID      int32   `json:"id"`
				Logprob float64 `json:"logprob"`
			} `json:"next"`
			Position int `json:"position"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return "", err
		}
		for _, t := range append(v.Tokens, v.Next) {
			fmt.Fprintf(&out, "%d:%v ", t.ID, t.Logprob)
			history = append(history, t.ID)
			emitted++
		}
		pos = v.Position
	}
	req, _ := http.NewRequestWithContext(ctx, "DELETE", c.base+"/v1/sessions/"+op.Session, nil)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	c.stats.status(resp.StatusCode)
	switch {
	case resp.StatusCode == 204, c.lb && resp.StatusCode == 404:
	case resp.StatusCode == 410:
		// evicted while idle between its last round and the close: what it emitted stands
		c.stats.mu.Lock()
		c.stats.evicted++
		c.stats.mu.Unlock()
	default:
		return "", fmt.Errorf("close: %d", resp.StatusCode)
	}
	// what it emitted up to tk.tokens (a last round may run past it)
	fields := strings.Fields(out.String())
	return outcome(strings.Join(fields[:tk.tokens], " ")), nil
}

// completion runs one completion, whole or streamed, and returns each choice's token ids.
func (c *loadClient) completion(ctx context.Context, tk task) (outcome, error) {
	body := map[string]any{"prompt": tk.prompt, "max_tokens": tk.tokens, "temperature": 0.9, "seed": tk.seed, "n": tk.n, "stream": tk.stream}
	began := time.Now()
	code, h, reply, err := c.post(ctx, "/v1/completions", body)
	if err != nil {
		return "", err
	}
	if code != 200 {
		return "", fmt.Errorf("completion: %d %s", code, reply)
	}
	if c.hooks.open != nil {
		c.hooks.open(h.Get("X-Verity-Replica"), began)
	}
	toks := make([][]int32, tk.n)
	texts := make([]string, tk.n)
	add := func(line []byte) error {
		var cc struct {
			Choices []struct {
				Index  int     `json:"index"`
				Text   string  `json:"text"`
				Tokens []int32 `json:"tokens"`
			} `json:"choices"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal(line, &cc); err != nil || cc.Error != nil {
			return fmt.Errorf("completion: %v in %s", err, line)
		}
		for _, ch := range cc.Choices {
			toks[ch.Index] = append(toks[ch.Index], ch.Tokens...)
			texts[ch.Index] += ch.Text
		}
		return nil
	}
	if !tk.stream {
		if err := add(reply); err != nil {
			return "", err
		}
	} else {
		done := false
		sc := bufio.NewScanner(bytes.NewReader(reply))
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			switch {
			case !ok:
			case line == "[DONE]":
				done = true
			default:
				if err := add([]byte(line)); err != nil {
					return "", err
				}
			}
		}
		if !done {
			return "", fmt.Errorf("a stream without [DONE]: %q", reply)
		}
	}
	return outcome(fmt.Sprintf("%v %q", toks, texts)), nil
}

// drive runs clients concurrently for d, each taking tasks in turn (odd clients the big ones),
// and checks every outcome against want. It returns when every client has finished its task
// in hand.
func drive(t *testing.T, base string, clients int, d time.Duration, small, big []task, want map[int]outcome, lb bool, hooks loadHooks) *loadStats {
	stats := &loadStats{byStatus: map[int]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute) // a stuck request fails the test, not CI
	defer cancel()
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for k := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &loadClient{base: base, id: fmt.Sprintf("client-%d", k), http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}},
				lb: lb, hooks: hooks, stats: stats}
			tasks, off := small, 0
			if k%2 == 1 {
				tasks, off = big, len(small)
			}
			for i := k; time.Now().Before(stop); i++ {
				j := i % len(tasks)
				got, err := c.run(ctx, tasks[j])
				if err != nil {
					stats.fail("client %d, task %d: %v", k, off+j, err)
					return
				}
				if got != want[off+j] {
					stats.fail("client %d, task %d: under load\n%s\nalone\n%s", k, off+j, got, want[off+j])
					return
				}
				stats.mu.Lock()
				stats.completed++
				stats.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return stats
}

// references runs every task alone against base.
func references(t *testing.T, base string, small, big []task) map[int]outcome {
	t.Helper()
	want := map[int]outcome{}
	c := &loadClient{base: base, id: "reference", http: http.DefaultClient, stats: &loadStats{byStatus: map[int]int{}}}
	for i, tk := range append(slices.Clone(small), big...) {
		// On a busy machine even a lone session can sit idle past --evict-after while another
		// replica's cache wants its slots; it then starts over, as the load's clients do.
		out, err := c.run(context.Background(), tk)
		for try := 1; errors.Is(err, errRestart) && try < 5; try++ {
			out, err = c.run(context.Background(), tk)
		}
		if err != nil {
			t.Fatalf("task %d alone: %v", i, err)
		}
		want[i] = out
	}
	return want
}

func (s *loadStats) check(t *testing.T, allowed ...int) {
	t.Helper()
	for _, f := range s.failures {
		t.Error(f)
	}
	for code, n := range s.byStatus {
		if code >= 500 && code != 503 || !slices.Contains(allowed, code) {
			t.Errorf("%d replies with status %d", n, code)
		}
	}
	if s.completed == 0 {
		t.Error("no task completed")
	}
}

// 64 clients against one server: every request answered (or refused with 429/503 and
// Retry-After, or 410 for an evicted session), every output the same as alone, the RSS flat;
// bodies far past the limit are refused without being kept.
func TestServeLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test")
	}
	d := loadSeconds(t, 4)
	model := tinyModel(t, "tiny-llama-q8_0")
	r := startReplica(t, "solo", model, loadReplicaArgs...)
	base := "http://" + r.addr
	small, big := loadTasks()
	want := references(t, base, small, big)
	pid := r.cmd.Process.Pid
	var samples []int64
	sampled := make(chan struct{})
	go func() { // RSS every half second, and a few bodies far past the limit
		defer close(sampled)
		huge := []byte(`{"prompt": [` + strings.Repeat("12345, ", 1<<20) + `1]}`)
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
			samples = append(samples, rss(pid))
			resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(huge))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 413 {
					t.Errorf("a %d-byte body: status %d", len(huge), resp.StatusCode)
				}
			}
		}
	}()
	start := time.Now()
	stats := drive(t, base, 64, d, small, big, want, false, loadHooks{})
	<-sampled
	samples = append(samples, rss(pid))
	stats.check(t, 200, 204, 410, 429, 503)
	var st struct {
		Rounds int64 `json:"verify_rounds"`
		Steps  int64 `json:"verify_steps"`
	}
	if resp, err := http.Get(base + "/v1/stats"); err == nil {
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
	}
	t.Logf("%v: %d requests (%v), %d tasks done, %d refusals retried, %d evictions; %d rounds in %d steps; RSS MB %v",
		time.Since(start).Round(time.Millisecond), stats.requests.Load(), stats.byStatus, stats.completed, stats.refused, stats.evicted,
		st.Rounds, st.Steps, mb(samples))
	if n := len(samples); n >= 4 && samples[0] > 0 {
		// flat: the second half's peak within 25 % (and 32 MiB) of the first half's
		first, second := slices.Max(samples[:n/2]), slices.Max(samples[n/2:])
		if second > first+max(first/4, 32<<20) {
			t.Errorf("RSS grew from %d MB to %d MB", first>>20, second>>20)
		}
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-r.done; err != nil {
		t.Errorf("after SIGTERM: %v", err)
	}
}

func mb(s []int64) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = v >> 20
	}
	return out
}
