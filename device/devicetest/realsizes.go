package devicetest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"verity/device"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/repack"
)

// Cases with the shapes of real models (Run with RealSizes). They check what small shapes
// cannot: grids of tens of thousands of blocks, byte offsets of hundreds of megabytes, the
// last expert of a full expert stack. The shapes:
//
//   - Llama-3.2-1B: n_embd 2048, n_ff 8192, 32 query heads and 8 KV heads of 64, vocabulary
//     128256 (the output matrix only in Q8_0 and Q6_K, the quantised types real files store
//     it in), a 2048-token cache;
//   - Qwen3.5-MoE: n_embd 2048, 256 experts of n_ff 512 with 8 used per token (expert stacks
//     in Q8_0 and the K-quants real files use for them), 16 query heads and 2 KV heads of 256,
//     Gated DeltaNet with 16 key heads and 32 value heads of 128 (8192 conv channels);
//   - Mixtral 8x7B's grouped experts: 8 experts of n_ff 14336 over n_embd 4096, 2 per token,
//     no shared expert, in Q4_K;
//   - Qwen3-30B-A3B's grouped experts: 128 experts of n_ff 768 over n_embd 2048, 8 per token,
//     no shared expert, in Q4_K and Q6_K.
//
// Every case is a step of 8 rows (a tree verify) or one row (a decode). Weights are random
// bytes with every float field finite (FiniteBits); values do not matter for the checks made
// here, and the small cases cover the awkward ones.

// vocabTypes and expertTypes are the weight types the output matrix and the expert stacks are
// checked in.
var (
	vocabTypes  = map[dtype.Type]bool{dtype.Q8_0: true, dtype.Q6_K: true}
	expertTypes = map[dtype.Type]bool{dtype.Q8_0: true, dtype.Q4_K: true, dtype.Q5_K: true, dtype.Q6_K: true}
)

func init() {
	for _, t := range kernels.WeightTypes() {
		t := t
		f, _ := kernels.Lookup(t)
		RegisterReal("matvec_"+t.String()+"_"+f.Act.String(), func() []Case { return realMatVecCases(t) })
		RegisterReal("matvec8_"+t.String()+"_"+f.Act.String(), func() []Case { return realMatVecCases(t) })
		if expertTypes[t] {
			RegisterReal("moe_matvec_"+t.String()+"_"+f.Act.String(), func() []Case { return realMoEMatVecCases(t) })
			RegisterReal("moe_gate_up_"+t.String()+"_"+f.Act.String(), func() []Case { return realMoEGroupedCases(t, true) })
			RegisterReal("moe_down_"+t.String()+"_"+f.Act.String(), func() []Case { return realMoEGroupedCases(t, false) })
		}
	}
	for _, a := range []kernels.Act{kernels.ActF16, kernels.ActBF16, kernels.ActQ8_0, kernels.ActQ8_1, kernels.ActQ8_K} {
		a := a
		RegisterReal("act_"+a.String(), func() []Case { return realActCases(a) })
		RegisterReal("rmsnorm_act_"+a.String(), func() []Case { return realNormActCases(a) })
		RegisterReal("swiglu_act_"+a.String(), func() []Case { return realSwiGLUActCases(a) })
	}
	RegisterReal("rmsnorm_f32", realRMSNormCases)
	RegisterReal("rope_f32", realRopeCases)
	RegisterReal("rope_kv_store_f32", realRopeKVStoreCases)
	RegisterReal("attention_f32", realAttentionCases)
	RegisterReal("attention_merge_f32", realAttentionMergeCases)
	RegisterReal("argmax_f32", realArgmaxCases)
	RegisterReal("moe_router_f32", realRouterCases)
	RegisterReal("moe_combine_f32", realCombineCases)
	RegisterReal("gdn_conv_f32", realGDNConvCases)
	RegisterReal("gdn_scan_f32", realGDNScanCases)
}

func realRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed5)) }

// FiniteBits returns n random bytes (a function of seed) with bit 6 of every byte clear. Bit 6
// of a value's high byte is the top exponent bit of an f16, bf16 or f32, so read as weights of
// any type every float field, wherever it lies in a block, is finite and below 2 in magnitude;
// the other bits are uniform.
func FiniteBits(seed uint64, n int) []byte {
	r := realRand(seed)
	b := make([]byte, n)
	i := 0
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64()&^0x4040404040404040)
	}
	for ; i < n; i++ {
		b[i] = byte(r.Uint32()) &^ 0x40
	}
	return b
}

