package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"verity/device/dtype"
	"verity/fixtures"
	"verity/host/gguf"
)

// testdata/llamacpp.json holds llama.cpp's own tokenization (llama_tokenize, commit 22dc605) of
// a corpus of texts with the fixtures' vocabularies, written by TestOracle. TestLlamaCpp checks
// Encode against it without llama.cpp.

var update = flag.Bool("update", false, "with VERITY_ORACLE: rewrite testdata/llamacpp.json from llama.cpp's output")

const expectedFile = "testdata/llamacpp.json"

// corpus covers each branch of the pre-tokenizers (contractions in any case, letters with and
// without a leading non-letter, digit runs, punctuation runs with trailing newlines, whitespace
// runs before text, newlines and at the end), scripts with combining marks, emoji sequences,
// special tokens' texts, and malformed UTF-8. (A NUL byte ends the oracle's text, and llama.cpp
// aborts on a code point above U+10FFFF: neither is here.)
var corpus = []string{
	"",
	" ",
	"Hello world",
	"Hello, world! How are you doing today?",
	"I'm sure they'LL say it's fine; WE'D rather they'd Ve not. She'S 'tis",
	"don't  can't won't shouldn't y'all",
	"1234567890 3.14159 -42 1,000,000 0x1F 2026-11-30",
	"   leading spaces and trailing spaces   ",
	"line one\nline two\r\nline three\n\n\nend\n",
	"\t\ttabs\tand  \t mixed \n \n  whitespace",
	"a  b   c    d",
	"func main() {\n\tfmt.Println(\"hi\") // comment\n}\n",
	"!!!???...;;; ((( ))) [[ ]] {{}} <<>> @#$%^&*_+=|\\/~`",
	"café naïve résumé façade coöperate",
	"e\u0301 a\u0308 n\u0303 combining marks: o\u0302\u0323",
	"日本語のテキストと中文文本。한국어 텍스트도 있습니다.",
	"Здравствуй, мир! Γειά σου κόσμε. שלום עולם. مرحبا بالعالم",
	"हिन्दी में पाठ। தமிழ் உரை. ภาษาไทย",
	"emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇺🇸 ❤️ ✨",
	"non\u00a0breaking\u2009thin\u3000ideographic\u200bzero width",
	"<|begin_of_text|>Hello<|end_of_text|>",
	"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n",
	"<|endoftext|><|endoftext|>x<|im_end",
	"the quick brown fox jumps over the lazy dog THE QUICK BROWN FOX",
	"supercalifragilisticexpialidocious antidisestablishmentarianism",
	"Hello123world 12ab34 a1b2c3",
	"https://example.com/path?query=1&other=two#frag user@example.org",
	"ǅemal ǈubljana Ⅻ ① ½ ²³ ٣٤٥ ४५६",
	"\x01\x7f control \x1b[31mred\x1b[0m",
	"\xff\xfe invalid \xc3 truncated \xe2\x82 and overlong \xc0\xaf end",
	"\xed\xa0\x80 surrogate \xf0\x82\x82\xac overlong euro",
	strings.Repeat("ab", 300) + " " + strings.Repeat("9", 40) + " " + strings.Repeat(" ", 50) + "x",
	"'s 'S 'll 'LL 'Ll ''' 's'",
	"HTTPServer parseJSONResponse getHTTPCode iPhone McDonald's ABCdef XMLHttpRequest",
	"\u4ef7\u683c\u662f\uff11\uff12\uff13\uff14\u5143\uff0c\uff46\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48 \uff21\uff22\uff23\uff01\u3000\u6b21",
	"\u00b5-law \u03a9mega \u01c5 \ufb01ne \u1e9etra\u00dfe \u13a0 \u2126 \U00010400\U00010428",
	"path/to/file\r\n/usr/bin/env x\n//comment",
	"x \u2026 y\u3002z\uff0cw\u3001v \u0964 \u06d4 \u060c (a|b) end.",
	"\n",
	"\r\n\r\n",
	"    ",
	"x\n   \n",
}

