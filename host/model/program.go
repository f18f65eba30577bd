package model

import (
	"fmt"
	"sort"
	"strings"

	"verity/device/dtype"
	"verity/device/kernels"
	"verity/host/gguf"
)

// Buf identifies a buffer of a Program.
type Buf int

// noBuf stands for an absent optional input (MoE without a shared expert).
const noBuf Buf = -1

// BufKind says what a buffer's rows hold.
type BufKind uint8

const (
	F32Buf BufKind = iota // float32 values
	I32Buf                // int32 values
	ActBuf                // activations converted to a matvec input format (Act)
)

// BufSpec describes a buffer: Width values per row (for ActBuf: the float32 width converted).
type BufSpec struct {
	Name  string
	Kind  BufKind
	Width int
	Act   kernels.Act // for ActBuf
	// Rows says how many rows the buffer has in a step: "step" (one per row of the step),
	// "out" (one per wanted logits row), "keys" (one per key of the step's key lists),
	// "keyoff" (rows+1).
	Rows string
}

// RowBytes is the size of one row of the buffer.
func (b BufSpec) RowBytes() int {
	if b.Kind == ActBuf {
		return b.Act.RowBytes(b.Width)
	}
	return 4 * b.Width
}

// OpKind names an operation.
type OpKind uint8

const (
	OpEmbed     OpKind = iota // Out = Weight[tokens]
	OpRMSNorm                 // Out = rmsnorm(In[0]) · Weight, Groups groups of Width per row (an ActBuf Out: converted, one group per row)
	OpConvert                 // Out (ActBuf) = In[0] converted to Out's Act format
	OpMatVec                  // Out = Weight · In[0] (In[0] an F32Buf for F32 weights, else an ActBuf); with Acc, Out += Weight · In[0]
	OpRope                    // In[0] rotated in place; In[1] is the rope table buffer
	OpKVStore                 // cache[Layer][slots] = (In[0], In[1]); with In[2] a RoPE table, In[0] rotated first (Heads, HeadDim, NRot, RopeMode)
	OpAttention               // Out = attention(In[0]) over the Layer's cache (an ActBuf Out: converted, f16 or bf16)
	OpAdd                     // Out = In[0] + In[1]
	OpSwiGLU                  // Out = silu(In[0]) · In[1] (an ActBuf Out: converted, rows of Width)
	OpGather                  // Out = the rows of In[0] listed in the out.rows input

	// Hybrid recurrent / MoE architectures.
	OpSplitGate  // In[0] per head [q | gate] → Out (q), Out2 (gate)
	OpSigmoidMul // Out = In[0] ⊙ sigmoid(In[1]) (an ActBuf Out: converted, rows of Width)
	OpGDNConv    // Out = silu(causal conv of In[0]) with the Layer's conv state (Weight: taps)
	OpGDNScan    // Out = gated delta rule over In[0] (q|k|v), In[1] (β input), In[2] (α input); Weight ssm_a, Weight2 dt bias
	OpGatedNorm  // Out = rmsnorm(In[0])·Weight ⊙ silu(In[1]) per head
	OpRouter     // In[0] router logits → Out (expert ids), Out2 (weights)
	OpMoEMatVec  // Out[slot] = Weight[ids[slot]] · In[0] (In[1]: ids); per token or per slot input
	OpMoEGateUp  // Out[slot] = silu(Weight[ids[slot]] · In[0]) ⊙ (Weight2[ids[slot]] · In[0]) (In[1]: ids)
	OpMoEDown    // Out = Σ_k In[2][k]·(Weight[ids[slot k]] · In[0][slot k]) [+ sigmoid(In[4])·In[3], a shared expert] (In[1]: ids)

	OpBias // Out = In[0] + Weight (a bias vector, added to every row of Width values)

	// Gemma.
	OpGeGLU   // Out = gelu(In[0]) · In[1] (an ActBuf Out: converted, rows of Width)
	OpScale   // Out = In[0] · Scale
	OpSoftCap // Out = SoftCap · tanh(In[0] / SoftCap)
)

var opNames = [...]string{"embed", "rmsnorm", "convert", "matvec", "rope", "kv_store", "attention", "add", "swiglu", "gather",
	"split_gate", "sigmoid_mul", "gdn_conv", "gdn_scan", "gated_norm", "router", "moe_matvec", "moe_gate_up",
	"moe_down", "bias", "geglu", "scale", "softcap"}