// realF32s returns n values uniform in [−scale, scale).
func realF32s(seed uint64, n int, scale float32) []float32 {
	if shapesOnly {
		return nil
	}
	r := realRand(seed)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(int32(r.Uint32())) * (scale / (1 << 31))
	}
	return v
}

// realMatrix returns the device layout (repack.Pack) of a random rows × cols matrix of type t.
func realMatrix(seed uint64, t dtype.Type, rows, cols int) []byte {
	if shapesOnly {
		return nil
	}
	rb, err := t.RowBytes(int64(cols))
	if err != nil {
		panic(err)
	}
	p, err := repack.Pack(t, []int64{int64(cols), int64(rows)}, FiniteBits(seed, rows*int(rb)))
	if err != nil {
		panic(err)
	}
	return p.Data
}

// realExperts returns the device layout of a stack of ne experts of out × cols values of type
// t in which only the experts in used are random; the others are zero (and never read).
func realExperts(seed uint64, t dtype.Type, ne, out, cols int, used []int32) []byte {
	if shapesOnly {
		return nil
	}
	l, err := repack.NewLayout(t, []int64{int64(cols), int64(out), int64(ne)})
	if err != nil {
		panic(err)
	}
	w := make([]byte, l.Size())
	done := map[int32]bool{}
	for _, e := range used {
		if done[e] {
			continue
		}
		done[e] = true
		m := realMatrix(seed+uint64(e), t, out, cols)
		if int64(len(m)) != l.ExpertStride {
			panic(fmt.Sprintf("devicetest: %s expert of %d bytes in a stack of stride %d", t, len(m), l.ExpertStride))
		}
		copy(w[int64(e)*l.ExpertStride:], m)
	}
	return w
}

// realActivations returns n rows of cols random values converted to format a.
func realActivations(seed uint64, a kernels.Act, n, cols int) []byte {
	if shapesOnly {
		return nil
	}
	x := realF32s(seed, n*cols, 2)
	rb := a.RowBytes(cols)
	out := make([]byte, n*rb)
	for c := 0; c < n; c++ {
		kernels.ConvertRow(a, out[c*rb:(c+1)*rb], x[c*cols:(c+1)*cols])
	}
	return out
}

func realMatVecCases(t dtype.Type) []Case {
	f, _ := kernels.Lookup(t)
	shapes := []struct {
		name          string
		rows, cols, n int
	}{
		{"llama-3.2-1b/attn_q", 2048, 2048, 8},
		{"llama-3.2-1b/attn_k", 512, 2048, 1},
		{"llama-3.2-1b/ffn_up", 8192, 2048, 1},
		{"llama-3.2-1b/ffn_down", 2048, 8192, 1},
		{"llama-3.2-1b/ffn_up", 8192, 2048, 8},
		{"llama-3.2-1b/ffn_down", 2048, 8192, 8},
	}
	if vocabTypes[t] {
		shapes = append(shapes, struct {
			name          string
			rows, cols, n int
		}{"llama-3.2-1b/output", 128256, 2048, 1})
	}
	var out []Case
	for i, s := range shapes {
		seed := uint64(t)<<32 | uint64(i)
		s := s
		out = append(out, Case{
			Name: fmt.Sprintf("%s/rows=%d/cols=%d/n=%d", s.name, s.rows, s.cols, s.n),
			Buffers: []Buffer{{"W", realMatrix(seed, t, s.rows, s.cols), false},
				{"X", realActivations(seed, f.Act, s.n, s.cols), false}, {"Y", make([]byte, 4*s.n*s.rows), true}},
			Args: func(p []device.Ptr) any {
				return kernels.MatVecArgs{W: p[0], X: p[1], Y: p[2], Rows: int32(s.rows), Cols: int32(s.cols), N: int32(s.n)}
			},
		})
	}
	return out
}

