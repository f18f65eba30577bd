package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"verity/host/engine"
	"verity/host/serve"
)

func newServeCmd() *cobra.Command {
	var model, addr, backend, alias, replica, clientHeader, keyFile, logFormat string
	var layers []int
	var megakernel, prefixCache, logRequests bool
	var adapters loraFlags
	var sms int
	var threads, ctx, sessions, maxNodes, maxRows int
	var queue, clientQueue, clientSessions int
	var maxBody int64
	var idle, evictAfter, queueWait, grace, readTimeout, writeTimeout, connIdle, requestTimeout time.Duration
	var apiKeys, corsOrigins []string
	var tmpl chatTemplateFlags
	var cache cacheFlags
	cmd := &cobra.Command{
		Use:   "serve --model FILE|FIXTURE [--addr HOST:PORT]",
		Short: "Serve speculative-decoding verification over HTTP",
		Long: `Serve a model as a speculative-decoding verify service (JSON over HTTP):

  POST   /v1/sessions              {"prompt": [ids], "sampler": {"temperature", "top_k", "top_p", "seed"}}
                                   → {"session", "position", "next": {"id", "logprob"}}
                                   ("text": "…" instead of "prompt": tokenized with the model's
                                   tokenizer, BOS as the model asks, special tokens recognised;
                                   "max_tokens": the session reserves only that much cache)
  POST   /v1/sessions/{id}/verify  {"position", "tokens": [ids], "parents": [−1 or an earlier node]}
                                   → {"accepted": [nodes], "tokens": [...], "next", "position", "drafted"}
  DELETE /v1/sessions/{id}
  POST   /v1/completions           OpenAI's completions ({"prompt": "…" or [ids], "max_tokens",
                                   "temperature", "top_p", "top_k", "seed", "stream"}), plain
                                   decoding batched with the verify rounds
  POST   /v1/chat/completions      the same with "messages" in the model's chat template (its
                                   Jinja tokenizer.chat_template, "chat_template_kwargs" as
                                   further variables; else chatml or llama3 by its tokens)
  GET    /v1/models, /v1/models/{id}, /v1/stats, /v1/health
  POST   /tokenize, /detokenize
  GET    /health (liveness), /ready (readiness: 503 while draining), /metrics (Prometheus)

Every session reserves cache space while it is open (a completion its prompt and max_tokens, a
verify session its context or max_tokens); requests that do not fit wait in a per-client fair
queue (--queue, --queue-wait: past them 429 or 503 with Retry-After), and idle verify sessions
are closed least recently used first when a waiting request needs their space (--evict-after:
their next call gets 410).

With --prefix-cache (the default), what closed sessions computed stays in cache slots no
session needs, and a new prompt that begins with the same tokens computes only the rest (its
logits are the same bits; "cached" in the session's reply, "prefix_cache" in /v1/stats).

On SIGTERM or SIGINT /ready fails and new sessions and completions are refused (503), while
open verify sessions go on until their clients close them; then the server stops accepting
connections and requests in flight finish — all within --grace, after which streams still
running end with an error event. It exits 0.

A session holds its committed tokens and the target's chosen next token. Each verify runs the
next token and the draft tree in one step, accepts the longest path of draft tokens the target
itself chooses (greedy at temperature 0, its seeded sample otherwise), commits it and returns
the target's next token. The emitted tokens are exactly those of plain decoding with the same
sampler, whatever the drafts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if model == "" {
				return errors.New("--model is required")
			}
			if err := (serveLimits{context: ctx, sessions: sessions, step: maxRows, maxNodes: maxNodes, queue: queue, clientQueue: clientQueue,
				maxBody: maxBody, idle: idle, queueWait: queueWait, grace: grace, readTimeout: readTimeout, writeTimeout: writeTimeout,
				connIdle: connIdle, requestTimeout: requestTimeout}).check(); err != nil {
				return err
			}
			path, name, err := resolveModel(model, cmd)
			if err != nil {
				return err
			}
			if alias == "" {
				alias = strings.TrimSuffix(name, ".gguf")
			}
			keys, err := readAPIKeys(apiKeys, keyFile)
			if err != nil {
				return err
			}
			logger, err := requestLogger(cmd.ErrOrStderr(), logFormat, logRequests)
			if err != nil {
				return err
			}
			bes, err := openBackends(backend, threads)
			if err != nil {
				return err
			}
			defer closeAll(bes)
			kt, vt, err := cache.types(bes)
			if err != nil {
				return err
			}
			uses, lo, done, err := adapters.open(cmd)
			if err != nil {
				return err
			}
			m, pl, err := openModel(cmd, path, name, bes, layers, engine.LoadOptions{MaxRows: maxRows, Context: ctx, Sessions: sessions, Megakernel: megakernel, MegakernelSMs: sms, PrefixCache: prefixCache, Adapters: uses, LoRA: lo, CacheK: kt, CacheV: vt})
			done()
			if err != nil {
				return err
			}
			reportMerge(cmd.ErrOrStderr(), m.LoRA)
			defer m.Close()
			tk, err := loadTokenizer(path)
			if err == nil {
				tk, err = tmpl.apply(tk)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "verity: %s\n", describeChatTemplate(tk))
			} else if tmpl != (chatTemplateFlags{}) {
				return fmt.Errorf("a chat template needs the model's tokenizer: %w", err)
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "verity: prompts must be token ids: %v\n", err)
				tk = nil
			}
			if replica == "" {
				replica, _ = os.Hostname()
			}
			sv := serve.New(m.Engine, serve.Options{MaxNodes: maxNodes, IdleTimeout: idle, EvictAfter: evictAfter,
				ClientSessions: clientSessions, Tokenizer: tk, ModelName: alias, Fingerprint: fingerprint(), Adapters: serveAdapters(m.LoRA),
				Admission: serve.AdmissionOptions{MaxQueue: queue, ClientQueue: clientQueue, MaxWait: queueWait},
				HTTP: serve.HTTPOptions{APIKeys: keys, CORSOrigins: corsOrigins, ClientHeader: clientHeader, MaxBody: maxBody,
					RequestTimeout: requestTimeout, WriteTimeout: writeTimeout, Replica: replica, Logger: logger}})
			defer sv.Shutdown()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: sv.Handler(), ReadHeaderTimeout: min(10*time.Second, readTimeout), ReadTimeout: readTimeout,
				IdleTimeout: connIdle, ErrorLog: slogErrorLog(logger)}
			fmt.Fprintf(cmd.OutOrStdout(), "verity: serving %s as %q on http://%s (%s, context %d (%s), %d sessions)\n",
				model, alias, ln.Addr(), m.Engine.Executor().Name(), m.Engine.Context(), pl.ContextFrom, sessions)
			stop, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			select {
			case err := <-served:
				return err // (not ErrServerClosed: nothing shut it down)
			case <-stop.Done():
			}
			cancel() // a second signal ends the process at once
			return drain(cmd, srv, sv, served, grace)
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "GGUF file or fixture name")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	cmd.Flags().StringVar(&alias, "alias", "", "the model's id in the API (default: the file's or fixture's name)")
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cache.add(cmd)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	adapters.register(cmd)
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads (0: all)")
	cmd.Flags().IntVar(&ctx, "context", 0, contextHelp)
	cmd.Flags().IntVar(&sessions, "sessions", 4, "sessions the cache holds at full length")
	cmd.Flags().IntVar(&maxRows, "step", 64, "rows per step: prefill chunk, and the largest draft tree + 1")
	cmd.Flags().IntVar(&maxNodes, "max-nodes", 0, "draft nodes per verify request (0: step − 1)")
	cmd.Flags().DurationVar(&idle, "idle", 10*time.Minute, "close sessions idle this long (0: never)")
	cmd.Flags().DurationVar(&evictAfter, "evict-after", 5*time.Second, "a verify session idle this long may be closed when a waiting request needs its cache space (least recently used first; negative: never)")
	cmd.Flags().IntVar(&clientSessions, "client-sessions", 0, "verify sessions one client may hold open (0: --sessions; negative: no cap)")
	cmd.Flags().IntVar(&queue, "queue", 256, "requests that may wait for cache space at once (past it: 429)")
	cmd.Flags().IntVar(&clientQueue, "client-queue", 0, "requests one client may have waiting (0: a quarter of --queue, at least 64)")
	cmd.Flags().DurationVar(&queueWait, "queue-wait", 30*time.Second, "the longest a request waits for cache space (past it: 503)")
	cmd.Flags().DurationVar(&grace, "grace", 30*time.Second, "on SIGTERM or SIGINT, how long requests in flight may take to finish")
	cmd.Flags().DurationVar(&readTimeout, "read-timeout", time.Minute, "the longest a request's headers and body may take to arrive")
	cmd.Flags().DurationVar(&writeTimeout, "write-timeout", time.Minute, "the longest one write to a client may block (a client that stops reading is cut off)")
	cmd.Flags().DurationVar(&connIdle, "conn-idle-timeout", 2*time.Minute, "close keep-alive connections idle this long")
	cmd.Flags().DurationVar(&requestTimeout, "request-timeout", 10*time.Minute, "a request's generation deadline (0: none; past it 504, or an error event)")
	cmd.Flags().Int64Var(&maxBody, "max-body", 0, "the largest request body in bytes (0: room for a batch of full prompts)")
	cmd.Flags().StringSliceVar(&apiKeys, "api-key", nil, "require \"Authorization: Bearer KEY\" with this key (repeatable; /health, /ready and /metrics stay open)")
	cmd.Flags().StringVar(&keyFile, "api-key-file", "", "a file of API keys, one a line (# comments)")
	cmd.Flags().StringSliceVar(&corsOrigins, "cors", nil, "allow browsers at this origin (repeatable; \"*\": any) to call the API")
	cmd.Flags().StringVar(&clientHeader, "client-header", "", "the header naming a request's client for fair queueing and session caps, e.g. X-Forwarded-For behind a proxy (default: the remote address; with API keys: the key)")
	cmd.Flags().StringVar(&replica, "replica", "", "this server's name in the X-Verity-Replica reply header (default: the host name)")
	cmd.Flags().BoolVar(&logRequests, "log-requests", true, "log one line per request to stderr")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "request log format: text or json")
	cmd.Flags().BoolVar(&prefixCache, "prefix-cache", true, "keep closed sessions' K/V entries (and states) in free cache slots for prompts that begin the same way (the same logits)")
	tmpl.add(cmd)
	return cmd
}

// drain shuts the server down gracefully: /ready fails and new sessions and completions are
// refused (503, so that a load balancer sends them elsewhere), while the verify sessions
// already open go on until their clients close them; then the listener closes and the
// requests in flight finish. Whatever still runs when grace has passed is stopped (streams
// end with an error event) and given a moment to say so.
func drain(cmd *cobra.Command, srv *http.Server, sv *serve.Service, served <-chan error, grace time.Duration) error {
	fmt.Fprintf(cmd.ErrOrStderr(), "verity: draining (grace %v)\n", grace)
	sv.Drain()
	shut, done := context.WithTimeout(context.Background(), grace)
	defer done()
	for sv.OpenSessions() > 0 && shut.Err() == nil {
		select {
		case <-shut.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := srv.Shutdown(shut); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "verity: the grace period passed with requests running: stopping them\n")
		sv.Stop()
		last, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		if srv.Shutdown(last) != nil {
			srv.Close()
		}
	}
	<-served
	fmt.Fprintf(cmd.ErrOrStderr(), "verity: stopped\n")
	return nil
}

// readAPIKeys joins --api-key and the keys of --api-key-file (one a line; blank lines and
// lines that begin with # skipped).
func readAPIKeys(keys []string, file string) ([]string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				keys = append(keys, line)
			}
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("%s holds no API key", file)
		}
	}
	for _, k := range keys {
		if strings.TrimSpace(k) == "" {
			return nil, errors.New("an empty API key")
		}
	}
	return keys, nil
}

// requestLogger is the request log's slog logger (nil: none).
func requestLogger(w io.Writer, format string, on bool) (*slog.Logger, error) {
	switch format {
	case "text":
		if on {
			return slog.New(slog.NewTextHandler(w, nil)), nil
		}
	case "json":
		if on {
			return slog.New(slog.NewJSONHandler(w, nil)), nil
		}
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return nil, nil
}

// slogErrorLog sends net/http's own messages (TLS handshakes, bad requests) to the logger.
func slogErrorLog(l *slog.Logger) *log.Logger {
	if l == nil {
		return nil
	}
	return slog.NewLogLogger(l.Handler(), slog.LevelWarn)
}

// fingerprint is the system_fingerprint of completions: the build's revision where it has one.
func fingerprint() string {
	fp := "fp_devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				fp = "fp_" + s.Value[:12]
			}
		}
	}
	return fp
}