func (k OpKind) String() string { return opNames[k] }

// Op is one operation of a Program.
type Op struct {
	Kind   OpKind
	Name   string // the output's name, e.g. "blk.3.attn_q"; unique within the program
	In     []Buf
	Out    Buf
	Out2   Buf    // second output (split_gate, router)
	Weight string // tensor name (embed, rmsnorm, matvec, …)
	// Weight2 is a second tensor (gdn_scan: dt bias; moe_gate_up: the up experts).
	Weight2 string
	Layer   int // cache layer (kv_store, attention) or recurrent-state layer (gdn_*); -1 otherwise

	// Shape parameters, by kind.
	Rows, Cols     int     // matvec: Rows outputs of Cols inputs; embed: Cols values per row
	Groups, Width  int     // rmsnorm: Groups groups of Width values per row
	Eps            float32 // rmsnorm, gated_norm, gdn_scan (L2 norm)
	Heads, HeadDim int     // rope, attention (query heads)
	KVHeads        int     // attention
	NRot           int     // rope
	RopeMode       int32   // rope
	Scale          float32 // attention, scale
	// Window (attention) is the number of keys of a sliding-window layer: each row attends to
	// the last Window keys of its list (0: all of them).
	Window int
	// SoftCap (attention: its scores; softcap: its values) caps values at ±SoftCap as
	// SoftCap·tanh(x/SoftCap); 0 for none.
	SoftCap       float32
	Experts, Used int  // router, moe_matvec: experts and experts per token
	PerSlot       bool // moe_matvec: one input row per (token, expert) slot, else per token
	// Acc makes a matvec add its products to Out (Out += W·In[0]: a residual add fused into
	// it, see fuseResiduals) instead of storing them.
	Acc bool
	GDN GDNShape

	// Cost model: bytes of weights read once per step, bytes and flops per row, and (for
	// attention) bytes and flops per key of each row.
	WeightBytes int64
	BytesPerRow int64
	FlopsPerRow int64
	BytesPerKey int64
	FlopsPerKey int64
}

// KeysRead returns how many of a row's n keys the op reads: n, or for a sliding-window
// attention at most its window.
func (op *Op) KeysRead(n int) int {
	if op.Kind == OpAttention && op.Window > 0 {
		return min(n, op.Window)
	}
	return n
}

// Tensor is a weight bound from the GGUF file.
type Tensor struct {
	Name string
	Type dtype.Type
	Dims []int64
	Data []byte
}

// RopeTable describes one table of (cos, sin) pairs per row.
type RopeTable struct {
	Buf   Buf
	NRot  int
	Base  float64
	Scale float64   // positions are divided by Scale (linear scaling)
	Freqs []float32 // optional per-pair frequency divisors (rope_freqs.weight), len NRot/2
	Attn  float64   // multiplies cos and sin (rope.scaling.attn_factor); 0 means 1
	// Sections, when not all zero, are multi-section (IMROPE) sizes: pair i takes position
	// component t, h, w or e by llama.cpp's interleaved rule; for text t = h = w = pos and
	// e = 0, so only pairs falling in the 4th section differ (they do not rotate).
	Sections [4]int
}

// Program is a model compiled into ops over buffers.
type Program struct {
	Config  Config
	Buffers []BufSpec
	Ops     []Op
	Tensors map[string]*Tensor

	// Step inputs and the output.
	Tokens, Slots, Keys, KeyOff, OutRows Buf
	Ropes                                []RopeTable
	Logits                               Buf // float32 [out rows][NVocab]
	// Caches: one K/V cache per attention layer: KVDim elements per slot, of type CacheK
	// (keys) and CacheV (values) — F32, F16 or BF16 (kernels.CacheTypes; F32 as built, see
	// SetCacheTypes).
	CacheLayers    int
	KVDim          int
	CacheK, CacheV dtype.Type
	// Recurrent state: one conv and one SSM state per GDN layer per state slot, and the step
	// inputs naming each row's source and destination state slot.
	StateLayers        int
	GDN                GDNShape
	StateSrc, StateDst Buf
	// MoE: experts per token (rows of "moe" buffers are step rows × Used).
	Used int
}

