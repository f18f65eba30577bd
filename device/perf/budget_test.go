package perf

import (
	"fmt"
	"strings"
	"testing"

	"verity/device"
	"verity/device/devicetest"
	"verity/device/dtype"
	"verity/device/kernels"
)

// budget is the least predicted percentage of its floor a kernel keeps on the H200 (the
// model's prediction from the committed facts): for entries starting with entry, at the cases
// whose name contains shape ("" any). The first row that matches a launch applies, and every
// launch must match one: a new kernel needs a row. Raise a row when a kernel gets faster;
// lowering one needs a reason in the commit.
type budget struct {
	entry, shape string
	pct          float64
}

var budgets = []budget{
	// The matvec rows below were lowered when the model learned how often a matvec's loops run
	// (regionCounts, Traffic.Passes): it had shared a row's bytes between the pass over the
	// columns — whose own loads are the pipeline's first units — and the loop over the units as
	// if each ran as often as the other, so that a one-column row of 2048 values, two units a
	// lane, was counted as a third of its pass and a third of its loop's iteration (one pass
	// and two thirds of an iteration run: three units unrolled, two there), and an 8192-value
	// row's loop four times too few. Counted so, the short rows are issue-bound: a warp's pass
	// (its first loads, the butterfly, the store) is most of a 64-unit row's work.
	//
	// matvec, one column, on large matrices (issue 16's target: 85 %). q4_0, q4_1, q5_1 and
	// q6_K ask the L2 for their rows ahead (MATVEC's PF1). The quantised formats but q5_1 and
	// q8_0 keep one unit in flight a lane: on the short rows the pass is the larger cost and the
	// registers buy warps (sm_90 ffn_up q4_K 43 -> 64 %, q5_K 48 -> 67, q4_0 44 -> 54, q5_0 50 ->
	// 65, q6_K 60 -> 69, q2_K 31 -> 43), while the long rows of q4_K and q5_K lose some of their
	// bytes in flight (ffn_down 65 -> 54 and 89 -> 62 %; on sm_80 both 100 %): a layer's gate and
	// up are twice its down's bytes. q4_0's first 100 % came from a reading of the SASS that attributed its activations'
	// word loads (an address aligned down: q8_0's 34-byte blocks) to no buffer.
	{"matvec_q4_K_", "ffn_up/rows=8192/cols=2048/n=1", 63},
	{"matvec_q4_0_", "ffn_up/rows=8192/cols=2048/n=1", 53},
	{"matvec_q4_0_", "ffn_down/rows=2048/cols=8192/n=1", 91},
	{"matvec_q5_1_", "ffn_down/rows=2048/cols=8192/n=1", 97},
	{"matvec_q6_K_", "ffn_down/rows=2048/cols=8192/n=1", 99},
	{"matvec_q4_1_", "ffn_up/rows=8192/cols=2048/n=1", 60},
	{"matvec_q4_1_", "ffn_down/rows=2048/cols=8192/n=1", 99},
	{"matvec_q4_K_", "ffn_down/rows=2048/cols=8192/n=1", 54},
	{"matvec_q5_K_", "ffn_up/rows=8192/cols=2048/n=1", 66},
	{"matvec_q5_K_", "ffn_down/rows=2048/cols=8192/n=1", 62},
	{"matvec_", "ffn_up/rows=8192/cols=2048/n=1", 43},
	{"matvec_", "ffn_down/rows=2048/cols=8192/n=1", 35},
	{"matvec_", "output/", 70},
	{"matvec_", "bandwidth/", 48},
	// matvec8, eight columns (a tree verify), on large matrices (target: 80 %, met by f16 and
	// f32, by bf16 at ffn_up; the least q2_K's, 20 % at attn_q). f16's
	// 89 % at ffn_down in MV8_AHEAD came from a reading of the SASS that lost the dependency of
	// a widening HADD2.F32 on its load (an R20.H0_H0 operand): it was bf16's 67 %. q2_K, q3_K
	// and q5_1 ask the L2 for their rows ahead (MATVEC's PF). A pass's sums are taken together
	// (warp_sums), not one butterfly each.
	// the pipelined forms (MV8_AHEAD: the next unit's loads issued before this one's folds;
	// MV8_AHEAD3, f16 and f32: the unit after next's, so that ffn_down's 4 warps an SM keep
	// enough bytes in flight; bf16 keeps the megakernel's form, latency-bound at ffn_down)
	{"matvec8_f16_", "ffn_up/rows=8192/cols=2048/n=8", 99},
	{"matvec8_f16_", "ffn_down/rows=2048/cols=8192/n=8", 99},
	{"matvec8_f16_", "attn_q/rows=2048/cols=2048/n=8", 95},
	{"matvec8_bf16_", "ffn_up/rows=8192/cols=2048/n=8", 99},
	{"matvec8_bf16_", "ffn_down/rows=2048/cols=8192/n=8", 66},
	{"matvec8_f32_", "ffn_up/rows=8192/cols=2048/n=8", 99},
	{"matvec8_f32_", "ffn_down/rows=2048/cols=8192/n=8", 99}, // 83 in MV8_AHEAD
	{"matvec8_f32_", "attn_q/rows=2048/cols=2048/n=8", 99},
	// q8_0 and q4_0 in the MMA form (MV8_MMA: a unit's integer sums for four rows and the
	// eight columns on the tensor cores, the block's activations and each warp's rows in shared
	// memory): load/store-bound at ffn_up (the fragments' and scales' shared reads, 97 and 147
	// cycles a KB), latency-bound at 2048 rows (four warps an SM, two chunks in flight a warp).
	// The staged forms (MV8_STAGED: the block's activations in shared memory); q5_0 at one row
	// a warp, the others at two (latency-bound at ffn_down: 2048 rows of
	// two a warp are 8 warps an SM). q5_K and q6_K run one block an SM with the registers the
	// prefetch needs (MV8_STAGED1): ffn_down and attn_q gain more (q6_K 38 -> 62 % and
	// 38 -> 59 %) than ffn_up loses with half the warps (75 -> 59 %)
	// (q8_0 93/92 % and q4_0 51 % at ffn_down before the activations' word loads were read as
	// X's, see matvec above; q5_0 52/58 %. Then 89/91 %, q4_0 47/48 %, q5_0 57/59 %, q5_1 80 %
	// at ffn_up, q2_K and q3_K 47 and 53 % there, before the reader followed ptxas's bitfield
	// inserts — a chunk's base over the lane, LOP3.LUT 0xe2 — in the block's copy of the
	// activations and the K-quants' scale loads: those were attributed to no buffer, each priced
	// as one coalesced cycle. Read as X's, one row a warp leaves the copy and the eight columns'
	// shared reads bound by the load/store path: q8_0's shared reads alone are 9.4 bytes a
	// weight byte.)
	{"matvec8_q8_0_", "ffn_up/rows=8192/cols=2048/n=8", 61}, // MV8_MMA (51 % staged)
	{"matvec8_q6_K_", "ffn_up/rows=8192/cols=2048/n=8", 40},
	{"matvec8_q4_1_", "ffn_up/rows=8192/cols=2048/n=8", 47},
	{"matvec8_q5_K_", "ffn_up/rows=8192/cols=2048/n=8", 35},
	{"matvec8_q5_1_", "ffn_up/rows=8192/cols=2048/n=8", 47},
	{"matvec8_q4_K_", "ffn_up/rows=8192/cols=2048/n=8", 40},
	{"matvec8_q5_0_", "ffn_up/rows=8192/cols=2048/n=8", 31},
	{"matvec8_q4_0_", "ffn_up/rows=8192/cols=2048/n=8", 40}, // MV8_MMA (26 % staged)
	{"matvec8_q3_K_", "ffn_up/rows=8192/cols=2048/n=8", 28},
	{"matvec8_q2_K_", "ffn_up/rows=8192/cols=2048/n=8", 24},
	{"matvec8_q8_0_", "ffn_down/rows=2048/cols=8192/n=8", 53},
	{"matvec8_q5_0_", "ffn_down/rows=2048/cols=8192/n=8", 34},
	{"matvec8_q4_0_", "ffn_down/rows=2048/cols=8192/n=8", 30},
	{"matvec8_q6_K_", "ffn_down/rows=2048/cols=8192/n=8", 55},
	{"matvec8_q5_K_", "ffn_down/rows=2048/cols=8192/n=8", 49},
	{"matvec8_q4_1_", "ffn_down/rows=2048/cols=8192/n=8", 31},
	{"matvec8_q5_1_", "ffn_down/rows=2048/cols=8192/n=8", 48},
	{"matvec8_q4_K_", "ffn_down/rows=2048/cols=8192/n=8", 27},
	{"matvec8_q3_K_", "ffn_down/rows=2048/cols=8192/n=8", 30},
	{"matvec8_q2_K_", "ffn_down/rows=2048/cols=8192/n=8", 26},
	{"matvec8_", "ffn_up/rows=8192/cols=2048/n=8", 35},
	{"matvec8_", "ffn_down/rows=2048/cols=8192/n=8", 27},
	{"matvec8_", "bandwidth/", 7.5},
	// one column through matvec8, which no launch does (MatVecFor gives it to matvec): the
	// branch-free forms fold all eight columns; the least q4_K's on 512 rows, 32 blocks of two
	// rows a warp
	{"matvec8_", "/n=1", 5},
	// the other shapes and kernels: no regression
	{"matvec_", "", 4},
	{"matvec8_", "", 19}, // the least q2_K's at attn_q (20 %, latency-bound)
	{"moe_matvec_", "", 31},
	// the grouped MoE: two units in flight a lane (ROW_AHEAD); the least mixtral's eight-token
	// gate/up (35 %, issue-bound) and qwen3.5-moe's one-token down (42 %: 16 units a row)
	{"moe_gate_up_", "", 34},
	{"moe_down_", "", 41},
	{"act_", "", 7},
	// the fused producers and conversions: one block a piece of 256 values of a row (a decoded
	// row's 8192 on 32 SMs, not one); latency-bound at a few hundred nanoseconds' work
	{"swiglu_act_", "/n=1", 1},
	{"swiglu_act_", "", 8},
	{"rmsnorm_act_", "", 0.32},
	// the merge on its own (a tree's, in the megakernel): a block per (row, KV head) reads its
	// query heads' partial results from the L2, where the attention launch left them: a few L2
	// round trips and no DRAM to speak of, so its floor is a token and its time is the measure
	{"attention_merge_", "qwen3.5-moe/", 0.8},
	{"attention_merge_", "", 1.3},
	{"attention_", "qwen3.5-moe/", 5}, // 64 pairs of 256 dims merged by one block a KV head, 8 at a time
	{"attention_", "", 12},            // and its K/V budgets (attentionKVBudgets)
	{"argmax_", "", 0.3},
	{"gdn_conv_", "", 4},
	{"gdn_scan_", "", 1.8}, // 16 state values loaded a pass (GDN_AHEAD)
	{"moe_combine_", "", 10},
	{"moe_router_", "", 0.01},
	{"rmsnorm_", "", 0.3},
	{"rope_", "", 1.5},
}

