package main

/*
#include <stdlib.h>

// --- verity.h ---
// libverity: Verity's C ABI. Build the library with
//     go build -buildmode=c-shared -o libverity.so ./tools/libverity
// (add -tags cuda for the cuda backend) and link with -lverity.
//
// The rules every function follows:
// - Models and sessions are integer handles (verity_model, verity_session); a handle that
//   is not open gets VERITY_ERR_HANDLE, never a crash. No pointer into the library's memory
//   is handed out but verity_last_error's and verity_status_name's strings: results are
//   copied into the caller's buffers, whose sizes the caller gives.
// - A function returns a verity_status and sets this thread's message (verity_last_error):
//   why it failed, "" when it succeeded. NULL pointers, bad sizes, bad handles and too-small
//   buffers are errors like any other.
// - Structs begin with their size (see below) and grow only at the end.
// - Any thread may call any function. A session runs one call at a time (a second one, from
//   another thread or from a callback, gets VERITY_ERR_BUSY); different sessions run on
//   different threads at once, their steps taking the model one at a time.
// - The model's logits are the same bits on every backend: a verified tree's node has the
//   logits decoding its path would give.
#include <stddef.h>
#include <stdint.h>

// The ABI version this header describes. verity_abi_version() returns the library's; a
// program should check that they are equal. A new version only adds functions, status codes
// and struct fields (at the ends of structs), so a library of a later version runs programs
// built for an earlier one.
#define VERITY_ABI_VERSION 1

// Every function that can fail returns a verity_status: VERITY_OK, or an error code whose
// message verity_last_error() gives on the same thread.
typedef int32_t verity_status;

#define VERITY_OK 0
// A NULL pointer where one is needed, or a value out of range (a token outside the
// vocabulary, a tree whose parents do not precede their children, a role the chat template
// refuses).
#define VERITY_ERR_ARGUMENT 1
// A struct's size field is smaller than the first version of the struct, or implausibly large.
#define VERITY_ERR_STRUCT_SIZE 2
// No open model or session has this handle (never opened, or closed).
#define VERITY_ERR_HANDLE 3
// An output buffer is too small; where the function has a count output, it holds the size
// needed. Nothing else has changed.
#define VERITY_ERR_BUFFER 4
// The session is running another call (on another thread, or the call whose callback this
// is), or the model to close has calls running.
#define VERITY_ERR_BUSY 5
// A file cannot be read, or is not a GGUF file.
#define VERITY_ERR_IO 6
// The GGUF file is not a model Verity runs (architecture, tensors, tokenizer), or an adapter
// does not fit it.
#define VERITY_ERR_MODEL 7
// An option this build or model does not support: a backend not built in, a cache type, a
// model without a usable chat template, a chat template that rewrites message contents.
#define VERITY_ERR_UNSUPPORTED 8
// The request needs more positions than the session's context holds.
#define VERITY_ERR_CONTEXT 9
// The model's K/V cache has no room left for this session (other sessions hold it).
#define VERITY_ERR_CAPACITY 10
// The call does not fit the session's state: a commit with no verified tree.
#define VERITY_ERR_STATE 11
// A failure inside the library; the message says where.
#define VERITY_ERR_INTERNAL 12

// Handles of open models and sessions: never 0, never reused after close.
typedef uint64_t verity_model;
typedef uint64_t verity_session;

// K/V cache element types (verity_open_options.cache_type_k and cache_type_v).
#define VERITY_CACHE_DEFAULT 0
#define VERITY_CACHE_F32 1
#define VERITY_CACHE_F16 2
#define VERITY_CACHE_BF16 3

// Structs begin with their size: set it to sizeof the struct (struct verity_open_options o =
// {.size = sizeof o};). Later ABI versions only add fields at the end; the library reads and writes
// only the fields the given size holds (an input struct's bytes past the fields it knows must
// be zero). Every other field's zero value is its default.

// How verity_open loads a model.
struct verity_open_options {
	size_t size;
	// Where the kernels run: "cpu" (NULL or "": the Go twins), "ptxvm" (the committed CUDA
	// kernels, interpreted), "cuda" or "cuda:N" (a GPU; a library built with -tags cuda), or
	// a comma-separated list of those, which splits the layers across them as a pipeline.
	const char *backend;
	int32_t threads;      // CPU threads (0: one per CPU)
	int32_t context;      // positions per session (0: the model's, at most 2048)
	int32_t sessions;     // full-length sessions the K/V cache holds at once (0: 1)
	int32_t max_rows;     // the step: the longest prefill chunk and largest tree (0: 64)
	int32_t cache_type_k; // VERITY_CACHE_*; DEFAULT: f16 when a stage is a GPU, else f32
	int32_t cache_type_v;
	// Nonzero: closed sessions' cache entries stay until their room is needed, and a new
	// session's first prompt that begins with the same tokens takes them.
	int32_t prefix_cache;
	int32_t megakernel; // nonzero: each step runs as one megakernel launch
	// LoRA adapters (GGUF files, as llama.cpp's convert_lora_to_gguf.py writes them) merged
	// into the weights at load; adapter_scales may be NULL (scale 1 each).
	const char *const *adapter_paths;
	const float *adapter_scales;
	size_t n_adapters;
	// The chat template verity_generate_chat uses instead of the model's: chatml,
	// chatml-think, llama3, or a Jinja template's text (NULL: the model's).
	const char *chat_template;
};

// What verity_model_info reports. Strings are NUL-terminated UTF-8, cut to fit.
struct verity_model_info {
	size_t size;
	char architecture[32];  // general.architecture: llama, qwen3, phi3, qwen35moe, …
	char name[128];         // general.name
	char chat_format[16];   // jinja, chatml, chatml-think, llama3; "" when the model has none
	char tokenizer[16];     // tokenizer.ggml.model: gpt2 (byte-level BPE), llama (SentencePiece)
	char pre_tokenizer[32]; // tokenizer.ggml.pre, or sentencepiece
	char backend[128];      // where it runs, e.g. "cpu (8 threads)"
	uint64_t parameters;    // weights in the file (elements of all its tensors)
	int32_t context;        // positions per session, as loaded
	int32_t train_context;  // the model's training context (n_ctx)
	int32_t vocab;          // logits per position: the output's rows
	int32_t tokenizer_vocab; // tokens the tokenizer knows (at most vocab)
	int32_t layers;
	int32_t embedding;      // n_embd
	int32_t experts;        // experts per MoE layer (0: dense)
	int32_t experts_used;   // experts per token
	int32_t max_rows;       // largest tree verify_tree takes, longest prefill chunk
	int32_t sessions;       // full-length sessions the cache holds at once
	int32_t bos;            // begin-of-sequence token, -1 for none
	int32_t eos;            // end-of-sequence token, -1 for none
	int32_t adapters;       // LoRA adapters merged into the weights
	int32_t threads;        // CPU threads of its backends (0 on GPUs only)
};

// verity_tokenize flags.
#define VERITY_TOKENIZE_ADD_SPECIAL 1   // BOS first (and EOS last) where the model adds them
#define VERITY_TOKENIZE_PARSE_SPECIAL 2 // special tokens written in the text are tokens

// verity_detokenize flags.
#define VERITY_DETOKENIZE_SPECIAL 1 // special tokens give their text (else nothing)

// The text callback of verity_generate_chat: len bytes of UTF-8 (never part of a character;
// also NUL-terminated), valid only during the call. Return 0 to go on, anything else to stop.
typedef int32_t (*verity_text_fn)(void *user, const char *text, size_t len);

// How verity_generate_chat samples and when it stops.
struct verity_generate_options {
	size_t size;
	int32_t max_tokens; // most tokens to generate (0: to the end of the context)
	int32_t top_k;      // sample among the k most likely tokens (0: all)
	double temperature; // 0: greedy (the largest logit); else the softmax at this temperature
	double top_p;       // sample within the smallest set of this probability (0 or 1: all)
	uint64_t seed;      // the sampler's seed: a token depends only on (seed, position, logits)
	// Stop strings (at most 16, each 1 … 256 bytes): the text ends before the first to occur.
	const char *const *stops;
	size_t n_stops;
	// Positions kept free for the answer when a long chat is fitted to the context
	// (0: max_tokens, or without it a quarter of the context).
	int32_t reserve;
};

// Why verity_generate_chat stopped.
#define VERITY_FINISH_STOP 1     // an end-of-generation token, or a stop string
#define VERITY_FINISH_LENGTH 2   // max_tokens, or the end of the context
#define VERITY_FINISH_CALLBACK 3 // the callback returned nonzero

// What verity_stats reports about a session: its last verity_generate_chat (or, for the
// rates, its last prefill or verify_tree), and its state now.
struct verity_stats {
	size_t size;
	double prefill_tokens_per_second; // positions computed per second (cached ones not counted)
	double decode_tokens_per_second;  // generated tokens per second after the first
	double prefill_seconds;
	double decode_seconds;
	int32_t prompt_tokens;      // the last chat's prompt
	int32_t cached_tokens;      // its positions kept from before (the session's, or the prefix cache's)
	int32_t generated_tokens;   // tokens generated, the one that ended generation included
	int32_t truncated_messages; // messages left out to fit the context (oldest turns first)
	int32_t finish;             // VERITY_FINISH_* of the last chat (0: none yet)
	int32_t positions;          // committed positions now
	int32_t context;            // the most positions the session may hold
	int32_t threads;            // CPU threads of the model's backends
};
// --- end of verity.h ---

void verity__set_error(const char *msg, size_t len);
const char *verity__error(void);
int32_t verity__call_text(verity_text_fn fn, void *user, const char *text, size_t len);
*/
import "C"

