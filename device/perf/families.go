package perf

import (
	"fmt"
	"strings"

	"verity/device/dtype"
	"verity/device/kernels"
)

// The traffic of each kernel family (see Traffic): one function per argument type, from the
// kernels' sources in ptx/src. float32 values are 4 bytes; i32 indices 4.

const f32 = 4

func init() {
	RegisterTraffic(matvecTraffic)
	RegisterTraffic(moeMatVecTraffic)
	RegisterTraffic(moeGateUpTraffic)
	RegisterTraffic(moeDownTraffic)
	RegisterTraffic(convertTraffic)
	RegisterTraffic(rmsnormTraffic)
	RegisterTraffic(rmsnormActTraffic)
	RegisterTraffic(binaryActTraffic)
	RegisterTraffic(binaryTraffic)
	RegisterTraffic(unaryTraffic)
	RegisterTraffic(biasTraffic)
	RegisterTraffic(gatherTraffic)
	RegisterTraffic(embedTraffic)
	RegisterTraffic(argmaxTraffic)
	RegisterTraffic(ropeTraffic)
	RegisterTraffic(ropeKVStoreTraffic)
	RegisterTraffic(kvStoreTraffic)
	RegisterTraffic(attentionTraffic)
	RegisterTraffic(gatedNormTraffic)
	RegisterTraffic(splitGateTraffic)
	RegisterTraffic(routerTraffic)
	RegisterTraffic(combineTraffic)
	RegisterTraffic(gdnConvTraffic)
	RegisterTraffic(gdnScanTraffic)
}

func n64(v ...int32) int64 {
	p := int64(1)
	for _, x := range v {
		p *= int64(x)
	}
	return p
}

// matvec, matvec8: every weight row once per pass of columns (once in all when the matrix
// stays in the L2), every warp reading all N activation rows — a warp of matvec8 handles
// rowsPerWarp rows; a staged matvec8 reads them once per block — and Y written (and read with
// Acc).
func matvecTraffic(entry string, a kernels.MatVecArgs) (Traffic, error) {
	t, f, row, err := weightRow(entry, a.Cols)
	if err != nil {
		return Traffic{}, err
	}
	w := int64(a.Rows) * row
	p := int64((int(a.N) + columns(entry) - 1) / columns(entry))
	x := int64(a.N) * int64(f.Act.RowBytes(int(a.Cols)))
	y := n64(a.N, a.Rows) * f32
	tr := Traffic{Passes: p, Streams: []Stream{
		{Param: "W", Bytes: w * passes(w, int(a.N), columns(entry)), Requested: w * p},
		{Param: "X", Bytes: x, Requested: x * xReaders(entry, t, a.Rows)},
		{Param: "Y", Bytes: y, Write: true},
	}}
	if a.Acc != 0 {
		tr.Streams = append(tr.Streams, Stream{Param: "Y", Bytes: y})
	}
	return tr, nil
}

// distinctExperts is how many experts n·k routed slots read, taken to be distinct.
func distinctExperts(n, k, ne int32) int64 { return min(int64(n)*int64(k), int64(ne)) }

const expertNote = "assumes the routed slots pick distinct experts"

func moeMatVecTraffic(entry string, a kernels.MoEMatVecArgs) (Traffic, error) {
	_, f, row, err := weightRow(entry, a.Cols)
	if err != nil {
		return Traffic{}, err
	}
	slots := n64(a.N, a.K)
	xRows := int64(a.N)
	if a.XPerSlot != 0 {
		xRows = slots
	}
	xb := int64(f.Act.RowBytes(int(a.Cols)))
	return Traffic{Note: expertNote, Streams: []Stream{
		{Param: "W", Bytes: distinctExperts(a.N, a.K, a.NExpert) * int64(a.Out) * row, Requested: slots * int64(a.Out) * row},
		{Param: "X", Bytes: xRows * xb, Requested: slots * int64(a.Out) * xb},
		{Param: "Ids", Bytes: slots * 4, Requested: slots * int64(a.Out) * 4},
		{Param: "Y", Bytes: slots * int64(a.Out) * f32, Write: true},
	}}, nil
}

