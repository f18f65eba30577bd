package engine

import (
	"fmt"
	"sync"

	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/model"
	"verity/host/packfile"
	"verity/repack"
)

// Prefetch chooses whether the weight prefetcher runs (LoadOptions.Prefetch).
type Prefetch uint8

const (
	// PrefetchAuto runs it when the mapped weights exceed StreamShare of the memory left
	// beside the load's private memory: the model streams from the disk.
	PrefetchAuto Prefetch = iota
	PrefetchOn            // always (where the weights are mapped)
	PrefetchOff           // never: pages are read when a kernel touches them
)

// StreamShare is the share of the memory left for the weights above which a load streams.
const StreamShare = 0.75

// RuntimeReserve is the memory set aside beside a load's own for the process around it (the Go
// runtime, goroutine stacks, logits and token lists) before the weights' share is taken.
const RuntimeReserve = 16 << 20

// Weights says where a loaded model's weights live.
type Weights struct {
	// Packed is the packed-weights file the matrices are mapped from ("" when they were
	// packed into private memory), and Wrote whether this load wrote it.
	Packed string
	Wrote  bool
	// Footprint is the load's memory on the host (GPU stages' memory is the device's).
	Footprint Footprint
	// Budget is the host memory the load was checked against.
	Budget int64
	// Streaming says that the mapped weights exceed StreamShare of the memory left for them
	// and a prefetcher reads each segment ahead (Prefetching); Resident are the segments kept
	// in memory, the others dropped behind the prefetcher (Segments of the Program: the
	// embedding, each layer, the output head).
	Streaming, Prefetching bool
	Segments               []Segment
	// StreamedBytes is what each step reads from the disk when streaming: the segments that
	// are not resident. Window is how much of them the prefetcher may read ahead of the step.
	StreamedBytes, Window int64

	room int64 // the memory the mapped weights may hold
}

// Segment is a range of the Program's ops and of the packed file their matrices are in.
type Segment struct {
	Name     string // "embedding", "layer 3", "output"
	Ops      [2]int // [first, end) op indices
	Off, End int64  // bytes of the packed file
	Resident bool
}

// Bytes is the segment's size in the packed file.
func (s Segment) Bytes() int64 { return s.End - s.Off }

// packedTensors are p's matrices read from f's mapping (those a LoRA merge replaced are not),
// in the order the ops first read them, for a packed file.
func packedTensors(f *gguf.File, p *model.Program) []packfile.Tensor {
	var ts []packfile.Tensor
	for _, name := range exec.Matrices(p, 0, len(p.Ops)) {
		t := p.Tensors[name]
		if _, ok := f.Offset(t.Data); ok {
			ts = append(ts, packfile.Tensor{Name: name, Type: t.Type, Dims: t.Dims, Data: t.Data})
		}
	}
	return ts
}

// virtualSpans is packfile.File.Span for a packed file of ts not written yet: the tensors at
// page boundaries one after another, as the file lays them out.
func virtualSpans(ts []packfile.Tensor) func(names ...string) (int64, int64) {
	at := map[string][2]int64{}
	var off int64
	for _, t := range ts {
		l, err := repack.NewLayout(t.Type, t.Dims)
		if err != nil {
			continue
		}
		at[t.Name] = [2]int64{off, off + l.Size()}
		off = (off + l.Size() + packfile.Page - 1) / packfile.Page * packfile.Page
	}
	return func(names ...string) (int64, int64) {
		lo, hi := int64(-1), int64(0)
		for _, n := range names {
			if r, ok := at[n]; ok {
				if lo < 0 || r[0] < lo {
					lo = r[0]
				}
				hi = max(hi, r[1])
			}
		}
		if lo < 0 {
			return 0, 0
		}
		return lo, hi
	}
}

// segments splits p's ops into the embedding (the ops before layer 0), each layer, and the
// output head, with the span of the packed file their matrices take.
func segments(p *model.Program, span func(names ...string) (int64, int64)) ([]Segment, error) {
	n := p.Config.NLayer
	layers := make([]int, n)
	for i := range layers {
		layers[i] = i
	}
	starts, err := exec.BlockCuts(p, layers)
	if err != nil {
		return nil, err
	}
	var segs []Segment
	add := func(name string, lo, hi int) {
		if lo >= hi {
			return
		}
		s := Segment{Name: name, Ops: [2]int{lo, hi}}
		s.Off, s.End = span(exec.Matrices(p, lo, hi)...)
		segs = append(segs, s)
	}
	add("embedding", 0, starts[0])
	for l := 0; l < n; l++ {
		end := len(p.Ops)
		if l+1 < n {
			end = starts[l+1]
		} else {
			// the last layer ends where its ops end: the output head follows
			for end = starts[l]; end < len(p.Ops) && layerOf(p.Ops[end].Name) == l; end++ {
			}
		}
		add(fmt.Sprintf("layer %d", l), starts[l], end)
	}
	last := segs[len(segs)-1].Ops[1]
	add("output", last, len(p.Ops))
	return segs, nil
}

// layerOf is the layer of an op named "blk.N.…", or -1.
func layerOf(name string) int {
	var n int
	if _, err := fmt.Sscanf(name, "blk.%d.", &n); err != nil {
		return -1
	}
	return n
}

