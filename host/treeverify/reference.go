package treeverify

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"verity/device/num"
)

// Tolerance is the seed's gate: the relative Frobenius error of all 8 × vocab logits against
// the reference. (The seed measured 3.3e-2 for bf16 GEMMs with a float32 residual, and 0.18 …
// 0.57 for its wrong variants, at its full shape.)
const Tolerance = 6.5e-2

// Reference computes the seed's model in float64 from the same weights and cache, in Hugging
// Face's layout and rotate-half RoPE — independent of Verity's Program, kernels and
// permuted layout. It keeps its own cache, appending each tree's keys and values rounded to
// bf16 as the seed's cache stores them, and computes everything else in float64.
type Reference struct {
	cfg    Config
	w      *Weights
	maxSeq int
	k, v   [][]float64 // per layer, [slot][n_kv·hd] (rotate-half order)
	Round  bool        // round appended keys and values to bf16, as the seed's cache stores them (NewReference sets it)
}

// NewReference returns the reference for w with positions [0, history) of cache kv committed.
func NewReference(w *Weights, kv KVCache, cfg Config, maxSeq int) (*Reference, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := w.check(cfg); err != nil {
		return nil, err
	}
	r := &Reference{cfg: cfg, w: w, maxSeq: maxSeq, k: make([][]float64, cfg.Layers), v: make([][]float64, cfg.Layers), Round: true}
	d := cfg.NKV * cfg.HD
	for l := range r.k {
		r.k[l], r.v[l] = make([]float64, maxSeq*d), make([]float64, maxSeq*d)
		for h := 0; h < cfg.NKV; h++ {
			for s := 0; s < cfg.History; s++ {
				for i := 0; i < cfg.HD; i++ {
					r.k[l][s*d+h*cfg.HD+i] = bf(kv[l].K[(h*maxSeq+s)*cfg.HD+i])
					r.v[l][s*d+h*cfg.HD+i] = bf(kv[l].V[(h*maxSeq+s)*cfg.HD+i])
				}
			}
		}
	}
	return r, nil
}

func bf(b uint16) float64 { return float64(num.BF16ToF32(b)) }

// matmul returns x·Wᵀ for rows x of in values and W of out rows, in parallel over W's rows.
func matmul(x [][]float64, w []uint16, out, in int) [][]float64 {
	y := make([][]float64, len(x))
	for i := range y {
		y[i] = make([]float64, out)
	}
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for t := 0; t < workers; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float64, in)
			for r := t; r < out; r += workers {
				for j, b := range w[r*in : (r+1)*in] {
					row[j] = bf(b)
				}
				for i, xi := range x {
					var s float64
					for j, a := range row {
						s += a * xi[j]
					}
					y[i][r] = s
				}
			}
		}()
	}
	wg.Wait()
	return y
}

