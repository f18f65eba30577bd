package devicetest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"verity/device"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/num"
	"verity/repack"
)

// Test cases for the kernels of device/kernels. Shapes come from each kernel's boundaries
// (1, 31, 32, 33, a block ±1) and stay small: the cases also run through the PTX
// interpreter.

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// f32s returns n normally distributed values of standard deviation scale as bytes.
func f32s(r *rand.Rand, n int, scale float64) []byte {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return f32Bytes(v)
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// special puts awkward values (signed zeros, subnormals, huge and tiny numbers) at the
// start of a float32 buffer.
func special(b []byte) []byte {
	vals := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, 1e30, -1e-30, 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), num.NaN32()}
	for i, v := range vals {
		if 4*i+4 <= len(b) {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	}
	return b
}

func init() {
	elementwiseCases()
	unaryCases()
	Register("add_bias_f32", biasCases)
	Register("rmsnorm_f32", rmsnormCases)
	for _, a := range []kernels.Act{kernels.ActF16, kernels.ActBF16, kernels.ActQ8_0, kernels.ActQ8_1, kernels.ActQ8_K} {
		Register("rmsnorm_act_"+a.String(), func() []Case { return normActCases(a) })
		for _, op := range []string{"swiglu", "sigmoid_mul", "geglu"} {
			Register(op+"_act_"+a.String(), func() []Case { return binaryActCases(op, a) })
		}
	}
	Register("gated_rmsnorm_f32", gatedNormCases)
	Register("split_gate_f32", splitGateCases)
	Register("rope_f32", ropeCases)
	Register("argmax_f32", argmaxCases)
	Register("kv_store_f32", kvStoreCases)
	Register("rope_kv_store_f32", ropeKVStoreCases)
	Register("attention_f32", attentionCases)
	Register("attention_merge_f32", attentionMergeCases)
	Register("gather_f32", gatherCases)
	for _, a := range []kernels.Act{kernels.ActF16, kernels.ActBF16, kernels.ActQ8_0, kernels.ActQ8_1, kernels.ActQ8_K} {
		a := a
		Register("act_"+a.String(), func() []Case { return actCases(a) })
	}
	for _, t := range kernels.WeightTypes() {
		t := t
		f, _ := kernels.Lookup(t)
		Register("matvec_"+t.String()+"_"+f.Act.String(), func() []Case { return matvecCases(t) })
		Register("matvec8_"+t.String()+"_"+f.Act.String(), func() []Case { return matvecCases(t) })
		Register("embed_"+t.String(), func() []Case { return embedCases(t) })
		Register("moe_matvec_"+t.String()+"_"+f.Act.String(), func() []Case { return moeMatVecCases(t) })
		Register("moe_gate_up_"+t.String()+"_"+f.Act.String(), func() []Case { return moeGateUpCases(t) })
		Register("moe_down_"+t.String()+"_"+f.Act.String(), func() []Case { return moeDownCases(t) })
	}
	Register("moe_router_f32", routerCases)
	Register("moe_combine_f32", moeCombineCases)
	Register("gdn_conv_f32", gdnConvCases)
	Register("gdn_scan_f32", gdnScanCases)
}

func elementwiseCases() {
	for i, entry := range []string{"add_f32", "swiglu_f32", "sigmoid_mul_f32", "geglu_f32"} {
		seed := uint64(i)
		Register(entry, func() []Case {
			var out []Case
			for _, n := range []int{1, 255, 256, 257, 1000} {
				r := rng(seed*1000 + uint64(n))
				a, b := special(f32s(r, n, 4)), f32s(r, n, 4)
				if n >= 256 { // B's specials meet A's other specials: Inf − Inf, Inf·0, 0·Inf, …
					copy(b[4:], special(make([]byte, 4*11))) // b[9] = +Inf meets a[9] = −Inf
				}
				out = append(out, Case{
					Name:    fmt.Sprintf("n=%d", n),
					Buffers: []Buffer{{"A", a, false}, {"B", b, false}, {"Y", make([]byte, 4*n), true}},
					Args: func(p []device.Ptr) any {
						return kernels.BinaryArgs{A: p[0], B: p[1], Y: p[2], N: int32(n)}
					},
				})
			}
			// in place: Y = A
			r := rng(seed + 77)
			n := 300
			out = append(out, Case{
				Name:    "n=300/in-place",
				Buffers: []Buffer{{"A", f32s(r, n, 3), true}, {"B", f32s(r, n, 3), false}},
				Args: func(p []device.Ptr) any {
					return kernels.BinaryArgs{A: p[0], B: p[1], Y: p[0], N: int32(n)}
				},
			})
			return out
		})
	}
}

// unaryCases: Scale and SoftCap over lengths around a block, with special values, the
// parameter of a real model (√n_embd, a soft cap of 30) and others, in place too.
func unaryCases() {
	for i, entry := range []string{"scale_f32", "softcap_f32"} {
		seed := uint64(i) + 40
		Register(entry, func() []Case {
			var out []Case
			for k, n := range []int{1, 255, 256, 257, 1000} {
				r := rng(seed*1000 + uint64(n))
				x := special(f32s(r, n, 40))
				c := []float32{48, 30, 0.5, 1e-3, 1e20}[k]
				out = append(out, Case{
					Name:    fmt.Sprintf("n=%d/c=%g", n, c),
					Buffers: []Buffer{{"X", x, false}, {"Y", make([]byte, 4*n), true}},
					Args: func(p []device.Ptr) any {
						return kernels.UnaryArgs{X: p[0], Y: p[1], N: int32(n), C: c}
					},
				})
			}
			r := rng(seed + 77)
			n := 300
			out = append(out, Case{
				Name:    "n=300/in-place",
				Buffers: []Buffer{{"X", f32s(r, n, 30), true}},
				Args: func(p []device.Ptr) any {
					return kernels.UnaryArgs{X: p[0], Y: p[0], N: int32(n), C: 50}
				},
			})
			return out
		})
	}
}

func biasCases() []Case {
	var out []Case
	for _, shape := range [][2]int{{1, 1}, {1, 255}, {3, 256}, {8, 257}, {5, 1000}, {64, 96}} {
		rows, w := shape[0], shape[1]
		r := rng(uint64(rows*10000 + w))
		x, bias := special(f32s(r, rows*w, 4)), special(f32s(r, w, 1))
		out = append(out, Case{
			Name:    fmt.Sprintf("rows=%d/width=%d", rows, w),
			Buffers: []Buffer{{"X", x, false}, {"Bias", bias, false}, {"Y", make([]byte, 4*rows*w), true}},
			Args: func(p []device.Ptr) any {
				return kernels.BiasArgs{X: p[0], Bias: p[1], Y: p[2], Rows: int32(rows), Width: int32(w)}
			},
		})
	}
	r := rng(99)
	out = append(out, Case{ // in place: Y = X
		Name:    "rows=4/width=300/in-place",
		Buffers: []Buffer{{"X", f32s(r, 4*300, 3), true}, {"Bias", f32s(r, 300, 1), false}},
		Args: func(p []device.Ptr) any {
			return kernels.BiasArgs{X: p[0], Bias: p[1], Y: p[0], Rows: 4, Width: 300}
		},
	})
	return out
}