import (
	"runtime/debug"
	"unicode/utf8"
	"unsafe"

	"verity/host/serve"
	"verity/host/tokenizer"
)

// The C functions. Each checks its pointers and structs, calls its core function (core.go),
// copies the results into the caller's memory and sets this thread's error message. No Go
// pointer is handed to C: handles are integers, and results are copied into the caller's
// buffers (the callback's text into C memory freed after it returns).

// statusCodes maps the core's codes to the header's.
var statusCodes = [...]C.verity_status{
	codeOK: C.VERITY_OK, codeArgument: C.VERITY_ERR_ARGUMENT, codeStructSize: C.VERITY_ERR_STRUCT_SIZE,
	codeHandle: C.VERITY_ERR_HANDLE, codeBuffer: C.VERITY_ERR_BUFFER, codeBusy: C.VERITY_ERR_BUSY,
	codeIO: C.VERITY_ERR_IO, codeModel: C.VERITY_ERR_MODEL, codeUnsupported: C.VERITY_ERR_UNSUPPORTED,
	codeContext: C.VERITY_ERR_CONTEXT, codeCapacity: C.VERITY_ERR_CAPACITY, codeState: C.VERITY_ERR_STATE,
	codeInternal: C.VERITY_ERR_INTERNAL,
}

// statusNames are the codes' names, in C memory for the life of the process.
var statusNames = func() []*C.char {
	names := []string{"VERITY_OK", "VERITY_ERR_ARGUMENT", "VERITY_ERR_STRUCT_SIZE", "VERITY_ERR_HANDLE",
		"VERITY_ERR_BUFFER", "VERITY_ERR_BUSY", "VERITY_ERR_IO", "VERITY_ERR_MODEL", "VERITY_ERR_UNSUPPORTED",
		"VERITY_ERR_CONTEXT", "VERITY_ERR_CAPACITY", "VERITY_ERR_STATE", "VERITY_ERR_INTERNAL"}
	out := make([]*C.char, len(names))
	for i, n := range names {
		out[i] = C.CString(n)
	}
	return out
}()