func realMoEMatVecCases(t dtype.Type) []Case {
	f, _ := kernels.Lookup(t)
	const ne, k = 256, 8
	shapes := []struct {
		name                 string
		outRows, cols, n, xs int
	}{
		{"qwen3.5-moe/ffn_up_exps", 512, 2048, 1, 0},
		{"qwen3.5-moe/ffn_up_exps", 512, 2048, 8, 0},
		{"qwen3.5-moe/ffn_down_exps", 2048, 512, 1, 1},
	}
	// Row r's experts are distinct; row 0's first is the last of the stack.
	ids := func(n int) []int32 {
		out := make([]int32, n*k)
		for r := 0; r < n; r++ {
			for j := 0; j < k; j++ {
				out[r*k+j] = int32((255 + 31*j + 97*r) % ne)
			}
		}
		return out
	}
	// One stack per expert shape, shared by its cases (buffers are never written): the
	// experts of the widest step (a step's first rows choose the same experts as a shorter
	// step's) are random, the others zero.
	stacks := map[[2]int][]byte{}
	for i, s := range shapes {
		key := [2]int{s.outRows, s.cols}
		if stacks[key] == nil {
			stacks[key] = realExperts(uint64(t)<<32|uint64(i)|1<<16, t, ne, s.outRows, s.cols, ids(8))
		}
	}
	var out []Case
	for i, s := range shapes {
		seed := uint64(t)<<32 | uint64(i) | 2<<16
		xRows := s.n
		if s.xs != 0 {
			xRows = s.n * k
		}
		s := s
		out = append(out, Case{
			Name: fmt.Sprintf("%s/out=%d/cols=%d/experts=%d/n=%d/k=%d/per_slot=%d", s.name, s.outRows, s.cols, ne, s.n, k, s.xs),
			Buffers: []Buffer{{"W", stacks[[2]int{s.outRows, s.cols}], false},
				{"X", realActivations(seed, f.Act, xRows, s.cols), false}, {"Ids", device.I32Bytes(ids(s.n)), false},
				{"Y", make([]byte, 4*s.n*k*s.outRows), true}},
			Args: func(p []device.Ptr) any {
				return kernels.MoEMatVecArgs{W: p[0], X: p[1], Ids: p[2], Y: p[3], N: int32(s.n), K: k, Out: int32(s.outRows),
					Cols: int32(s.cols), NExpert: ne, XPerSlot: int32(s.xs)}
			},
		})
	}
	return out
}

// moeShape is a routed-expert FFN: ne experts of n_ff ff over n_embd emb, k per token.
type moeShape struct {
	name           string
	ne, k, emb, ff int
	shared         bool // a shared expert's output and gate are added (Qwen3.5-MoE)
	types          map[dtype.Type]bool
}

// moeShapes are the models whose grouped expert kernels are checked: Qwen3.5-MoE (256
// experts of 512, 8 per token, with a shared expert) in every expert type, Mixtral 8x7B (8
// experts of 14336 over 4096, 2 per token: expert stacks of a quarter to half a gigabyte) in
// Q4_K, its usual type, and Qwen3-30B-A3B (128 experts of 768, 8 per token) in Q4_K and Q6_K.
var moeShapes = []moeShape{
	{"qwen3.5-moe", 256, 8, 2048, 512, true, expertTypes},
	{"mixtral-8x7b", 8, 2, 4096, 14336, false, map[dtype.Type]bool{dtype.Q4_K: true}},
	{"qwen3-30b-a3b", 128, 8, 2048, 768, false, map[dtype.Type]bool{dtype.Q4_K: true, dtype.Q6_K: true}},
}