func moeGateUpTraffic(entry string, a kernels.MoEGateUpArgs) (Traffic, error) {
	_, f, row, err := weightRow(entry, a.Cols)
	if err != nil {
		return Traffic{}, err
	}
	slots := n64(a.N, a.K)
	w := distinctExperts(a.N, a.K, a.NExpert) * int64(a.Out) * row
	xb := int64(f.Act.RowBytes(int(a.Cols)))
	return Traffic{Note: expertNote, Streams: []Stream{
		{Param: "WGate", Bytes: w, Requested: slots * int64(a.Out) * row},
		{Param: "WUp", Bytes: w, Requested: slots * int64(a.Out) * row},
		{Param: "X", Bytes: int64(a.N) * xb, Requested: 2 * slots * int64(a.Out) * xb},
		{Param: "Ids", Bytes: slots * 4, Requested: slots * int64(a.Out) * 4},
		{Param: "Y", Bytes: slots * int64(a.Out) * f32, Write: true},
	}}, nil
}

func moeDownTraffic(entry string, a kernels.MoEDownArgs) (Traffic, error) {
	_, f, row, err := weightRow(entry, a.Cols)
	if err != nil {
		return Traffic{}, err
	}
	slots := n64(a.N, a.K)
	xb := int64(f.Act.RowBytes(int(a.Cols)))
	tr := Traffic{Note: expertNote, Streams: []Stream{
		{Param: "W", Bytes: distinctExperts(a.N, a.K, a.NExpert) * int64(a.Rows) * row, Requested: slots * int64(a.Rows) * row},
		{Param: "X", Bytes: slots * xb, Requested: slots * int64(a.Rows) * xb},
		{Param: "Ids", Bytes: slots * 4, Requested: slots * int64(a.Rows) * 4},
		{Param: "Weights", Bytes: slots * f32, Requested: slots * int64(a.Rows) * f32},
		{Param: "Out", Bytes: n64(a.N, a.Rows) * f32, Write: true},
	}}
	if a.Shared != 0 {
		tr.Streams = append(tr.Streams, Stream{Param: "Shared", Bytes: n64(a.N, a.Rows) * f32},
			Stream{Param: "Gate", Bytes: int64(a.N) * f32, Requested: n64(a.N, a.Rows) * f32})
	}
	return tr, nil
}

func actOf(entry string) (kernels.Act, error) {
	i := strings.LastIndex(entry, "_act_")
	name := entry[i+len("_act_"):]
	if i < 0 {
		name = strings.TrimPrefix(entry, "act_")
	}
	for _, a := range []kernels.Act{kernels.ActF16, kernels.ActBF16, kernels.ActQ8_0, kernels.ActQ8_1, kernels.ActQ8_K} {
		if a.String() == name {
			return a, nil
		}
	}
	return 0, fmt.Errorf("perf: %s names no activation format", entry)
}

func convertTraffic(entry string, a kernels.ConvertArgs) (Traffic, error) {
	act, err := actOf(entry)
	if err != nil {
		return Traffic{}, err
	}
	return Traffic{Streams: []Stream{
		{Param: "X", Bytes: n64(a.N, a.Cols) * f32},
		{Param: "Out", Bytes: int64(a.N) * int64(act.RowBytes(int(a.Cols))), Write: true},
	}}, nil
}

// rmsnorm: a warp per group reads its row twice (the sum of squares, then the output).
func rmsnormTraffic(_ string, a kernels.RMSNormArgs) (Traffic, error) {
	x := n64(a.Groups, a.Width) * f32
	return Traffic{Streams: []Stream{
		{Param: "X", Bytes: x, Requested: 2 * x},
		{Param: "W", Bytes: int64(a.Width) * f32, Requested: x},
		{Param: "Y", Bytes: x, Write: true},
	}}, nil
}

func rmsnormActTraffic(entry string, a kernels.RMSNormActArgs) (Traffic, error) {
	act, err := actOf(entry)
	if err != nil {
		return Traffic{}, err
	}
	x := n64(a.Rows, a.Width) * f32
	return Traffic{Streams: []Stream{
		{Param: "X", Bytes: x, Requested: 2 * x},
		{Param: "W", Bytes: int64(a.Width) * f32, Requested: x},
		{Param: "Out", Bytes: int64(a.Rows) * int64(act.RowBytes(int(a.Width))), Write: true},
	}}, nil
}

func binaryActTraffic(entry string, a kernels.BinaryActArgs) (Traffic, error) {
	act, err := actOf(entry)
	if err != nil {
		return Traffic{}, err
	}
	x := n64(a.Rows, a.Width) * f32
	return Traffic{Streams: []Stream{
		{Param: "A", Bytes: x}, {Param: "B", Bytes: x},
		{Param: "Out", Bytes: int64(a.Rows) * int64(act.RowBytes(int(a.Width))), Write: true},
	}}, nil
}

