package megakernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"verity/device"
)

// The stream: what the interpreters read, little-endian throughout.
//
//	header   10 u32: magic "VMK1", version, kernel-table hash, instructions, SMs (queues),
//	         parameter words, dependencies, items, prefetch window (bytes), prefetch ranges
//	instrs   12 u32 each: kernel, first parameter word, parameters, grid x, grid y,
//	         threads per block, parts, first dependency, dependencies, prefetch parameter
//	         (its index + 1, 0 for none), prefetch bytes per block, prefetch bytes in all
//	deps     2 u32 each: an instruction index and its parts, each instruction's indices
//	         increasing and below its own index
//	queues   SMs+1 u32: queue k's items are items[queues[k] : queues[k+1]]
//	items    8 u32 each: instruction, part, the part's blocks [first, end) of the
//	         instruction's grid of B blocks in P parts: ⌊part·B/P⌋ and ⌊(part+1)·B/P⌋, its
//	         prefetch ranges: the first's index and how many (each item's follow the
//	         previous item's), and its instruction's first dependency and dependencies (the
//	         instruction's own words, repeated so that the wait needs only the item's record:
//	         the instruction's words are read beside it)
//	ranges   3 u32 each: the parameter word holding a stream's address, and bytes
//	         [from, to) from it
//	(padding to 8 bytes)
//	params   u64 words: each parameter's bits in the low end of its own word
//
// A decoded stream is checked whole: every part of every instruction is queued exactly once,
// each queue is in program order, every index is in range, each dependency's part count is
// that instruction's, each instruction's parameter count is its kernel's, and a prefetched
// parameter is an address.
//
// Prefetch: an instruction's stream is what its blocks read through the prefetch parameter —
// block v's bytes are [v·per block, (v+1)·per block) from the address, clipped to the bytes in
// all — which no instruction of the step writes (weights). Before it waits for an item's
// dependencies, a block asks the L2 for the item's ranges: the window of its queue's coming
// streams (prefetch.go, PrefetchPlan), which a decoded stream must hold exactly.
const (
	magic       = 0x314b4d56 // "VMK1"
	version     = StreamVersion
	headerWords = HeaderWords
	instrWords  = InstrWords
	itemWords   = ItemWords
	// MaxSMs bounds the queues of a stream.
	MaxSMs = 1024
	// MaxThreads is the size of the megakernel's thread blocks: no instruction's blocks may
	// be larger.
	MaxThreads = 256
	// maxStream bounds a stream's size (64 MiB; a step of a large model needs well under 1).
	maxStream = 64 << 20
)

var ptrType = reflect.TypeFor[device.Ptr]()

// The stream's layout as the megakernel's source reads it (tools/mkgen writes these into the
// kernel table): its version, the second header word, and the words of a header, an
// instruction and an item.
const (
	StreamVersion = 6
	HeaderWords   = 10
	InstrWords    = 12
	ItemWords     = 8
	RangeWords    = 3
)

// streamWords is the number of 32-bit words before a stream's parameters (its padding
// included).
func streamWords(instrs, deps, queues, items, ranges uint64) uint64 {
	w := headerWords + instrWords*instrs + 2*deps + queues + 1 + itemWords*items + RangeWords*ranges
	return w + w&1
}

