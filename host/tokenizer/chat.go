package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"` // system, user, assistant, tool, …
	Content string `json:"content"`
	Name    string `json:"name,omitempty"` // a participant's name, given to Jinja templates
}

// UnmarshalJSON reads a message whose content is a string, null, or OpenAI's list of content
// parts; text parts are joined with newlines, as llama.cpp joins them, and any other part is
// refused (the models Verity runs read text only), as is any other field (tool calls among
// them: nothing would parse a model's).
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Name    string          `json:"name"`
	}
	if err := strictJSON(b, &raw); err != nil {
		return err
	}
	*m = Message{Role: raw.Role, Name: raw.Name}
	c := bytes.TrimSpace(raw.Content)
	switch {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '[':
		var parts []json.RawMessage
		if err := json.Unmarshal(c, &parts); err != nil {
			return fmt.Errorf("message content: %w", err)
		}
		texts := make([]string, len(parts))
		for i, raw := range parts {
			var kind struct {
				Type string `json:"type"`
			}
			var p struct {
				Type string  `json:"type"`
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(raw, &kind); err != nil {
				return fmt.Errorf("message content part %d: %w", i, err)
			}
			if kind.Type != "text" {
				return fmt.Errorf("message content part %d: type %q, want text parts only", i, kind.Type)
			}
			if err := strictJSON(raw, &p); err != nil || p.Text == nil {
				return fmt.Errorf("message content part %d: want {\"type\": \"text\", \"text\": …}", i)
			}
			texts[i] = *p.Text
		}
		m.Content = strings.Join(texts, "\n")
	default:
		if err := json.Unmarshal(c, &m.Content); err != nil {
			return fmt.Errorf("message content: %w", err)
		}
	}
	return nil
}

// strictJSON decodes b into v, refusing fields v does not have.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// Chat templates. A file's tokenizer.chat_template is rendered as the Jinja template it is
// (TemplateJinja); where a file has none, or its template does not compile, Chat writes a
// built-in one recognised the way llama.cpp recognises them: from the template's markers, or
// from the vocabulary's special tokens.
const (
	TemplateJinja       = "jinja"        // the file's (or WithChatTemplate's) Jinja template
	TemplateChatML      = "chatml"       // <|im_start|>role\ncontent<|im_end|>\n (Qwen)
	TemplateChatMLThink = "chatml-think" // chatml whose assistant turn opens with <think>\n (Qwen3.5)
	TemplateLlama3      = "llama3"       // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
	TemplateGemma       = "gemma"        // <start_of_turn>role\ncontent<end_of_turn>\n, assistant as model (Gemma)
)

// chatFormat is how Chat writes a conversation.
type chatFormat struct {
	name  string          // one of the Template names; "" for none
	jinja *jinja.Template // the compiled template when name is TemplateJinja
	err   error           // why the file's template is not the one used (nil if it is, or there is none)
}

// chatFormat picks the chat format of the vocabulary given its template text tmpl ("" when the
// file has none).
func (t *Tokenizer) chatFormat(tmpl string) chatFormat {
	if tmpl != "" {
		j, err := jinja.Compile(tmpl)
		if err == nil {
			return chatFormat{name: TemplateJinja, jinja: j}
		}
		return chatFormat{name: t.builtinTemplate(tmpl), err: fmt.Errorf("tokenizer.chat_template does not compile: %w", err)}
	}
	return chatFormat{name: t.builtinTemplate("")}
}

// builtinTemplate names the built-in template whose markers tmpl holds (or, when tmpl is "",
// whose special tokens the vocabulary has); "" for none.
func (t *Tokenizer) builtinTemplate(tmpl string) string {
	has := func(s string) bool { _, ok := t.index[s]; return ok }
	chatml := strings.Contains(tmpl, "<|im_start|>") && !strings.Contains(tmpl, "<|im_sep|>") && !strings.Contains(tmpl, "<end_of_utterance>")
	llama3 := strings.Contains(tmpl, "<|start_header_id|>") && strings.Contains(tmpl, "<|end_header_id|>")
	gemma := strings.Contains(tmpl, "<start_of_turn>")
	if tmpl == "" {
		chatml = has("<|im_start|>") && has("<|im_end|>")
		llama3 = has("<|start_header_id|>") && has("<|end_header_id|>") && has("<|eot_id|>")
		gemma = has("<start_of_turn>") && has("<end_of_turn>")
	}
	switch {
	case chatml && t.preName == "qwen35":
		return TemplateChatMLThink
	case chatml:
		return TemplateChatML
	case llama3:
		return TemplateLlama3
	case gemma:
		return TemplateGemma
	}
	return ""
}

// ChatTemplate names the chat template Chat applies, "" when the model has none it can use.
func (t *Tokenizer) ChatTemplate() string { return t.chat.name }

// ChatTemplateError says why the file's tokenizer.chat_template is not the template Chat
// applies (it does not compile); nil when it is, or when the file has none.
func (t *Tokenizer) ChatTemplateError() error { return t.chat.err }

// WithChatTemplate returns a tokenizer like t that writes chats with spec instead: a built-in
// template's name (chatml, chatml-think, llama3, gemma) or the text of a Jinja template.
func (t *Tokenizer) WithChatTemplate(spec string) (*Tokenizer, error) {
	c := *t
	switch spec {
	case TemplateChatML, TemplateChatMLThink, TemplateLlama3, TemplateGemma:
		c.chat = chatFormat{name: spec}
	case "":
		return nil, fmt.Errorf("tokenizer: an empty chat template")
	default:
		j, err := jinja.Compile(spec)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: the chat template does not compile: %w", err)
		}
		c.chat = chatFormat{name: TemplateJinja, jinja: j}
	}
	return &c, nil
}