// vocabularies are the vocabularies the corpus is tokenized with: the Llama-3.2-1B shape's
// full-size one, the small fixtures' of each pre-tokenizer, the Llama one again under the
// GPT-2 and default pre-tokenizers (pre replaces tokenizer.ggml.pre), and the word vocabulary
// (arch "words") under every pre-tokenizer. fixture names a file that carries the vocabulary,
// or a model to carry it (withVocab), for llama.cpp to load.
var vocabularies = []struct {
	arch, fixture string
	n             int
	pre           string
}{
	{"llama", "llama-1b-q4_k_m", 128256, ""},
	{"llama", "small-llama-q4_k_m", 1024, ""},
	{"qwen3", "small-qwen3-q6_k", 1024, ""},
	{"qwen35moe", "small-q35moe-q4_k_m", 1024, ""},
	{"gemma2", "small-gemma2-q4_k_m", 1024, ""}, // <start_of_turn>, <end_of_turn>, <bos>, <eos>
	{"llama", "tiny-llama-q8_0", 320, "gpt-2"},
	{"llama", "tiny-llama-q8_0", 320, "default"},
	// Every pre-tokenizer again, with a vocabulary built to tell them apart (see
	// wordVocabFile), on the tiny model (see withVocab).
	{"words", "tiny-llama-q8_0", 0, "llama-bpe"},
	{"words", "tiny-llama-q8_0", 0, "qwen2"},
	{"words", "tiny-llama-q8_0", 0, "qwen35"},
	{"words", "tiny-llama-q8_0", 0, "gpt-2"},
	{"words", "tiny-llama-q8_0", 0, "default"},
	{"words", "tiny-llama-q8_0", 0, "smollm"},
	{"words", "tiny-llama-q8_0", 0, "tekken"},
	{"words", "tiny-llama-q8_0", 0, "gpt-4o"},
	{"words", "tiny-llama-q8_0", 0, "seed-coder"},
	{"words", "tiny-llama-q8_0", 0, "smaug-bpe"},
	{"words", "tiny-llama-q8_0", 0, "falcon"},
	{"words", "tiny-llama-q8_0", 0, "deepseek-llm"},
	{"words", "tiny-llama-q8_0", 0, "deepseek-coder"},
	{"words", "tiny-llama-q8_0", 0, "viking"},
	{"words", "tiny-llama-q8_0", 0, "poro-chat"},
	{"spm", "", 0, ""}, // testdata/spm.gguf
}

// spmFile is a SentencePiece vocabulary (Llama 2's tokenizer model) for llama.cpp: the tokenizer
// keys of the oracle's synthetic model "mkgguf.py llama --tokenizer spm --n-vocab 1200".
const spmFile = "testdata/spm.gguf"