func rmsnormCases() []Case {
	var out []Case
	for _, w := range []int{1, 31, 32, 33, 64, 100, 257} {
		groups := 3
		r := rng(uint64(w))
		x := special(f32s(r, groups*w, 2))
		out = append(out, Case{
			Name:    fmt.Sprintf("groups=%d/width=%d", groups, w),
			Buffers: []Buffer{{"X", x, false}, {"W", f32s(r, w, 1), false}, {"Y", make([]byte, 4*groups*w), true}},
			Args: func(p []device.Ptr) any {
				return kernels.RMSNormArgs{X: p[0], W: p[1], Y: p[2], Groups: int32(groups), Width: int32(w), Eps: 1e-6}
			},
		})
	}
	r := rng(99)
	out = append(out, Case{
		Name:    "in-place",
		Buffers: []Buffer{{"X", f32s(r, 2*64, 1), true}, {"W", f32s(r, 64, 1), false}},
		Args: func(p []device.Ptr) any {
			return kernels.RMSNormArgs{X: p[0], W: p[1], Y: p[0], Groups: 2, Width: 64, Eps: 1e-5}
		},
	})
	return out
}

// normActCases: whole blocks of the format, one row and several, the widest row, rows whose
// last piece (kernels.RowActSegment) is shorter, special values (a zero row, an infinite
// value, NaN) in the input.
func normActCases(a kernels.Act) []Case {
	bv := map[kernels.Act]int{kernels.ActQ8_0: 32, kernels.ActQ8_1: 32, kernels.ActQ8_K: 256}[a]
	if bv == 0 {
		bv = 1
	}
	var out []Case
	for i, sh := range [][2]int{{1, 256}, {3, 512}, {2, 2048}, {1, kernels.MaxRowActWidth}, {2, 768}, {2, 800}, {1, 96}} {
		rows, w := sh[0], sh[1]
		if w%bv != 0 {
			continue
		}
		r := rng(uint64(w*10+rows) + uint64(a)*1000)
		x := f32s(r, rows*w, 1.5)
		switch i {
		case 1:
			x = special(x)
		case 4:
			copy(x[:4*w], make([]byte, 4*w)) // an all-zero row: scale 1/sqrt(eps)
		}
		out = append(out, Case{
			Name:    fmt.Sprintf("rows=%d/width=%d", rows, w),
			Buffers: []Buffer{{"X", x, false}, {"W", f32s(r, w, 1), false}, {"Out", make([]byte, rows*a.RowBytes(w)), true}},
			Args: func(p []device.Ptr) any {
				return kernels.RMSNormActArgs{X: p[0], W: p[1], Out: p[2], Rows: int32(rows), Width: int32(w), Eps: 1e-6}
			},
		})
	}
	return out
}

// binaryActCases: whole blocks of the format, one row and several, the widest row, rows whose
// last piece (kernels.RowActSegment) is shorter, special values in both inputs.
func binaryActCases(op string, a kernels.Act) []Case {
	bv := map[kernels.Act]int{kernels.ActQ8_0: 32, kernels.ActQ8_1: 32, kernels.ActQ8_K: 256}[a]
	if bv == 0 {
		bv = 1
	}
	var out []Case
	for i, sh := range [][2]int{{1, 256}, {3, 512}, {2, 2048}, {1, kernels.MaxRowActWidth}, {2, 800}, {1, 96}} {
		rows, w := sh[0], sh[1]
		if w%bv != 0 {
			continue
		}
		r := rng(uint64(w*10+rows) + uint64(a)*1000 + uint64(len(op)))
		x, y := f32s(r, rows*w, 3), f32s(r, rows*w, 1)
		if i == 1 {
			x, y = special(x), special(y)
		}
		out = append(out, Case{
			Name:    fmt.Sprintf("rows=%d/width=%d", rows, w),
			Buffers: []Buffer{{"A", x, false}, {"B", y, false}, {"Out", make([]byte, rows*a.RowBytes(w)), true}},
			Args: func(p []device.Ptr) any {
				return kernels.BinaryActArgs{A: p[0], B: p[1], Out: p[2], Rows: int32(rows), Width: int32(w)}
			},
		})
	}
	return out
}

// ropeKVStoreCases: both pair orders, full and partial rotation, head sizes around a warp,
// rows stored to scattered slots, special values.
func ropeKVStoreCases() []Case {
	var out []Case
	for _, c := range []struct {
		rows, heads, hd, nrot int
		mode                  int32
	}{
		{1, 1, 8, 8, kernels.RopeAdjacent}, {3, 2, 64, 64, kernels.RopeNeox}, {2, 4, 64, 32, kernels.RopeNeox},
		{2, 2, 128, 64, kernels.RopeAdjacent}, {5, 8, 33 * 2, 66, kernels.RopeAdjacent}, {2, 3, 100, 24, kernels.RopeNeox},
	} {
		c := c
		d, ns := c.heads*c.hd, 2*c.rows+3
		r := rng(uint64(c.rows*1000+c.hd*10+int(c.mode)) + 77)
		slots := make([]int32, c.rows)
		for i := range slots {
			slots[i] = int32(2*i + 1) // distinct, not in row order's first slots
		}
		kt, vt := cacheTypePairs[len(out)%len(cacheTypePairs)][0], cacheTypePairs[len(out)%len(cacheTypePairs)][1]
		out = append(out, Case{
			Name: fmt.Sprintf("rows=%d/heads=%d/head_dim=%d/n_rot=%d/mode=%d/cache=%s,%s", c.rows, c.heads, c.hd, c.nrot, c.mode, kt, vt),
			Buffers: []Buffer{{"K", special(f32s(r, c.rows*d, 1)), false}, {"V", special(f32s(r, c.rows*d, 1)), false},
				{"CosSin", f32s(r, c.rows*c.nrot, 1), false}, {"Slots", i32Bytes(slots), false},
				{"KCache", cacheBytes(r, kt, ns*d, 1), true}, {"VCache", cacheBytes(r, vt, ns*d, 1), true}},
			Args: func(p []device.Ptr) any {
				return kernels.RopeKVStoreArgs{K: p[0], V: p[1], CosSin: p[2], Slots: p[3], KCache: p[4], VCache: p[5],
					Rows: int32(c.rows), KVDim: int32(d), NSlots: int32(ns), Heads: int32(c.heads), HeadDim: int32(c.hd),
					NRot: int32(c.nrot), Mode: c.mode, KType: int32(kt), VType: int32(vt)}
			},
		})
	}
	return out
}