func binaryTraffic(_ string, a kernels.BinaryArgs) (Traffic, error) {
	x := int64(a.N) * f32
	return Traffic{Streams: []Stream{{Param: "A", Bytes: x}, {Param: "B", Bytes: x}, {Param: "Y", Bytes: x, Write: true}}}, nil
}

func unaryTraffic(_ string, a kernels.UnaryArgs) (Traffic, error) {
	x := int64(a.N) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: x}, {Param: "Y", Bytes: x, Write: true}}}, nil
}

func biasTraffic(_ string, a kernels.BiasArgs) (Traffic, error) {
	x := n64(a.Rows, a.Width) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: x}, {Param: "Bias", Bytes: int64(a.Width) * f32, Requested: x},
		{Param: "Y", Bytes: x, Write: true}}}, nil
}

func gatherTraffic(_ string, a kernels.GatherArgs) (Traffic, error) {
	x := n64(a.Rows, a.Width) * f32
	return Traffic{Streams: []Stream{{Param: "Idx", Bytes: int64(a.Rows) * 4, Requested: int64(a.Rows) * 4 * 8},
		{Param: "X", Bytes: x}, {Param: "Out", Bytes: x, Write: true}}}, nil
}

func embedTraffic(entry string, a kernels.EmbedArgs) (Traffic, error) {
	t, _, err := weightType(entry)
	if err != nil {
		return Traffic{}, err
	}
	rb, err := t.RowBytes(int64(a.Cols))
	if err != nil {
		return Traffic{}, err
	}
	return Traffic{Streams: []Stream{{Param: "Tokens", Bytes: int64(a.Rows) * 4},
		{Param: "Table", Bytes: int64(a.Rows) * rb}, {Param: "Out", Bytes: n64(a.Rows, a.Cols) * f32, Write: true}}}, nil
}

func argmaxTraffic(_ string, a kernels.ArgmaxArgs) (Traffic, error) {
	return Traffic{Streams: []Stream{{Param: "X", Bytes: n64(a.Rows, a.Cols) * f32},
		{Param: "Out", Bytes: int64(a.Rows) * 4, Write: true}}}, nil
}

func ropeTraffic(_ string, a kernels.RopeArgs) (Traffic, error) {
	x := n64(a.Rows, a.Heads, a.HeadDim) * f32
	cs := n64(a.Rows, a.NRot) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: x}, {Param: "X", Bytes: x, Write: true},
		{Param: "CosSin", Bytes: cs, Requested: cs * int64(a.Heads)}}}, nil
}

func ropeKVStoreTraffic(_ string, a kernels.RopeKVStoreArgs) (Traffic, error) {
	x := n64(a.Rows, a.KVDim) * f32
	cs := n64(a.Rows, a.NRot) * f32
	return Traffic{Streams: []Stream{{Param: "K", Bytes: x}, {Param: "V", Bytes: x},
		{Param: "CosSin", Bytes: cs, Requested: cs * int64(a.Heads)}, {Param: "Slots", Bytes: int64(a.Rows) * 4},
		{Param: "KCache", Bytes: x, Write: true}, {Param: "VCache", Bytes: x, Write: true}}}, nil
}

func kvStoreTraffic(_ string, a kernels.KVStoreArgs) (Traffic, error) {
	x := n64(a.Rows, a.KVDim) * f32
	return Traffic{Streams: []Stream{{Param: "K", Bytes: x}, {Param: "V", Bytes: x}, {Param: "Slots", Bytes: int64(a.Rows) * 4},
		{Param: "KCache", Bytes: x, Write: true}, {Param: "VCache", Bytes: x, Write: true}}}, nil
}

