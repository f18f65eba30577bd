package lora

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"verity/host/gguf"
	"verity/host/quant"
)

// Result describes what a merge did.
type Result struct {
	Adapters []Applied
	Tensors  int   // merged tensors
	Bytes    int64 // their private memory
	TiedHead bool  // the head keeps the base embedding (see Plan.TiedHead)
	Blocks   Blocks
	Duration time.Duration
}

// Applied is one adapter of a merge.
type Applied struct {
	Path, Name string
	Scale      float64
	Alpha      float64
	Targets    int
	Ranks      []int
}

// Blocks counts how the merged blocks (elements, for F32, F16 and BF16) were written.
type Blocks struct {
	Copied  int64 // Δ exactly 0: the base's bytes
	Moved   int64 // every code moved within its range (float types: rounded to nearest)
	Clamped int64 // a code would have left its range: clamped (a fresh quantisation did no better, or was not needed)
	Refit   int64 // a code would have left its range, and a fresh quantisation had the lower error
	Fresh   int64 // written in a merge type by a fresh quantisation
}

func (b *Blocks) add(o Blocks) {
	b.Copied += o.Copied
	b.Moved += o.Moved
	b.Clamped += o.Clamped
	b.Refit += o.Refit
	b.Fresh += o.Fresh
}

// Merge plans (NewPlan) and merges uses into base: see Plan.Merge.
func Merge(base *gguf.File, uses []Use, o Options) (*gguf.File, *Result, error) {
	p, err := NewPlan(base, uses, o)
	if err != nil {
		return nil, nil, err
	}
	return p.Merge()
}

// Merge computes every target and returns a view of the base file in which the merged tensors
// replace them (and, for TiedHead, output.weight holds the base embedding). The view reads
// the base's other tensors and is valid while the base file is open; the adapters may be
// closed once Merge returns. The pages of the replaced tensors are handed back to the kernel.
func (p *Plan) Merge() (*gguf.File, *Result, error) {
	start := time.Now()
	res := &Result{Tensors: len(p.Targets), Bytes: p.Bytes, TiedHead: p.TiedHead}
	for _, u := range p.uses {
		a := u.Adapter
		res.Adapters = append(res.Adapters, Applied{Path: a.Path, Name: a.Name, Scale: u.Scale, Alpha: a.Alpha, Targets: len(a.Pairs), Ranks: a.Ranks()})
	}
	threads := p.opt.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	var mem []gguf.MemTensor
	for _, t := range p.Targets {
		data, blocks, err := p.mergeTarget(t, threads)
		if err != nil {
			return nil, nil, err
		}
		res.Blocks.add(blocks)
		mem = append(mem, gguf.MemTensor{Name: t.Name, Type: t.Type, Dims: t.Base.Dims, Data: data})
		if !(p.TiedHead && t.Name == "token_embd.weight") { // the head still reads it
			_ = p.base.AdviseDontNeed(t.Base)
		}
	}
	if p.TiedHead {
		e, _ := p.base.Tensor("token_embd.weight")
		mem = append(mem, gguf.MemTensor{Name: "output.weight", Type: e.Type, Dims: e.Dims, Data: p.base.Data(e)})
	}
	v, err := p.base.WithTensors(mem)
	if err != nil {
		return nil, nil, fmt.Errorf("lora: %w", err)
	}
	res.Duration = time.Since(start)
	return v, res, nil
}

// lowRank is one adapter's Δ = P·A of a target, in float64: P has a row of r factors per
// output row (the scale folded in), A has r rows of n_in.
type lowRank struct {
	r    int
	p, a []float64
}

// load reads a pair's factors at factor f (see the package comment for the orientations).
func load(file *gguf.File, pr Pair, f float64, rows, in int) (lowRank, error) {
	r := pr.Rank
	lr := lowRank{r: r, p: make([]float64, rows*r), a: make([]float64, r*in)}
	pSrc, aSrc := pr.B, pr.A // B's rows are P's; A's rows are A's
	if pr.Embedding {
		pSrc, aSrc = pr.A, pr.B // lora_a's rows are P's; lora_b's columns are A's rows
	}
	pv, err := values(file, pSrc)
	if err != nil {
		return lowRank{}, err
	}
	for i, x := range pv {
		lr.p[i] = f * float64(x)
	}
	av, err := values(file, aSrc)
	if err != nil {
		return lowRank{}, err
	}
	if pr.Embedding {
		for j := range in { // lora_b row j holds column j of A
			for k := range r {
				lr.a[k*in+j] = float64(av[j*r+k])
			}
		}
	} else {
		for i, x := range av {
			lr.a[i] = float64(x)
		}
	}
	return lr, nil
}

