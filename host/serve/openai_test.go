package serve_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"verity/host/engine"
	"verity/host/serve"
)

var update = flag.Bool("update", false, "rewrite testdata/openai_transcript.txt")

// shape is the part of one of OpenAI's published response objects a client relies on: each
// required field and its JSON type ("string", "number", "object", "array", "null", "bool",
// "string|null", "object|null", or "=VALUE" for a constant string), with the shapes of nested
// objects and of array elements by path ("choices[]", "choices[].message", …).
type shape map[string]string

// The shapes, after OpenAI's API reference: the model object and list, the completion and its
// choice, the chat completion, its chunk, the usage, and the error object.
var shapes = map[string]map[string]shape{
	"list":  {"": {"object": "=list", "data": "array"}, "data[]": {"id": "string", "object": "=model", "created": "number", "owned_by": "string"}},
	"model": {"": {"id": "string", "object": "=model", "created": "number", "owned_by": "string"}},
	"text_completion": {
		"":          {"id": "string", "object": "=text_completion", "created": "number", "model": "string", "system_fingerprint": "string", "choices": "array", "usage": "object"},
		"choices[]": {"text": "string", "index": "number", "logprobs": "object|null", "finish_reason": "string"},
		"usage":     {"prompt_tokens": "number", "completion_tokens": "number", "total_tokens": "number"},
	},
	"text_completion chunk": {
		"":          {"id": "string", "object": "=text_completion", "created": "number", "model": "string", "choices": "array"},
		"choices[]": {"text": "string", "index": "number", "finish_reason": "string|null"},
	},
	"chat.completion": {
		"":                  {"id": "string", "object": "=chat.completion", "created": "number", "model": "string", "system_fingerprint": "string", "choices": "array", "usage": "object"},
		"choices[]":         {"index": "number", "message": "object", "logprobs": "object|null", "finish_reason": "string"},
		"choices[].message": {"role": "=assistant", "content": "string|null"},
		"usage":             {"prompt_tokens": "number", "completion_tokens": "number", "total_tokens": "number"},
	},
	"chat.completion.chunk": {
		"":                {"id": "string", "object": "=chat.completion.chunk", "created": "number", "model": "string", "system_fingerprint": "string", "choices": "array"},
		"choices[]":       {"index": "number", "delta": "object", "finish_reason": "string|null"},
		"choices[].delta": {},
		"usage":           {"prompt_tokens": "number", "completion_tokens": "number", "total_tokens": "number"},
	},
	"error": {"": {"error": "object"}, "error": {"message": "string", "type": "string", "param": "string|null", "code": "string|null"}},
}

// conform checks v against the shapes of kind.
func conform(kind string, v any) error {
	sh, ok := shapes[kind]
	if !ok {
		return fmt.Errorf("no shape %q", kind)
	}
	var walk func(path string, v any) error
	walk = func(path string, v any) error {
		want, ok := sh[path]
		if !ok {
			return nil
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %T", path, v)
		}
		for field, typ := range want {
			x, present := obj[field]
			if !present {
				if kind == "chat.completion.chunk" && path == "" && field == "usage" {
					continue
				}
				return fmt.Errorf("%s: no field %q", path, field)
			}
			if !hasType(x, typ) {
				return fmt.Errorf("%s.%s: %v is not %s", path, field, x, typ)
			}
			sub := field
			if path != "" {
				sub = path + "." + field
			}
			if arr, ok := x.([]any); ok {
				for _, e := range arr {
					if err := walk(sub+"[]", e); err != nil {
						return err
					}
				}
			} else if err := walk(sub, x); err != nil {
				return err
			}
		}
		return nil
	}
	return walk("", v)
}

func hasType(x any, typ string) bool {
	for _, t := range strings.Split(typ, "|") {
		ok := false
		switch t {
		case "string":
			_, ok = x.(string)
		case "number":
			_, ok = x.(float64)
		case "bool":
			_, ok = x.(bool)
		case "object":
			_, ok = x.(map[string]any)
		case "array":
			_, ok = x.([]any)
		case "null":
			ok = x == nil
		default:
			ok = x == strings.TrimPrefix(t, "=")
		}
		if ok {
			return true
		}
	}
	return false
}

// volatile are the fields that differ from run to run, blanked in the transcript.
var volatile = regexp.MustCompile(`"(id|created)":("(chat)?cmpl-[0-9a-f]+"|[0-9]+)`)