// maxMessage bounds an error message (the thread's buffer in lib.c holds 4096 bytes).
const maxMessage = 4000

// status records err as this thread's message ("" for none) and returns its code.
func status(err error) C.verity_status {
	msg := ""
	if err != nil {
		msg = err.Error()
		if len(msg) > maxMessage {
			cut := maxMessage
			for cut > 0 && !utf8.RuneStart(msg[cut]) {
				cut--
			}
			msg = msg[:cut] + "…"
		}
	}
	cs := C.CString(msg)
	C.verity__set_error(cs, C.size_t(len(msg)))
	C.free(unsafe.Pointer(cs))
	return statusCodes[codeOf(err)]
}

// guard turns a panic into VERITY_ERR_INTERNAL (deferred by every function).
func guard(st *C.verity_status) {
	if r := recover(); r != nil {
		*st = status(fail(codeInternal, "internal error: %v\n%s", r, debug.Stack()))
	}
}

// Limits on counts the caller gives: far past any real request, they catch a negative
// number passed as a size_t.
const (
	maxCount    = 1 << 28 // tokens, bytes of text
	maxMessages = 1 << 20
	maxStruct   = 1 << 16 // bytes of a struct
)

// checkSize checks a struct's size field against ours (the current version's, which is the
// first version's too in ABI 1). An input struct's bytes past ours must be zero: fields of a
// later version that this library would ignore.
func checkSize(what string, p unsafe.Pointer, size C.size_t, ours uintptr, input bool) error {
	switch {
	case uintptr(size) < ours:
		return fail(codeStructSize, "%s.size is %d: want sizeof(%s), %d in ABI %d", what, size, what, ours, C.VERITY_ABI_VERSION)
	case size > maxStruct:
		return fail(codeStructSize, "%s.size is %d: not a struct's size (uninitialised?)", what, size)
	}
	if input {
		for i, b := range unsafe.Slice((*byte)(p), uintptr(size))[ours:] {
			if b != 0 {
				return fail(codeUnsupported, "%s: byte %d is set, past the %d bytes of the fields this library (ABI %d) knows", what, int(ours)+i, ours, C.VERITY_ABI_VERSION)
			}
		}
	}
	return nil
}

