package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
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
		{"gemma2", TemplateGemma, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"}, // llama.cpp's gemma
		{"llama", "", ""}, // the fixtures' Llama vocabulary has no header tokens
	} {
		tk := fixtureTokenizer(t, tc.arch, 1024)
		if got := tk.ChatTemplate(); got != tc.template {
			t.Errorf("%s: template %q, want %q", tc.arch, got, tc.template)
		}
		got, err := tk.Chat(msgs, nil)
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
		opener := "<|im_start|>"
		if tc.template == TemplateGemma {
			opener = "<start_of_turn>"
		}
		start, _ := tk.lookup(opener)
		if ids := tk.Encode(got, Options{ParseSpecial: true}); ids[0] != start {
			t.Errorf("%s: %v does not open with %s", tc.arch, ids[:4], opener)
		}
	}
	// Qwen3.5's template closes the thinking block at once when asked not to think.
	q35 := fixtureTokenizer(t, "qwen35moe", 1024)
	if got, err := q35.Chat(msgs[1:], map[string]any{"enable_thinking": false}); err != nil ||
		got != "<|im_start|>user\n Hi \n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" {
		t.Errorf("enable_thinking false: %q, %v", got, err)
	}
	q := fixtureTokenizer(t, "qwen3", 1024)
	for _, bad := range [][]Message{nil, {{Role: "", Content: "x"}}, {{Role: "user\n", Content: "x"}}} {
		if _, err := q.Chat(bad, nil); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	// A file's template that does not compile leaves the built-in one its markers name, and
	// says why; one without known markers is refused with both reasons.
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
	if l3.ChatTemplate() != TemplateLlama3 || l3.ChatTemplateError() == nil || !strings.Contains(l3.ChatTemplateError().Error(), "does not compile") {
		t.Errorf("template %q, error %v", l3.ChatTemplate(), l3.ChatTemplateError())
	}
	got, err := l3.Chat(msgs[1:], nil)
	if want := "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"; err != nil || got != want {
		t.Errorf("llama3: %q, %v", got, err)
	}
	kv["tokenizer.chat_template"] = gguf.Str("{{ bos_token }}[INST] {% if %}")
	other, err := Load(vocabFile(t, kv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Chat(msgs, nil); err == nil || !strings.Contains(err.Error(), "does not compile") || !strings.Contains(err.Error(), "not a chatml, llama3 or gemma") {
		t.Errorf("unknown template: %v", err)
	}
	// A file's template that compiles is the one used.
	kv["tokenizer.chat_template"] = gguf.Str("{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}")
	j, err := Load(vocabFile(t, kv))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := j.Chat(msgs, nil); j.ChatTemplate() != TemplateJinja || j.ChatTemplateError() != nil || err != nil ||
		got != "[system] Be brief.\n[user]  Hi \n\n" { // the vocabulary adds BOS itself: the template's is dropped
		t.Errorf("jinja: %s %v: %q, %v", j.ChatTemplate(), j.ChatTemplateError(), got, err)
	}
}

// chatTemplate reads a Jinja template from testdata/chat.
func chatTemplate(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/chat/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// randomChat is a seeded conversation: an optional system turn, then alternating user and
// assistant turns ending with the user's, with contents of words, spaces, newlines and
// non-ASCII text.
func randomChat(r *rand.Rand) []Message {
	words := []string{"hello", " ", "\n", "naïve", "日本語", "🙂", "a+b", "{{ x }}", "'quoted'", "\"", "\t"}
	text := func() string {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	var msgs []Message
	if r.IntN(2) == 0 {
		msgs = append(msgs, Message{Role: "system", Content: text()})
	}
	turns := 1 + 2*r.IntN(3)
	for i := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, Message{Role: role, Content: text()})
	}
	return msgs
}

// Jinja templates written in the styles of real models' render what the built-in templates of
// the same formats write, on seeded random conversations: chatml, Qwen3.5's thinking opening
// (with enable_thinking from the variables), and Llama 3's, whose leading bos_token is dropped
// because the tokenizer adds BOS itself.
func TestChatJinjaMatchesBuiltin(t *testing.T) {
	llama3 := map[string]gguf.Value{
		"tokenizer.ggml.model":            gguf.Str("gpt2"),
		"tokenizer.ggml.pre":              gguf.Str("llama-bpe"),
		"tokenizer.ggml.tokens":           gguf.ArrStrings([]string{"a", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"}),
		"tokenizer.ggml.merges":           gguf.ArrStrings(nil),
		"tokenizer.ggml.bos_token_id":     gguf.U32(1),
		"tokenizer.ggml.add_bos_token":    gguf.Bool(true),
		"tokenizer.ggml.eos_token_id":     gguf.U32(2),
		"tokenizer.ggml.add_eos_token":    gguf.Bool(false),
		"tokenizer.ggml.token_type":       gguf.ArrInt32s([]int32{1, 3, 3, 3, 3}),
		"tokenizer.ggml.padding_token_id": gguf.U32(0),
	}
	l3, err := Load(vocabFile(t, llama3))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		base     *Tokenizer
		template string
		vars     map[string]any
	}{
		{fixtureTokenizer(t, "qwen3", 1024), "chatml.jinja", nil},
		{fixtureTokenizer(t, "qwen35moe", 1024), "think.jinja", nil},
		{fixtureTokenizer(t, "qwen35moe", 1024), "think.jinja", map[string]any{"enable_thinking": false}},
		{fixtureTokenizer(t, "qwen35moe", 1024), "think.jinja", map[string]any{"enable_thinking": true}},
		{l3, "llama3.jinja", nil},
	} {
		if tc.base.ChatTemplate() == "" || tc.base.ChatTemplate() == TemplateJinja {
			t.Fatalf("%s: the base tokenizer's template is %q", tc.template, tc.base.ChatTemplate())
		}
		j, err := tc.base.WithChatTemplate(chatTemplate(t, tc.template))
		if err != nil {
			t.Fatal(err)
		}
		if j.ChatTemplate() != TemplateJinja || tc.base.ChatTemplate() == TemplateJinja {
			t.Fatalf("%s: WithChatTemplate gave %q and left %q", tc.template, j.ChatTemplate(), tc.base.ChatTemplate())
		}
		r := rand.New(rand.NewPCG(7, 1))
		for i := range 300 {
			msgs := randomChat(r)
			want, err := tc.base.Chat(msgs, tc.vars)
			if err != nil {
				t.Fatal(err)
			}
			got, err := j.Chat(msgs, tc.vars)
			if err != nil || got != want {
				t.Fatalf("%s %v, case %d %q:\n got %q, %v\nwant %q", tc.template, tc.vars, i, msgs, got, err, want)
			}
		}
	}
}

func TestChatJinja(t *testing.T) {
	base := fixtureTokenizer(t, "qwen3", 1024) // no BOS added: a template's bos_token stays
	inst, err := base.WithChatTemplate(chatTemplate(t, "inst.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	bos, eos := base.specialText(base.BOS()), base.specialText(base.EOS())
	for _, tc := range []struct {
		msgs []Message
		want string // "" for an error
		err  string
	}{
		{[]Message{{Role: "user", Content: "Hi"}}, bos + "[INST] Hi [/INST]", ""},
		{[]Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi", Name: "ann"}, {Role: "assistant", Content: "Hello."}, {Role: "user", Content: "Why?"}},
			bos + "[INST] ann: Hi [/INST] Hello." + eos + "[INST] Be brief.\n\nWhy? [/INST]", ""},
		{[]Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, "", "roles must alternate"},
		{[]Message{{Role: "assistant", Content: "a"}}, "", "roles must alternate"},
	} {
		got, err := inst.Chat(tc.msgs, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: %q, %v; want an error saying %q", tc.msgs, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %q, %v\nwant %q", tc.msgs, got, err, tc.want)
		}
	}
	// Chat's own variables cannot be overridden; other variables reach the template.
	for _, k := range reservedChatVars {
		if _, err := inst.Chat([]Message{{Role: "user", Content: "x"}}, map[string]any{k: 1}); err == nil {
			t.Errorf("variable %q accepted", k)
		}
	}
	v, err := base.WithChatTemplate("{{ greeting | upper }} {{ n + 1 }} {{ flags | join(',') }}")
	if err != nil {
		t.Fatal(err)
	}
	var vars map[string]any // as a request's chat_template_kwargs decode
	if err := json.Unmarshal([]byte(`{"greeting": "hi", "n": 2, "flags": ["a", "b"]}`), &vars); err != nil {
		t.Fatal(err)
	}
	if got, err := v.Chat([]Message{{Role: "user", Content: "x"}}, vars); err != nil || got != "HI 3 a,b" {
		t.Errorf("variables: %q, %v", got, err)
	}
	for _, spec := range []string{"", "{% for %}", "{{ x "} {
		if _, err := base.WithChatTemplate(spec); err == nil {
			t.Errorf("template %q accepted", spec)
		}
	}
	for _, name := range []string{TemplateChatML, TemplateChatMLThink, TemplateLlama3} {
		if b, err := base.WithChatTemplate(name); err != nil || b.ChatTemplate() != name {
			t.Errorf("built-in %s: %v", name, err)
		}
	}
}

func TestMessageJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Message
		err  bool
	}{
		{`{"role": "user", "content": "hi"}`, Message{Role: "user", Content: "hi"}, false},
		{`{"role": "assistant", "content": null}`, Message{Role: "assistant"}, false},
		{`{"role": "assistant"}`, Message{Role: "assistant"}, false},
		{`{"role": "user", "name": "ann", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}`, Message{Role: "user", Name: "ann", Content: "a\nb"}, false},
		{`{"role": "user", "content": []}`, Message{Role: "user"}, false},
		{`{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}`, Message{}, true},
		{`{"role": "user", "content": [{"type": "text"}]}`, Message{}, true},
		{`{"role": "user", "content": 3}`, Message{}, true},
		{`{"role": "user", "content": {"text": "a"}}`, Message{}, true},
		{`{"role": "user", "content": "x", "bogus": 1}`, Message{}, true},
		{`{"role": "assistant", "content": null, "tool_calls": [{"id": "1"}]}`, Message{}, true},
		{`{"role": "user", "content": [{"type": "text", "text": "a", "extra": 1}]}`, Message{}, true},
		{`[1]`, Message{}, true},
	} {
		var m Message
		err := json.Unmarshal([]byte(tc.in), &m)
		if tc.err != (err != nil) || (!tc.err && m != tc.want) {
			t.Errorf("%s: %+v, %v", tc.in, m, err)
		}
	}
	// A message writes its content as a string, and reads back the same.
	m := Message{Role: "assistant", Content: "x\ny", Name: "bot"}
	b, _ := json.Marshal(m)
	var back Message
	if err := json.Unmarshal(b, &back); err != nil || back != m || string(b) != `{"role":"assistant","content":"x\ny","name":"bot"}` {
		t.Errorf("%s → %+v, %v", b, back, err)
	}
}

// FuzzChat: any conversation a client can send (a JSON list of messages) and any variables
// are written by the Jinja templates or refused with an error, never a panic; where chatml.jinja
// writes one, it is the built-in chatml's text.
func FuzzChat(f *testing.F) {
	f.Add(`[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]`, `{"enable_thinking": false}`)
	f.Add(`[{"role": "user", "content": [{"type": "text", "text": "a"}]}, {"role": "assistant", "content": null}]`, `{}`)
	f.Add(`[{"role": "user", "name": "{{ x }}", "content": "{% raw %}"}]`, `{"x": [1, {"y": null}], "z": 1e300}`)
	base := fixtureTokenizer(f, "qwen35moe", 1024)
	var templates []*Tokenizer
	for _, name := range []string{"chatml.jinja", "think.jinja", "inst.jinja", "llama3.jinja"} {
		b, err := os.ReadFile("testdata/chat/" + name)
		if err != nil {
			f.Fatal(err)
		}
		tk, err := base.WithChatTemplate(string(b))
		if err != nil {
			f.Fatal(err)
		}
		templates = append(templates, tk)
	}
	chatml, err := base.WithChatTemplate(TemplateChatML)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msgsJSON, varsJSON string) {
		var msgs []Message
		var vars map[string]any
		if json.Unmarshal([]byte(msgsJSON), &msgs) != nil || json.Unmarshal([]byte(varsJSON), &vars) != nil {
			return
		}
		for _, tk := range templates {
			tk.Chat(msgs, vars)
		}
		if got, err := templates[0].Chat(msgs, vars); err == nil {
			if want, err := chatml.Chat(msgs, vars); err != nil || got != want {
				t.Errorf("chatml.jinja %q, built-in %q, %v", got, want, err)
			}
		}
	})
}

// Gemma's turns end with <end_of_turn>, which ends generation as <eos> does; <bos> is added.
func TestGemmaTokens(t *testing.T) {
	tk := fixtureTokenizer(t, "gemma2", 1024)
	for _, s := range []string{"<end_of_turn>", "<eos>"} {
		id, ok := tk.lookup(s)
		if !ok || !tk.IsEOG(id) {
			t.Errorf("%s (%d, %v) does not end generation", s, id, ok)
		}
	}
	if start, _ := tk.lookup("<start_of_turn>"); tk.IsEOG(start) {
		t.Error("<start_of_turn> ends generation")
	}
	if bos, _ := tk.lookup("<bos>"); !tk.AddsBOS() || tk.BOS() != bos {
		t.Errorf("BOS %d, adds it: %v", tk.BOS(), tk.AddsBOS())
	}
}