// attention: the key lists are data; taken as a tree step's (devicetest's real cases): the
// first NSlots − Rows slots are a history every row attends to, and row r also attends to r+1
// slots of its own (its path; a decode row, Rows = 1, to one). ptx/src/attention.cu runs a
// block per (group of kernels.AttnGroup rows, KV head, chunk) for the Shared chunks the host
// promised (the history's whole chunks), and a block per (row, KV head, chunk) for the others:
// of those, the first row of a group computes a chunk that holds the same slots for all its
// rows (a history's whole chunk not promised), the others' blocks return after comparing it,
// and a block past its row's last chunk returns at once. So each history slot's K and V rows
// come from DRAM once, and a computed chunk stages its keys' K and V rows (the last, partial
// chunk again from the L2 per row) and reads the queries of its pairs; each pair's partial
// result goes to Part, which the chunks' last block reads back to merge.
func attentionTraffic(entry string, a kernels.AttentionArgs) (Traffic, error) {
	kes, err := cacheBytes(a.KType)
	if err != nil {
		return Traffic{}, err
	}
	ves, err := cacheBytes(a.VType)
	if err != nil {
		return Traffic{}, err
	}
	if entry == kernels.AttentionMerge.EntryName {
		return attentionMergeTraffic(a, kes, ves), nil
	}
	rows, nkv, hd, chunk := int64(a.Rows), int64(a.NKV), int64(a.HeadDim), int64(kernels.AttnChunk)
	g := int64(a.NHead / a.NKV) // query heads per KV head
	hist := max(0, int64(a.NSlots)-rows)
	whole := hist / chunk // the history's whole chunks, the same for every row
	shared := min(int64(a.Shared), whole)
	// per KV head: the keys of all lists, the keys staged, the (row, query head) pairs computed
	// by chunk, every row's chunks (the merge's reads), and the slots and offsets read
	var keys, staged, pairs, parts, slotReads, offReads int64
	// the working blocks of the shared chunks, and of the others (first in the grid)
	type kind struct {
		work        Work
		instrs, lsu float64
	}
	var shr, own kind
	returning := int64(0)
	deferred := a.DeferMerge != 0
	add := func(k *kind, n, rowsIn, keys int64, later bool) { // n blocks computing rowsIn rows over chunks of keys keys
		b := attnBlock(rowsIn*g, keys, hd, kes, ves, later, deferred)
		k.work.Blocks += n * nkv
		k.instrs += float64(n*nkv) * b.Instrs
		k.lsu += float64(n*nkv) * b.LSUCycles
		k.work.DRAMWaits, k.work.L2Waits, k.work.Syncs = b.DRAMWaits, b.L2Waits, b.Syncs
		staged += n * keys
		pairs += n * rowsIn * g
		gn := min(rows, int64(kernels.AttnGroup))
		slotReads += n * gn * chunk
		offReads += n * (2*gn*chunk + 2*gn + 2)
	}
	for g0 := int64(0); g0 < rows; g0 += int64(kernels.AttnGroup) { // the shared chunks
		add(&shr, shared, min(int64(kernels.AttnGroup), rows-g0), chunk, false)
		// a shared chunk's block for KV head h > 0 follows head h−1's in the grid, which
		// asked the L2 for its keys and values
		shr.work.Successors += shared * (nkv - 1)
	}
	for r := range rows {
		n := hist + r + 1
		keys += n
		parts += (n + chunk - 1) / chunk
		for c := shared; c < int64(a.Chunks); c++ {
			if deferred && c == int64(a.Chunks)-1 { // the merge launch's
				continue
			}
			switch first := r%int64(kernels.AttnGroup) == 0; {
			case c*chunk >= n || c < whole && !first: // past the row's end, or its group's first row's chunk
				returning++
				slotReads += 2 * chunk
				offReads += 4
			case c < whole:
				add(&own, 1, min(int64(kernels.AttnGroup), rows-r), chunk, false)
			default: // the row's own chunk
				add(&own, 1, 1, min(chunk, n-c*chunk), !first)
			}
		}
	}
	kv := int64(a.NSlots) * nkv * hd     // cache elements of each of K and V
	part := pairs * nkv * (hd + 2) * f32 // partial results written
	q := rows * int64(a.NHead) * hd * f32
	for _, k := range []*kind{&shr, &own} {
		if k.work.Blocks > 0 {
			k.work.Instrs, k.work.LSUCycles = k.instrs/float64(k.work.Blocks), k.lsu/float64(k.work.Blocks)
		}
	}
	// the shared chunks' blocks, with the others' leading them in the grid; or the others alone
	work := own.work
	if shr.work.Blocks > 0 {
		work = shr.work
		if own.work.Blocks > 0 {
			work.Leading = &own.work
		}
	}
	// the blocks of an unpromised row's chunks that its group's first row computes: each
	// reads its row's and the first row's key offsets (one L2 round trip), their chunk's keys
	// (another), each warp compares the whole chunk and votes, and it returns (no barrier:
	// every warp reaches the same answer); the blocks past a row's last chunk return at once
	work.Returning = &Work{Blocks: returning * nkv, L2Waits: 2, Instrs: attnReturningInstrs, LSUCycles: attnReturningLSU}
	// the blocks that bring a (row, KV head)'s chunk count to its end merge the row's chunks.
	// Over a shared history a group's rows differ only in their own chunks, whose blocks come
	// first in the grid: the last of a row's blocks is one of the shared chunks', the same for
	// all the group's rows, and it merges them all together — one block a (group, KV head),
	// the group's pairs. Without shared chunks, one a (row, KV head), the row's query heads.
	nc := (hist + rows + chunk - 1) / chunk
	m, merging := attnMerge(g, nc, hd), rows*nkv
	if shared > 0 {
		m, merging = attnMerge(min(rows, int64(kernels.AttnGroup))*g, nc, hd), (rows+int64(kernels.AttnGroup)-1)/int64(kernels.AttnGroup)*nkv
	}
	if merging = min(merging, work.Blocks); merging > 0 && !deferred {
		m.Blocks = merging
		work.Merging = &m
	}
	note := fmt.Sprintf("assumes a tree step's key lists (a shared history of NSlots−Rows slots, r+1 own slots for row r); K/V %.1f MB of the launch's traffic; timed from its work as counted from attention.cu",
		float64(kv*(kes+ves))/1e6)
	if deferred {
		note += "; its merge deferred to attention_merge_f32"
	}
	streams := []Stream{
		{Param: "Q", Bytes: q, Requested: pairs * nkv * hd * f32},
		{Param: "KCache", Bytes: kv * kes, Requested: staged * nkv * hd * kes},
		{Param: "VCache", Bytes: kv * ves, Requested: staged * nkv * hd * ves},
		{Param: "Keys", Bytes: keys * 4, Requested: slotReads * nkv * 4},
		{Param: "KeyOff", Bytes: (rows + 1) * 4, Requested: offReads * nkv * 4},
		{Param: "Part", Bytes: part, Write: true},
	}
	if !deferred {
		streams = append(streams,
			Stream{Param: "Part", Requested: parts * int64(a.NHead) * (hd + 2) * f32},                    // the merge's reads, from the L2
			Stream{Param: "Out", Bytes: q / f32 * int64(kernels.Act(a.OutAct).RowBytes(1)), Write: true}) // f32, f16 or bf16
	}
	return Traffic{Work: &work, Note: note, Streams: streams}, nil
}