// writeOut copies the struct at ours (of n bytes) to the caller's out, whose size field says
// how many bytes it holds: our fields that fit, zeros past them; the size field is kept.
func writeOut(out unsafe.Pointer, ours unsafe.Pointer, n uintptr) {
	size := uintptr(*(*C.size_t)(out))
	dst := unsafe.Slice((*byte)(out), size)
	src := unsafe.Slice((*byte)(ours), n)
	hdr := unsafe.Sizeof(C.size_t(0))
	copy(dst[hdr:], src[hdr:])
	clear(dst[min(n, size):])
}

// setString writes s into a char array of the caller's struct, cut at a character boundary
// to leave room for the NUL.
func setString(dst []C.char, s string) {
	if len(s) > len(dst)-1 {
		cut := len(dst) - 1
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	for i := range len(s) {
		dst[i] = C.char(s[i])
	}
	dst[len(s)] = 0
}

// goStrings reads n C strings; what names them in errors.
func goStrings(p **C.char, n C.size_t, what string) ([]string, error) {
	if n == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, fail(codeArgument, "%s is NULL with a count of %d", what, n)
	}
	out := make([]string, n)
	for i, s := range unsafe.Slice(p, n) {
		if s == nil {
			return nil, fail(codeArgument, "%s[%d] is NULL", what, i)
		}
		out[i] = C.GoString(s)
	}
	return out, nil
}

// int32s copies n int32s from the caller.
func int32s(p *C.int32_t, n C.size_t, what string) ([]int32, error) {
	switch {
	case n > maxCount:
		return nil, fail(codeArgument, "%s: a count of %d", what, uint64(n))
	case n == 0:
		return nil, nil
	case p == nil:
		return nil, fail(codeArgument, "%s is NULL with a count of %d", what, n)
	}
	return append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(p)), n)...), nil
}

// roomOf is an optional output buffer's room: -1 when there is no buffer.
func roomOf(p unsafe.Pointer, n C.size_t) int {
	if p == nil {
		return -1
	}
	return int(min(n, maxCount))
}

// verity_abi_version returns the library's ABI version (VERITY_ABI_VERSION of the header it
// was built with).
//
//export verity_abi_version
func verity_abi_version() C.uint32_t { return C.VERITY_ABI_VERSION }

// verity_last_error returns the message of this thread's last call that returned a
// verity_status: why it failed, "" if it succeeded. The text stays valid until this thread's
// next such call.
//
//export verity_last_error
func verity_last_error() *C.char { return (*C.char)(unsafe.Pointer(C.verity__error())) }

// verity_status_name returns a status code's name ("VERITY_ERR_BUFFER"), or NULL for a
// number that is not one.
//
//export verity_status_name
func verity_status_name(code C.verity_status) *C.char {
	for i, c := range statusCodes {
		if c == code {
			return statusNames[i]
		}
	}
	return nil
}