func budgetFor(entry, shape string) (budget, bool) {
	for _, b := range budgets {
		if strings.HasPrefix(entry, b.entry) && strings.Contains(shape, b.shape) {
			return b, true
		}
	}
	return budget{}, false
}

// bandwidthShapes are the matrices the GPU check's bandwidth test times (device/cuda's
// TestBandwidth): 65536 rows of the fewest multiple of 256 columns that makes 16384 rows at
// least 64 MB of GGUF bytes, with one and eight columns.
func bandwidthShapes(t dtype.Type) []devicetest.Shape {
	cols := int64(256)
	for {
		rb, err := t.RowBytes(cols)
		if err != nil {
			return nil
		}
		if 16384*rb >= 64<<20 {
			break
		}
		cols += 256
	}
	var out []devicetest.Shape
	for _, n := range []int32{1, 8} {
		out = append(out, devicetest.Shape{Name: fmt.Sprintf("bandwidth/rows=65536/cols=%d/n=%d", cols, n),
			Args: kernels.MatVecArgs{W: 1 << 40, X: 2 << 40, Y: 3 << 40, Rows: 65536, Cols: int32(cols), N: n}})
	}
	return out
}

// launches are the kernels and shapes the budgets cover: every real-size case, and the
// bandwidth test's matrices for the matvecs.
func launches() []struct {
	spec  device.Spec
	shape devicetest.Shape
} {
	var out []struct {
		spec  device.Spec
		shape devicetest.Shape
	}
	add := func(k device.Spec, s devicetest.Shape) {
		out = append(out, struct {
			spec  device.Spec
			shape devicetest.Shape
		}{k, s})
	}
	for _, k := range device.Kernels() {
		for _, s := range devicetest.RealShapes(k.Entry()) {
			add(k, s)
		}
	}
	for _, t := range kernels.WeightTypes() {
		for _, n := range []int{1, 8} {
			k, err := kernels.MatVecFor(t, n)
			if err != nil {
				continue
			}
			for _, s := range bandwidthShapes(t) {
				if s.Args.(kernels.MatVecArgs).N == int32(n) {
					add(k, s)
				}
			}
		}
	}
	return out
}