// attentionMergeTraffic: attention_merge_f32 (ptx/src/attention.cu), a block per (row, KV head)
// for the head's query heads, over the key lists attentionTraffic assumes (a tree step's: a
// shared history of NSlots−Rows slots, r+1 own slots for row r): the row's key offsets, then
// the last chunk's slots and the counter (two L2 round trips); the row's own chunk,
// the launch's last, computed as attention_f32's block computes a chunk (attnBlock) — its keys
// and values written by this step, so its staged slices come from the L2 — and att_merge's
// waits and work (attnMerge) for the row's chunks, whose partial results the attention launch
// just wrote to the L2. kes and ves are the caches' element sizes.
func attentionMergeTraffic(a kernels.AttentionArgs, kes, ves int64) Traffic {
	rows, nkv, hd, chunk := int64(a.Rows), int64(a.NKV), int64(a.HeadDim), int64(kernels.AttnChunk)
	g := int64(a.NHead / a.NKV)
	hist := max(0, int64(a.NSlots)-rows)
	var words, ownKeys, ownPairs int64
	var work Work
	for r := range rows {
		n := hist + r + 1
		if a.Window > 0 {
			n = min(n, int64(a.Window))
		}
		nc := min((n+chunk-1)/chunk, int64(a.Chunks))
		b := Work{L2Waits: 2, Syncs: 1, Instrs: 8 * 40} // the offsets, then the slots and the counter
		if nc == int64(a.Chunks) && a.Shared < a.Chunks {
			k := n - (nc-1)*chunk
			own := attnBlock(g, k, hd, kes, ves, false, true)
			b.Instrs += own.Instrs
			b.LSUCycles += own.LSUCycles
			b.L2Waits += own.DRAMWaits // the slots this step wrote
			b.Syncs += own.Syncs + 1
			ownKeys += k
			ownPairs += g
		}
		m := attnMerge(g, nc, hd)
		work.Instrs += float64(nkv) * (b.Instrs + m.Instrs)
		work.LSUCycles += float64(nkv) * (b.LSUCycles + m.LSUCycles)
		work.L2Waits, work.Syncs = max(work.L2Waits, b.L2Waits+m.L2Waits), max(work.Syncs, b.Syncs+m.Syncs)
		words += g * nkv * nc * (hd + 2)
	}
	work.Blocks = rows * nkv
	work.Instrs /= float64(work.Blocks)
	work.LSUCycles /= float64(work.Blocks)
	q := rows * int64(a.NHead) * hd * f32
	return Traffic{Work: &work, Note: "assumes a tree step's key lists, as attention_f32's; the rows' own chunks' keys and values and the partial results read from the L2",
		Streams: []Stream{
			{Param: "Q", Bytes: ownPairs * nkv * hd * f32},
			{Param: "KCache", Requested: ownKeys * nkv * hd * kes},
			{Param: "VCache", Requested: ownKeys * nkv * hd * ves},
			{Param: "Keys", Bytes: ownKeys * 4, Requested: ownKeys * nkv * 4},
			{Param: "KeyOff", Bytes: (rows + 1) * 4, Requested: work.Blocks * 8},
			{Param: "Count", Bytes: rows * nkv * 4},
			{Param: "Part", Bytes: ownPairs * nkv * (hd + 2) * f32, Write: true},
			{Param: "Part", Requested: words * f32},
			{Param: "Out", Bytes: q / f32 * int64(kernels.Act(a.OutAct).RowBytes(1)), Write: true},
		}}
}