// cacheTypePairs are (K, V) cache types the K/V kernels' cases cycle through.
var cacheTypePairs = [][2]dtype.Type{{dtype.F32, dtype.F32}, {dtype.F16, dtype.F16}, {dtype.BF16, dtype.BF16},
	{dtype.F16, dtype.BF16}, {dtype.BF16, dtype.F32}}

// cacheBytes returns n normally distributed values of standard deviation scale as a cache of
// type t (rounded to nearest even for the 16-bit types).
func cacheBytes(r *rand.Rand, t dtype.Type, n int, scale float64) []byte {
	b := f32s(r, n, scale)
	if t == dtype.F32 {
		return b
	}
	out := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		f := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		h := num.F32ToF16(f)
		if t == dtype.BF16 {
			h = num.F32ToBF16(f)
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return out
}

func gatedNormCases() []Case {
	var out []Case
	for _, d := range []int{1, 32, 33, 128} {
		rows, heads := 2, 3
		n := rows * heads * d
		r := rng(uint64(d) + 500)
		out = append(out, Case{
			Name: fmt.Sprintf("rows=%d/heads=%d/d=%d", rows, heads, d),
			Buffers: []Buffer{{"X", f32s(r, n, 1), false}, {"Z", f32s(r, n, 2), false}, {"W", f32s(r, d, 1), false},
				{"Y", make([]byte, 4*n), true}},
			Args: func(p []device.Ptr) any {
				return kernels.GatedNormArgs{X: p[0], Z: p[1], W: p[2], Y: p[3], Rows: int32(rows), Heads: int32(heads), D: int32(d), Eps: 1e-6}
			},
		})
	}
	return out
}

func splitGateCases() []Case {
	var out []Case
	for _, d := range []int{1, 64, 129} {
		rows, heads := 2, 3
		r := rng(uint64(d) + 600)
		out = append(out, Case{
			Name: fmt.Sprintf("rows=%d/heads=%d/d=%d", rows, heads, d),
			Buffers: []Buffer{{"X", f32s(r, rows*heads*2*d, 1), false}, {"Q", make([]byte, 4*rows*heads*d), true},
				{"G", make([]byte, 4*rows*heads*d), true}},
			Args: func(p []device.Ptr) any {
				return kernels.SplitGateArgs{X: p[0], Q: p[1], G: p[2], Rows: int32(rows), Heads: int32(heads), D: int32(d)}
			},
		})
	}
	return out
}

func ropeCases() []Case {
	var out []Case
	for _, c := range []struct{ rows, heads, hd, nrot int }{{1, 1, 2, 2}, {3, 4, 64, 64}, {2, 2, 128, 64}, {2, 3, 66, 34}} {
		for _, mode := range []int32{kernels.RopeAdjacent, kernels.RopeNeox} {
			r := rng(uint64(c.hd*10 + c.nrot + int(mode)))
			cs := make([]float32, c.rows*c.nrot)
			for row := 0; row < c.rows; row++ {
				for i := 0; i < c.nrot/2; i++ {
					th := float64(row+3) * math.Pow(10000, -2*float64(i)/float64(c.nrot))
					cs[row*c.nrot+2*i], cs[row*c.nrot+2*i+1] = float32(math.Cos(th)), float32(math.Sin(th))
				}
			}
			c, mode := c, mode
			out = append(out, Case{
				Name:    fmt.Sprintf("rows=%d/heads=%d/head_dim=%d/n_rot=%d/mode=%d", c.rows, c.heads, c.hd, c.nrot, mode),
				Buffers: []Buffer{{"X", f32s(r, c.rows*c.heads*c.hd, 1), true}, {"CosSin", f32Bytes(cs), false}},
				Args: func(p []device.Ptr) any {
					return kernels.RopeArgs{X: p[0], CosSin: p[1], Rows: int32(c.rows), Heads: int32(c.heads), HeadDim: int32(c.hd), NRot: int32(c.nrot), Mode: mode}
				},
			})
		}
	}
	return out
}

func argmaxCases() []Case {
	var out []Case
	for _, cols := range []int{1, 31, 255, 256, 257, 1000} {
		rows := 4
		r := rng(uint64(cols) + 700)
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(r.IntN(50)) // many ties
		}
		// row 1: NaNs around; row 2: all NaN; row 3: the maximum twice
		nan := num.NaN32()
		v[cols] = nan
		for i := 2 * cols; i < 3*cols; i++ {
			v[i] = nan
		}
		v[3*cols+cols/2] = 1000
		v[4*cols-1] = 1000
		out = append(out, Case{
			Name:    fmt.Sprintf("rows=%d/cols=%d", rows, cols),
			Buffers: []Buffer{{"X", f32Bytes(v), false}, {"Out", make([]byte, 4*rows), true}},
			Args: func(p []device.Ptr) any {
				return kernels.ArgmaxArgs{X: p[0], Out: p[1], Rows: int32(rows), Cols: int32(cols)}
			},
		})
	}
	return out
}

func kvStoreCases() []Case {
	var out []Case
	for i, tp := range cacheTypePairs {
		rows, d, ns := 5, 96, 9
		r := rng(800 + uint64(i))
		slots := []int32{3, 0, 8, 5, 1}
		kt, vt := tp[0], tp[1]
		out = append(out, Case{
			Name: fmt.Sprintf("rows=%d/kv_dim=%d/slots=%d/cache=%s,%s", rows, d, ns, kt, vt),
			Buffers: []Buffer{{"K", special(f32s(r, rows*d, 1)), false}, {"V", f32s(r, rows*d, 1e-4), false}, {"Slots", i32Bytes(slots), false},
				{"KCache", cacheBytes(r, kt, ns*d, 1), true}, {"VCache", cacheBytes(r, vt, ns*d, 1), true}},
			Args: func(p []device.Ptr) any {
				return kernels.KVStoreArgs{K: p[0], V: p[1], Slots: p[2], KCache: p[3], VCache: p[4], Rows: int32(rows), KVDim: int32(d),
					NSlots: int32(ns), KType: int32(kt), VType: int32(vt)}
			},
		})
	}
	return out
}