// GDNShape is the geometry of a Gated DeltaNet layer.
type GDNShape struct {
	C, K     int // conv channels (2·NK·D + NV·D) and kernel size
	NK, NV   int // key/query heads and value heads
	D        int // head size (key and value)
	Inner    int // NV·D
	ConvSize int // floats of conv state per slot: (K−1)·C
	SSMSize  int // floats of SSM state per slot: NV·D·D
}

// StateBytes is the recurrent state of one sequence (or one tree node) in bytes.
func (p *Program) StateBytes() int64 {
	return int64(p.StateLayers) * 4 * int64(p.GDN.ConvSize+p.GDN.SSMSize)
}

// WeightBytes is the total size of the weights the program reads.
func (p *Program) WeightBytes() int64 {
	var n int64
	for _, t := range p.Tensors {
		n += int64(len(t.Data))
	}
	return n
}

// builder accumulates a Program.
type builder struct {
	p     *Program
	f     *gguf.File
	names map[string]Buf
	used  map[string]bool
	conv  map[convKey]Buf // live conversions of a buffer to an activation format
	layer int
}

type convKey struct {
	src Buf
	act kernels.Act
}

func newBuilder(f *gguf.File, c Config) *builder {
	b := &builder{
		p:     &Program{Config: c, Tensors: map[string]*Tensor{}},
		f:     f,
		names: map[string]Buf{},
		used:  map[string]bool{},
		conv:  map[convKey]Buf{},
	}
	b.p.Tokens = b.buf("tokens", I32Buf, 1, "step")
	b.p.Slots = b.buf("kv.slots", I32Buf, 1, "step")
	b.p.Keys = b.buf("kv.keys", I32Buf, 1, "keys")
	b.p.KeyOff = b.buf("kv.keyoff", I32Buf, 1, "keyoff")
	b.p.OutRows = b.buf("out.rows", I32Buf, 1, "out")
	return b
}

// buf returns the buffer called name, creating it.
func (b *builder) buf(name string, kind BufKind, width int, rows string) Buf {
	if id, ok := b.names[name]; ok {
		return id
	}
	id := Buf(len(b.p.Buffers))
	b.p.Buffers = append(b.p.Buffers, BufSpec{Name: name, Kind: kind, Width: width, Rows: rows})
	b.names[name] = id
	return id
}

func (b *builder) f32(name string, width int) Buf { return b.buf(name, F32Buf, width, "step") }

// emit appends an op and invalidates conversions of its output.
func (b *builder) emit(op Op) Buf {
	for k := range b.conv {
		if k.src == op.Out {
			delete(b.conv, k)
		}
	}
	switch op.Kind {
	case OpKVStore, OpAttention, OpGDNConv, OpGDNScan:
	default:
		op.Layer = -1
	}
	b.p.Ops = append(b.p.Ops, op)
	return op.Out
}

// tensor binds a weight, checking its dims (fastest first) and that kernels support its type.
func (b *builder) tensor(name string, dims ...int64) (*Tensor, error) {
	if t, ok := b.p.Tensors[name]; ok {
		return t, nil
	}
	t, err := b.read(name, dims...)
	if err != nil {
		return nil, err
	}
	b.p.Tensors[name] = t
	return t, nil
}

// read checks a tensor as tensor does and marks it used, without making it one of the
// Program's weights: a tensor the builder reads itself (RoPE factors) or takes apart (split),
// or one that is checked but not used (rope_factors_long).
func (b *builder) read(name string, dims ...int64) (*Tensor, error) {
	ti, ok := b.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("model: tensor %q is missing", name)
	}
	if !equalDims(ti.Dims, dims) {
		return nil, fmt.Errorf("model: tensor %q has dims %v, want %v", name, ti.Dims, dims)
	}
	if _, err := kernels.Lookup(ti.Type); err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	if len(dims) == 1 && ti.Type != dtype.F32 {
		return nil, fmt.Errorf("model: tensor %q is %s; 1-D weights must be f32", name, ti.Type)
	}
	b.used[name] = true
	return &Tensor{Name: name, Type: ti.Type, Dims: ti.Dims, Data: b.f.Data(ti)}, nil
}