// reservedChatVars are the variables Chat gives a Jinja template itself, the template
// language's functions, and tools (templates write tool instructions, but nothing would parse
// the model's calls).
var reservedChatVars = []string{"messages", "add_generation_prompt", "bos_token", "eos_token",
	"namespace", "raise_exception", "range", "strftime_now", "dict", "joiner", "cycler", "tools"}

// Chat writes messages as the model's chat template does and opens the assistant's turn; the
// text holds special tokens, to be encoded with ParseSpecial (BOS comes from AddSpecial). vars
// are further variables for a Jinja template (a request's chat_template_kwargs, e.g.
// enable_thinking); the built-in templates read only enable_thinking (chatml-think: false
// writes an empty thinking block, as Qwen3.5's template does).
//
// A Jinja template sees messages (role, content, and name where given), add_generation_prompt
// (true), bos_token and eos_token. Where the tokenizer adds BOS itself, a BOS the template
// writes first is dropped, and likewise an EOS it writes last, so that encoding the text with
// AddSpecial does not double them (llama.cpp does the same).
func (t *Tokenizer) Chat(msgs []Message, vars map[string]any) (string, error) {
	if t.chat.name == "" {
		switch {
		case t.templateText == "":
			return "", fmt.Errorf("tokenizer: the model has no tokenizer.chat_template, and no chatml, llama3 or gemma special tokens")
		case t.chat.err != nil:
			return "", fmt.Errorf("tokenizer: %w (and it is not a chatml, llama3 or gemma template)", t.chat.err)
		}
		return "", fmt.Errorf("tokenizer: the model's tokenizer.chat_template is not a chatml, llama3 or gemma template")
	}
	if len(msgs) == 0 {
		return "", fmt.Errorf("tokenizer: a chat needs at least one message")
	}
	for i, m := range msgs {
		if m.Role == "" || strings.ContainsAny(m.Role, "\n<>|") {
			return "", fmt.Errorf("tokenizer: message %d: role %q", i, m.Role)
		}
	}
	for _, k := range reservedChatVars {
		if _, ok := vars[k]; ok {
			return "", fmt.Errorf("tokenizer: the chat template variable %q cannot be set", k)
		}
	}
	if t.chat.name == TemplateJinja {
		return t.renderJinja(msgs, vars)
	}
	if t.chat.name == TemplateGemma {
		return gemmaChat(msgs), nil
	}
	var b strings.Builder
	for _, m := range msgs {
		switch t.chat.name {
		case TemplateChatML, TemplateChatMLThink:
			fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, m.Content)
		case TemplateLlama3:
			fmt.Fprintf(&b, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", m.Role, strings.TrimSpace(m.Content))
		}
	}
	switch t.chat.name {
	case TemplateChatML:
		b.WriteString("<|im_start|>assistant\n")
	case TemplateChatMLThink:
		b.WriteString("<|im_start|>assistant\n<think>\n")
		if think, ok := vars["enable_thinking"].(bool); ok && !think {
			b.WriteString("\n</think>\n\n")
		}
	case TemplateLlama3:
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return b.String(), nil
}

// renderJinja renders the Jinja template (see Chat).
func (t *Tokenizer) renderJinja(msgs []Message, vars map[string]any) (string, error) {
	data := make(map[string]any, len(vars)+4)
	for k, v := range vars {
		data[k] = v
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		mm := map[string]any{"role": m.Role, "content": m.Content}
		if m.Name != "" {
			mm["name"] = m.Name
		}
		list[i] = mm
	}
	data["messages"] = list
	data["add_generation_prompt"] = true
	bos, eos := t.specialText(t.bos), t.specialText(t.eos)
	data["bos_token"], data["eos_token"] = bos, eos
	out, err := t.chat.jinja.Render(data)
	if err != nil {
		return "", fmt.Errorf("tokenizer: the chat template: %w", err)
	}
	if t.addBOS && bos != "" {
		out = strings.TrimPrefix(out, bos)
	}
	if t.addEOS && eos != "" {
		out = strings.TrimSuffix(out, eos)
	}
	return out, nil
}

// specialText is token id's text as the vocabulary spells it, "" for -1.
func (t *Tokenizer) specialText(id int32) string {
	s, _, _ := t.Token(id) // "" for an id outside the vocabulary
	return s
}

// gemmaChat writes msgs as llama.cpp's built-in gemma template does: Gemma has no system turn,
// so the system messages' contents (trimmed, joined) open the next user turn, followed by a
// blank line; the assistant's role is "model"; every content is trimmed; the model's turn is
// opened for the answer. One difference: a system content of white space alone still leaves
// the blank line (llama.cpp's writes nothing), so that what the template writes never depends
// on what a content says (EncodeChat).
func gemmaChat(msgs []Message) string {
	var b strings.Builder
	system, pending := "", false
	for _, m := range msgs {
		if m.Role == "system" {
			system += strings.TrimSpace(m.Content)
			pending = pending || m.Content != ""
			continue
		}
		role := m.Role
		if role == "assistant" {
			role = "model"
		}
		fmt.Fprintf(&b, "<start_of_turn>%s\n", role)
		if pending && role != "model" {
			b.WriteString(system + "\n\n")
			system, pending = "", false
		}
		b.WriteString(strings.TrimSpace(m.Content) + "<end_of_turn>\n")
	}
	b.WriteString("<start_of_turn>model\n")
	return b.String()
}
