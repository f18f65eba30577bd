package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// --api-key and --api-key-file: one key a line, blank lines, # comments and the spaces around
// a key (a CRLF file's \r among them) skipped; no key at all, or an empty one, refused.
func TestServeAPIKeyFile(t *testing.T) {
	dir := t.TempDir()
	file := func(text string) string {
		p := filepath.Join(dir, fmt.Sprintf("keys%d", len(text)))
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name  string
		flags []string
		file  string // contents ("": no --api-key-file)
		want  []string
		err   bool
	}{
		{"flags only", []string{"a", "b"}, "", []string{"a", "b"}, false},
		{"none", nil, "", nil, false},
		{"file", nil, "sk-1\nsk-2\n", []string{"sk-1", "sk-2"}, false},
		{"comments and blanks", nil, "# the team's keys\n\nsk-1\n   \n  sk-2  \n# sk-old\n\tsk-3\n", []string{"sk-1", "sk-2", "sk-3"}, false},
		{"crlf, no final newline", nil, "sk-1\r\nsk-2\r\n\r\nsk-3", []string{"sk-1", "sk-2", "sk-3"}, false},
		{"flags and file", []string{"a"}, "sk-1\n", []string{"a", "sk-1"}, false},
		{"only comments", nil, "# nothing yet\n\n", nil, true},
		{"empty flag", []string{" "}, "", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := ""
			if c.file != "" {
				path = file(c.file)
			}
			got, err := readAPIKeys(slices.Clone(c.flags), path)
			if (err != nil) != c.err || !c.err && !slices.Equal(got, c.want) {
				t.Errorf("keys %q, error %v; want %q (error %v)", got, err, c.want, c.err)
			}
		})
	}
	if _, err := readAPIKeys(nil, filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing key file was accepted")
	}
}

// --log-format text or json, --log-requests=false: no logger; anything else refused.
func TestServeRequestLogger(t *testing.T) {
	for _, c := range []struct {
		format string
		on     bool
		line   string // the start of a line it writes ("": no logger)
		err    bool
	}{
		{"text", true, "time=", false},
		{"json", true, `{"time":`, false},
		{"text", false, "", false},
		{"json", false, "", false},
		{"yaml", true, "", true},
		{"", true, "", true},
	} {
		var buf bytes.Buffer
		l, err := requestLogger(&buf, c.format, c.on)
		if (err != nil) != c.err || (l != nil) != (c.line != "") {
			t.Errorf("%q on %v: logger %v, error %v", c.format, c.on, l != nil, err)
			continue
		}
		if l != nil {
			l.Info("request", "status", 200)
			if !strings.HasPrefix(buf.String(), c.line) || !strings.Contains(buf.String(), "200") {
				t.Errorf("%q: %q", c.format, buf.String())
			}
		}
	}
}

// openFDs counts a process's open descriptors (-1 where /proc cannot tell).
func openFDs(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

// rawRequest sends head (and then body, a byte every gap, if gap > 0) on a new connection and
// returns the reply's status (0: none) and how long the server took to close the connection
// after the request began (the test fails if it keeps it past limit).
func rawRequest(t *testing.T, addr, head, body string, gap, limit time.Duration) (int, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	if gap == 0 {
		io.WriteString(c, body)
	} else {
		go func() {
			for i := 0; i < len(body); i++ {
				if _, err := c.Write([]byte{body[i]}); err != nil {
					return
				}
				time.Sleep(gap)
			}
		}()
	}
	c.SetReadDeadline(start.Add(limit))
	reply, err := io.ReadAll(c)
	took := time.Since(start)
	if err != nil {
		t.Errorf("the server kept the connection past %v (%v) after %q", limit, err, reply)
	}
	status := 0
	if len(reply) > 0 {
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(reply)), nil)
		if err != nil {
			t.Errorf("a reply that is not HTTP: %q", reply)
		} else {
			status = resp.StatusCode
			b, _ := io.ReadAll(resp.Body)
			if status >= 400 && errorCodeOf(b) == "" {
				t.Errorf("%d without an error object: %s", status, b)
			}
			if bytes.Contains(b, []byte("127.0.0.1")) || bytes.Contains(b, []byte("i/o timeout")) {
				t.Errorf("the error shows the connection's internals: %s", b)
			}
		}
	}
	return status, took
}