// realMoEGroupedCases are the grouped expert kernels at the moeShapes' sizes for a decode
// step and an 8-node verify.
func realMoEGroupedCases(t dtype.Type, gateUp bool) []Case {
	f, _ := kernels.Lookup(t)
	var out []Case
	for si, m := range moeShapes {
		if !m.types[t] {
			continue
		}
		ne, k, emb, ff := m.ne, m.k, m.emb, m.ff
		ids := func(n int) []int32 {
			out := make([]int32, n*k)
			for r := 0; r < n; r++ {
				for j := 0; j < k; j++ {
					out[r*k+j] = int32((ne - 1 + 31*j + 97*r) % ne)
				}
			}
			return out
		}
		seed := uint64(t)<<32 | 3<<16 | uint64(si)<<12
		if gateUp {
			wg, wu := realExperts(seed, t, ne, ff, emb, ids(8)), realExperts(seed+1000, t, ne, ff, emb, ids(8))
			for _, n := range []int{1, 8} {
				n := n
				out = append(out, Case{
					Name: fmt.Sprintf("%s/ffn_gate_up_exps/out=%d/cols=%d/experts=%d/n=%d/k=%d", m.name, ff, emb, ne, n, k),
					Buffers: []Buffer{{"WGate", wg, false}, {"WUp", wu, false}, {"X", realActivations(seed+uint64(n), f.Act, n, emb), false},
						{"Ids", device.I32Bytes(ids(n)), false}, {"Y", make([]byte, 4*n*k*ff), true}},
					Args: func(p []device.Ptr) any {
						return kernels.MoEGateUpArgs{WGate: p[0], WUp: p[1], X: p[2], Ids: p[3], Y: p[4], N: int32(n), K: int32(k),
							Out: int32(ff), Cols: int32(emb), NExpert: int32(ne)}
					},
				})
			}
			continue
		}
		w := realExperts(seed+2000, t, ne, emb, ff, ids(8))
		for _, n := range []int{1, 8} {
			n := n
			bufs := []Buffer{{"W", w, false}, {"X", realActivations(seed+10+uint64(n), f.Act, n*k, ff), false},
				{"Ids", device.I32Bytes(ids(n)), false}, {"Weights", device.F32Bytes(realF32s(seed+20, n*k, 0.5)), false}}
			if m.shared {
				bufs = append(bufs, Buffer{"Shared", device.F32Bytes(realF32s(seed+30, n*emb, 1)), false},
					Buffer{"Gate", device.F32Bytes(realF32s(seed+40, n, 2)), false})
			}
			bufs = append(bufs, Buffer{"Out", make([]byte, 4*n*emb), true})
			shared := m.shared
			out = append(out, Case{
				Name:    fmt.Sprintf("%s/ffn_down_exps/rows=%d/cols=%d/experts=%d/n=%d/k=%d", m.name, emb, ff, ne, n, k),
				Buffers: bufs,
				Args: func(p []device.Ptr) any {
					a := kernels.MoEDownArgs{W: p[0], X: p[1], Ids: p[2], Weights: p[3], Out: p[len(p)-1],
						N: int32(n), K: int32(k), Rows: int32(emb), Cols: int32(ff), NExpert: int32(ne)}
					if shared {
						a.Shared, a.Gate = p[4], p[5]
					}
					return a
				},
			})
		}
	}
	return out
}

func realActCases(a kernels.Act) []Case {
	const n, cols = 8, 8192
	return []Case{{
		Name:    fmt.Sprintf("llama-3.2-1b/ffn_down_input/n=%d/cols=%d", n, cols),
		Buffers: []Buffer{{"X", device.F32Bytes(realF32s(uint64(a)+50, n*cols, 4)), false}, {"Out", make([]byte, n*a.RowBytes(cols)), true}},
		Args: func(p []device.Ptr) any {
			return kernels.ConvertArgs{X: p[0], Out: p[1], Cols: cols, N: n}
		},
	}}
}

// realNormActCases: Llama-3.2-1B's attention norm fused with its conversion, for a decoded
// row and a tree verify's eight.
func realNormActCases(a kernels.Act) []Case {
	const cols = 2048
	var out []Case
	for _, n := range []int{1, 8} {
		out = append(out, Case{
			Name: fmt.Sprintf("llama-3.2-1b/attn_norm/n=%d/cols=%d", n, cols),
			Buffers: []Buffer{{"X", device.F32Bytes(realF32s(uint64(a)+60+uint64(n), n*cols, 3)), false},
				{"W", device.F32Bytes(realF32s(uint64(a)+70, cols, 2)), false}, {"Out", make([]byte, n*a.RowBytes(cols)), true}},
			Args: func(p []device.Ptr) any {
				return kernels.RMSNormActArgs{X: p[0], W: p[1], Out: p[2], Rows: int32(n), Width: cols, Eps: 1e-5}
			},
		})
	}
	return out
}