// attentionCase is one attention launch: rows × heads (of nkv KV heads) of head size hd over a
// cache of ns slots of types kt, vt, the rows' key lists keys.
func attentionCase(name string, seed uint64, nh, nkv, hd, ns int, kt, vt dtype.Type, keys [][]int32) Case {
	return attentionCaseWith(name, seed, nh, nkv, hd, ns, kt, vt, keys, 0, 0)
}

// attentionCaseWith is attentionCase with a sliding window and a soft cap of the scores.
func attentionCaseWith(name string, seed uint64, nh, nkv, hd, ns int, kt, vt dtype.Type, keys [][]int32, window int32, softCap float32) Case {
	r := rng(seed)
	var flat, off []int32
	off = append(off, 0)
	chunks := 1
	for _, k := range keys {
		flat = append(flat, k...)
		off = append(off, int32(len(flat)))
		chunks = max(chunks, kernels.AttnChunks(len(k)))
	}
	rows := len(keys)
	scale := float32(1 / math.Sqrt(float64(hd)))
	pw := kernels.AttnPartWords(hd)
	shared := int32(kernels.AttnShared(keys, int(window))) // every chunk the lists share, promised
	return Case{
		Name: fmt.Sprintf("%s/rows=%d/heads=%d/kv=%d/head_dim=%d/slots=%d/cache=%s,%s%s", name, rows, nh, nkv, hd, ns, kt, vt,
			windowName(window, softCap)),
		Buffers: []Buffer{{"Q", f32s(r, rows*nh*hd, 1), false}, {"KCache", cacheBytes(r, kt, ns*nkv*hd, 1), false},
			{"VCache", cacheBytes(r, vt, ns*nkv*hd, 1), false}, {"Keys", i32Bytes(flat), false}, {"KeyOff", i32Bytes(off), false},
			{"Out", make([]byte, 4*rows*nh*hd), true}, {"Part", make([]byte, 4*rows*nh*chunks*pw), true},
			{"Count", make([]byte, 4*rows*nkv), false}},
		Args: func(p []device.Ptr) any {
			return kernels.AttentionArgs{Q: p[0], KCache: p[1], VCache: p[2], Keys: p[3], KeyOff: p[4], Out: p[5], Part: p[6], Count: p[7],
				Rows: int32(rows), NHead: int32(nh), NKV: int32(nkv), HeadDim: int32(hd), NSlots: int32(ns), Chunks: int32(chunks),
				KType: int32(kt), VType: int32(vt), Scale: scale, Window: window, SoftCap: softCap, Shared: shared}
		},
	}
}

// attentionOut is attention case c writing its output as act (AttentionArgs.OutAct).
func attentionOut(c Case, act kernels.Act) Case {
	c.Buffers = slices.Clone(c.Buffers)
	c.Buffers[5].Data = make([]byte, len(c.Buffers[5].Data)/4*act.RowBytes(1)) // Out
	return attentionVariant(c, "/out="+act.String(), func(a *kernels.AttentionArgs) { a.OutAct = int32(act) })
}

// attentionVariant is attention case c named with suffix, its arguments changed by set.
func attentionVariant(c Case, suffix string, set func(a *kernels.AttentionArgs)) Case {
	args := c.Args
	c.Name += suffix
	c.Args = func(p []device.Ptr) any {
		a := args(p).(kernels.AttentionArgs)
		set(&a)
		return a
	}
	return c
}

// unpromised is attention case c with no shared chunks promised (Shared 0): the kernel finds
// the rows that share a chunk itself.
func unpromised(c Case) Case {
	return attentionVariant(c, "/unpromised", func(a *kernels.AttentionArgs) { a.Shared = 0 })
}

// deferred is attention case c with its merge deferred (AttentionArgs.DeferMerge): Part is
// its result, Out untouched.
func deferred(c Case) Case {
	return attentionVariant(c, "/deferred", func(a *kernels.AttentionArgs) { a.DeferMerge = 1 })
}

// merging is attention case c's merge launch (AttentionMerge, DeferMerge 1), Part holding
// random partial results of the chunks the first launch computes: the chunks' maxima spread
// over a few units (some chunks' weights underflow), their sums positive.
func merging(c Case, seed uint64, hd int) Case {
	c.Buffers = slices.Clone(c.Buffers)
	r := rng(seed)
	pw := kernels.AttnPartWords(hd)
	part := make([]float32, len(c.Buffers[6].Data)/4)
	for i := range part {
		switch i % pw {
		case 0:
			part[i] = float32(r.NormFloat64() * 8)
		case 1:
			part[i] = float32(1 + 63*r.Float64())
		default:
			part[i] = float32(r.NormFloat64() * 4)
		}
	}
	c.Buffers[6] = Buffer{"Part", f32Bytes(part), true}
	return attentionVariant(c, "/merge", func(a *kernels.AttentionArgs) { a.DeferMerge = 1 })
}

// attentionMergeCases: the merge launches of tree steps (4 and 8 query heads a KV head, heads
// of 33 and 300 dims: several outputs a thread, fewer pairs a merge batch), of rows of more
// chunks than one window of weights holds (the maxima reloaded), of sliding windows and soft
// caps, and of every output type.
func attentionMergeCases() []Case {
	parents := []int{-1, 0, 0, 1, 1, 2, 3, 5, 7, 8}
	long := make([][]int32, 3)
	r := rng(1110)
	for row, n := range []int{4200, 64 * 65, 3} {
		for range n {
			long[row] = append(long[row], int32(r.IntN(70)))
		}
	}
	return []Case{
		merging(attentionCase("tree", 1100, 8, 2, 64, 140, dtype.F16, dtype.F16, treeKeys(130, parents)), 1120, 64),
		merging(attentionOut(attentionCase("tree", 1101, 16, 2, 64, 78, dtype.BF16, dtype.F32, treeKeys(68, parents)), kernels.ActF16), 1121, 64),
		merging(attentionOut(attentionCase("tree", 1102, 3, 1, 33, 140, dtype.F32, dtype.F32, treeKeys(130, parents)), kernels.ActBF16), 1122, 33),
		merging(attentionCase("tree", 1103, 16, 2, 300, 140, dtype.F16, dtype.BF16, treeKeys(130, parents)), 1123, 300),
		merging(attentionCase("long", 1104, 8, 2, 64, 70, dtype.F32, dtype.F32, long), 1124, 64),
		merging(attentionCaseWith("window", 1105, 4, 2, 32, 140, dtype.F16, dtype.F16, treeKeys(130, parents), 70, 0), 1125, 32),
		merging(attentionCaseWith("softcap", 1106, 4, 1, 16, 140, dtype.BF16, dtype.BF16, treeKeys(130, parents), 0, 0.3), 1126, 16),
		merging(attentionCase("short", 1107, 4, 2, 16, 40, dtype.F16, dtype.F16, [][]int32{{3, 1, 4}, {1, 5, 9, 2, 6}}), 1127, 16),
	}
}