// verity serve as run in production, in a process of its own: the API keys of
// --api-key-file, the model's id (the file's name without .gguf by default, --alias), one
// structured log line per request (--log-format), a request body that never finishes or
// trickles cut off at --read-timeout, and idle keep-alive connections closed after
// --conn-idle-timeout (the server's descriptors back where they were).
func TestServeOps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts verity serve")
	}
	model := tinyModel(t, "tiny-llama-q8_0")
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("# verity\nsk-alpha\n\n  sk-beta\n# sk-gamma\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const readTimeout, idleTimeout = time.Second, time.Second
	for _, c := range []struct {
		name     string
		args     []string
		id       string
		format   string
		timeouts bool
	}{
		{"default", []string{"--log-format", "json", "--read-timeout", readTimeout.String(), "--conn-idle-timeout", idleTimeout.String()},
			"tiny-llama-q8_0", "json", true},
		{"alias", []string{"--alias", "acme-tiny", "--log-format", "text"}, "acme-tiny", "text", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--context", "32", "--sessions", "1", "--step", "8", "--api-key-file", keys}, c.args...)
			r := startReplica(t, c.name, model, args...)
			base := "http://" + r.addr
			get := func(path, key string, hdr ...string) (int, []byte) {
				t.Helper()
				req, _ := http.NewRequest("GET", base+path, nil)
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				for i := 0; i+1 < len(hdr); i += 2 {
					req.Header.Set(hdr[i], hdr[i+1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, b
			}
			// the keys of the file, and no others
			for _, k := range []struct {
				key    string
				status int
			}{{"sk-alpha", 200}, {"sk-beta", 200}, {"sk-gamma", 401}, {"# verity", 401}, {"", 401}, {"sk-alphabet", 401}} {
				code, b := get("/v1/models", k.key)
				if code != k.status || code == 401 && errorCodeOf(b) != "invalid_api_key" {
					t.Errorf("key %q: %d %s", k.key, code, b)
				}
			}
			for _, p := range []string{"/health", "/ready", "/metrics"} {
				if code, _ := get(p, ""); code != 200 {
					t.Errorf("%s without a key: %d", p, code)
				}
			}
			// the model's id
			var list struct{ Data []struct{ ID string } }
			code, b := get("/v1/models", "sk-alpha", "X-Request-Id", "ops-"+c.name)
			if json.Unmarshal(b, &list) != nil || len(list.Data) != 1 || list.Data[0].ID != c.id {
				t.Errorf("/v1/models: %d %s, want the id %q", code, b, c.id)
			}
			if code, b := get("/v1/models/"+c.id, "sk-alpha"); code != 200 {
				t.Errorf("/v1/models/%s: %d %s", c.id, code, b)
			}
			if code, _ := get("/v1/models/"+model, "sk-alpha"); code != 404 {
				t.Errorf("the model's path as its id: %d", code)
			}
			// one log line per request, in the format asked for
			var line string
			for deadline := time.Now().Add(2 * time.Second); line == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				b, _ := os.ReadFile(r.log)
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, "ops-"+c.name) {
						if line != "" {
							t.Errorf("two log lines for one request:\n%s\n%s", line, l)
						}
						line = l
					}
				}
			}
			want := []string{"msg=request", "method=GET", "path=/v1/models", `route="GET /v1/models"`, "status=200", "duration=", "request_id=ops-" + c.name}
			if c.format == "json" {
				want = []string{`"msg":"request"`, `"method":"GET"`, `"path":"/v1/models"`, `"route":"GET /v1/models"`, `"status":200`, `"duration":`, `"request_id":"ops-` + c.name + `"`}
				if !json.Valid([]byte(line)) {
					t.Errorf("not a JSON line: %q", line)
				}
			}
			for _, w := range want {
				if !strings.Contains(line, w) {
					t.Errorf("the request's log line %q has no %s", line, w)
				}
			}
			if !c.timeouts {
				return
			}
			pid := r.cmd.Process.Pid
			head := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-alpha\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
			body := `{"prompt": [1, 2, 3], "max_tokens": 2}`
			limit := readTimeout + 2*time.Second
			for _, tc := range []struct {
				name, head, body string
				gap              time.Duration
				status           int // 0: closed without a reply
			}{
				{"a body that never finishes", fmt.Sprintf(head, len(body)+10), body, 0, 408},
				{"a body trickled", fmt.Sprintf(head, len(body)), body, 150 * time.Millisecond, 408},
				{"headers that never finish", "POST /v1/completions HTTP/1.1\r\nHost: x\r\n", "", 0, 0},
				{"a whole request", fmt.Sprintf(head, len(body)) + body, "", 0, 200},
			} {
				status, took := rawRequest(t, r.addr, tc.head, tc.body, tc.gap, limit)
				if status != tc.status || tc.status != 200 && took < readTimeout/2 {
					t.Errorf("%s: status %d after %v, want %d after the read timeout %v", tc.name, status, took, tc.status, readTimeout)
				}
				if tc.status == 200 && took < idleTimeout/2 {
					t.Errorf("%s: the keep-alive connection was closed after %v, before the idle timeout %v", tc.name, took, idleTimeout)
				}
			}
			// idle keep-alive connections: each asks once, then idles
			before := openFDs(pid)
			const conns = 200
			cs := make([]net.Conn, 0, conns)
			defer func() {
				for _, c := range cs {
					c.Close()
				}
			}()
			for range conns {
				c, err := net.Dial("tcp", r.addr)
				if err != nil {
					t.Fatal(err)
				}
				cs = append(cs, c)
				io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
			}
			readers := make([]*bufio.Reader, conns)
			for i, c := range cs {
				readers[i] = bufio.NewReader(c)
				resp, err := http.ReadResponse(readers[i], nil)
				if err != nil || resp.StatusCode != 200 || resp.Close {
					t.Fatalf("connection %d: %v", i, err)
				}
				io.Copy(io.Discard, resp.Body)
			}
			held := openFDs(pid)
			opened := time.Now()
			for i, c := range cs {
				c.SetReadDeadline(opened.Add(idleTimeout + 3*time.Second))
				if n, err := readers[i].ReadByte(); err != io.EOF {
					t.Fatalf("idle connection %d: %v (%v) after %v, want EOF", i, n, err, time.Since(opened))
				}
			}
			var after int
			for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if after = openFDs(pid); after <= before+2 || time.Now().After(deadline) {
					break
				}
			}
			t.Logf("server descriptors: %d before, %d with %d idle connections, %d %v after", before, held, conns, after, time.Since(opened).Round(time.Millisecond))
			if before > 0 && (held < before+conns-2 || after > before+2) {
				t.Errorf("server descriptors: %d before, %d with %d idle connections, %d after the idle timeout", before, held, conns, after)
			}
		})
	}
}