// realSwiGLUActCases: Llama-3.2-1B's SwiGLU fused with the conversion of ffn_down's input, for
// a decoded row and a tree verify's eight.
func realSwiGLUActCases(a kernels.Act) []Case {
	const cols = 8192
	var out []Case
	for _, n := range []int{1, 8} {
		out = append(out, Case{
			Name: fmt.Sprintf("llama-3.2-1b/ffn_down_input/n=%d/cols=%d", n, cols),
			Buffers: []Buffer{{"A", device.F32Bytes(realF32s(uint64(a)+80+uint64(n), n*cols, 4)), false},
				{"B", device.F32Bytes(realF32s(uint64(a)+90+uint64(n), n*cols, 4)), false}, {"Out", make([]byte, n*a.RowBytes(cols)), true}},
			Args: func(p []device.Ptr) any {
				return kernels.BinaryActArgs{A: p[0], B: p[1], Out: p[2], Rows: int32(n), Width: cols}
			},
		})
	}
	return out
}

func realRMSNormCases() []Case {
	var out []Case
	for i, s := range []struct {
		name          string
		groups, width int
		eps           float32
	}{
		{"llama-3.2-1b/attn_norm", 8, 2048, 1e-5},
		{"qwen3.5-moe/attn_q_norm", 8 * 16, 256, 1e-6},
	} {
		s := s
		seed := uint64(100 + i)
		out = append(out, Case{
			Name: fmt.Sprintf("%s/groups=%d/width=%d", s.name, s.groups, s.width),
			Buffers: []Buffer{{"X", device.F32Bytes(realF32s(seed, s.groups*s.width, 3)), false}, {"W", device.F32Bytes(realF32s(seed+1, s.width, 2)), false},
				{"Y", make([]byte, 4*s.groups*s.width), true}},
			Args: func(p []device.Ptr) any {
				return kernels.RMSNormArgs{X: p[0], W: p[1], Y: p[2], Groups: int32(s.groups), Width: int32(s.width), Eps: s.eps}
			},
		})
	}
	return out
}

func realRopeCases() []Case {
	var out []Case
	for i, s := range []struct {
		name                  string
		rows, heads, hd, nrot int
		mode                  int32
		base                  float64
	}{
		{"llama-3.2-1b/q", 8, 32, 64, 64, kernels.RopeAdjacent, 500000},
		{"qwen3.5-moe/q", 8, 16, 256, 64, kernels.RopeNeox, 1e7},
	} {
		cs := make([]float32, s.rows*s.nrot)
		for r := 0; r < s.rows; r++ {
			for j := 0; j < s.nrot/2; j++ {
				th := float64(2040+r) * math.Pow(s.base, -2*float64(j)/float64(s.nrot))
				cs[r*s.nrot+2*j], cs[r*s.nrot+2*j+1] = float32(math.Cos(th)), float32(math.Sin(th))
			}
		}
		s := s
		out = append(out, Case{
			Name: fmt.Sprintf("%s/rows=%d/heads=%d/head_dim=%d/n_rot=%d/mode=%d", s.name, s.rows, s.heads, s.hd, s.nrot, s.mode),
			Buffers: []Buffer{{"X", device.F32Bytes(realF32s(uint64(200+i), s.rows*s.heads*s.hd, 3)), true},
				{"CosSin", device.F32Bytes(cs), false}},
			Args: func(p []device.Ptr) any {
				return kernels.RopeArgs{X: p[0], CosSin: p[1], Rows: int32(s.rows), Heads: int32(s.heads), HeadDim: int32(s.hd), NRot: int32(s.nrot), Mode: s.mode}
			},
		})
	}
	return out
}