// split binds matrix name (y = W·x, dims [in, Σ parts]) as one tensor per part: part i holds
// rows (outputs) parts[0]+…+parts[i−1] onward, in the file's own bytes, named name[i]. A fused
// projection taken apart this way computes each output row exactly as the fused one does.
func (b *builder) split(name string, in int64, parts ...int64) ([]*Tensor, error) {
	var total int64
	for _, n := range parts {
		total += n
	}
	t, err := b.read(name, in, total) // only the parts are weights
	if err != nil {
		return nil, err
	}
	rb, err := t.Type.RowBytes(in)
	if err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	out := make([]*Tensor, len(parts))
	var lo int64
	for i, n := range parts {
		s := &Tensor{Name: fmt.Sprintf("%s[%d]", name, i), Type: t.Type, Dims: []int64{in, n}, Data: t.Data[lo*rb : (lo+n)*rb]}
		b.p.Tensors[s.Name] = s
		out[i] = s
		lo += n
	}
	return out, nil
}

func equalDims(a []int64, b []int64) bool {
	// trailing 1s are insignificant in ggml
	for len(a) > 1 && a[len(a)-1] == 1 {
		a = a[:len(a)-1]
	}
	for len(b) > 1 && b[len(b)-1] == 1 {
		b = b[:len(b)-1]
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// embed emits a token embedding lookup.
func (b *builder) embed(out Buf, w *Tensor) {
	n := int(w.Dims[0])
	b.emit(Op{Kind: OpEmbed, Name: b.p.Buffers[out].Name, In: []Buf{b.p.Tokens}, Out: out, Weight: w.Name, Cols: n,
		BytesPerRow: rowBytes(w) + 4*int64(n) + 4})
}

// rmsnorm emits out = rmsnorm(in)·w over groups of len(w) values per row.
func (b *builder) rmsnorm(name string, in Buf, w *Tensor, eps float32) Buf {
	width := int(w.Dims[0])
	total := b.p.Buffers[in].Width
	out := b.f32(name, total)
	b.emit(Op{Kind: OpRMSNorm, Name: name, In: []Buf{in}, Out: out, Weight: w.Name,
		Groups: total / width, Width: width, Eps: eps,
		WeightBytes: int64(len(w.Data)), BytesPerRow: 8 * int64(total), FlopsPerRow: 4 * int64(total)})
	return out
}

// rmsnormInPlace normalises groups of a buffer in place (per-head q/k norms).
func (b *builder) rmsnormInPlace(name string, buf Buf, w *Tensor, eps float32) {
	width := int(w.Dims[0])
	total := b.p.Buffers[buf].Width
	b.emit(Op{Kind: OpRMSNorm, Name: name, In: []Buf{buf}, Out: buf, Weight: w.Name,
		Groups: total / width, Width: width, Eps: eps,
		WeightBytes: int64(len(w.Data)), BytesPerRow: 8 * int64(total), FlopsPerRow: 4 * int64(total)})
}

// matvec emits out = w·in, converting in to the weight's activation format first (once per
// buffer version: q, k and v projections of one input share one conversion).
func (b *builder) matvec(name string, in Buf, w *Tensor) Buf {
	f, _ := kernels.Lookup(w.Type)  // checked in tensor()
	cols, rows := int(w.Dims[0]), 1 // a 1-D weight is a single row: a dot product
	if len(w.Dims) > 1 {
		rows = int(w.Dims[1])
	}
	src := in
	if f.Act != kernels.ActF32 {
		k := convKey{in, f.Act}
		conv, ok := b.conv[k]
		if !ok {
			cname := b.p.Buffers[in].Name + "." + f.Act.String()
			conv = b.buf(cname, ActBuf, cols, "step")
			b.p.Buffers[conv].Act = f.Act
			b.emit(Op{Kind: OpConvert, Name: cname, In: []Buf{in}, Out: conv,
				BytesPerRow: 4*int64(cols) + int64(f.Act.RowBytes(cols)), FlopsPerRow: 3 * int64(cols)})
			b.conv[k] = conv
		}
		src = conv
	}
	out := b.f32(name, rows)
	b.emit(Op{Kind: OpMatVec, Name: name, In: []Buf{src}, Out: out, Weight: w.Name, Rows: rows, Cols: cols,
		WeightBytes: int64(len(w.Data)), BytesPerRow: int64(f.Act.RowBytes(cols)) + 4*int64(rows),
		FlopsPerRow: 2 * int64(rows) * int64(cols)})
	return out
}

func rowBytes(t *Tensor) int64 {
	n, _ := t.Type.RowBytes(t.Dims[0])
	return n
}

// rope emits an in-place rotation of buf's heads with the table for (nRot, base).
func (b *builder) rope(name string, buf Buf, heads, headDim int, tab RopeTable, mode int32) {
	b.emit(Op{Kind: OpRope, Name: name, In: []Buf{buf, tab.Buf}, Out: buf, Heads: heads, HeadDim: headDim,
		NRot: tab.NRot, RopeMode: mode, BytesPerRow: int64(8*heads*headDim + 4*tab.NRot), FlopsPerRow: int64(3 * heads * tab.NRot)})
}

// ropeTable returns the step input holding (cos, sin) pairs for these parameters.
func (b *builder) ropeTable(nRot int, base, scale, attn float64, freqs []float32, sections [4]int) RopeTable {
	for _, t := range b.p.Ropes {
		if t.NRot == nRot && t.Base == base && t.Scale == scale && t.Attn == attn && len(t.Freqs) == len(freqs) && t.Sections == sections {
			return t
		}
	}
	name := fmt.Sprintf("rope.%d", len(b.p.Ropes))
	t := RopeTable{Buf: b.buf(name, F32Buf, nRot, "step"), NRot: nRot, Base: base, Scale: scale, Attn: attn, Freqs: freqs, Sections: sections}
	b.p.Ropes = append(b.p.Ropes, t)
	return t
}

// attention emits the KV store and attention of one cache layer.
func (b *builder) attention(prefix string, q, k, v Buf, c Config) Buf {
	return b.attentionWith(prefix, q, k, v, c, c.AttnScale, 0, 0)
}

// attentionWith is attention with the scores scaled by scale, a sliding window of window keys
// (0: none) and the scores soft-capped at softCap (0: not).
func (b *builder) attentionWith(prefix string, q, k, v Buf, c Config, scale float32, window int, softCap float32) Buf {
	layer := b.p.CacheLayers
	b.p.CacheLayers++
	kvdim := c.NHeadKV * c.HeadDim
	b.p.KVDim = kvdim
	// float32 caches (Build's); SetCacheTypes changes the byte counts for other types
	b.emit(Op{Kind: OpKVStore, Name: prefix + ".kv_store", In: []Buf{k, v}, Out: k, Layer: layer,
		BytesPerRow: 16 * int64(kvdim)})
	out := b.f32(prefix+".attn", c.NHead*c.HeadDim)
	b.emit(Op{Kind: OpAttention, Name: prefix + ".attn", In: []Buf{q}, Out: out, Layer: layer,
		Heads: c.NHead, HeadDim: c.HeadDim, KVHeads: c.NHeadKV, Scale: scale, Window: window, SoftCap: softCap,
		BytesPerRow: 8 * int64(c.NHead*c.HeadDim), BytesPerKey: 8*int64(kvdim) + 4,
		FlopsPerKey: int64(4*c.NHead*c.HeadDim + 4*c.NHead)})
	return out
}

// SetCacheTypes makes the K and V caches hold elements of types k and v (kernels.CacheTypes)
// and sets the K/V stores' and attentions' byte counts for them.
func (p *Program) SetCacheTypes(k, v dtype.Type) error {
	for _, t := range []dtype.Type{k, v} {
		if !kernels.CacheTypeOK(t) {
			return fmt.Errorf("model: a K/V cache of %s: the cache types are f32, f16 and bf16", t)
		}
	}
	// the bytes of one slot's K and V elements, before and after
	was := int64(p.KVDim) * int64(p.CacheK.BlockBytes()+p.CacheV.BlockBytes())
	now := int64(p.KVDim) * int64(k.BlockBytes()+v.BlockBytes())
	p.CacheK, p.CacheV = k, v
	for i := range p.Ops {
		switch op := &p.Ops[i]; op.Kind {
		case OpKVStore: // writes a slot's K and V per row
			op.BytesPerRow += now - was
		case OpAttention: // reads a slot's K and V per key
			op.BytesPerKey += now - was
		}
	}
	return nil
}

// bias emits buf += t (each row), in place; t must be a float32 vector as wide as buf's rows.
func (b *builder) bias(name string, buf Buf, t *Tensor) error {
	if t.Type != dtype.F32 {
		return fmt.Errorf("model: tensor %q is %s: biases must be F32", t.Name, t.Type)
	}
	w := b.p.Buffers[buf].Width
	b.emit(Op{Kind: OpBias, Name: name, In: []Buf{buf}, Out: buf, Weight: t.Name, Width: w,
		WeightBytes: int64(len(t.Data)), BytesPerRow: 8 * int64(w), FlopsPerRow: int64(w)})
	return nil
}

func (b *builder) add(name string, x, y Buf) Buf {
	w := b.p.Buffers[x].Width
	return b.emit(Op{Kind: OpAdd, Name: name, In: []Buf{x, y}, Out: x, BytesPerRow: 12 * int64(w), FlopsPerRow: int64(w)})
}

func (b *builder) swiglu(name string, gate, up Buf) Buf {
	w := b.p.Buffers[gate].Width
	return b.emit(Op{Kind: OpSwiGLU, Name: name, In: []Buf{gate, up}, Out: gate, BytesPerRow: 12 * int64(w), FlopsPerRow: 20 * int64(w)})
}

// geglu emits gate = gelu(gate) · up, in place.
func (b *builder) geglu(name string, gate, up Buf) Buf {
	w := b.p.Buffers[gate].Width
	return b.emit(Op{Kind: OpGeGLU, Name: name, In: []Buf{gate, up}, Out: gate, BytesPerRow: 12 * int64(w), FlopsPerRow: 40 * int64(w)})
}

// scale emits buf ·= s, in place.
func (b *builder) scale(name string, buf Buf, s float32) Buf {
	w := b.p.Buffers[buf].Width
	return b.emit(Op{Kind: OpScale, Name: name, In: []Buf{buf}, Out: buf, Scale: s, BytesPerRow: 8 * int64(w), FlopsPerRow: int64(w)})
}

// softCap emits buf = c·tanh(buf/c), in place.
func (b *builder) softCap(name string, buf Buf, c float32) Buf {
	w := b.p.Buffers[buf].Width
	return b.emit(Op{Kind: OpSoftCap, Name: name, In: []Buf{buf}, Out: buf, SoftCap: c, BytesPerRow: 8 * int64(w), FlopsPerRow: 30 * int64(w)})
}

// head emits gather → final norm → output projection.
func (b *builder) head(x Buf, norm, out *Tensor, eps float32) {
	w := b.p.Buffers[x].Width
	g := b.buf("out.x", F32Buf, w, "out")
	b.emit(Op{Kind: OpGather, Name: "out.x", In: []Buf{x, b.p.OutRows}, Out: g, BytesPerRow: 8 * int64(w)})
	n := b.rmsnorm("out.norm", g, norm, eps)
	b.p.Buffers[n].Rows = "out"
	b.p.Logits = b.matvec("logits", n, out)
	for _, bi := range []Buf{b.p.Logits} {
		b.p.Buffers[bi].Rows = "out"
	}
	for k, v := range b.conv {
		if k.src == n {
			b.p.Buffers[v].Rows = "out"
		}
	}
}

// finish checks the program's invariants.
func (b *builder) finish() (*Program, error) {
	seen := map[string]bool{}
	for _, op := range b.p.Ops {
		if seen[op.Name] {
			return nil, fmt.Errorf("model: internal error: op name %q used twice", op.Name)
		}
		seen[op.Name] = true
	}
	var unused []string
	for _, t := range b.f.Tensors {
		if !b.used[t.Name] && !ignoredTensor(t.Name) {
			unused = append(unused, t.Name)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, fmt.Errorf("model: %s: tensors the architecture does not use (unsupported variant?): %s", b.p.Config.Arch, strings.Join(unused, ", "))
	}
	return b.p, nil
}

// ignoredTensor lists tensors a model may carry that the forward pass does not read.
func ignoredTensor(name string) bool {
	return strings.Contains(name, ".nextn.")
}