// verity_open loads the GGUF model at path (options may be NULL: every default) and sets
// *out_model to its handle (0 on failure).
//
//export verity_open
func verity_open(path *C.char, options *C.struct_verity_open_options, out_model *C.verity_model) (st C.verity_status) {
	defer guard(&st)
	if out_model == nil {
		return status(fail(codeArgument, "out_model is NULL"))
	}
	*out_model = 0
	if path == nil {
		return status(fail(codeArgument, "path is NULL"))
	}
	var o openOptions
	if p := options; p != nil {
		if err := checkSize("verity_open_options", unsafe.Pointer(p), p.size, unsafe.Sizeof(*p), true); err != nil {
			return status(err)
		}
		if p.backend != nil {
			o.backend = C.GoString(p.backend)
		}
		o.threads, o.context, o.sessions, o.maxRows = int(p.threads), int(p.context), int(p.sessions), int(p.max_rows)
		o.cacheK, o.cacheV = int(p.cache_type_k), int(p.cache_type_v)
		o.prefixCache, o.megakernel = p.prefix_cache != 0, p.megakernel != 0
		if p.n_adapters > 64 {
			return status(fail(codeArgument, "n_adapters %d: at most 64", uint64(p.n_adapters)))
		}
		paths, err := goStrings(p.adapter_paths, p.n_adapters, "adapter_paths")
		if err != nil {
			return status(err)
		}
		o.adapterPaths = paths
		for i := range paths {
			scale := 1.0
			if p.adapter_scales != nil {
				scale = float64(unsafe.Slice(p.adapter_scales, p.n_adapters)[i])
			}
			o.adapterScales = append(o.adapterScales, scale)
		}
		if p.chat_template != nil {
			o.chatTemplate, o.haveChatTemplate = C.GoString(p.chat_template), true
		}
	}
	id, err := openModel(C.GoString(path), o)
	if err == nil {
		*out_model = C.verity_model(id)
	}
	return status(err)
}

// verity_model_close closes a model and every session of it (VERITY_ERR_BUSY while calls
// on them run).
//
//export verity_model_close
func verity_model_close(model C.verity_model) (st C.verity_status) {
	defer guard(&st)
	return status(closeModel(uint64(model)))
}

// verity_model_info describes a model; set out_info->size first.
//
//export verity_model_info
func verity_model_info(model C.verity_model, out_info *C.struct_verity_model_info) (st C.verity_status) {
	defer guard(&st)
	if out_info == nil {
		return status(fail(codeArgument, "out_info is NULL"))
	}
	if err := checkSize("verity_model_info", unsafe.Pointer(out_info), out_info.size, unsafe.Sizeof(*out_info), false); err != nil {
		return status(err)
	}
	mi, err := modelInfoOf(uint64(model))
	if err != nil {
		return status(err)
	}
	var info C.struct_verity_model_info
	setString(info.architecture[:], mi.architecture)
	setString(info.name[:], mi.name)
	setString(info.chat_format[:], mi.chatFormat)
	setString(info.tokenizer[:], mi.tokenizer)
	setString(info.pre_tokenizer[:], mi.preTokenizer)
	setString(info.backend[:], mi.backend)
	info.parameters = C.uint64_t(mi.parameters)
	info.context, info.train_context = C.int32_t(mi.context), C.int32_t(mi.trainContext)
	info.vocab, info.tokenizer_vocab = C.int32_t(mi.vocab), C.int32_t(mi.tokenizerVocab)
	info.layers, info.embedding = C.int32_t(mi.layers), C.int32_t(mi.embedding)
	info.experts, info.experts_used = C.int32_t(mi.experts), C.int32_t(mi.expertsUsed)
	info.max_rows, info.sessions = C.int32_t(mi.maxRows), C.int32_t(mi.sessions)
	info.bos, info.eos = C.int32_t(mi.bos), C.int32_t(mi.eos)
	info.adapters, info.threads = C.int32_t(mi.adapters), C.int32_t(mi.threads)
	writeOut(unsafe.Pointer(out_info), unsafe.Pointer(&info), unsafe.Sizeof(info))
	return status(nil)
}

