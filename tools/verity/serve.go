package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"verity/host/engine"
	"verity/host/serve"
)

func newServeCmd() *cobra.Command {
	var model, addr, backend string
	var layers []int
	var megakernel, prefixCache bool
	var sms int
	var threads, ctx, sessions, maxNodes, maxRows int
	var idle time.Duration
	var tmpl chatTemplateFlags
	cmd := &cobra.Command{
		Use:   "serve --model FILE|FIXTURE [--addr HOST:PORT]",
		Short: "Serve speculative-decoding verification over HTTP",
		Long: `Serve a model as a speculative-decoding verify service (JSON over HTTP):

  POST   /v1/sessions              {"prompt": [ids], "sampler": {"temperature", "top_k", "top_p", "seed"}}
                                   → {"session", "position", "next": {"id", "logprob"}}
                                   ("text": "…" instead of "prompt": tokenized with the model's
                                   tokenizer, BOS as the model asks, special tokens recognised)
  POST   /v1/sessions/{id}/verify  {"position", "tokens": [ids], "parents": [−1 or an earlier node]}
                                   → {"accepted": [nodes], "tokens": [...], "next", "position", "drafted"}
  DELETE /v1/sessions/{id}
  POST   /v1/completions           OpenAI's completions ({"prompt": "…" or [ids], "max_tokens",
                                   "temperature", "top_p", "top_k", "seed", "stream"}), plain
                                   decoding batched with the verify rounds
  POST   /v1/chat/completions      the same with "messages" in the model's chat template (its
                                   Jinja tokenizer.chat_template, "chat_template_kwargs" as
                                   further variables; else chatml or llama3 by its tokens)
  GET    /v1/stats, /v1/health

With --prefix-cache (the default), what closed sessions computed stays in cache slots no
session needs, and a new prompt that begins with the same tokens computes only the rest (its
logits are the same bits; "cached" in the session's reply, "prefix_cache" in /v1/stats).

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
			path, _, err := resolveModel(model, cmd)
			if err != nil {
				return err
			}
			bes, err := openBackends(backend, threads)
			if err != nil {
				return err
			}
			defer closeAll(bes)
			m, err := engine.LoadSplit(path, bes, layers, engine.LoadOptions{MaxRows: maxRows, Context: ctx, Sessions: sessions, Megakernel: megakernel, MegakernelSMs: sms, PrefixCache: prefixCache})
			if err != nil {
				return err
			}
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
			sv := serve.New(m.Engine, serve.Options{MaxNodes: maxNodes, IdleTimeout: idle, Tokenizer: tk, ModelName: model})
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: sv.Handler(), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "verity: serving %s on http://%s (%s, context %d, %d sessions)\n",
				model, ln.Addr(), m.Engine.Executor().Name(), m.Engine.Context(), sessions)
			stop, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			go func() {
				<-stop.Done()
				shut, done := context.WithTimeout(context.Background(), 5*time.Second)
				defer done()
				srv.Shutdown(shut)
			}()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "GGUF file or fixture name")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads (0: all)")
	cmd.Flags().IntVar(&ctx, "context", 2048, "positions per session")
	cmd.Flags().IntVar(&sessions, "sessions", 4, "sessions the cache holds at full length")
	cmd.Flags().IntVar(&maxRows, "step", 64, "rows per step: prefill chunk, and the largest draft tree + 1")
	cmd.Flags().IntVar(&maxNodes, "max-nodes", 0, "draft nodes per verify request (0: step − 1)")
	cmd.Flags().DurationVar(&idle, "idle", 10*time.Minute, "close sessions idle this long (0: never)")
	cmd.Flags().BoolVar(&prefixCache, "prefix-cache", true, "keep closed sessions' K/V entries (and states) in free cache slots for prompts that begin the same way (the same logits)")
	tmpl.add(cmd)
	return cmd
}