// realRopeKVStoreCases: a tree step's keys rotated and its keys and values stored into slots
// 2048 … 2055 of the Llama-3.2-1B shape's cache (8 KV heads of 64), f16 (the GPU's default) and
// bf16 (the seed's).
func realRopeKVStoreCases() []Case {
	const rows, heads, hd, hist = 8, 8, 64, 2048
	const d, ns = heads * hd, hist + rows
	var out []Case
	for i, t := range []dtype.Type{dtype.F16, dtype.BF16} {
		cs := make([]float32, rows*hd)
		for r := 0; r < rows; r++ {
			for j := 0; j < hd/2; j++ {
				th := float64(hist+r) * math.Pow(500000, -2*float64(j)/hd)
				cs[r*hd+2*j], cs[r*hd+2*j+1] = float32(math.Cos(th)), float32(math.Sin(th))
			}
		}
		slots := make([]int32, rows)
		for r := range slots {
			slots[r] = int32(hist + r)
		}
		seed, t := uint64(220+10*i), t
		out = append(out, Case{
			Name: fmt.Sprintf("llama-3.2-1b/k/rows=%d/heads=%d/head_dim=%d/n_rot=%d/mode=%d/slots=%d/cache=%s,%s", rows, heads, hd, hd,
				kernels.RopeAdjacent, ns, t, t),
			Buffers: []Buffer{{"K", device.F32Bytes(realF32s(seed, rows*d, 3)), false}, {"V", device.F32Bytes(realF32s(seed+1, rows*d, 3)), false},
				{"CosSin", device.F32Bytes(cs), false}, {"Slots", i32Bytes(slots), false},
				{"KCache", FiniteBits(seed+2, 2*ns*d), true}, {"VCache", FiniteBits(seed+3, 2*ns*d), true}},
			Args: func(p []device.Ptr) any {
				return kernels.RopeKVStoreArgs{K: p[0], V: p[1], CosSin: p[2], Slots: p[3], KCache: p[4], VCache: p[5],
					Rows: rows, KVDim: d, NSlots: ns, Heads: heads, HeadDim: hd, NRot: hd, Mode: kernels.RopeAdjacent,
					KType: int32(t), VType: int32(t)}
			},
		})
	}
	return out
}

// realAttentionCases: at 2048 positions, a decode row and an 8-node tree (a chain: row r
// attends to the history and to rows 0…r, slots 2048… holding the rows' own keys), with f32
// and f16 caches (bf16 for the Qwen3.5 shape).
func realAttentionCases() []Case {
	const hist, rows = 2048, 8
	var out []Case
	for i, s := range []struct {
		name        string
		nh, nkv, hd int
		kt          dtype.Type
		rows        int
	}{
		{"llama-3.2-1b", 32, 8, 64, dtype.F32, rows},
		{"llama-3.2-1b", 32, 8, 64, dtype.F16, rows},
		{"llama-3.2-1b", 32, 8, 64, dtype.F16, 1},
		{"qwen3.5-moe", 16, 2, 256, dtype.BF16, rows},
	} {
		ns := hist + s.rows
		keys := make([][]int32, s.rows)
		for r := range keys {
			for j := 0; j < hist+r+1; j++ {
				keys[r] = append(keys[r], int32(j))
			}
		}
		out = append(out, attentionCase(s.name, uint64(300+10*i), s.nh, s.nkv, s.hd, ns, s.kt, s.kt, keys))
		if s.rows > 1 && s.kt != dtype.F32 { // a tree's merge on its own (the megakernel's form)
			out = append(out, deferred(out[len(out)-1]))
		}
	}
	return out
}

// realAttentionMergeCases: the merge launches of realAttentionCases' deferred trees.
func realAttentionMergeCases() []Case {
	var out []Case
	for _, c := range realAttentionCases() {
		if strings.HasSuffix(c.Name, "/deferred") {
			hd := int(c.Args(make([]device.Ptr, len(c.Buffers))).(kernels.AttentionArgs).HeadDim)
			out = append(out, merging(c, 340, hd))
		}
	}
	return out
}

func realArgmaxCases() []Case {
	const rows, cols = 8, 128256
	return []Case{{
		Name:    fmt.Sprintf("llama-3.2-1b/logits/rows=%d/cols=%d", rows, cols),
		Buffers: []Buffer{{"X", device.F32Bytes(realF32s(400, rows*cols, 20)), false}, {"Out", make([]byte, 4*rows), true}},
		Args: func(p []device.Ptr) any {
			return kernels.ArgmaxArgs{X: p[0], Out: p[1], Rows: rows, Cols: cols}
		},
	}}
}