// verity_tokenize writes the tokens of text_len bytes of text (VERITY_TOKENIZE_* flags) into
// out_tokens, which holds capacity of them, and their count into *out_count. With too little
// room (out_tokens may be NULL to ask) it writes only the count and returns VERITY_ERR_BUFFER.
//
//export verity_tokenize
func verity_tokenize(model C.verity_model, text *C.char, text_len C.size_t, flags C.uint32_t, out_tokens *C.int32_t, capacity C.size_t, out_count *C.size_t) (st C.verity_status) {
	defer guard(&st)
	switch {
	case out_count == nil:
		return status(fail(codeArgument, "out_count is NULL"))
	case text == nil && text_len > 0:
		return status(fail(codeArgument, "text is NULL with a length of %d", text_len))
	case text_len > maxCount:
		return status(fail(codeArgument, "text_len %d", uint64(text_len)))
	case flags&^(C.VERITY_TOKENIZE_ADD_SPECIAL|C.VERITY_TOKENIZE_PARSE_SPECIAL) != 0:
		return status(fail(codeArgument, "flags %#x: want VERITY_TOKENIZE_* bits", uint32(flags)))
	}
	*out_count = 0
	s := ""
	if text_len > 0 {
		s = C.GoStringN(text, C.int(text_len))
	}
	toks, err := tokenize(uint64(model), s, flags&C.VERITY_TOKENIZE_ADD_SPECIAL != 0, flags&C.VERITY_TOKENIZE_PARSE_SPECIAL != 0)
	if err != nil {
		return status(err)
	}
	*out_count = C.size_t(len(toks))
	if out_tokens == nil || capacity < C.size_t(len(toks)) {
		return status(fail(codeBuffer, "%d tokens, room for %d", len(toks), uint64(capacity)))
	}
	copy(unsafe.Slice((*int32)(unsafe.Pointer(out_tokens)), len(toks)), toks)
	return status(nil)
}

// verity_detokenize writes the text of count tokens (VERITY_DETOKENIZE_* flags) into
// out_text, which holds capacity bytes, NUL-terminated, and its length (without the NUL) into
// *out_len. With too little room (out_text may be NULL to ask) it writes only the length and
// returns VERITY_ERR_BUFFER. The text is the tokens' bytes: a token may end inside a
// character.
//
//export verity_detokenize
func verity_detokenize(model C.verity_model, tokens *C.int32_t, count C.size_t, flags C.uint32_t, out_text *C.char, capacity C.size_t, out_len *C.size_t) (st C.verity_status) {
	defer guard(&st)
	if out_len == nil {
		return status(fail(codeArgument, "out_len is NULL"))
	}
	*out_len = 0
	if flags&^C.VERITY_DETOKENIZE_SPECIAL != 0 {
		return status(fail(codeArgument, "flags %#x: want VERITY_DETOKENIZE_* bits", uint32(flags)))
	}
	toks, err := int32s(tokens, count, "tokens")
	if err != nil {
		return status(err)
	}
	text, err := detokenize(uint64(model), toks, flags&C.VERITY_DETOKENIZE_SPECIAL != 0)
	if err != nil {
		return status(err)
	}
	*out_len = C.size_t(len(text))
	if out_text == nil || capacity < C.size_t(len(text))+1 {
		return status(fail(codeBuffer, "%d bytes and the NUL, room for %d", len(text), uint64(capacity)))
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(out_text)), len(text)+1)
	copy(dst, text)
	dst[len(text)] = 0
	return status(nil)
}

// verity_session_open starts an empty session of a model and sets *out_session to its
// handle (0 on failure). Sessions of one model share its K/V cache; each runs one call at a
// time, and different sessions may run on different threads at once.
//
//export verity_session_open
func verity_session_open(model C.verity_model, out_session *C.verity_session) (st C.verity_status) {
	defer guard(&st)
	if out_session == nil {
		return status(fail(codeArgument, "out_session is NULL"))
	}
	*out_session = 0
	id, err := openSession(uint64(model))
	if err == nil {
		*out_session = C.verity_session(id)
	}
	return status(err)
}

// verity_session_close ends a session and frees its cache positions.
//
//export verity_session_close
func verity_session_close(session C.verity_session) (st C.verity_status) {
	defer guard(&st)
	return status(closeSession(uint64(session)))
}

// verity_session_tokens writes the session's committed tokens into out_tokens (room for
// capacity) and their count into *out_count; with too little room (out_tokens may be NULL to
// ask), only the count and VERITY_ERR_BUFFER.
//
//export verity_session_tokens
func verity_session_tokens(session C.verity_session, out_tokens *C.int32_t, capacity C.size_t, out_count *C.size_t) (st C.verity_status) {
	defer guard(&st)
	if out_count == nil {
		return status(fail(codeArgument, "out_count is NULL"))
	}
	*out_count = 0
	toks, err := sessionTokens(uint64(session))
	if err != nil {
		return status(err)
	}
	*out_count = C.size_t(len(toks))
	if out_tokens == nil || capacity < C.size_t(len(toks)) {
		return status(fail(codeBuffer, "%d tokens, room for %d", len(toks), uint64(capacity)))
	}
	copy(unsafe.Slice((*int32)(unsafe.Pointer(out_tokens)), len(toks)), toks)
	return status(nil)
}