// chooseResident marks segments resident, from the first, while they fit in room with the
// streaming window (the two largest of the others: the one computing and the one being read)
// beside them. It returns the bytes of those that stream, and the window the prefetcher may
// fill ahead of the step: the room the resident ones leave, less the segment computing.
func chooseResident(segs []Segment, room int64) (streamed, window int64) {
	var total, largest int64
	for _, s := range segs {
		total += s.Bytes()
		largest = max(largest, s.Bytes())
	}
	if total <= room {
		for i := range segs {
			segs[i].Resident = true
		}
		return 0, room - total
	}
	twoLargest := func(from int) int64 { // the two largest segments from index from on
		var a, b int64
		for _, s := range segs[from:] {
			if x := s.Bytes(); x > a {
				a, b = x, a
			} else if x > b {
				b = x
			}
		}
		return a + b
	}
	var kept int64
	for i := range segs {
		if kept+segs[i].Bytes()+twoLargest(i+1) > room {
			break
		}
		segs[i].Resident = true
		kept += segs[i].Bytes()
	}
	var big int64 // the largest streamed segment
	for _, s := range segs {
		if !s.Resident {
			big = max(big, s.Bytes())
		}
	}
	return total - kept, max(big, room-kept-big)
}

// prefetcher reads the streamed segments' matrices ahead of the ops that use them, as far
// ahead as its window of memory allows, and drops them behind: a reader goroutine reads each
// streamed segment through the page cache (large sequential reads, at the disk's speed; a
// resident segment is only advised, which costs nothing while its pages are in memory) and
// waits while the window is full; another drops each streamed segment from memory once the
// step has passed it (unless KeepBehind). After the last segment come the first ones again,
// for the next step. A step that reaches a streamed segment the reader has not finished waits
// for it: touching its pages first would fault them in a page at a time (the mapping is advised
// random), each a synchronous read of the disk, several times slower than the reader's large
// reads.
type prefetcher struct {
	pf     *packfile.File
	segs   []Segment
	start  map[int]int // first op index → segment
	drop   bool
	window int64 // streamed bytes the read-ahead may hold ahead of the step

	mu      sync.Mutex
	cond    *sync.Cond
	at      int64 // the segment the step computes, counted over every step's segments (-1: none yet)
	readTo  int64 // the segments before it are read, or were passed by the step unread
	closed  bool
	done    sync.WaitGroup
	scratch []byte
}

func newPrefetcher(pf *packfile.File, segs []Segment, drop bool, window int64) *prefetcher {
	s := &prefetcher{pf: pf, segs: segs, start: map[int]int{}, drop: drop, window: window, at: -1, scratch: make([]byte, 4<<20)}
	s.cond = sync.NewCond(&s.mu)
	for i, sg := range segs {
		if sg.End > sg.Off {
			s.start[sg.Ops[0]] = i
		}
	}
	s.done.Go(s.run)
	if drop {
		s.done.Go(s.dropBehind)
	}
	return s
}

// beforeOp is the executors' BeforeOp: it moves the step to the segment op i begins (skipping
// those the step does not run, such as the output head of a prefill chunk without outputs).
func (s *prefetcher) beforeOp(i int) {
	k, ok := s.start[i]
	if !ok {
		return
	}
	s.mu.Lock()
	n := int64(len(s.segs))
	next := s.at + 1
	next += (int64(k) - next%n + n) % n
	s.at = next
	s.cond.Broadcast()
	for s.streamed(next) > 0 && s.readTo <= next && !s.closed { // (the reader reads it next)
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// streamed is the bytes of segment a (counted over all steps) that must be read.
func (s *prefetcher) streamed(a int64) int64 {
	sg := s.segs[a%int64(len(s.segs))]
	if sg.Resident {
		return 0
	}
	return sg.End - sg.Off
}

func (s *prefetcher) run() {
	var read int64 // the next segment to read
	// canRead says whether segment read may be read now: it is the step's or the next one, or
	// it fits in the window beside those read ahead of the step (call with mu held)
	canRead := func() bool {
		if read < s.at {
			read = s.at // the step is past these
			s.readTo = max(s.readTo, read)
		}
		var ahead int64
		for a := s.at + 1; a < read; a++ {
			ahead += s.streamed(a)
		}
		return read <= s.at+1 || ahead+s.streamed(read) <= s.window
	}
	for {
		s.mu.Lock()
		for !s.closed && !canRead() {
			s.cond.Wait()
		}
		if s.closed {
			s.mu.Unlock()
			return
		}
		a := read
		read++
		s.mu.Unlock()
		if sg := s.segs[a%int64(len(s.segs))]; sg.End > sg.Off {
			if sg.Resident {
				s.pf.WillNeed(sg.Off, sg.End)
			} else {
				s.pf.ReadAhead(sg.Off, sg.End, s.scratch)
			}
		}
		s.mu.Lock()
		s.readTo = max(s.readTo, a+1)
		s.mu.Unlock()
		s.cond.Broadcast()
	}
}

// dropBehind drops each streamed segment once the step has passed it.
func (s *prefetcher) dropBehind() {
	var dropped int64 // segments before it are dropped
	for {
		s.mu.Lock()
		for !s.closed && dropped >= s.at {
			s.cond.Wait()
		}
		if s.closed {
			s.mu.Unlock()
			return
		}
		at := s.at
		s.mu.Unlock()
		for ; dropped < at; dropped++ {
			if dropped >= 0 && s.streamed(dropped) > 0 {
				sg := s.segs[dropped%int64(len(s.segs))]
				s.pf.DontNeed(sg.Off, sg.End)
			}
		}
	}
}

func (s *prefetcher) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cond.Broadcast()
	s.done.Wait()
}