// values dequantises a whole adapter tensor, refusing non-finite values.
func values(file *gguf.File, t gguf.TensorInfo) ([]float32, error) {
	f, err := quant.Lookup(t.Type)
	if err != nil {
		return nil, fmt.Errorf("lora: tensor %q: %w", t.Name, err)
	}
	out := make([]float32, t.Elements())
	f.Dequantize(out, file.Data(t))
	for _, x := range out {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("lora: tensor %q holds a non-finite value (%v)", t.Name, x)
		}
	}
	return out, nil
}

// aligned returns n zero bytes starting at a 64-byte boundary.
func aligned(n int64) []byte {
	b := make([]byte, n+64)
	off := (64 - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%64)) % 64
	return b[off : off+int(n) : off+int(n)]
}

// mergeTarget computes target t's merged bytes, rows spread over threads workers.
func (p *Plan) mergeTarget(t Target, threads int) ([]byte, Blocks, error) {
	in, rows := int(t.Base.Dims[0]), int(t.Base.Dims[1])
	terms := make([]lowRank, len(t.terms))
	for i, tm := range t.terms {
		u := p.uses[tm.use]
		lr, err := load(u.Adapter.file, tm.pair, u.Adapter.Factor(tm.pair, u.Scale), rows, in)
		if err != nil {
			return nil, Blocks{}, err
		}
		terms[i] = lr
	}
	size, _ := t.Type.TensorBytes(t.Base.Dims) // checked by NewPlan
	out := aligned(size)
	m, err := newRowMerger(t, p.opt.Rounding)
	if err != nil {
		return nil, Blocks{}, err
	}
	src := p.base.Data(t.Base)
	if int64(len(src)) != t.Base.Size {
		return nil, Blocks{}, fmt.Errorf("lora: tensor %q: its data lies outside the model file", t.Name)
	}
	inBytes, outBytes := len(src)/rows, int(size)/rows
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		blocks Blocks
	)
	chunk := max(1, rows/(threads*16))
	for range min(threads, rows) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := m.scratch(in)
			for {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= rows {
					break
				}
				for o := lo; o < min(lo+chunk, rows); o++ {
					delta(w.d, terms, o)
					m.row(w, o, src[o*inBytes:(o+1)*inBytes], out[o*outBytes:(o+1)*outBytes])
				}
			}
			mu.Lock()
			blocks.add(w.blocks)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out, blocks, nil
}

// delta sets d to row o of Σ P·A over the terms: for each term in order, for k = 0…r−1 in
// order, d += P[o][k]·A[k] (each product rounded to float64 before it is added: no FMA). Four
// k at a time share one pass over d, adding in the same order.
func delta(d []float64, terms []lowRank, o int) {
	clear(d)
	n := len(d)
	for _, t := range terms {
		p := t.p[o*t.r : (o+1)*t.r]
		k := 0
		for ; k+4 <= len(p); k += 4 {
			p0, p1, p2, p3 := p[k], p[k+1], p[k+2], p[k+3]
			a0, a1 := t.a[k*n:(k+1)*n], t.a[(k+1)*n:(k+2)*n]
			a2, a3 := t.a[(k+2)*n:(k+3)*n], t.a[(k+3)*n:(k+4)*n]
			for j := range d {
				x := d[j] + float64(p0*a0[j])
				x += float64(p1 * a1[j])
				x += float64(p2 * a2[j])
				d[j] = x + float64(p3*a3[j])
			}
		}
		for ; k < len(p); k++ {
			pk, a := p[k], t.a[k*n:(k+1)*n]
			for j := range d {
				d[j] += float64(pk * a[j])
			}
		}
	}
}