// verity_prefill appends count tokens to the session and, when out_logits is not NULL,
// writes the last one's logits (verity_model_info.vocab floats; capacity is its room in
// floats, checked before anything runs). It drops a verified tree.
//
//export verity_prefill
func verity_prefill(session C.verity_session, tokens *C.int32_t, count C.size_t, out_logits *C.float, capacity C.size_t) (st C.verity_status) {
	defer guard(&st)
	toks, err := int32s(tokens, count, "tokens")
	if err != nil {
		return status(err)
	}
	l, err := prefill(uint64(session), toks, out_logits != nil, roomOf(unsafe.Pointer(out_logits), capacity))
	if err != nil {
		return status(err)
	}
	if out_logits != nil {
		copy(unsafe.Slice((*float32)(unsafe.Pointer(out_logits)), len(l)), l)
	}
	return status(nil)
}

// verity_verify_tree runs a draft tree of count nodes after the session's tokens in one step:
// node i has token tokens[i] and parent parents[i] (node 0 is the root, parent -1, and
// continues the session; every other node's parent is an earlier node). Node i's logits are
// bit-identical to decoding the path root…i one token at a time. Where the pointers are not
// NULL it writes every node's logits, node after node (count × verity_model_info.vocab
// floats; logits_capacity is the room in floats) and each node's argmax (the largest logit,
// the lowest index on ties; argmax_capacity entries). Capacities are checked before anything
// runs. The session's tokens are unchanged: verity_commit takes a path of the tree, and any
// other call on the session drops it.
//
//export verity_verify_tree
func verity_verify_tree(session C.verity_session, tokens *C.int32_t, parents *C.int32_t, count C.size_t, out_logits *C.float, logits_capacity C.size_t, out_argmax *C.int32_t, argmax_capacity C.size_t) (st C.verity_status) {
	defer guard(&st)
	toks, err := int32s(tokens, count, "tokens")
	if err != nil {
		return status(err)
	}
	par, err := int32s(parents, count, "parents")
	if err != nil {
		return status(err)
	}
	logits, argmax, err := verifyTree(uint64(session), toks, par, roomOf(unsafe.Pointer(out_logits), logits_capacity), roomOf(unsafe.Pointer(out_argmax), argmax_capacity))
	if err != nil {
		return status(err)
	}
	if out_logits != nil {
		nv := len(logits[0])
		dst := unsafe.Slice((*float32)(unsafe.Pointer(out_logits)), len(logits)*nv)
		for i, l := range logits {
			copy(dst[i*nv:], l)
		}
	}
	if out_argmax != nil {
		copy(unsafe.Slice((*int32)(unsafe.Pointer(out_argmax)), len(argmax)), argmax)
	}
	return status(nil)
}

// verity_commit accepts a root-to-node path of the last verified tree (count node indices:
// path[0] = 0, each next a child of the one before): its tokens join the session, the other
// nodes are dropped; count 0 drops the whole tree. A path that is not one of the tree's is
// refused and the tree kept.
//
//export verity_commit
func verity_commit(session C.verity_session, path *C.int32_t, count C.size_t) (st C.verity_status) {
	defer guard(&st)
	p, err := int32s(path, count, "path")
	if err != nil {
		return status(err)
	}
	return status(commit(uint64(session), p))
}

// verity_rollback keeps the session's first positions tokens (at most its length) and drops
// a verified tree; the state is exactly the one it had at that length.
//
//export verity_rollback
func verity_rollback(session C.verity_session, positions C.size_t) (st C.verity_status) {
	defer guard(&st)
	if positions > maxCount {
		return status(fail(codeArgument, "positions %d", uint64(positions)))
	}
	return status(rollback(uint64(session), int(positions)))
}