// A client speaking OpenAI's wire format — the requests an SDK sends, with their default
// fields — drives the service; every reply conforms to the shape OpenAI publishes for it, and
// the exchange, recorded with its volatile fields blanked, equals
// testdata/openai_transcript.txt (go test -run TestOpenAITranscript -update rewrites it).
func TestOpenAITranscript(t *testing.T) {
	const name = "tiny-qwen3-q8_0" // a chat template
	tk := fixtureTokenizer(t, name)
	m := load(t, name, engine.LoadOptions{MaxRows: 8, Context: 64, Sessions: 2})
	sv := serve.New(m.Engine, serve.Options{Tokenizer: tk, ModelName: "verity-tiny", Fingerprint: "fp_test",
		HTTP: serve.HTTPOptions{APIKeys: []string{"sk-test"}}})
	defer sv.Shutdown()
	srv := httptest.NewServer(sv.Handler())
	defer srv.Close()

	var transcript strings.Builder
	exchange := func(method, path, key, body, kind string, wantStatus int) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "OpenAI/Go")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != wantStatus {
			t.Errorf("%s %s %s: status %d, want %d: %s", method, path, body, resp.StatusCode, wantStatus, out)
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: no X-Request-Id", method, path)
		}
		fmt.Fprintf(&transcript, "> %s %s\n", method, path)
		if body != "" {
			fmt.Fprintf(&transcript, "> %s\n", body)
		}
		fmt.Fprintf(&transcript, "< %d %s\n", resp.StatusCode, resp.Header.Get("Content-Type"))
		var objs [][]byte
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					if line != "[DONE]" {
						objs = append(objs, []byte(line))
					}
					fmt.Fprintf(&transcript, "< data: %s\n", volatile.ReplaceAllString(line, `"$1": "…"`))
				}
			}
		} else {
			objs = [][]byte{out}
			fmt.Fprintf(&transcript, "< %s\n", volatile.ReplaceAllString(strings.TrimSpace(string(out)), `"$1": "…"`))
		}
		for i, o := range objs {
			var v any
			dec := json.NewDecoder(bytes.NewReader(o))
			if err := dec.Decode(&v); err != nil {
				t.Errorf("%s %s: reply %d is not JSON: %s", method, path, i, o)
				continue
			}
			k := kind
			if wantStatus >= 400 {
				k = "error"
			} else if kind == "text_completion" && len(objs) > 1 {
				k = "text_completion chunk"
				if m, _ := v.(map[string]any); m["usage"] != nil {
					k = "text_completion" // the usage chunk: no choices
				}
			}
			if err := conform(k, v); err != nil {
				t.Errorf("%s %s: reply %d is not OpenAI's %s: %v\n%s", method, path, i, k, err, o)
			}
		}
		transcript.WriteString("\n")
	}
	const key = "sk-test"
	exchange("GET", "/v1/models", key, "", "list", 200)
	exchange("GET", "/v1/models/verity-tiny", key, "", "model", 200)
	exchange("GET", "/v1/models/gpt-4o", key, "", "", 404)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hi."}],"max_completion_tokens":6,"temperature":0.7,"seed":-42,"n":1,"store":false,"metadata":{"run":"sdk"},"user":"u-1","service_tier":"auto","parallel_tool_calls":true}`, "chat.completion", 200)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Count"}]}],"max_tokens":5,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`, "chat.completion.chunk", 200)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"user","content":"x"}],"max_tokens":3,"temperature":0,"stream":true}`, "chat.completion.chunk", 200)
	exchange("POST", "/v1/completions", key, `{"model":"verity-tiny","prompt":"Once upon","max_tokens":4,"temperature":0,"logprobs":2,"echo":false,"n":2,"seed":7}`, "text_completion", 200)
	exchange("POST", "/v1/completions", key, `{"model":"verity-tiny","prompt":[1,2,3],"max_tokens":3,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`, "text_completion", 200)
	// refusals, each an error object
	exchange("POST", "/v1/chat/completions", "", `{"model":"verity-tiny","messages":[{"role":"user","content":"x"}]}`, "", 401)
	exchange("POST", "/v1/chat/completions", "sk-wrong", `{"model":"verity-tiny","messages":[{"role":"user","content":"x"}]}`, "", 401)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, "", 400)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"user","content":"x"}],"frequency_penalty":0.5}`, "", 400)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{}}}}`, "", 400)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"wizard","content":"x"}]}`, "", 400)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[]}`, "", 400)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"user","content":"x"}],"max_tokens":"many"}`, "", 400)
	exchange("POST", "/v1/chat/completions", key, `{"model":"verity-tiny","messages":[{"role":"user","content":"x"}],"frobnicate":1}`, "", 400)
	exchange("POST", "/v1/completions", key, `{"model":"verity-tiny","prompt":"x"} {"prompt":"y"}`, "", 400)
	exchange("POST", "/v1/completions", key, `{"model":"verity-tiny","prompt":null}`, "", 400)
	exchange("POST", "/v1/completions", key, `{"model":"verity-tiny","prompt":[`+strings.Repeat("5,", 80)+`5]}`, "", 400)
	exchange("POST", "/v1/completions", key, `{"prompt":"x","seed":1.5}`, "", 400)
	exchange("POST", "/v1/completion", key, `{}`, "", 404)
	exchange("DELETE", "/v1/completions", key, "", "", 405)

	got := transcript.String()
	for _, leak := range []string{"Go struct", "openAIParams", "json: ", "serve: ", "engine: ", "int32", "float64"} {
		if strings.Contains(got, leak) {
			t.Errorf("the transcript shows %q", leak)
		}
	}
	path := filepath.Join("testdata", "openai_transcript.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestOpenAITranscript -update writes it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("the transcript differs from %s at line %d:\n got %s\nwant %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("the transcript differs from %s in length (%d lines, want %d)", path, len(gl), len(wl))
	}
}