func windowName(window int32, softCap float32) string {
	var s string
	if window > 0 {
		s += fmt.Sprintf("/window=%d", window)
	}
	if softCap > 0 {
		s += fmt.Sprintf("/softcap=%g", softCap)
	}
	return s
}

// treeKeys returns the key lists of a tree step: every row attends to the slots 0 … hist−1,
// then to its ancestors' slots (hist + parent …) root first and its own last.
func treeKeys(hist int, parents []int) [][]int32 {
	keys := make([][]int32, len(parents))
	for i := range parents {
		var path []int32
		for n := i; n >= 0; n = parents[n] {
			path = append([]int32{int32(hist + n)}, path...)
		}
		k := make([]int32, 0, hist+len(path))
		for j := 0; j < hist; j++ {
			k = append(k, int32(j))
		}
		keys[i] = append(k, path...)
	}
	return keys
}

func attentionCases() []Case {
	var out []Case
	// Random key lists (slots repeat): groups of 1 to 12 query heads per KV head, head sizes the
	// 16-byte loads do not fit (1, 33) and above the 64 dims of a slice (300), lists of one to
	// three chunks.
	for i, c := range []struct{ rows, nh, nkv, hd, ns int }{{1, 1, 1, 1, 1}, {3, 4, 2, 64, 140}, {2, 2, 1, 33, 70},
		{2, 12, 1, 40, 50}, {1, 3, 1, 8, 5}, {2, 16, 2, 300, 35}} {
		r := rng(uint64(c.hd*100 + c.ns))
		keys := make([][]int32, c.rows)
		for row := range keys {
			n := 1 + r.IntN(2*c.ns)
			if row == 1 {
				n = 2*c.ns + 1 // a row of several chunks (more than 64 keys where there are 33 slots)
			}
			for j := 0; j < n; j++ {
				keys[row] = append(keys[row], int32(r.IntN(c.ns)))
			}
		}
		tp := cacheTypePairs[i%len(cacheTypePairs)]
		out = append(out, attentionCase("random", uint64(c.hd*100+c.ns+1), c.nh, c.nkv, c.hd, c.ns, tp[0], tp[1], keys))
		if i == 1 { // rows of one to three chunks, the last of each the merge's
			out = append(out, deferred(out[len(out)-1]))
		}
	}
	// one chunk a row, deferred: the first launch is one block that returns
	out = append(out, deferred(attentionCase("short", 1090, 4, 2, 16, 40, dtype.F16, dtype.F16, [][]int32{{3, 1, 4}, {1, 5, 9, 2, 6}})))
	// Tree steps: 10 nodes (a group of 8 and 2 more rows) over a history of 130 positions,
	// their chunks shared where the slots agree; 4 query heads per KV head, so 32 (row, head)
	// pairs per pass over a chunk; the last with 3 and 6 heads per KV head (more than 32 pairs).
	parents := []int{-1, 0, 0, 1, 1, 2, 3, 5, 7, 8}
	for i, c := range []struct{ nh, nkv, hd int }{{8, 2, 64}, {8, 2, 16}, {6, 2, 64}, {12, 2, 32}} {
		hist := 130 - 62*(i%2)
		tp := cacheTypePairs[(i+1)%len(cacheTypePairs)]
		out = append(out, attentionCase("tree", uint64(900+i), c.nh, c.nkv, c.hd, hist+len(parents), tp[0], tp[1], treeKeys(hist, parents)))
		if i < 2 {
			out = append(out, unpromised(out[len(out)-1]), attentionOut(out[len(out)-1], kernels.Act(1+i))) // f16, bf16
		}
		out = append(out, deferred(out[len(out)-1]))
	}
	// Sliding windows (Gemma): of fewer keys than a chunk, of one chunk and a bit, longer than
	// some rows' lists; a tree over a history longer than the window (the nodes' windows start
	// at different positions of it); soft-capped scores, alone and with a window.
	for i, c := range []struct {
		nh, nkv, hd int
		window      int32
		cap         float32
	}{{4, 2, 32, 40, 0}, {8, 2, 16, 70, 0}, {6, 2, 64, 200, 0}, {4, 1, 16, 0, 0.3}, {8, 2, 32, 65, 50}} {
		tp := cacheTypePairs[i%len(cacheTypePairs)]
		hist := 130
		out = append(out, attentionCaseWith("tree", uint64(950+i), c.nh, c.nkv, c.hd, hist+len(parents), tp[0], tp[1], treeKeys(hist, parents), c.window, c.cap))
		r := rng(uint64(960 + i))
		keys := make([][]int32, 3)
		for row := range keys {
			n := []int{1, 39, 150}[row]
			for j := 0; j < n; j++ {
				keys[row] = append(keys[row], int32(r.IntN(70)))
			}
		}
		out = append(out, attentionCaseWith("random", uint64(970+i), c.nh, c.nkv, c.hd, 70, tp[0], tp[1], keys, c.window, c.cap))
	}
	return out
}

func gatherCases() []Case {
	var out []Case
	for _, w := range []int{1, 255, 256, 300} {
		src, rows := 7, 4
		r := rng(uint64(w) + 900)
		idx := []int32{6, 0, 3, 3}
		out = append(out, Case{
			Name:    fmt.Sprintf("rows=%d/width=%d", rows, w),
			Buffers: []Buffer{{"X", f32s(r, src*w, 1), false}, {"Idx", i32Bytes(idx), false}, {"Out", make([]byte, 4*rows*w), true}},
			Args: func(p []device.Ptr) any {
				return kernels.GatherArgs{X: p[0], Idx: p[1], Out: p[2], Rows: int32(rows), Width: int32(w), SrcRows: int32(src)}
			},
		})
	}
	return out
}

func actCases(a kernels.Act) []Case {
	var out []Case
	for _, c := range []struct{ n, cols int }{{1, 256}, {3, 512}} {
		r := rng(uint64(c.cols*10+c.n) + uint64(a))
		x := special(f32s(r, c.n*c.cols, 3))
		// a block of zeros (q8 scale 0) and a block of one huge value
		for i := 32; i < 64; i++ {
			binary.LittleEndian.PutUint32(x[4*i:], 0)
		}
		if c.n > 1 { // non-finite inputs: a NaN, +Inf, −Inf, and both infinities in one block
			for i, v := range []float32{num.NaN32(), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.Inf(-1))} {
				j := 64 + 37*i
				if i == 4 {
					j = 64 + 37*3 + 1
				}
				binary.LittleEndian.PutUint32(x[4*(c.cols+j):], math.Float32bits(v))
			}
		}
		c := c
		out = append(out, Case{
			Name:    fmt.Sprintf("n=%d/cols=%d", c.n, c.cols),
			Buffers: []Buffer{{"X", x, false}, {"Out", make([]byte, c.n*a.RowBytes(c.cols)), true}},
			Args: func(p []device.Ptr) any {
				return kernels.ConvertArgs{X: p[0], Out: p[1], Cols: int32(c.cols), N: int32(c.n)}
			},
		})
	}
	return out
}