func realRouterCases() []Case {
	const rows, ne, k = 8, 256, 8
	return []Case{{
		Name: fmt.Sprintf("qwen3.5-moe/ffn_gate_inp/rows=%d/experts=%d/k=%d", rows, ne, k),
		Buffers: []Buffer{{"Logits", device.F32Bytes(realF32s(500, rows*ne, 4)), false}, {"Ids", make([]byte, 4*rows*k), true},
			{"Weights", make([]byte, 4*rows*k), true}},
		Args: func(p []device.Ptr) any {
			return kernels.RouterArgs{Logits: p[0], Ids: p[1], Weights: p[2], Rows: rows, NExpert: ne, K: k}
		},
	}}
}

func realCombineCases() []Case {
	const n, k, width = 8, 8, 2048
	return []Case{{
		Name: fmt.Sprintf("qwen3.5-moe/n=%d/k=%d/width=%d/shared", n, k, width),
		Buffers: []Buffer{{"Y", device.F32Bytes(realF32s(600, n*k*width, 2)), false}, {"Weights", device.F32Bytes(realF32s(601, n*k, 1)), false},
			{"Shared", device.F32Bytes(realF32s(602, n*width, 2)), false}, {"Gate", device.F32Bytes(realF32s(603, n, 4)), false},
			{"Out", make([]byte, 4*n*width), true}},
		Args: func(p []device.Ptr) any {
			return kernels.MoECombineArgs{Y: p[0], Weights: p[1], Shared: p[2], Gate: p[3], Out: p[4], N: n, K: k, Width: width}
		},
	}}
}

// The recurrent cases chain 8 rows through state slot 1 (a prefill chunk): row 0 starts from
// slot 0, the last row writes slot 2.
var (
	realSrc = []int32{0, 1, 1, 1, 1, 1, 1, 1}
	realDst = []int32{1, 1, 1, 1, 1, 1, 1, 2}
)

func realGDNConvCases() []Case {
	const rows, ch, k, ns = 8, 8192, 4, 3
	return []Case{{
		Name: fmt.Sprintf("qwen3.5-moe/ssm_conv1d/rows=%d/channels=%d/k=%d", rows, ch, k),
		Buffers: []Buffer{{"X", device.F32Bytes(realF32s(700, rows*ch, 2)), false}, {"W", device.F32Bytes(realF32s(701, ch*k, 1)), false},
			{"State", device.F32Bytes(realF32s(702, ns*(k-1)*ch, 2)), true}, {"Src", device.I32Bytes(realSrc), false},
			{"Dst", device.I32Bytes(realDst), false}, {"Y", make([]byte, 4*rows*ch), true}},
		Args: func(p []device.Ptr) any {
			return kernels.GDNConvArgs{X: p[0], W: p[1], State: p[2], Src: p[3], Dst: p[4], Y: p[5], Rows: rows, C: ch, K: k, NStates: ns}
		},
	}}
}

func realGDNScanCases() []Case {
	const rows, nk, nv, d, ns = 8, 16, 32, 128, 3
	width := (2*nk + nv) * d
	a := realF32s(802, nv, 1)
	for i := range a {
		a[i] = -float32(math.Abs(float64(a[i]))) // ssm_a = −exp(A_log) < 0
	}
	return []Case{{
		Name: fmt.Sprintf("qwen3.5-moe/rows=%d/heads=%d/%d/d=%d", rows, nk, nv, d),
		Buffers: []Buffer{{"QKV", device.F32Bytes(realF32s(800, rows*width, 1)), false}, {"Beta", device.F32Bytes(realF32s(801, rows*nv, 2)), false},
			{"Alpha", device.F32Bytes(realF32s(803, rows*nv, 2)), false}, {"A", device.F32Bytes(a), false}, {"DtBias", device.F32Bytes(realF32s(804, nv, 1)), false},
			{"State", device.F32Bytes(realF32s(805, ns*nv*d*d, 0.3)), true}, {"Src", device.I32Bytes(realSrc), false},
			{"Dst", device.I32Bytes(realDst), false}, {"Out", make([]byte, 4*rows*nv*d), true}},
		Args: func(p []device.Ptr) any {
			return kernels.GDNScanArgs{QKV: p[0], Beta: p[1], Alpha: p[2], A: p[3], DtBias: p[4], State: p[5], Src: p[6], Dst: p[7], Out: p[8],
				Rows: rows, NK: nk, NV: nv, D: d, NStates: ns, Eps: 1e-6}
		},
	}}
}