// Encode lays the schedule out as a stream.
func (s *Schedule) Encode() []byte {
	var nParams, nDeps, nItems int
	for _, in := range s.Instrs {
		nParams += len(in.Params)
		nDeps += len(in.Deps)
	}
	nItems = s.Items()
	plan := s.PrefetchPlan()
	nRanges := 0
	for _, q := range plan {
		for _, rs := range q {
			nRanges += len(rs)
		}
	}
	words := int(streamWords(uint64(len(s.Instrs)), uint64(nDeps), uint64(len(s.Queues)), uint64(nItems), uint64(nRanges)))
	buf := make([]byte, 4*words+8*nParams)
	w := buf
	put := func(v uint32) {
		binary.LittleEndian.PutUint32(w, v)
		w = w[4:]
	}
	for _, v := range []int64{magic, version, int64(TableHash()), int64(len(s.Instrs)), int64(len(s.Queues)), int64(nParams), int64(nDeps), int64(nItems), s.PrefetchBytes, int64(nRanges)} {
		put(uint32(v))
	}
	po, do := 0, 0
	for _, in := range s.Instrs {
		pf := in.Prefetch
		for _, v := range []int64{int64(in.Kernel), int64(po), int64(len(in.Params)), int64(in.GridX), int64(in.GridY), int64(in.Threads), int64(in.Parts),
			int64(do), int64(len(in.Deps)), int64(pf.Param + 1), pf.PerBlock, pf.Total} {
			put(uint32(v))
		}
		po += len(in.Params)
		do += len(in.Deps)
	}
	for _, in := range s.Instrs {
		for _, d := range in.Deps {
			put(uint32(d))
			put(uint32(s.Instrs[d].Parts))
		}
	}
	off := 0
	for _, q := range s.Queues {
		put(uint32(off))
		off += len(q)
	}
	put(uint32(off))
	// every part's first block (partBlocks), by instruction: lo(p+1) − lo(p) is b/parts, plus one
	// each time the remainders b mod parts add up past parts — no division per part
	first := make([]int32, len(s.Instrs)+nItems)
	at := make([]int32, len(s.Instrs)) // where each instruction's parts start in first
	n := int32(0)
	for i := range s.Instrs {
		in := &s.Instrs[i]
		at[i] = n
		b, parts := int64(in.Blocks()), int64(in.Parts)
		q, r := b/max(parts, 1), b%max(parts, 1)
		lo, acc := int64(0), int64(0)
		for p := int64(0); p <= parts; p++ {
			first[n] = int32(lo)
			n++
			lo, acc = lo+q, acc+r
			if acc >= parts {
				lo, acc = lo+1, acc-parts
			}
		}
	}
	depAt := make([]uint32, len(s.Instrs)) // each instruction's first dependency
	for i, d := 1, uint32(0); i < len(s.Instrs); i++ {
		d += uint32(len(s.Instrs[i-1].Deps))
		depAt[i] = d
	}
	nr := uint32(0)
	for k, q := range s.Queues {
		for j, it := range q { // an item's eight words, as four little-endian pairs
			f := first[at[it.Instr]+it.Part:]
			binary.LittleEndian.PutUint64(w, uint64(uint32(it.Instr))|uint64(uint32(it.Part))<<32)
			binary.LittleEndian.PutUint64(w[8:], uint64(uint32(f[0]))|uint64(uint32(f[1]))<<32)
			binary.LittleEndian.PutUint64(w[16:], uint64(nr)|uint64(uint32(len(plan[k][j])))<<32)
			binary.LittleEndian.PutUint64(w[24:], uint64(depAt[it.Instr])|uint64(uint32(len(s.Instrs[it.Instr].Deps)))<<32)
			nr += uint32(len(plan[k][j]))
			w = w[32:]
		}
	}
	s.putRanges(w, plan)
	p := buf[4*words:]
	for _, in := range s.Instrs {
		for _, v := range in.Params {
			binary.LittleEndian.PutUint64(p, v)
			p = p[8:]
		}
	}
	return buf
}