// TestBudgets fails when a kernel's predicted share of its floor falls below its budget.
func TestBudgets(t *testing.T) {
	c := Cards[DefaultCard]
	for _, l := range launches() {
		b, ok := budgetFor(l.spec.Entry(), l.shape.Name)
		if !ok {
			t.Errorf("%s %s: no budget (add a row to budgets)", l.spec.Entry(), l.shape.Name)
			continue
		}
		p, err := Predict(c, l.spec, l.shape.Args)
		if err != nil {
			t.Errorf("%s %s: %v", l.spec.Entry(), l.shape.Name, err)
			continue
		}
		if p.Pct < b.pct {
			t.Errorf("%s %s: predicted %.1f %% of the floor (%s-bound), below its budget of %.1f %%", l.spec.Entry(), l.shape.Name,
				p.Pct, p.Limiter, b.pct)
		}
	}
}

// TestPrefetchesOnlyHelp: every launch's prediction without its kernel's prefetches (what the
// megakernel's bodies, which make none, are priced at) is no faster than with them, and some
// kernel gains from them.
func TestPrefetchesOnlyHelp(t *testing.T) {
	c := Cards[DefaultCard]
	gained := 0
	for _, l := range launches() {
		p, err := Predict(c, l.spec, l.shape.Args)
		if err != nil {
			t.Fatal(err)
		}
		u, err := PredictWith(c, l.spec, l.shape.Args, Options{Unprefetched: true})
		if err != nil {
			t.Fatal(err)
		}
		if u.TimeUS < p.TimeUS {
			t.Errorf("%s %s: %.2f µs without the prefetches, %.2f with", l.spec.Entry(), l.shape.Name, u.TimeUS, p.TimeUS)
		}
		if u.TimeUS > p.TimeUS {
			gained++
		}
	}
	if gained == 0 {
		t.Error("no launch gains from its kernel's prefetches")
	}
}