func rmsnorm(x []float64, w []uint16, eps float64) []float64 {
	var ss float64
	for _, a := range x {
		ss += a * a
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, a := range x {
		y[i] = a * s * bf(w[i])
	}
	return y
}

// rope rotates each head of x (rotate-half pairs i, i+hd/2) to position p.
func rope(x []float64, heads, hd int, p float64, theta float64) {
	for h := 0; h < heads; h++ {
		v := x[h*hd : (h+1)*hd]
		for i := 0; i < hd/2; i++ {
			s, c := math.Sincos(p * math.Pow(theta, -2*float64(i)/float64(hd)))
			a, b := v[i], v[i+hd/2]
			v[i], v[i+hd/2] = a*c-b*s, a*s+b*c
		}
	}
}

// Step computes tree t at pos as variant v would (Correct for the grade) and returns the
// logits, [8][vocab]. With Correct it appends the nodes' keys and values at pos … pos+7.
func (r *Reference) Step(tokens []int64, t Tree, pos int, v Variant) ([][]float64, error) {
	c := r.cfg
	if pos < 1 || pos+Nodes > r.maxSeq || len(tokens) != Nodes {
		return nil, fmt.Errorf("treeverify: reference step at %d of %d with %d tokens", pos, r.maxSeq, len(tokens))
	}
	attend, offset := v.apply(t)
	x := make([][]float64, Nodes)
	for i, tok := range tokens {
		if tok < 0 || tok >= int64(c.Vocab) {
			return nil, fmt.Errorf("treeverify: token %d outside the vocabulary", tok)
		}
		x[i] = make([]float64, c.D)
		for j := range x[i] {
			x[i][j] = bf(r.w.Embed[int(tok)*c.D+j])
		}
	}
	d, rep := c.NKV*c.HD, c.NQ/c.NKV
	scale := 1 / math.Sqrt(float64(c.HD))
	for l, w := range r.w.Layers {
		h := make([][]float64, Nodes)
		for i := range h {
			h[i] = rmsnorm(x[i], w.InNorm, c.Eps)
		}
		q, k, vv := matmul(h, w.Q, c.NQ*c.HD, c.D), matmul(h, w.K, d, c.D), matmul(h, w.V, d, c.D)
		K, V := r.k[l], r.v[l]
		if v != Correct { // a variant must not change the cache the correct steps read
			K, V = append([]float64(nil), K...), append([]float64(nil), V...)
		}
		for i := 0; i < Nodes; i++ {
			p := float64(int64(pos) + offset[i])
			rope(q[i], c.NQ, c.HD, p, c.Theta)
			rope(k[i], c.NKV, c.HD, p, c.Theta)
			for j := 0; j < d; j++ {
				kk, vj := k[i][j], vv[i][j]
				if r.Round {
					kk, vj = float64(num.BF16ToF32(num.F32ToBF16(float32(kk)))), float64(num.BF16ToF32(num.F32ToBF16(float32(vj))))
				}
				K[(pos+i)*d+j], V[(pos+i)*d+j] = kk, vj
			}
		}
		a := make([][]float64, Nodes)
		for i := 0; i < Nodes; i++ {
			a[i] = make([]float64, c.NQ*c.HD)
			keys := make([]int, 0, pos+len(attend[i]))
			for s := 0; s < pos; s++ {
				keys = append(keys, s)
			}
			for _, j := range attend[i] {
				keys = append(keys, pos+j)
			}
			scores := make([]float64, len(keys))
			for hq := 0; hq < c.NQ; hq++ {
				g := hq / rep
				qh := q[i][hq*c.HD : (hq+1)*c.HD]
				best := math.Inf(-1)
				for n, s := range keys {
					kh := K[s*d+g*c.HD : s*d+(g+1)*c.HD]
					var dot float64
					for e := range qh {
						dot += qh[e] * kh[e]
					}
					scores[n] = dot * scale
					best = max(best, scores[n])
				}
				var sum float64
				for n := range scores {
					scores[n] = math.Exp(scores[n] - best)
					sum += scores[n]
				}
				out := a[i][hq*c.HD : (hq+1)*c.HD]
				for n, s := range keys {
					p := scores[n] / sum
					vh := V[s*d+g*c.HD : s*d+(g+1)*c.HD]
					for e := range out {
						out[e] += p * vh[e]
					}
				}
			}
		}
		o := matmul(a, w.O, c.D, c.NQ*c.HD)
		for i := range x {
			for j := range x[i] {
				x[i][j] += o[i][j]
			}
			h[i] = rmsnorm(x[i], w.PostNorm, c.Eps)
		}
		gate, up := matmul(h, w.Gate, c.FFN, c.D), matmul(h, w.Up, c.FFN, c.D)
		for i := range gate {
			for j, g := range gate[i] {
				gate[i][j] = g / (1 + math.Exp(-g)) * up[i][j]
			}
		}
		down := matmul(gate, w.Down, c.D, c.FFN)
		for i := range x {
			for j := range x[i] {
				x[i][j] += down[i][j]
			}
		}
	}
	for i := range x {
		x[i] = rmsnorm(x[i], r.w.FinalNorm, c.Eps)
	}
	return matmul(x, r.w.Embed, c.Vocab, c.D), nil
}

// RelError is the seed's grade: ‖got − want‖_F / ‖want‖_F over all rows.
func RelError(got [][]float32, want [][]float64) float64 {
	var g Grade
	g.Add(got, want)
	return g.Error()
}

// Grade accumulates the seed's error over several steps' logits: one Frobenius norm over all
// of them.
type Grade struct{ diff2, want2 float64 }

// Add adds one step's logits and the reference's.
func (g *Grade) Add(got [][]float32, want [][]float64) {
	for i := range want {
		for j, w := range want[i] {
			d := float64(got[i][j]) - w
			g.diff2 += d * d
			g.want2 += w * w
		}
	}
}

// Error is ‖got − want‖_F / ‖want‖_F over everything added.
func (g *Grade) Error() float64 { return math.Sqrt(g.diff2 / g.want2) }

// KV returns layer l's keys and values at positions [from, to) in the seed's layout
// ([n_kv][to−from][hd]).
func (r *Reference) KV(l, from, to int) (k, v []float64) {
	c := r.cfg
	d, n := c.NKV*c.HD, to-from
	k, v = make([]float64, n*d), make([]float64, n*d)
	for s := 0; s < n; s++ {
		for h := 0; h < c.NKV; h++ {
			for i := 0; i < c.HD; i++ {
				k[(h*n+s)*c.HD+i] = r.k[l][(from+s)*d+h*c.HD+i]
				v[(h*n+s)*c.HD+i] = r.v[l][(from+s)*d+h*c.HD+i]
			}
		}
	}
	return k, v
}
