package tokenizer

import (
	"strings"
	"testing"

	"verity/host/gguf"
)

func TestChat(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: " Hi \n"}}
	for _, tc := range []struct {
		arch     string
		template string
		want     string
	}{
		{"qwen3", TemplateChatML, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi \n<|im_end|>\n<|im_start|>assistant\n"},
		{"qwen35moe", TemplateChatMLThink, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi \n<|im_end|>\n<|im_start|>assistant\n<think>\n"},
		{"llama", "", ""}, // the fixtures' Llama vocabulary has no header tokens
	} {
		tk := fixtureTokenizer(t, tc.arch, 1024)
		if got := tk.ChatTemplate(); got != tc.template {
			t.Errorf("%s: template %q, want %q", tc.arch, got, tc.template)
		}
		got, err := tk.Chat(msgs)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "no tokenizer.chat_template") {
				t.Errorf("%s: %q, %v", tc.arch, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v\nwant %q", tc.arch, got, err, tc.want)
		}
		// The template's special tokens are tokens once parsed.
		start, _ := tk.lookup("<|im_start|>")
		if ids := tk.Encode(got, Options{ParseSpecial: true}); ids[0] != start {
			t.Errorf("%s: %v does not open with <|im_start|>", tc.arch, ids[:4])
		}
	}
	q := fixtureTokenizer(t, "qwen3", 1024)
	for _, bad := range [][]Message{nil, {{Role: "", Content: "x"}}, {{Role: "user\n", Content: "x"}}} {
		if _, err := q.Chat(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// A file's template text decides: Llama 3 markers, trimmed contents; an unknown template is
	// refused with a reason.
	kv := map[string]gguf.Value{
		"tokenizer.ggml.model":        gguf.Str("gpt2"),
		"tokenizer.ggml.pre":          gguf.Str("llama-bpe"),
		"tokenizer.ggml.tokens":       gguf.ArrStrings([]string{"a", "<|begin_of_text|>"}),
		"tokenizer.ggml.merges":       gguf.ArrStrings(nil),
		"tokenizer.ggml.bos_token_id": gguf.U32(1),
		"tokenizer.chat_template":     gguf.Str("{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>…"),
	}
	l3, err := Load(vocabFile(t, kv))
	if err != nil {
		t.Fatal(err)
	}
	got, err := l3.Chat(msgs[1:])
	if want := "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"; err != nil || got != want {
		t.Errorf("llama3: %q, %v", got, err)
	}
	kv["tokenizer.chat_template"] = gguf.Str("{{ bos_token }}[INST] {{ m }} [/INST]")
	other, err := Load(vocabFile(t, kv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Chat(msgs); err == nil || !strings.Contains(err.Error(), "not a chatml or llama3 template") {
		t.Errorf("unknown template: %v", err)
	}
}