// attnBlock counts one working block of attention_f32 (ptx/src/attention.cu) computing p
// (row, query head) pairs over a chunk of keys keys: warp instructions and L1/shared cycles
// of its loops as the source writes them (a pass of more than 16 pairs in the tiled forms,
// their loops' instructions per FMA as ptxas emits them for sm_90; fewer in attnUntiled's),
// and its waits in order — the row's key offsets and
// slots (L2), each pair of staged slices (DRAM: two are in flight ahead; each slice's queries
// are asked of the L1 before that wait, so they add none) and the rows' counters (one
// acquire-release atomic a row, the first warp's lanes side by side: L2); the last block of a
// row adds the merge (attnMerge). A block of a later row than its group's first
// (later) compares its chunk with the first row's before anything else (an L2 round trip
// more).
func attnBlock(p, keys, hd, kes, ves int64, later, deferred bool) Work {
	const ds, pmax, warps = 64, 32, 8
	ns := (hd + ds - 1) / ds
	passes := (p + pmax - 1) / pmax
	var in, lsu float64
	for p0 := int64(0); p0 < p; p0 += pmax {
		np := min(pmax, p-p0)
		if np > pmax/2 { // the tiled forms (att_scores_tiled, att_softmax_tiled, att_values_tiled)
			for d0 := int64(0); d0 < hd; d0 += ds {
				w := min(ds, hd-d0)
				// scores: per 4 dims, each warp 2 key vectors and 4 query vectors (8 and 4
				// rows: a wavefront each) for 32 FMAs, ~40 instructions as ptxas unrolls it
				in += warps * float64(w/4) * 40
				lsu += warps * float64(w/4) * 6
				// values: per 4 keys, each warp 4 weight vectors and 4 value pairs (8 and 4
				// rows: a wavefront each) for 32 FMAs, ~44 instructions; every warp runs it,
				// whatever the slice's width
				in += warps * float64((keys+3)/4) * 44
				lsu += warps * float64((keys+3)/4) * 8
			}
			// softmax, per thread (8 scores of 4 pairs): the scale (2 each), the maxima as
			// max_key's integers (a key, ~6, each score; a pair's two keys' maximum, 3
			// butterfly steps of a shuffle and a maximum, the store; after the barrier the 4
			// key groups' loads, 3 maxima and max_unkey, ~4), the weights (exp32 ~20 and 3
			// more each) and a warp's 4 sums (2 loads, 2 adds and the 5-step butterfly each)
			in += warps * (8*2 + 8*6 + 4*(1+3*2+1) + 4*(4+3+4) + 8*24 + 4*(4+5*2+4))
			lsu += warps * (4 + 4 + 8 + 4*2)
		} else {
			in, lsu = attnUntiled(in, lsu, np, keys, hd)
		}
		for d0 := int64(0); d0 < hd; d0 += ds {
			w := min(ds, hd-d0)
			e := float64(ds * w)                     // a staged slice's elements, keys and values
			in += e / 32 * (2 + float64(kes)/16) * 2 // loads (16-byte vectors), widening, stores
			lsu += e/32 + e*float64(kes)/512*4 + e/32 + e*float64(ves)/512*4
			in += float64(np*w) / 32 * 3 // the pairs' query slice
			lsu += float64(np*w) / 32 * 2
		}
		in += float64(np*(hd+2)) / 32 // the partial results
		lsu += float64(np*(hd+2)) / 32
	}
	in += 400 // the key lists, the group's comparison, the counter
	lsu += 50
	total := passes * 2 * ns
	w := Work{Instrs: in, LSUCycles: lsu, DRAMWaits: int((total + 1) / 2),
		L2Waits: 2 + 1, Syncs: int(3 + 2*total + 3*passes)}
	if deferred { // no counter to wait for: a bad chunk's mark is not waited on
		w.L2Waits--
	}
	if later {
		w.Instrs += attnReturningInstrs
		w.LSUCycles += attnReturningLSU
		w.L2Waits++
	}
	return w
}

