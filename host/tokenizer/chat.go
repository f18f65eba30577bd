package tokenizer

import (
	"fmt"
	"strings"
)

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"` // system, user, assistant, tool, …
	Content string `json:"content"`
	Name    string `json:"name,omitempty"` // a participant's name; not part of the templates
}

// Chat templates, recognised the way llama.cpp recognises its built-in ones: from the markers
// in tokenizer.chat_template, or where a file has none, from the special tokens of the
// vocabulary.
const (
	TemplateChatML      = "chatml"       // <|im_start|>role\ncontent<|im_end|>\n (Qwen)
	TemplateChatMLThink = "chatml-think" // chatml whose assistant turn opens with <think>\n (Qwen3.5)
	TemplateLlama3      = "llama3"       // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
)

// detectTemplate names the chat template of the vocabulary given its template text tmpl (""
// when the file has none).
func (t *Tokenizer) detectTemplate(tmpl string) string {
	has := func(s string) bool { _, ok := t.index[s]; return ok }
	chatml := strings.Contains(tmpl, "<|im_start|>") && !strings.Contains(tmpl, "<|im_sep|>") && !strings.Contains(tmpl, "<end_of_utterance>")
	llama3 := strings.Contains(tmpl, "<|start_header_id|>") && strings.Contains(tmpl, "<|end_header_id|>")
	if tmpl == "" {
		chatml = has("<|im_start|>") && has("<|im_end|>")
		llama3 = has("<|start_header_id|>") && has("<|end_header_id|>") && has("<|eot_id|>")
	}
	switch {
	case chatml && t.preName == "qwen35":
		return TemplateChatMLThink
	case chatml:
		return TemplateChatML
	case llama3:
		return TemplateLlama3
	}
	return ""
}

// ChatTemplate names the chat template Chat applies, "" when the model has none it knows.
func (t *Tokenizer) ChatTemplate() string { return t.template }

// Chat writes messages as the model's chat template does and opens the assistant's turn; the
// text holds special tokens, to be encoded with ParseSpecial (BOS comes from AddSpecial).
func (t *Tokenizer) Chat(msgs []Message) (string, error) {
	if t.template == "" {
		if t.templateText == "" {
			return "", fmt.Errorf("tokenizer: the model has no tokenizer.chat_template, and no chatml or llama3 special tokens")
		}
		return "", fmt.Errorf("tokenizer: the model's tokenizer.chat_template is not a chatml or llama3 template")
	}
	if len(msgs) == 0 {
		return "", fmt.Errorf("tokenizer: a chat needs at least one message")
	}
	var b strings.Builder
	for i, m := range msgs {
		if m.Role == "" || strings.ContainsAny(m.Role, "\n<>|") {
			return "", fmt.Errorf("tokenizer: message %d: role %q", i, m.Role)
		}
		switch t.template {
		case TemplateChatML, TemplateChatMLThink:
			fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, m.Content)
		case TemplateLlama3:
			fmt.Fprintf(&b, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", m.Role, strings.TrimSpace(m.Content))
		}
	}
	switch t.template {
	case TemplateChatML:
		b.WriteString("<|im_start|>assistant\n")
	case TemplateChatMLThink:
		b.WriteString("<|im_start|>assistant\n<think>\n")
	case TemplateLlama3:
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return b.String(), nil
}
