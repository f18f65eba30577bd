package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"verity/host/engine"
	"verity/host/serve"
	"verity/host/tokenizer"
)

func newGenerateCmd() *cobra.Command {
	var model, prompt, backend string
	var layers []int
	var megakernel, parseSpecial, showPrompt, chat bool
	var system string
	var sms, threads, n, draft int
	var smp serve.Sampler
	cmd := &cobra.Command{
		Use:   "generate --model FILE|FIXTURE --prompt TEXT [-n TOKENS]",
		Short: "Continue a text with the model, token by token, and print it as it comes",
		Long: `Tokenize --prompt with the model's tokenizer (BOS as the model asks; special tokens written
in the text recognised with --parse-special, e.g. a chat template's <|im_start|>), prefill it and
decode up to -n tokens, printing each as it is chosen, until an end-of-generation token (EOS, end
of turn). The sampler is the verify service's: greedy at --temperature 0 (the default), else a
sample from the softmax at that temperature within --top-k and --top-p, seeded by (--seed,
position), so a run is reproducible — and, because the logits are bit-exact, identical on
every backend. --draft K speculates: each step verifies up to K draft tokens found by prompt
lookup (the longest of the last 3, 2 or 1 tokens seen before, and what followed it) in one
pass, through the verify service's own verification, and emits every accepted token — the
same text as without it, in fewer steps where the text repeats itself. With --chat the prompt is a user message (after --system, if given) in the
model's chat template (chatml, Qwen3.5's, Llama 3's). Timings go to standard error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if model == "" {
				return errors.New("--model is required")
			}
			if n < 1 {
				return fmt.Errorf("-n %d: want at least one token", n)
			}
			if err := smp.Check(); err != nil {
				return err
			}
			path, _, err := resolveModel(model, cmd)
			if err != nil {
				return err
			}
			tk, err := loadTokenizer(path)
			if err != nil {
				return err
			}
			text := prompt
			if chat {
				var msgs []tokenizer.Message
				if system != "" {
					msgs = append(msgs, tokenizer.Message{Role: "system", Content: system})
				}
				if text, err = tk.Chat(append(msgs, tokenizer.Message{Role: "user", Content: prompt})); err != nil {
					return err
				}
				parseSpecial = true
			}
			ids := tk.Encode(text, tokenizer.Options{AddSpecial: true, ParseSpecial: parseSpecial})
			if len(ids) == 0 {
				return errors.New("--prompt: no tokens (an empty prompt for a model that adds no BOS)")
			}
			bes, err := openBackends(backend, threads)
			if err != nil {
				return err
			}
			defer closeAll(bes)
			if draft < 0 || draft > 63 {
				return fmt.Errorf("--draft %d: want 0 … 63", draft)
			}
			m, err := engine.LoadSplit(path, bes, layers, engine.LoadOptions{MaxRows: 64, Context: len(ids) + n + draft + 1, Megakernel: megakernel, MegakernelSMs: sms})
			if err != nil {
				return err
			}
			defer m.Close()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if showPrompt {
				text, _ := tk.Decode(ids, true)
				fmt.Fprint(out, text)
			}
			if draft > 0 {
				return speculate(cmd, m.Engine, tk, ids, smp, n, draft)
			}
			s := m.NewSession()
			defer s.Close()
			start := time.Now()
			l, err := s.Prefill(ids, false)
			if err != nil {
				return err
			}
			prefill := time.Since(start)
			logits, pos := l[0], len(ids)
			start = time.Now()
			made := 0
			for made < n {
				tok := smp.Choose(logits, pos)
				made++
				if tk.IsEOG(tok) {
					break
				}
				p, err := tk.Piece(tok, true)
				if err != nil {
					return err
				}
				if _, err := out.Write(p); err != nil {
					return err
				}
				if made == n {
					break
				}
				if logits, err = s.Decode(tok); err != nil {
					return err
				}
				pos++
			}
			fmt.Fprintln(out)
			decode := time.Since(start)
			fmt.Fprintf(errOut, "%d prompt tokens in %.2f s (%.1f tok/s), %d generated in %.2f s (%.1f tok/s), %s\n",
				len(ids), prefill.Seconds(), float64(len(ids))/prefill.Seconds(), made, decode.Seconds(),
				float64(made)/decode.Seconds(), m.Engine.Executor().Name())
			return nil
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "GGUF file or fixture name")
	cmd.Flags().StringVar(&prompt, "prompt", "", "the text to continue")
	cmd.Flags().BoolVar(&parseSpecial, "parse-special", false, "recognise special tokens written in the prompt")
	cmd.Flags().BoolVar(&showPrompt, "echo", false, "print the prompt before the generated text")
	cmd.Flags().IntVar(&draft, "draft", 0, "speculate up to this many prompt-lookup draft tokens per step (0: plain decoding)")
	cmd.Flags().BoolVar(&chat, "chat", false, "the prompt is a user message, in the model's chat template")
	cmd.Flags().StringVar(&system, "system", "", "with --chat: a system message first")
	cmd.Flags().IntVarP(&n, "tokens", "n", 128, "most tokens to generate")
	cmd.Flags().Float64Var(&smp.Temperature, "temperature", 0, "0: greedy; else sample at this temperature")
	cmd.Flags().IntVar(&smp.TopK, "top-k", 0, "sample among the k most likely tokens (0: all)")
	cmd.Flags().Float64Var(&smp.TopP, "top-p", 1, "sample within the smallest set of this probability (1: all)")
	cmd.Flags().Uint64Var(&smp.Seed, "seed", 0, "the sampler's seed")
	cmd.Flags().IntVar(&threads, "threads", 0, "CPU threads (0: all)")
	cmd.Flags().StringVar(&backend, "backend", "cpu", backendHelp)
	cmd.Flags().IntSliceVar(&layers, "layers", nil, layersHelp)
	cmd.Flags().BoolVar(&megakernel, "megakernel", false, megakernelHelp)
	cmd.Flags().IntVar(&sms, "sms", 0, smsHelp)
	return cmd
}

// speculate generates like plain decoding, verifying prompt-lookup drafts of up to k tokens
// per step through a verify service.
func speculate(cmd *cobra.Command, e *engine.Engine, tk *tokenizer.Tokenizer, prompt []int32, smp serve.Sampler, n, k int) error {
	sv := serve.New(e, serve.Options{MaxNodes: k, Tokenizer: tk})
	defer sv.Shutdown()
	out := cmd.OutOrStdout()
	start := time.Now()
	op, err := sv.Open(prompt, smp)
	if err != nil {
		return err
	}
	defer sv.Close(op.Session)
	history := append([]int32(nil), prompt...)
	made, steps, drafted, accepted := 0, 0, 0, 0
	done := false
	emit := func(t serve.Token) error {
		if done {
			return nil
		}
		made++
		history = append(history, t.ID)
		if tk.IsEOG(t.ID) || made == n {
			done = true
		}
		if tk.IsEOG(t.ID) {
			return nil
		}
		p, err := tk.Piece(t.ID, true)
		if err != nil {
			return err
		}
		_, err = out.Write(p)
		return err
	}
	if err := emit(op.Next); err != nil {
		return err
	}
	pos := op.Position
	for !done {
		d := lookupDraft(history, k)
		parents := make([]int, len(d))
		for i := range parents {
			parents[i] = i - 1
		}
		v, err := sv.Verify(op.Session, serve.Draft{Position: pos, Tokens: d, Parents: parents})
		if err != nil {
			return err
		}
		steps++
		drafted += len(d)
		accepted += len(v.Tokens)
		for _, t := range append(v.Tokens, v.Next) {
			if err := emit(t); err != nil {
				return err
			}
		}
		pos = v.Position
	}
	fmt.Fprintln(out)
	el := time.Since(start)
	rate := 0.0
	if drafted > 0 {
		rate = 100 * float64(accepted) / float64(drafted)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%d prompt tokens, %d generated in %.2f s (%.1f tok/s) in %d verify steps: %d of %d draft tokens accepted (%.0f%%), %s\n",
		len(prompt), made, el.Seconds(), float64(made)/el.Seconds(), steps, accepted, drafted, rate, e.Executor().Name())
	return nil
}

// lookupDraft drafts up to k tokens by prompt lookup: the most recent earlier occurrence of the
// longest suffix of tokens (3, 2 or 1 of them), and the tokens that followed it.
func lookupDraft(tokens []int32, k int) []int32 {
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
