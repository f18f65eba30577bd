package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"verity/host/gguf"
	"verity/host/tokenizer"
)

// loadTokenizer reads the tokenizer of a GGUF file.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return tokenizer.Load(f)
}

// chatTemplateFlags are --chat-template and --chat-template-file: the chat template to use
// instead of the model's.
type chatTemplateFlags struct{ spec, file string }

func (c *chatTemplateFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&c.spec, "chat-template", "", "chat template instead of the model's: chatml, chatml-think, llama3, gemma, or a Jinja template's text")
	cmd.Flags().StringVar(&c.file, "chat-template-file", "", "chat template instead of the model's: a Jinja template file")
}

// apply returns tk with the chat template the flags name (tk itself when they name none).
func (c *chatTemplateFlags) apply(tk *tokenizer.Tokenizer) (*tokenizer.Tokenizer, error) {
	spec := c.spec
	switch {
	case c.spec != "" && c.file != "":
		return nil, errors.New("--chat-template and --chat-template-file: give one")
	case c.file != "":
		b, err := os.ReadFile(c.file)
		if err != nil {
			return nil, fmt.Errorf("--chat-template-file: %w", err)
		}
		spec = string(b)
	case spec == "":
		return tk, nil
	}
	tk, err := tk.WithChatTemplate(spec)
	if err != nil && c.file != "" {
		return nil, fmt.Errorf("--chat-template-file %s: %w", c.file, err)
	} else if err != nil {
		return nil, fmt.Errorf("--chat-template: %w", err)
	}
	return tk, nil
}

// describeChatTemplate says which chat template tk applies, and why not the file's where it
// does not compile.
func describeChatTemplate(tk *tokenizer.Tokenizer) string {
	name := tk.ChatTemplate()
	if name == "" {
		name = "none"
	}
	if err := tk.ChatTemplateError(); err != nil {
		return fmt.Sprintf("chat template %s (%v)", name, err)
	}
	return "chat template " + name
}

func newTokenizeCmd() *cobra.Command {
	var model, file string
	var noSpecial, parseSpecial, asJSON, decode bool
	cmd := &cobra.Command{
		Use:   "tokenize --model FILE|FIXTURE [TEXT | --file F | -]",
		Short: "Turn text into token ids with a model's tokenizer (or ids back into text)",
		Long: `Print the token ids of a text as the model's own tokenizer (the tokenizer.ggml.* keys of
its GGUF file) produces them — the ids llama.cpp's llama_tokenize gives for the same file. The
text is the argument, --file, or standard input ("-" or no argument). BOS/EOS are added where the
model asks for them unless --no-special; special tokens written in the text (e.g. <|im_start|>)
are recognised with --parse-special. --decode reads comma-separated ids instead and prints their
text (special tokens included). --json prints {"ids": [...], "pieces": [...]}.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if model == "" {
				return errors.New("--model is required")
			}
			path, _, err := resolveModel(model, cmd)
			if err != nil {
				return err
			}
			tk, err := loadTokenizer(path)
			if err != nil {
				return err
			}
			var text string
			switch {
			case len(args) == 1 && args[0] != "-":
				if file != "" {
					return errors.New("give the text or --file, not both")
				}
				text = args[0]
			case file != "":
				b, err := os.ReadFile(file)
				if err != nil {
					return err
				}
				text = string(b)
			default:
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return err
				}
				text = string(b)
			}
			var ids []int32
			if decode {
				if ids, err = parseInts(strings.TrimSpace(text)); err != nil {
					return fmt.Errorf("--decode: %w", err)
				}
			} else {
				ids = tk.Encode(text, tokenizer.Options{AddSpecial: !noSpecial, ParseSpecial: parseSpecial})
			}
			pieces := make([]string, len(ids))
			for i, id := range ids {
				p, err := tk.Piece(id, true)
				if err != nil {
					return err
				}
				pieces[i] = string(p)
			}
			out := cmd.OutOrStdout()
			switch {
			case asJSON:
				if ids == nil {
					ids = []int32{}
				}
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				return enc.Encode(map[string]any{"ids": ids, "pieces": pieces})
			case decode:
				_, err := fmt.Fprintln(out, strings.Join(pieces, ""))
				return err
			}
			s := make([]string, len(ids))
			for i, id := range ids {
				s[i] = strconv.Itoa(int(id))
			}
			_, err = fmt.Fprintln(out, strings.Join(s, ","))
			return err
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "GGUF file or fixture name")
	cmd.Flags().StringVar(&file, "file", "", "read the text from this file")
	cmd.Flags().BoolVar(&noSpecial, "no-special", false, "add no BOS/EOS")
	cmd.Flags().BoolVar(&parseSpecial, "parse-special", false, "recognise special tokens written in the text")
	cmd.Flags().BoolVar(&decode, "decode", false, "read comma-separated ids and print their text")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"ids": [...], "pieces": [...]}`)
	return cmd
}