// f16Fields are the byte offsets of the fp16 scale fields inside one block of each
// quantised type; the other bytes of a block take any value.
var f16Fields = map[dtype.Type][]int{
	dtype.Q4_0: {0}, dtype.Q4_1: {0, 2}, dtype.Q5_0: {0}, dtype.Q5_1: {0, 2}, dtype.Q8_0: {0},
	dtype.Q2_K: {80, 82}, dtype.Q3_K: {108}, dtype.Q4_K: {0, 2}, dtype.Q5_K: {0, 2}, dtype.Q6_K: {208},
}

// randomWeights returns rows rows of cols values of type t: random quants with small finite
// scales.
func randomWeights(r *rand.Rand, t dtype.Type, rows, cols int) []byte {
	switch t {
	case dtype.F32:
		return f32s(r, rows*cols, 0.1)
	case dtype.F16, dtype.BF16:
		b := make([]byte, 2*rows*cols)
		for i := 0; i < rows*cols; i++ {
			v := float32(r.NormFloat64() * 0.1)
			h := num.F32ToF16(v)
			if t == dtype.BF16 {
				h = num.F32ToBF16(v)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return b
	}
	rb, err := t.RowBytes(int64(cols))
	if err != nil {
		panic(err)
	}
	b := make([]byte, rows*int(rb))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	bb := t.BlockBytes()
	for blk := 0; blk < len(b)/bb; blk++ {
		for _, off := range f16Fields[t] {
			v := float32((r.Float64()*0.02 + 0.001) * float64(1-2*r.IntN(2)))
			binary.LittleEndian.PutUint16(b[blk*bb+off:], num.F32ToF16(v))
		}
	}
	return b
}

// matvecCases cover one and several weight passes (n beyond kernels.MaxColumns), rows that
// do not fill a block of warps, and rows long enough that every lane folds several units
// (the interleaved planes' later chunks).
func matvecCases(t dtype.Type) []Case {
	f, _ := kernels.Lookup(t)
	type shape struct{ rows, cols, n int }
	var shapes []shape
	for _, cols := range []int{256, 512} {
		for _, rn := range [][2]int{{1, 1}, {5, 2}, {33, 3}, {6, 8}, {3, 9}} {
			shapes = append(shapes, shape{rn[0], cols, rn[1]})
		}
	}
	if t.BlockSize() < 256 {
		shapes = append(shapes, shape{5, 32, 2}, shape{33, 96, 3}, shape{2, 32 * 70, 3})
	}
	shapes = append(shapes, shape{2, 256 * 41, 17})
	var out []Case
	for i, sh := range shapes {
		rows, cols, n := sh.rows, sh.cols, sh.n
		if cols%f.Unit != 0 || cols%t.BlockSize() != 0 {
			continue
		}
		acc := int32(i % 2) // every other shape adds to Y (a fused residual), NaN and ±Inf included
		r := rng(uint64(cols*100+rows) + uint64(t))
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		xb := f.Act.RowBytes(cols)
		xa := make([]byte, n*xb)
		for c := 0; c < n; c++ {
			kernels.ConvertRow(f.Act, xa[c*xb:(c+1)*xb], x[c*cols:(c+1)*cols])
		}
		y := make([]byte, 4*n*rows)
		if acc != 0 {
			y = special(f32s(r, n*rows, 1))
		}
		w := packedWeights(r, t, rows, cols, 1)
		if (t == dtype.F16 || t == dtype.BF16) && rows >= 3 && n >= 2 {
			halfSpecials(t, w, xa, cols, xb)
		}
		out = append(out, Case{
			Name: fmt.Sprintf("rows=%d/cols=%d/n=%d/acc=%d", rows, cols, n, acc),
			Buffers: []Buffer{{"W", w, false}, {"X", xa, false},
				{"Y", y, true}},
			Args: func(p []device.Ptr) any {
				return kernels.MatVecArgs{W: p[0], X: p[1], Y: p[2], Rows: int32(rows), Cols: int32(cols), N: int32(n), Acc: acc}
			},
		})
	}
	return out
}

// halfSpecials puts non-finite fp16 or bf16 values into weight rows 0–2 (in repack's device
// layout, a row's values in order) and activation columns 0–1 of a 16-bit matvec case: NaNs
// with payloads (quiet and signalling), ±Inf, an Inf meeting a zero activation (Inf·0) and an
// Inf activation meeting −Inf. Every result they reach is the canonical NaN or an infinity,
// whatever payload a widening keeps.
func halfSpecials(t dtype.Type, w, x []byte, cols, xb int) {
	nan, snan, inf, ninf := uint16(0x7e01), uint16(0x7c05), uint16(0x7c00), uint16(0xfc00)
	if t == dtype.BF16 {
		nan, snan, inf, ninf = 0x7fc1, 0x7f85, 0x7f80, 0xff80
	}
	stride := (2*cols + 255) / 256 * 256
	put := func(b []byte, at int, v uint16) { binary.LittleEndian.PutUint16(b[at:], v) }
	for i, v := range []uint16{nan, snan, inf, ninf} { // row 0
		put(w, 2*(3*i+1), v)
	}
	put(w, stride+2*5, inf) // row 1 meets column 0's zero: Inf·0
	put(x, 2*5, 0)
	put(w, 2*stride+2*9, ninf) // row 2 meets column 1's +Inf
	put(x, xb+2*9, inf)
	put(x, xb+2*11, nan) // column 1: a NaN every row meets
}

// packedWeights is randomWeights for experts matrices of rows × cols in the device layout
// the matvec kernels read.
func packedWeights(r *rand.Rand, t dtype.Type, rows, cols, experts int) []byte {
	p, err := repack.Pack(t, []int64{int64(cols), int64(rows), int64(experts)}, randomWeights(r, t, experts*rows, cols))
	if err != nil {
		panic(err)
	}
	return p.Data
}

func embedCases(t dtype.Type) []Case {
	cols := 256
	if t.BlockSize() < 256 {
		cols = 96
	}
	vocab, rows := 11, 5
	r := rng(uint64(t) + 1000)
	toks := []int32{10, 0, 3, 3, 7}
	table := randomWeights(r, t, vocab, cols)
	if t.BlockSize() > 1 { // token 7's row: NaN, +Inf and −Inf scales in its first blocks
		rb, _ := t.RowBytes(int64(cols))
		for i, h := range []uint16{0x7e01, 0x7c00, 0xfc00} {
			for _, off := range f16Fields[t] {
				binary.LittleEndian.PutUint16(table[7*int(rb)+i*t.BlockBytes()+off:], h)
			}
		}
	}
	return []Case{{
		Name:    fmt.Sprintf("rows=%d/cols=%d/vocab=%d", rows, cols, vocab),
		Buffers: []Buffer{{"Table", table, false}, {"Tokens", i32Bytes(toks), false}, {"Out", make([]byte, 4*rows*cols), true}},
		Args: func(p []device.Ptr) any {
			return kernels.EmbedArgs{Table: p[0], Tokens: p[1], Out: p[2], Rows: int32(rows), Cols: int32(cols), Vocab: int32(vocab)}
		},
	}}
}

func routerCases() []Case {
	var out []Case
	for _, c := range []struct{ rows, ne, k int }{{1, 8, 2}, {3, 70, 8}, {2, 33, 33}} {
		r := rng(uint64(c.ne*100+c.k) + 1100)
		x := f32s(r, c.rows*c.ne, 2)
		// row 0: ties between experts, one -0 among zeros
		for i := 0; i < c.ne; i += 2 {
			binary.LittleEndian.PutUint32(x[4*i:], 0)
		}
		binary.LittleEndian.PutUint32(x[4*2:], math.Float32bits(float32(math.Copysign(0, -1))))
		if c.rows > 1 { // row 1: a NaN logit
			binary.LittleEndian.PutUint32(x[4*(c.ne+3):], math.Float32bits(num.NaN32()))
		}
		c := c
		out = append(out, Case{
			Name:    fmt.Sprintf("rows=%d/experts=%d/k=%d", c.rows, c.ne, c.k),
			Buffers: []Buffer{{"Logits", x, false}, {"Ids", make([]byte, 4*c.rows*c.k), true}, {"Weights", make([]byte, 4*c.rows*c.k), true}},
			Args: func(p []device.Ptr) any {
				return kernels.RouterArgs{Logits: p[0], Ids: p[1], Weights: p[2], Rows: int32(c.rows), NExpert: int32(c.ne), K: int32(c.k)}
			},
		})
	}
	return out
}

func moeMatVecCases(t dtype.Type) []Case {
	f, _ := kernels.Lookup(t)
	cols := 256
	const n, k, outRows, ne = 2, 2, 5, 3
	ids := []int32{2, 0, 1, 2}
	var out []Case
	for _, perSlot := range []int{0, 1} {
		r := rng(uint64(t)*10 + uint64(perSlot) + 1200)
		xRows := n
		if perSlot != 0 {
			xRows = n * k
		}
		xb := f.Act.RowBytes(cols)
		xa := make([]byte, xRows*xb)
		for c := 0; c < xRows; c++ {
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			kernels.ConvertRow(f.Act, xa[c*xb:(c+1)*xb], x)
		}
		perSlot := perSlot
		out = append(out, Case{
			Name: fmt.Sprintf("n=%d/k=%d/out=%d/cols=%d/per_slot=%d", n, k, outRows, cols, perSlot),
			Buffers: []Buffer{{"W", packedWeights(r, t, outRows, cols, ne), false}, {"X", xa, false},
				{"Ids", i32Bytes(ids), false}, {"Y", make([]byte, 4*n*k*outRows), true}},
			Args: func(p []device.Ptr) any {
				return kernels.MoEMatVecArgs{W: p[0], X: p[1], Ids: p[2], Y: p[3], N: n, K: k, Out: outRows, Cols: int32(cols),
					NExpert: ne, XPerSlot: int32(perSlot)}
			},
		})
	}
	return out
}

// actRows converts rows of random values to the activation format of weight type t.
func actRows(r *rand.Rand, t dtype.Type, rows, cols int) []byte {
	f, _ := kernels.Lookup(t)
	xb := f.Act.RowBytes(cols)
	xa := make([]byte, rows*xb)
	for c := 0; c < rows; c++ {
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		kernels.ConvertRow(f.Act, xa[c*xb:(c+1)*xb], x)
	}
	return xa
}

func moeGateUpCases(t dtype.Type) []Case {
	// 512 columns: at most one unit a lane; 2560: two or three, through the buffers in flight
	// and past their refills (a K-quant's 80 units)
	var cs []Case
	for i, cols := range []int32{512, 2560} {
		const n, k, out, ne = 3, 2, 5, 4
		ids := []int32{2, 0, 1, 3, 3, 2}
		r := rng(uint64(t)*10 + 1250 + uint64(i)*7919)
		cs = append(cs, Case{
			Name: fmt.Sprintf("n=%d/k=%d/out=%d/cols=%d", n, k, out, cols),
			Buffers: []Buffer{{"WGate", packedWeights(r, t, out, int(cols), ne), false}, {"WUp", packedWeights(r, t, out, int(cols), ne), false},
				{"X", actRows(r, t, n, int(cols)), false}, {"Ids", i32Bytes(ids), false}, {"Y", make([]byte, 4*n*k*out), true}},
			Args: func(p []device.Ptr) any {
				return kernels.MoEGateUpArgs{WGate: p[0], WUp: p[1], X: p[2], Ids: p[3], Y: p[4], N: n, K: k, Out: out, Cols: cols, NExpert: ne}
			},
		})
	}
	return cs
}

func moeDownCases(t dtype.Type) []Case {
	const n, k, rows, cols, ne = 2, 3, 6, 256, 4
	ids := []int32{3, 0, 2, 1, 1, 3}
	r := rng(uint64(t)*10 + 1260)
	w, x, wts := packedWeights(r, t, rows, cols, ne), actRows(r, t, n*k, cols), f32s(r, n*k, 0.5)
	shared, gate := special(f32s(r, n*rows, 1)), f32Bytes([]float32{-2, 30})
	return []Case{{
		Name: fmt.Sprintf("n=%d/k=%d/rows=%d/cols=%d/no_shared", n, k, rows, cols),
		Buffers: []Buffer{{"W", w, false}, {"X", x, false}, {"Ids", i32Bytes(ids), false}, {"Weights", wts, false},
			{"Out", make([]byte, 4*n*rows), true}},
		Args: func(p []device.Ptr) any {
			return kernels.MoEDownArgs{W: p[0], X: p[1], Ids: p[2], Weights: p[3], Out: p[4], N: n, K: k, Rows: rows, Cols: cols, NExpert: ne}
		},
	}, {
		Name: fmt.Sprintf("n=%d/k=%d/rows=%d/cols=%d/shared", n, k, rows, cols),
		Buffers: []Buffer{{"W", w, false}, {"X", x, false}, {"Ids", i32Bytes(ids), false}, {"Weights", wts, false},
			{"Shared", shared, false}, {"Gate", gate, false}, {"Out", make([]byte, 4*n*rows), true}},
		Args: func(p []device.Ptr) any {
			return kernels.MoEDownArgs{W: p[0], X: p[1], Ids: p[2], Weights: p[3], Shared: p[4], Gate: p[5], Out: p[6],
				N: n, K: k, Rows: rows, Cols: cols, NExpert: ne}
		},
	}, moeDownLong(t)}
}

// moeDownLong is a moe_down case whose rows are long enough for two or three units a lane: the
// buffers in flight and past their refills (a K-quant's 80 units).
func moeDownLong(t dtype.Type) Case {
	const n, k, rows, cols, ne = 2, 2, 5, 2560, 3
	ids := []int32{2, 0, 1, 2}
	r := rng(uint64(t)*10 + 1270)
	w, x, wts := packedWeights(r, t, rows, cols, ne), actRows(r, t, n*k, cols), f32s(r, n*k, 0.5)
	return Case{
		Name: fmt.Sprintf("n=%d/k=%d/rows=%d/cols=%d/no_shared", n, k, rows, cols),
		Buffers: []Buffer{{"W", w, false}, {"X", x, false}, {"Ids", i32Bytes(ids), false}, {"Weights", wts, false},
			{"Out", make([]byte, 4*n*rows), true}},
		Args: func(p []device.Ptr) any {
			return kernels.MoEDownArgs{W: p[0], X: p[1], Ids: p[2], Weights: p[3], Out: p[4], N: n, K: k, Rows: rows, Cols: cols, NExpert: ne}
		},
	}
}

func moeCombineCases() []Case {
	const n, k, width = 2, 3, 300
	r := rng(1300)
	y, w := special(f32s(r, n*k*width, 1)), f32s(r, n*k, 0.5)
	shared, gate := special(f32s(r, n*width, 1)), f32Bytes([]float32{-2, 30})
	return []Case{{
		Name:    fmt.Sprintf("n=%d/k=%d/width=%d/no_shared", n, k, width),
		Buffers: []Buffer{{"Y", y, false}, {"Weights", w, false}, {"Out", make([]byte, 4*n*width), true}},
		Args: func(p []device.Ptr) any {
			return kernels.MoECombineArgs{Y: p[0], Weights: p[1], Out: p[2], N: n, K: k, Width: width}
		},
	}, {
		Name:    fmt.Sprintf("n=%d/k=%d/width=%d/shared_in_place", n, k, width),
		Buffers: []Buffer{{"Y", y, false}, {"Weights", w, false}, {"Shared", shared, true}, {"Gate", gate, false}},
		Args: func(p []device.Ptr) any {
			return kernels.MoECombineArgs{Y: p[0], Weights: p[1], Shared: p[2], Gate: p[3], Out: p[2], N: n, K: k, Width: width}
		},
	}}
}

// gdnConvCases chain rows through a slot and branch from it; the in-place case has Y = X and
// Src = Dst.
func gdnConvCases() []Case {
	var out []Case
	for _, c := range []struct {
		rows, ch, k int
		inPlace     bool
	}{{3, 40, 4, false}, {4, 300, 4, true}, {2, 33, 1, false}} {
		const ns = 3
		r := rng(uint64(c.ch*10+c.k) + 1400)
		x, w, st := f32s(r, c.rows*c.ch, 2), f32s(r, c.ch*c.k, 0.5), f32s(r, ns*(c.k-1)*c.ch, 1)
		src, dst := []int32{1, 1, 1, 0}[:c.rows], []int32{1, 1, 2, 0}[:c.rows]
		c := c
		bufs := []Buffer{{"X", x, c.inPlace}, {"W", w, false}, {"State", st, true}, {"Src", i32Bytes(src), false}, {"Dst", i32Bytes(dst), false}}
		if !c.inPlace {
			bufs = append(bufs, Buffer{"Y", make([]byte, 4*c.rows*c.ch), true})
		}
		out = append(out, Case{
			Name:    fmt.Sprintf("rows=%d/channels=%d/k=%d/in_place=%v", c.rows, c.ch, c.k, c.inPlace),
			Buffers: bufs,
			Args: func(p []device.Ptr) any {
				a := kernels.GDNConvArgs{X: p[0], W: p[1], State: p[2], Src: p[3], Dst: p[4], Y: p[0], Rows: int32(c.rows), C: int32(c.ch), K: int32(c.k), NStates: ns}
				if !c.inPlace {
					a.Y = p[5]
				}
				return a
			},
		})
	}
	return out
}

func gdnScanCases() []Case {
	var out []Case
	for _, c := range []struct{ rows, nk, nv, d int }{{3, 1, 2, 40}, {2, 2, 4, 16}} {
		const ns = 3
		r := rng(uint64(c.d*10+c.nv) + 1500)
		width := (2*c.nk + c.nv) * c.d
		c := c
		out = append(out, Case{
			Name: fmt.Sprintf("rows=%d/heads=%d/%d/d=%d", c.rows, c.nk, c.nv, c.d),
			Buffers: []Buffer{{"QKV", f32s(r, c.rows*width, 1), false}, {"Beta", f32s(r, c.rows*c.nv, 2), false},
				{"Alpha", f32s(r, c.rows*c.nv, 2), false}, {"A", f32s(r, c.nv, 1), false}, {"DtBias", f32s(r, c.nv, 1), false},
				{"State", f32s(r, ns*c.nv*c.d*c.d, 0.3), true}, {"Src", i32Bytes([]int32{0, 2, 2}[:c.rows]), false},
				{"Dst", i32Bytes([]int32{2, 2, 1}[:c.rows]), false}, {"Out", make([]byte, 4*c.rows*c.nv*c.d), true}},
			Args: func(p []device.Ptr) any {
				return kernels.GDNScanArgs{QKV: p[0], Beta: p[1], Alpha: p[2], A: p[3], DtBias: p[4], State: p[5], Src: p[6], Dst: p[7], Out: p[8],
					Rows: int32(c.rows), NK: int32(c.nk), NV: int32(c.nv), D: int32(c.d), NStates: ns, Eps: 1e-6}
			},
		})
	}
	return out
}
