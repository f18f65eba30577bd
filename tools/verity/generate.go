package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"verity/host/engine"
	"verity/host/gguf"
	"verity/host/serve"
	"verity/host/tokenizer"
)

func newGenerateCmd() *cobra.Command {
	var model, prompt, backend string
	var layers []int
	var megakernel, parseSpecial, showPrompt, chat bool
	var adapters loraFlags
	var system, messages string
	var stops []string
	var sms, threads, n, draft, ctx int
	var smp serve.Sampler
	seed := newSeedValue(&smp.Seed)
	var tmpl chatTemplateFlags
	var cache cacheFlags
	cmd := &cobra.Command{
		Use:   "generate --model FILE|FIXTURE --prompt TEXT [-n TOKENS]",
		Short: "Continue a text with the model, token by token, and print it as it comes",
		Long: `Tokenize --prompt with the model's tokenizer (BOS as the model asks; special tokens written
in the text recognised with --parse-special, e.g. a chat template's <|im_start|>), prefill it and
decode up to -n tokens, printing each as it is chosen, until an end-of-generation token (EOS, end
of turn) or a --stop string, which is not printed. The sampler is the verify service's: greedy at --temperature 0 (the default), else a
sample from the softmax at that temperature within --top-k and --top-p, seeded by (--seed,
position), so a run is reproducible — and, because the logits are bit-exact, identical on
every backend. --draft K speculates: each step verifies up to K draft tokens found by prompt
lookup (the longest of the last 3, 2 or 1 tokens seen before, and what followed it) in one
pass, through the verify service's own verification, and emits every accepted token — the
same text as without it, in fewer steps where the text repeats itself. With --chat the prompt is a user message (after --system, if given) in the
model's chat template (its Jinja tokenizer.chat_template, else chatml or Llama 3's by its special
tokens; --chat-template or --chat-template-file to use another), and --messages gives the conversation
before it: one that does not fit the context, with room for -n tokens (at most half the context),
keeps its system messages and latest turns and drops whole turns from the middle, saying so.
-n past the context (--context, by default the plan's: verity plan) generates what fits, saying
so. Timings go to standard error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if model == "" {
				return errors.New("--model is required")
			}
			if n < 1 {
				return fmt.Errorf("-n %d: want at least one token", n)
			}
			if seed.drawn {
				fmt.Fprintf(cmd.ErrOrStderr(), "seed: %d\n", smp.Seed)
			}
			if err := smp.Check(); err != nil {
				return err
			}
			if err := serve.CheckStops(stops); err != nil {
				return fmt.Errorf("--stop: %w", err)
			}
			path, name, err := resolveModel(model, cmd)
			if err != nil {
				return err
			}
			tk, err := loadTokenizer(path)
			if err != nil {
				return err
			}
			if !chat && (tmpl != (chatTemplateFlags{}) || messages != "") {
				return errors.New("--chat-template, --chat-template-file and --messages go with --chat")
			}
			if draft < 0 || draft > 63 {
				return fmt.Errorf("--draft %d: want 0 … 63", draft)
			}
			if ctx < 0 {
				return fmt.Errorf("--context %d: want 0 (the plan's) or more positions", ctx)
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
			defer done()
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			o, pl, err := planLoad(cmd, f, strings.TrimSuffix(name, ".gguf"), bes, layers, engine.LoadOptions{MaxRows: 64, Context: ctx, Megakernel: megakernel, MegakernelSMs: sms, Adapters: uses, LoRA: lo, CacheK: kt, CacheV: vt})
			if err != nil {
				f.Close()
				return err
			}
			limit := o.Context - draft - 1 // the positions a prompt and its tokens may take
			var ids []int32
			if chat {
				if tk, err = tmpl.apply(tk); err != nil {
					f.Close()
					return err
				}
				if ids, err = chatPrompt(cmd, tk, system, prompt, messages, limit, n); err != nil {
					f.Close()
					return err
				}
			} else {
				ids = tk.Encode(prompt, tokenizer.Options{AddSpecial: true, ParseSpecial: parseSpecial})
			}
			if len(ids) == 0 {
				f.Close()
				return errors.New("--prompt: no tokens (an empty prompt for a model that adds no BOS)")
			}
			if len(ids) >= limit {
				f.Close()
				return fmt.Errorf("a prompt of %d tokens leaves no room to generate in a context of %d positions (%s); --context sets another", len(ids), o.Context, pl.ContextFrom)
			}
			if len(ids)+n > limit {
				n = limit - len(ids)
				fmt.Fprintf(cmd.ErrOrStderr(), "verity: the context of %d positions (%s) holds %d tokens after the %d-token prompt: generating at most %d\n", o.Context, pl.ContextFrom, n, len(ids), n)
			}
			o.Context = len(ids) + n + draft + 1 // what this generation needs, no more
			m, err := loadPlanned(cmd, f, bes, layers, o)
			if err != nil {
				f.Close()
				return err
			}
			reportMerge(cmd.ErrOrStderr(), m.LoRA)
			defer m.Close()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if showPrompt {
				text, _ := tk.Decode(ids, true)
				fmt.Fprint(out, text)
			}
			// Plain decoding is the verify service's completion with no drafts: one loop for
			// both, and the drafted text is plain decoding's by the service's guarantee.
			sv := serve.New(m.Engine, serve.Options{MaxNodes: max(draft, 1), Tokenizer: tk})
			defer sv.Shutdown()
			var drafter serve.Drafter
			if draft > 0 {
				drafter = serve.PromptLookup(draft)
			}
			start := time.Now()
			var first time.Duration
			made := 0
			ts := serve.NewTextStream(tk, stops)
			if _, err := sv.CompleteDrafted(cmd.Context(), ids, smp, n, drafter, func(t serve.Token) error {
				if made++; made == 1 {
					first = time.Since(start)
				}
				text, _, stopped := ts.Add(t)
				if _, err := fmt.Fprint(out, text); err != nil {
					return err
				}
				if stopped {
					return serve.ErrStop
				}
				return nil
			}); err != nil {
				return err
			}
			rest, _ := ts.End()
			fmt.Fprintln(out, rest)
			el := time.Since(start)
			st := sv.Stats()
			rate := 0.0
			if made > 1 && el > first {
				rate = float64(made-1) / (el - first).Seconds()
			}
			fmt.Fprintf(errOut, "%d prompt tokens (first token after %.2f s), %d generated in %.2f s (%.1f tok/s after the first) in %d verify steps",
				len(ids), first.Seconds(), made, el.Seconds(), rate, st.Rounds)
			if draft > 0 {
				share := 0.0
				if st.Drafted > 0 {
					share = 100 * float64(st.Accepted) / float64(st.Drafted)
				}
				fmt.Fprintf(errOut, ": %d of %d draft tokens accepted (%.0f%%)", st.Accepted, st.Drafted, share)
			}
			fmt.Fprintf(errOut, ", %s\n", m.Engine.Executor().Name())
			return nil
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "GGUF file or fixture name")
	cmd.Flags().StringVar(&prompt, "prompt", "", "the text to continue")
	cmd.Flags().BoolVar(&parseSpecial, "parse-special", false, "recognise special tokens written in the prompt")
	cmd.Flags().BoolVar(&showPrompt, "echo", false, "print the prompt before the generated text")
	cmd.Flags().IntVar(&draft, "draft", 0, "speculate up to this many prompt-lookup draft tokens per step (0: plain decoding)")
	cmd.Flags().BoolVar(&chat, "chat", false, "the prompt is a user message, in the model's chat template")
	cmd.Flags().StringArrayVar(&stops, "stop", nil, "end the text before this string (repeatable)")
	cmd.Flags().StringVar(&system, "system", "", "with --chat: a system message first")
	cmd.Flags().StringVar(&messages, "messages", "", "with --chat: a JSON file of the conversation so far ([{\"role\", \"content\"}, …]; --prompt, if given, is the next user message); one longer than the context keeps its system messages and latest turns")
	cmd.Flags().IntVar(&ctx, "context", 0, contextHelp)
	tmpl.add(cmd)
	cmd.Flags().IntVarP(&n, "tokens", "n", 128, "most tokens to generate")
	cmd.Flags().Float64Var(&smp.Temperature, "temperature", 0, "0: greedy; else sample at this temperature")
	cmd.Flags().IntVar(&smp.TopK, "top-k", 0, "sample among the k most likely tokens (0: all)")
	cmd.Flags().Float64Var(&smp.TopP, "top-p", 1, "sample within the smallest set of this probability (1: all)")
	cmd.Flags().Var(seed, "seed", "the sampler's seed (-1: draw one at random, reported on stderr)")
	cmd.Flags().BoolVar(&smp.JSON, "json", false, "JSON mode: only tokens that continue a JSON object, ending when it closes")
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads (0: all)")
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cache.add(cmd)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	adapters.register(cmd)
	return cmd
}

// chatPrompt is generate --chat's prompt: the conversation of --messages (if given), the system
// message and --prompt as the next user message, in the chat template, fitted to limit
// positions with room for n tokens (at most half of them) kept for the answer.
func chatPrompt(cmd *cobra.Command, tk *tokenizer.Tokenizer, system, prompt, messages string, limit, n int) ([]int32, error) {
	var msgs []tokenizer.Message
	if system != "" {
		msgs = append(msgs, tokenizer.Message{Role: "system", Content: system})
	}
	if messages != "" {
		b, err := os.ReadFile(messages)
		if err != nil {
			return nil, fmt.Errorf("--messages: %w", err)
		}
		var conv []tokenizer.Message
		if err := json.Unmarshal(b, &conv); err != nil {
			return nil, fmt.Errorf("--messages %s: want a JSON list of {\"role\", \"content\"}: %w", messages, err)
		}
		for i, m := range conv {
			switch m.Role {
			case "system", "user", "assistant":
			case "developer":
				conv[i].Role = "system"
			default:
				return nil, fmt.Errorf("--messages %s: message %d: role %q: want system, user or assistant", messages, i, m.Role)
			}
		}
		msgs = append(msgs, conv...)
	}
	if prompt != "" || len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: prompt})
	}
	fit, err := serve.FitChat(msgs, func(ms []tokenizer.Message) ([]int32, error) {
		// special tokens from the template only, as the service encodes chats
		ids, _, err := tk.ChatTokens(ms, nil)
		if err != nil && tk.ChatTemplate() == "" {
			return nil, fmt.Errorf("%w; give one with --chat-template chatml|llama3|TEXT or --chat-template-file FILE", err)
		}
		return ids, err
	}, limit-min(n, limit/2))
	if err != nil {
		return nil, err
	}
	if fit.Truncated() {
		fmt.Fprintf(cmd.ErrOrStderr(), "verity: the conversation (%d tokens) does not fit the context with room for the answer: kept the %d system message(s) and the latest turns, dropped %d turn(s) (%d messages) from the middle; %d prompt tokens\n",
			fit.TokensBefore, fit.Head, fit.DroppedTurns, fit.DroppedMessages, len(fit.Tokens))
	}
	return fit.Tokens, nil
}