// vocabOnly returns a GGUF file with only the tokenizer.* keys of f.
func vocabOnly(t testing.TB, f *gguf.File) []byte {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			w.Set(kv.Key, kv.Value)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// wordVocabFile returns the tokenizer keys of a byte-level vocabulary built to tell the
// pre-tokenizers apart: the 320-token Llama fixture vocabulary (bytes, merges, its BOS and
// EOS, moved to the end), and for every word any pre-tokenizer cuts the corpus into (up to 24
// characters), merges that build it from the left, one character at a time. A word is then
// mostly one token, so where the words were cut shows in the ids.
func wordVocabFile(t testing.TB) []byte {
	t.Helper()
	wordVocabOnce.Do(func() { wordVocab, wordVocabErr = buildWordVocab() })
	if wordVocabErr != nil {
		t.Fatal(wordVocabErr)
	}
	return wordVocab
}

var (
	wordVocabOnce sync.Once
	wordVocab     []byte
	wordVocabErr  error
)

func buildWordVocab() ([]byte, error) {
	base, err := fixtures.VocabFile("llama", 320)
	if err != nil {
		return nil, err
	}
	f, err := gguf.Parse(base)
	if err != nil {
		return nil, err
	}
	strs := func(key string) []string {
		v, _ := f.Lookup(key)
		s, _ := v.Any().([]string)
		return slices.Clone(s)
	}
	tokens, merges := strs("tokenizer.ggml.tokens"), strs("tokenizer.ggml.merges")
	specials := slices.Clone(tokens[len(tokens)-2:]) // BOS, EOS
	tokens = tokens[:len(tokens)-2]
	have := map[string]bool{}
	for _, tok := range append(slices.Clone(tokens), specials...) {
		have[tok] = true
	}
	names := slices.Sorted(maps.Keys(preTokenizers))
	for _, text := range corpus {
		for _, name := range names {
			b, err := newBPE(name, nil)
			if err != nil {
				return nil, err
			}
			for _, w := range b.split(decodeUTF8(text)) {
				syms := []string{}
				for _, r := range spellBytes(encodeUTF8(w)) {
					syms = append(syms, string(r))
				}
				left := syms[0]
				for _, next := range syms[1:min(len(syms), 24)] {
					if tok := left + next; !have[tok] {
						have[tok] = true
						tokens = append(tokens, tok)
						merges = append(merges, left+" "+next)
					}
					left += next
				}
			}
		}
	}
	types := make([]int32, len(tokens)+2)
	for i := range types {
		types[i] = 1 // normal
	}
	types[len(tokens)], types[len(tokens)+1] = 3, 3 // control
	w := gguf.NewWriterFrom(f)
	w.Set("tokenizer.ggml.tokens", gguf.ArrStrings(append(tokens, specials...)))
	w.Set("tokenizer.ggml.token_type", gguf.ArrInt32s(types))
	w.Set("tokenizer.ggml.merges", gguf.ArrStrings(merges))
	w.Set("tokenizer.ggml.bos_token_id", gguf.U32(uint32(len(tokens))))
	w.Set("tokenizer.ggml.eos_token_id", gguf.U32(uint32(len(tokens)+1)))
	w.Set("tokenizer.ggml.padding_token_id", gguf.U32(uint32(len(tokens)+1)))
	var out bytes.Buffer
	if _, err := w.WriteTo(&out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// withVocab returns GGUF file bytes of model (a llama) with the tokenizer of vocab: its
// tokenizer.* keys, and the vocabulary-sized tensors (token_embd, output) replaced by F32
// zeros of the new size — enough for llama.cpp to load the file and tokenize with it.
func withVocab(t testing.TB, model, vocab []byte) []byte {
	t.Helper()
	vf, err := gguf.Parse(vocab)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	return rewrite(t, model, func(w *gguf.Writer) {
		for _, kv := range slices.Clone(w.KVs()) {
			if strings.HasPrefix(kv.Key, "tokenizer.") || kv.Key == "llama.vocab_size" {
				w.Delete(kv.Key)
			}
		}
		for _, kv := range vf.KVs {
			if strings.HasPrefix(kv.Key, "tokenizer.") {
				w.Set(kv.Key, kv.Value)
			}
			if kv.Key == "tokenizer.ggml.tokens" {
				n = int64(kv.Value.Len())
			}
		}
	}, func(ti gguf.TensorInfo) []int64 {
		if ti.Name == "token_embd.weight" || ti.Name == "output.weight" {
			return []int64{ti.Dims[0], n}
		}
		return nil
	})
}

// withPre returns GGUF file bytes with tokenizer.ggml.pre replaced (tensors copied).
func withPre(t testing.TB, b []byte, pre string) []byte {
	t.Helper()
	return rewrite(t, b, func(w *gguf.Writer) { w.Set("tokenizer.ggml.pre", gguf.Str(pre)) }, nil)
}

// rewrite returns GGUF file bytes b with its keys changed by edit and its tensors copied,
// except those resize gives new dimensions (F32 zeros of that shape instead).
func rewrite(t testing.TB, b []byte, edit func(*gguf.Writer), resize func(gguf.TensorInfo) []int64) []byte {
	t.Helper()
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriterFrom(f)
	edit(w)
	for _, ti := range f.Tensors {
		typ, dims, data := ti.Type, ti.Dims, f.Data(ti)
		if resize != nil {
			if d := resize(ti); d != nil {
				typ, dims, data = dtype.F32, d, make([]byte, 4*d[0]*d[1])
			}
		}
		if err := w.AddTensor(ti.Name, typ, dims, data); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if _, err := w.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// expected is one record of testdata/llamacpp.json.
type expected struct {
	Arch         string  `json:"arch"`
	NVocab       int     `json:"n_vocab"`
	Pre          string  `json:"pre,omitempty"` // replaces the fixture's pre-tokenizer
	ParseSpecial bool    `json:"parse_special"`
	Text         string  `json:"text,omitempty"`
	TextBase64   string  `json:"text_base64,omitempty"` // for text that is not valid UTF-8
	IDs          []int32 `json:"ids"`
}

func (e expected) text() (string, error) {
	if e.TextBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(e.TextBase64)
		return string(b), err
	}
	return e.Text, nil
}

func record(arch string, n int, pre string, parseSpecial bool, text string, ids []int32) expected {
	e := expected{Arch: arch, NVocab: n, Pre: pre, ParseSpecial: parseSpecial, IDs: ids}
	if utf8.ValidString(text) {
		e.Text = text
	} else {
		e.TextBase64 = base64.StdEncoding.EncodeToString([]byte(text))
	}
	if e.IDs == nil {
		e.IDs = []int32{}
	}
	return e
}

var vocabCache sync.Map // "arch/n" → *Tokenizer

// fixtureTokenizer loads the vocabulary of a fixture of arch with n tokens, under pre-tokenizer
// pre if it is not "".
func fixtureTokenizer(t testing.TB, arch string, n int, pre ...string) *Tokenizer {
	t.Helper()
	key := fmt.Sprintf("%s/%d/%v", arch, n, pre)
	if tk, ok := vocabCache.Load(key); ok {
		return tk.(*Tokenizer)
	}
	var b []byte
	var err error
	switch arch {
	case "spm":
		b, err = os.ReadFile(spmFile)
	case "words":
		b = wordVocabFile(t)
	default:
		b, err = fixtures.VocabFile(arch, n)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(pre) > 0 && pre[0] != "" {
		b = withPre(t, b, pre[0])
	}
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	vocabCache.Store(key, tk)
	return tk
}

func readExpected(t *testing.T) []expected {
	b, err := os.ReadFile(expectedFile)
	if err != nil {
		t.Fatal(err)
	}
	var recs []expected
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestLlamaCpp: Encode gives llama.cpp's ids for every text, vocabulary and special-token mode.
func TestLlamaCpp(t *testing.T) {
	recs := readExpected(t)
	if want := len(corpus) * len(vocabularies) * 2; len(recs) != want {
		t.Fatalf("%s holds %d records, want %d (corpus × vocabularies × parse_special): regenerate it with VERITY_ORACLE and -update", expectedFile, len(recs), want)
	}
	for _, e := range recs {
		text, err := e.text()
		if err != nil {
			t.Fatal(err)
		}
		tk := fixtureTokenizer(t, e.Arch, e.NVocab, e.Pre)
		got := tk.Encode(text, Options{AddSpecial: true, ParseSpecial: e.ParseSpecial})
		if !slices.Equal(got, e.IDs) {
			t.Errorf("%s/%d%s parse_special=%v %q:\n got %v\nwant %v", e.Arch, e.NVocab, e.Pre, e.ParseSpecial, text, got, e.IDs)
		}
	}
}

// TestOracle tokenizes the corpus with llama.cpp itself (the oracle's llama_logits --tokenize on
// each fixture file) and compares with Encode and with testdata/llamacpp.json; -update rewrites
// the file. It runs only when VERITY_ORACLE names the oracle's directory (with llama_logits
// built) and generates the fixtures it lacks.
func TestOracle(t *testing.T) {
	dir := os.Getenv("VERITY_ORACLE")
	if dir == "" {
		t.Skip("VERITY_ORACLE is not set")
	}
	tmp := t.TempDir()
	var recs []expected
	for _, v := range vocabularies {
		var path string
		var err error
		if v.arch == "spm" {
			path = filepath.Join(tmp, "spm.gguf")
			cmd := exec.Command("python3", "mkgguf.py", "llama", "--tokenizer", "spm", "--n-vocab", "1200", "-o", path)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("mkgguf.py: %v\n%s", err, out)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			vocab := vocabOnly(t, f)
			f.Close()
			if *update {
				if err := os.WriteFile(spmFile, vocab, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if old, err := os.ReadFile(spmFile); err != nil || !bytes.Equal(old, vocab) {
				t.Fatalf("%s differs from the oracle's SentencePiece vocabulary (or is missing: %v): rerun with -update", spmFile, err)
			}
		} else if path, err = fixtures.Path(v.fixture); err != nil {
			t.Fatal(err)
		}
		if v.pre != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if f, err := gguf.Parse(b); err != nil {
				t.Fatal(err)
			} else if v.arch == "words" {
				b = withVocab(t, b, wordVocabFile(t))
			} else if kv, ok := f.Lookup("tokenizer.ggml.tokens"); ok && kv.Len() != v.n {
				vocab, err := fixtures.VocabFile(v.arch, v.n)
				if err != nil {
					t.Fatal(err)
				}
				b = withVocab(t, b, vocab)
			}
			path = filepath.Join(tmp, v.fixture+"-"+v.pre+".gguf")
			if err := os.WriteFile(path, withPre(t, b, v.pre), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tk := fixtureTokenizer(t, v.arch, v.n, v.pre)
		for _, parse := range []bool{false, true} {
			for i, text := range corpus {
				file := filepath.Join(tmp, strconv.Itoa(i)+".txt")
				if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				args := []string{"--tokenize", "--prompt-file", file}
				if parse {
					args = append(args, "--parse-special")
				}
				cmd := exec.Command(filepath.Join(dir, "llama_logits"), append(args, path)...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("llama_logits %v: %v\n%s", args, err, stderr.Bytes())
				}
				line, _, _ := strings.Cut(string(out), "\n")
				ids := []int32{}
				for _, f := range strings.Fields(line) {
					id, err := strconv.ParseInt(f, 10, 32)
					if err != nil {
						t.Fatalf("llama_logits output %q: %v", line, err)
					}
					ids = append(ids, int32(id))
				}
				got := tk.Encode(text, Options{AddSpecial: true, ParseSpecial: parse})
				if !slices.Equal(got, ids) {
					t.Errorf("%s %s %s parse_special=%v %q:\n      got %v\nllama.cpp %v", v.arch, v.fixture, v.pre, parse, text, got, ids)
				}
				recs = append(recs, record(v.arch, v.n, v.pre, parse, text, ids))
			}
		}
	}
	// One record per line.
	b := []byte("[\n")
	for i, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, line...)
		if i+1 < len(recs) {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	b = append(b, "]\n"...)
	if *update {
		if err := os.WriteFile(expectedFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old, err := os.ReadFile(expectedFile); err != nil || !bytes.Equal(old, b) {
		t.Errorf("%s differs from llama.cpp's output (or is missing: %v): rerun with -update", expectedFile, err)
	}
}