// attnUntiled adds to in and lsu a pass of np pairs (at most half of a pass's) over a chunk
// of keys keys in the untiled forms (att_scores, att_values and the softmax beside them): a
// pair group of two warps a quarter of the pairs, a thread a key (or a dim) of each.
func attnUntiled(in, lsu float64, np, keys, hd int64) (float64, float64) {
	const ds = 64
	for pg := int64(0); pg < 4; pg++ { // two warps per pair group
		ni := (np - pg + 3) / 4
		if ni <= 0 {
			continue
		}
		nt := int64(1) // att_scores and att_values are instantiated for 1, 2, 4 and 8 pairs
		for nt < ni {
			nt *= 2
		}
		for d0 := int64(0); d0 < hd; d0 += ds {
			w := min(ds, hd-d0)
			// scores: per 4 dims, 4 key loads, nt query vectors, 4·nt FMAs and the loop
			in += 2 * float64(w/4) * float64(4+nt+4*nt+2)
			lsu += 2 * float64(w/4) * float64(4+nt)
			// values: per 4 keys, 4 value loads, nt weight vectors, 4·nt FMAs
			in += 2 * float64((keys+3)/4) * float64(4+nt+4*nt+2)
			lsu += 2 * float64((keys+3)/4) * float64(4+nt)
		}
		// softmax: scale, the warp maximum (a key, one redux.sync, max_unkey), exp32, the sum
		// (about 37 instructions a pair)
		in += 2 * float64(nt) * 37
		lsu += 2 * float64(nt) * 4
	}
	return in, lsu
}

// attnMerge counts what merging p (row, query head) pairs over their nc chunks adds to a
// block, as attention.cu's merge writes it, in batches of up to 32 pairs (fewer for heads of
// more than 64 dims), each in windows of the chunks its weights' room holds: the pairs' maxima
// (a lane's four chunks loaded at once: an L2 trip per 128 chunks; kept in shared memory for
// the weights when one window holds them all, else reloaded, a trip per weight a thread), the
// weights exp32(m_c − M) (~26 instructions a pair and chunk with the maxima's), and the sums
// L = fma(l_c, w_c, L) and O[d] = fma(o_c[d], w_c, O[d]) in chunk order (att_merge_sums: a
// thread's K outputs, a step of chunks loaded at once — an L2 trip a step and one for the
// rest — at the instructions ptxas's sm_90 loop takes a step).
func attnMerge(p, nc, hd int64) Work {
	const pmax, ds, chunk, threads = 32, 64, 64, 256
	hb := max(1, min(pmax, pmax*ds/hd))
	wn := pmax * chunk / hb
	waits, syncs := 0, 0
	var instrs float64 // thread instructions
	for b0 := int64(0); b0 < p; b0 += hb {
		nb := min(hb, p-b0)
		waits += int((nc + 127) / 128)
		syncs += 3
		// att_merge_sums<K, step>: the outputs a thread, the chunks a step, the instructions a step
		k := (nb*hd + threads - 1) / threads
		step, perStep := int64(4), 212.0
		switch {
		case k <= 1:
			step, perStep = 16, 164
		case k <= 4:
			step, perStep = 8, 197
		}
		for cw := int64(0); cw < nc; cw += wn {
			cn := min(wn, nc-cw)
			if nc > wn {
				waits += int((nb*wn + threads - 1) / threads)
			}
			waits += int(cn/step) + int(min(1, cn%step))
			syncs += 2
			instrs += float64(threads) * (float64(cn/step)*perStep + float64(cn%step*k)*6)
		}
		instrs += float64(nb * nc * (2 + 22 + 2))
	}
	loads := float64(p * nc * (3 + hd))
	return Work{Instrs: instrs / 32, LSUCycles: loads / 32, L2Waits: waits, Syncs: syncs}
}

// attnReturningInstrs is the warp instructions of an attention block that returns after
// comparing its chunk with the group's first row's, as attention.cu writes it: 8 warps, each
// ~30 for the two rows' key offsets and ~20 for two slots' comparison and the vote.
// attnReturningLSU is its L1 cycles: each warp's four key loads.
const (
	attnReturningInstrs = 8 * (30 + 20)
	attnReturningLSU    = 8 * 4
)