// Decode reads and checks a stream.
func Decode(b []byte) (*Schedule, error) {
	if len(b) > maxStream {
		return nil, fmt.Errorf("megakernel: stream of %d bytes (at most %d)", len(b), maxStream)
	}
	r := reader{b: b}
	h := make([]uint32, headerWords)
	for i := range h {
		h[i] = r.u32()
	}
	if r.err != nil {
		return nil, errors.New("megakernel: stream shorter than its header")
	}
	if h[0] != magic {
		return nil, fmt.Errorf("megakernel: not a stream (magic %#08x)", h[0])
	}
	if h[1] != version {
		return nil, fmt.Errorf("megakernel: stream version %d (this build reads %d)", h[1], version)
	}
	if h[2] != TableHash() {
		return nil, fmt.Errorf("megakernel: stream encoded for kernel table %#08x, this build has %#08x", h[2], TableHash())
	}
	nInstr, nSM, nParams, nDeps, nItems, nRanges := uint64(h[3]), uint64(h[4]), uint64(h[5]), uint64(h[6]), uint64(h[7]), uint64(h[9])
	if nSM < 1 || nSM > MaxSMs {
		return nil, fmt.Errorf("megakernel: stream for %d SMs (1…%d allowed)", nSM, MaxSMs)
	}
	words := streamWords(nInstr, nDeps, nSM, nItems, nRanges)
	if want := 4*words + 8*nParams; want != uint64(len(b)) {
		return nil, fmt.Errorf("megakernel: stream of %d bytes, its header says %d", len(b), want)
	}
	if nInstr == 0 {
		return nil, errors.New("megakernel: stream with no instructions")
	}
	kernels := Kernels()
	s := &Schedule{Instrs: make([]Instr, nInstr), Queues: make([][]Item, nSM), PrefetchBytes: int64(h[8])}
	type span struct{ off, n uint64 }
	deps := make([]span, nInstr)
	params := make([]span, nInstr)
	// Encode lays out each instruction's parameters and dependencies right after the previous
	// instruction's; Decode takes no other layout, so that a stream has exactly one encoding.
	var parts, nextParam, nextDep uint64
	for i := range s.Instrs {
		in := &s.Instrs[i]
		var f [instrWords]uint32
		for j := range f {
			f[j] = r.u32()
		}
		if uint64(f[0]) >= uint64(len(kernels)) {
			return nil, fmt.Errorf("megakernel: instruction %d: kernel %d outside the table of %d", i, f[0], len(kernels))
		}
		in.Kernel, in.Name = int(f[0]), kernels[f[0]].Entry()
		params[i] = span{uint64(f[1]), uint64(f[2])}
		if params[i].off != nextParam || params[i].off+params[i].n > nParams {
			return nil, fmt.Errorf("megakernel: instruction %d: parameters [%d, +%d), want them at %d of %d", i, f[1], f[2], nextParam, nParams)
		}
		nextParam += params[i].n
		if want := uint64(kernels[f[0]].ArgsType().NumField()); params[i].n != want {
			return nil, fmt.Errorf("megakernel: instruction %d: %d parameters, kernel %s takes %d", i, f[2], in.Name, want)
		}
		blocks := uint64(f[3]) * uint64(f[4])
		if f[3] < 1 || f[4] < 1 || blocks > 1<<31 {
			return nil, fmt.Errorf("megakernel: instruction %d: grid of %d × %d blocks", i, f[3], f[4])
		}
		if f[5] < 1 || f[5] > MaxThreads {
			return nil, fmt.Errorf("megakernel: instruction %d: %d threads per block (1…%d allowed)", i, f[5], MaxThreads)
		}
		in.GridX, in.GridY, in.Threads, in.Parts = int(f[3]), int(f[4]), int(f[5]), int(f[6])
		if f[6] < 1 || uint64(f[6]) > blocks || uint64(f[6]) > nSM {
			return nil, fmt.Errorf("megakernel: instruction %d: %d parts of %d blocks on %d SMs", i, f[6], blocks, nSM)
		}
		parts += uint64(f[6])
		deps[i] = span{uint64(f[7]), uint64(f[8])}
		if deps[i].off != nextDep || deps[i].off+deps[i].n > nDeps {
			return nil, fmt.Errorf("megakernel: instruction %d: dependencies [%d, +%d), want them at %d of %d", i, f[7], f[8], nextDep, nDeps)
		}
		nextDep += deps[i].n
		in.Prefetch = Prefetch{Param: int(f[9]) - 1, PerBlock: int64(f[10]), Total: int64(f[11])}
		if f[9] == 0 {
			if f[10] != 0 || f[11] != 0 {
				return nil, fmt.Errorf("megakernel: instruction %d: prefetch sizes %d, %d without a parameter", i, f[10], f[11])
			}
		} else if uint64(f[9]) > params[i].n || kernels[f[0]].ArgsType().Field(int(f[9])-1).Type != ptrType || f[10] == 0 || f[11] < f[10] {
			return nil, fmt.Errorf("megakernel: instruction %d: prefetch of parameter %d (%d bytes per block, %d in all) of %s", i, int(f[9])-1, f[10], f[11], in.Name)
		}
	}
	if parts != nItems {
		return nil, fmt.Errorf("megakernel: %d items queued for %d parts", nItems, parts)
	}
	if nextParam != nParams || nextDep != nDeps {
		return nil, fmt.Errorf("megakernel: the instructions use %d of %d parameters and %d of %d dependencies", nextParam, nParams, nextDep, nDeps)
	}
	depWords := make([]uint32, 2*nDeps)
	for j := range depWords {
		depWords[j] = r.u32()
	}
	for i := range s.Instrs {
		d := depWords[2*deps[i].off : 2*(deps[i].off+deps[i].n)]
		s.Instrs[i].Deps = make([]int, len(d)/2)
		for j := range s.Instrs[i].Deps {
			v := d[2*j]
			if uint64(v) >= uint64(i) || (j > 0 && v <= d[2*j-2]) {
				return nil, fmt.Errorf("megakernel: instruction %d: dependencies are not increasing indices below %d", i, i)
			}
			if d[2*j+1] != uint32(s.Instrs[v].Parts) {
				return nil, fmt.Errorf("megakernel: instruction %d: dependency %d of %d parts recorded as %d", i, v, s.Instrs[v].Parts, d[2*j+1])
			}
			s.Instrs[i].Deps[j] = int(v)
		}
	}
	qoff := make([]uint64, nSM+1)
	for k := range qoff {
		qoff[k] = uint64(r.u32())
		if (k == 0 && qoff[0] != 0) || (k > 0 && qoff[k] < qoff[k-1]) || qoff[k] > nItems {
			return nil, fmt.Errorf("megakernel: queue offsets are not increasing from 0 to %d", nItems)
		}
	}
	if qoff[nSM] != nItems {
		return nil, fmt.Errorf("megakernel: queues hold %d items, the header says %d", qoff[nSM], nItems)
	}
	var ranges [][2]uint32 // each item's blocks, in queue order, checked once the grids are
	var pfCount []uint32   // each item's prefetch ranges, in queue order
	nextRange := uint64(0)
	seen := make([][]bool, nInstr)
	for i := range seen {
		seen[i] = make([]bool, s.Instrs[i].Parts)
	}
	for k := range s.Queues {
		q := make([]Item, qoff[k+1]-qoff[k])
		for j := range q {
			in, p, lo, hi, rf, rn, df, dn := r.u32(), r.u32(), r.u32(), r.u32(), r.u32(), r.u32(), r.u32(), r.u32()
			if uint64(rf) != nextRange || nextRange+uint64(rn) > nRanges {
				return nil, fmt.Errorf("megakernel: queue %d item %d: prefetch ranges [%d, +%d), want them at %d of %d", k, j, rf, rn, nextRange, nRanges)
			}
			nextRange += uint64(rn)
			pfCount = append(pfCount, rn)
			if uint64(in) >= nInstr || int(p) >= s.Instrs[in].Parts {
				return nil, fmt.Errorf("megakernel: queue %d item %d: part %d of instruction %d does not exist", k, j, p, in)
			}
			if uint64(df) != deps[in].off || uint64(dn) != deps[in].n {
				return nil, fmt.Errorf("megakernel: queue %d item %d: dependencies [%d, +%d), its instruction %d's are [%d, +%d)", k, j, df, dn, in, deps[in].off, deps[in].n)
			}
			ranges = append(ranges, [2]uint32{lo, hi})
			if j > 0 && int32(in) < q[j-1].Instr {
				return nil, fmt.Errorf("megakernel: queue %d is not in program order at item %d", k, j)
			}
			if seen[in][p] {
				return nil, fmt.Errorf("megakernel: part %d of instruction %d is queued twice", p, in)
			}
			seen[in][p] = true
			q[j] = Item{Instr: int32(in), Part: int32(p)}
		}
		s.Queues[k] = q
	}
	if nextRange != nRanges {
		return nil, fmt.Errorf("megakernel: the items prefetch %d of %d ranges", nextRange, nRanges)
	}
	pfWords := make([]uint32, RangeWords*nRanges)
	for j := range pfWords {
		pfWords[j] = r.u32()
	}
	r.pad8()
	paramWords := make([]uint64, nParams)
	for j := range paramWords {
		paramWords[j] = r.u64()
	}
	if r.err != nil {
		return nil, r.err
	}
	for i := range s.Instrs {
		in := &s.Instrs[i]
		in.Params = paramWords[params[i].off : params[i].off+params[i].n]
		// the grid and block must be the kernel's own for these parameters: a body run with
		// fewer threads than it was written for would shuffle with absent lanes or wait at a
		// barrier for threads that never come
		k := kernels[in.Kernel]
		args, err := device.Unflatten(k.ArgsType(), in.Params)
		if err != nil {
			return nil, fmt.Errorf("megakernel: instruction %d: %w", i, err)
		}
		g, err := k.Geometry(args)
		if err != nil {
			return nil, fmt.Errorf("megakernel: instruction %d (%s): %w", i, k.Entry(), err)
		}
		if int(g.Grid.X) != in.GridX || int(g.Grid.Y) != in.GridY || g.Grid.Z != 1 ||
			int(g.Block.X) != in.Threads || g.Block.Y != 1 || g.Block.Z != 1 {
			return nil, fmt.Errorf("megakernel: instruction %d (%s): grid %d × %d of %d threads, the kernel launches %v of %v",
				i, k.Entry(), in.GridX, in.GridY, in.Threads, g.Grid, g.Block)
		}
	}
	n := 0
	for k, q := range s.Queues {
		for j, it := range q {
			lo, hi := partBlocks(&s.Instrs[it.Instr], int(it.Part))
			if r := ranges[n]; r != [2]uint32{uint32(lo), uint32(hi)} {
				return nil, fmt.Errorf("megakernel: queue %d item %d: part %d of instruction %d has blocks [%d, %d), not [%d, %d)", k, j, it.Part, it.Instr, r[0], r[1], lo, hi)
			}
			n++
		}
	}
	// the prefetch ranges must be the plan's for this schedule and window
	n, at := 0, 0
	for k, q := range s.PrefetchPlan() {
		for j, rs := range q {
			if int(pfCount[n]) != len(rs) {
				return nil, fmt.Errorf("megakernel: queue %d item %d: %d prefetch ranges, its window asks for %d", k, j, pfCount[n], len(rs))
			}
			for _, pr := range rs {
				w := pfWords[RangeWords*at:]
				if want := params[pr.Instr].off + uint64(s.Instrs[pr.Instr].Prefetch.Param); uint64(w[0]) != want || w[1] != pr.From || w[2] != pr.To {
					return nil, fmt.Errorf("megakernel: queue %d item %d: prefetch of parameter word %d, bytes [%d, %d); its window asks for word %d, bytes [%d, %d)",
						k, j, w[0], w[1], w[2], want, pr.From, pr.To)
				}
				at++
			}
			n++
		}
	}
	return s, nil
}