// verity_generate_chat writes a chat of count messages (roles[i]: system, user, assistant …;
// contents[i]) in the model's chat template, with the assistant's turn opened, and generates
// the answer in the session, calling callback (which may be NULL) with its text as it comes.
// The template's own text is tokenized with special tokens recognised and each content
// without, so a content that spells a control token (<|im_end|>, <|eot_id|>) cannot end its
// turn or start another; BOS comes once, first, where the model adds it. The session's tokens
// that begin the prompt are kept and only the rest computed, so a conversation continued in
// the same session computes only its new turns. A chat longer than the context less the
// answer's reserve loses its oldest turns after the leading system messages. options may be
// NULL (greedy, to the end of the context). The text stops before a stop string and at an
// end-of-generation token (neither is given to the callback); it comes in whole UTF-8
// characters (bytes that can form none become U+FFFD). *out_finish (if not NULL) says why it
// stopped: VERITY_FINISH_*.
//
//export verity_generate_chat
func verity_generate_chat(session C.verity_session, roles **C.char, contents **C.char, count C.size_t, options *C.struct_verity_generate_options, callback C.verity_text_fn, user unsafe.Pointer, out_finish *C.int32_t) (st C.verity_status) {
	defer guard(&st)
	if out_finish != nil {
		*out_finish = 0
	}
	if count == 0 {
		return status(fail(codeArgument, "no messages"))
	}
	if count > maxMessages {
		return status(fail(codeArgument, "a count of %d messages", uint64(count)))
	}
	rs, err := goStrings(roles, count, "roles")
	if err != nil {
		return status(err)
	}
	cs, err := goStrings(contents, count, "contents")
	if err != nil {
		return status(err)
	}
	msgs := make([]tokenizer.Message, count)
	for i := range msgs {
		msgs[i] = tokenizer.Message{Role: rs[i], Content: cs[i]}
	}
	var o genOptions
	if p := options; p != nil {
		if err := checkSize("verity_generate_options", unsafe.Pointer(p), p.size, unsafe.Sizeof(*p), true); err != nil {
			return status(err)
		}
		o.maxTokens, o.reserve = int(p.max_tokens), int(p.reserve)
		o.smp = serve.Sampler{Temperature: float64(p.temperature), TopK: int(p.top_k), TopP: float64(p.top_p), Seed: uint64(p.seed)}
		if p.n_stops > serve.MaxStops {
			return status(fail(codeArgument, "%d stop strings, at most %d", uint64(p.n_stops), serve.MaxStops))
		}
		if o.stops, err = goStrings(p.stops, p.n_stops, "stops"); err != nil {
			return status(err)
		}
	}
	emit := func(text string) bool {
		if callback == nil {
			return false
		}
		t := C.CString(text) // (a copy in C memory, NUL-terminated)
		defer C.free(unsafe.Pointer(t))
		return C.verity__call_text(callback, user, t, C.size_t(len(text))) != 0
	}
	finish, err := generateChat(uint64(session), msgs, o, emit)
	if err == nil && out_finish != nil {
		*out_finish = C.int32_t(finish)
	}
	return status(err)
}

// verity_stats describes a session; set out_stats->size first. It may be called from a
// generation's callback.
//
//export verity_stats
func verity_stats(session C.verity_session, out_stats *C.struct_verity_stats) (st C.verity_status) {
	defer guard(&st)
	if out_stats == nil {
		return status(fail(codeArgument, "out_stats is NULL"))
	}
	if err := checkSize("verity_stats", unsafe.Pointer(out_stats), out_stats.size, unsafe.Sizeof(*out_stats), false); err != nil {
		return status(err)
	}
	s, positions, ctx, threads, err := statsOf(uint64(session))
	if err != nil {
		return status(err)
	}
	rate := func(n int, sec float64) C.double {
		if n <= 0 || sec <= 0 {
			return 0
		}
		return C.double(float64(n) / sec)
	}
	var out C.struct_verity_stats
	out.prefill_tokens_per_second = rate(s.prefillTokens, s.prefillSeconds)
	out.decode_tokens_per_second = rate(s.decodeTokens, s.decodeSeconds)
	out.prefill_seconds, out.decode_seconds = C.double(s.prefillSeconds), C.double(s.decodeSeconds)
	out.prompt_tokens, out.cached_tokens = C.int32_t(s.promptTokens), C.int32_t(s.cachedTokens)
	out.generated_tokens, out.truncated_messages = C.int32_t(s.generatedTokens), C.int32_t(s.truncatedMessage)
	out.finish, out.positions = C.int32_t(s.finish), C.int32_t(positions)
	out.context, out.threads = C.int32_t(ctx), C.int32_t(threads)
	writeOut(unsafe.Pointer(out_stats), unsafe.Pointer(&out), unsafe.Sizeof(out))
	return status(nil)
}