// cacheBytes is the size of a K/V cache element of type t (a dtype value: f32, f16, bf16).
func cacheBytes(t int32) (int64, error) {
	switch dtype.Type(t) {
	case dtype.F32:
		return 4, nil
	case dtype.F16, dtype.BF16:
		return 2, nil
	}
	return 0, fmt.Errorf("perf: attention: no K/V cache type %d", t)
}

func gatedNormTraffic(_ string, a kernels.GatedNormArgs) (Traffic, error) {
	x := n64(a.Rows, a.Heads, a.D) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: x, Requested: 2 * x}, {Param: "Z", Bytes: x},
		{Param: "W", Bytes: int64(a.D) * f32, Requested: x}, {Param: "Y", Bytes: x, Write: true}}}, nil
}

func splitGateTraffic(_ string, a kernels.SplitGateArgs) (Traffic, error) {
	x := n64(a.Rows, a.Heads, a.D) * f32
	return Traffic{Streams: []Stream{{Param: "X", Bytes: 2 * x}, {Param: "Q", Bytes: x, Write: true},
		{Param: "G", Bytes: x, Write: true}}}, nil
}

func routerTraffic(_ string, a kernels.RouterArgs) (Traffic, error) {
	return Traffic{Streams: []Stream{{Param: "Logits", Bytes: n64(a.Rows, a.NExpert) * f32, Requested: n64(a.Rows, a.NExpert, a.K) * f32},
		{Param: "Ids", Bytes: n64(a.Rows, a.K) * 4, Write: true}, {Param: "Weights", Bytes: n64(a.Rows, a.K) * f32, Write: true}}}, nil
}

func combineTraffic(_ string, a kernels.MoECombineArgs) (Traffic, error) {
	w := n64(a.N, a.Width) * f32
	tr := Traffic{Streams: []Stream{{Param: "Y", Bytes: n64(a.N, a.K, a.Width) * f32},
		{Param: "Weights", Bytes: n64(a.N, a.K) * f32, Requested: n64(a.N, a.K, a.Width) * f32},
		{Param: "Out", Bytes: w, Write: true}}}
	if a.Shared != 0 {
		tr.Streams = append(tr.Streams, Stream{Param: "Shared", Bytes: w}, Stream{Param: "Gate", Bytes: int64(a.N) * f32, Requested: w})
	}
	return tr, nil
}

// gdn_conv: each channel's state is read and written per row (the L2 holds it in between).
func gdnConvTraffic(_ string, a kernels.GDNConvArgs) (Traffic, error) {
	x := n64(a.Rows, a.C) * f32
	st := n64(a.K-1, a.C) * f32
	return Traffic{Note: "a chain of rows through one state slot", Streams: []Stream{
		{Param: "X", Bytes: x}, {Param: "W", Bytes: n64(a.C, a.K) * f32, Requested: int64(a.Rows) * n64(a.C, a.K) * f32},
		{Param: "State", Bytes: 2 * st, Requested: int64(a.Rows) * st}, {Param: "State", Bytes: 2 * st, Requested: int64(a.Rows) * st, Write: true},
		{Param: "Src", Bytes: int64(a.Rows) * 4, Requested: int64(a.Rows) * n64(a.C) * 4},
		{Param: "Dst", Bytes: int64(a.Rows) * 4, Requested: int64(a.Rows) * n64(a.C) * 4},
		{Param: "Y", Bytes: x, Write: true}}}, nil
}

// gdn_scan: per row, each value head's d×d state is read, written, read again and written
// (the L2 holds a head's state between rows).
func gdnScanTraffic(_ string, a kernels.GDNScanArgs) (Traffic, error) {
	st := n64(a.NV, a.D, a.D) * f32
	width := int64(2*a.NK+a.NV) * int64(a.D) * f32
	return Traffic{Note: "a chain of rows through one state slot", Streams: []Stream{
		{Param: "QKV", Bytes: int64(a.Rows) * width, Requested: int64(a.Rows) * int64(a.NV) * 3 * int64(a.D) * f32 * 2},
		{Param: "State", Bytes: 2 * st, Requested: 2 * int64(a.Rows) * st}, {Param: "State", Bytes: 2 * st, Requested: 2 * int64(a.Rows) * st, Write: true},
		{Param: "Beta", Bytes: n64(a.Rows, a.NV) * f32}, {Param: "Alpha", Bytes: n64(a.Rows, a.NV) * f32},
		{Param: "Out", Bytes: n64(a.Rows, a.NV, a.D) * f32, Write: true}}}, nil
}