// partBlocks is the range of blocks [lo, hi) of part p of in.
func partBlocks(in *Instr, p int) (lo, hi int) {
	b := int64(in.Blocks())
	return int(int64(p) * b / int64(in.Parts)), int(int64(p+1) * b / int64(in.Parts))
}

// reader reads little-endian words, remembering the first overrun.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) u32() uint32 {
	if r.err != nil || r.off+4 > len(r.b) {
		r.err = errors.New("megakernel: stream truncated")
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64() uint64 {
	if r.err != nil || r.off+8 > len(r.b) {
		r.err = errors.New("megakernel: stream truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// pad8 skips the zero word that aligns what follows to 8 bytes.
func (r *reader) pad8() {
	if r.off&4 != 0 && r.u32() != 0 && r.err == nil {
		r.err = errors.New("megakernel: stream padding is not zero")
	}
}

// Reencode is s's stream made from prev, the stream of schedule from, when s differs from it
// only in the arguments of some instructions (EncodeOver): a copy of prev with
// those instructions' words rewritten. ok is false when s is not such a copy of from (then
// Encode it).
func (s *Schedule) Reencode(prev []byte, from *Schedule) (stream []byte, ok bool) {
	if !s.patchOf(prev, from) {
		return nil, false
	}
	stream = slices.Clone(prev)
	if !s.EncodeOver(stream, from) {
		return nil, false
	}
	return stream, true
}

// EncodeOver rewrites stream, the encoding of schedule from, into s's in place, when s differs
// from from only in the grids, parameters and prefetches per block of some instructions (a
// schedule patched with a step's new arguments, Rebind: the same kernels, threads, parts,
// dependencies, prefetched bytes and queues, the queues the very same slices). Only those
// instructions' words change: their records' grids and prefetches, their parameters and their
// items' blocks — the items found through the placement Build indexed, not by walking the
// queues — and, when a prefetching instruction's blocks changed, the prefetch ranges. It
// reports false, leaving stream as it was, when s is not such a copy of from, stream is not
// the size of its encoding, or an item would prefetch another number of ranges (then Encode s).
func (s *Schedule) EncodeOver(stream []byte, from *Schedule) bool {
	if !s.patchOf(stream, from) {
		return false
	}
	var place *placement
	switch {
	case s.place.of(s):
		place = s.place
	case from.place.of(s):
		place = from.place
	default: // a schedule Build did not lay out (Decode's, or one made by hand)
		if place = newPlacement(s); place == nil {
			return false
		}
	}
	var nParams, nDeps int
	for i := range s.Instrs {
		if int(place.first[i+1]-place.first[i]) != s.Instrs[i].Parts {
			return false
		}
		nParams += len(s.Instrs[i].Params)
		nDeps += len(s.Instrs[i].Deps)
	}
	words := len(stream)/4 - 2*nParams
	items := headerWords + instrWords*len(s.Instrs) + 2*nDeps + len(s.Queues) + 1 // the first item's word
	// a prefetching instruction with other blocks, or other bytes per block, has other
	// prefetch ranges: the plan's, if every item keeps its number of them (else Encode s)
	var plan [][][]PrefetchRange
	for i := range s.Instrs {
		a, b := &s.Instrs[i], &from.Instrs[i]
		if a.Prefetch.Param >= 0 && (a.Prefetch != b.Prefetch || a.GridX != b.GridX || a.GridY != b.GridY) {
			plan = s.PrefetchPlan()
			break
		}
	}
	if plan != nil {
		o := items
		for _, q := range plan {
			for _, rs := range q {
				if binary.LittleEndian.Uint32(stream[4*(o+5):]) != uint32(len(rs)) {
					return false
				}
				o += itemWords
			}
		}
	}
	po := 0
	for i := range s.Instrs {
		a, b := &s.Instrs[i], &from.Instrs[i]
		params := stream[4*words+8*po:]
		po += len(a.Params)
		regrid := a.GridX != b.GridX || a.GridY != b.GridY
		if !regrid && a.Prefetch == b.Prefetch && sameWords(a.Params, b.Params) {
			continue
		}
		rec := stream[4*(headerWords+instrWords*i):]
		binary.LittleEndian.PutUint32(rec[12:], uint32(a.GridX))
		binary.LittleEndian.PutUint32(rec[16:], uint32(a.GridY))
		binary.LittleEndian.PutUint32(rec[40:], uint32(a.Prefetch.PerBlock))
		for j, v := range a.Params {
			binary.LittleEndian.PutUint64(params[8*j:], v)
		}
		if !regrid {
			continue
		}
		// each part's blocks [⌊p·B/P⌋, ⌊(p+1)·B/P⌋), stepped as Encode steps them
		bl, parts := int64(a.Blocks()), int64(a.Parts)
		q, r := bl/parts, bl%parts
		lo, acc := int64(0), int64(0)
		for _, o := range place.item[place.first[i]:place.first[i+1]] {
			hi, next := lo+q, acc+r
			if next >= parts {
				hi, next = hi+1, next-parts
			}
			binary.LittleEndian.PutUint64(stream[4*(items+itemWords*int(o))+8:], uint64(uint32(lo))|uint64(uint32(hi))<<32)
			lo, acc = hi, next
		}
	}
	if plan != nil {
		s.putRanges(stream[4*(items+itemWords*s.Items()):], plan)
	}
	return true
}

// patchOf reports whether s differs from from only in its instructions' grids, parameters and
// prefetches per block, and stream is the size of their encodings, with from's header.
func (s *Schedule) patchOf(stream []byte, from *Schedule) bool {
	if len(s.Instrs) != len(from.Instrs) || len(s.Queues) != len(from.Queues) || s.PrefetchBytes != from.PrefetchBytes ||
		len(stream) < 4*headerWords {
		return false
	}
	if len(s.Queues) == 0 || &s.Queues[0] != &from.Queues[0] {
		for q := range s.Queues {
			if !sameSlice(s.Queues[q], from.Queues[q]) {
				return false
			}
		}
	}
	nParams, nDeps := 0, 0
	for i := range s.Instrs {
		a, b := &s.Instrs[i], &from.Instrs[i]
		if a.Kernel != b.Kernel || a.Threads != b.Threads || a.Parts != b.Parts || len(a.Params) != len(b.Params) ||
			a.Prefetch.Param != b.Prefetch.Param || a.Prefetch.Total != b.Prefetch.Total || !sameInts(a.Deps, b.Deps) || a.GridX <= 0 || a.GridY <= 0 ||
			int64(a.GridX)*int64(a.GridY) < int64(a.Parts) || a.Parts < 1 {
			return false
		}
		nParams += len(a.Params)
		nDeps += len(a.Deps)
	}
	// as many prefetch ranges as from's header says (EncodeOver checks them)
	words := streamWords(uint64(len(s.Instrs)), uint64(nDeps), uint64(len(s.Queues)), uint64(s.Items()), uint64(binary.LittleEndian.Uint32(stream[36:])))
	return uint64(len(stream)) == 4*words+8*uint64(nParams) && binary.LittleEndian.Uint32(stream) == magic &&
		binary.LittleEndian.Uint32(stream[4:]) == version && binary.LittleEndian.Uint32(stream[8:]) == TableHash()
}

// sameWords reports whether a and b hold the same words (at once when they are one slice).
func sameWords(a, b []uint64) bool { return sameSlice(a, b) || slices.Equal(a, b) }

// sameInts is sameWords for dependency lists.
func sameInts(a, b []int) bool { return sameSlice(a, b) || slices.Equal(a, b) }
