package treeverify

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"verity/device/num"
)

// RandomWeights draws seed-shaped bf16 weights for cfg, the same for the same seed on every
// machine: every matrix Gaussian with standard deviation gain/√in, so that each projection
// keeps its input's scale — gain 2 for Wq and Wk (attention scores of a few units, so that
// which keys a node sees matters), 1 for Wv, Wgate and Wup, 1/√(2·layers) for Wo and Wdown
// (the residual stream grows slowly); the embedding N(0, 1/√d) (logits of about unit size);
// norm gains 1 + N(0, 0.1²).
func RandomWeights(cfg Config, seed uint64) *Weights {
	type job struct {
		dst       *[]uint16
		n         int
		std, mean float64
		name      string
	}
	var jobs []job
	w := &Weights{Layers: make([]Layer, cfg.Layers)}
	d, qd, kd := cfg.D, cfg.NQ*cfg.HD, cfg.NKV*cfg.HD
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	res := 1 / math.Sqrt(2*float64(cfg.Layers))
	jobs = append(jobs, job{&w.Embed, cfg.Vocab * d, inv(d), 0, "embed"}, job{&w.FinalNorm, d, 0.1, 1, "final_norm"})
	for i := range w.Layers {
		l := &w.Layers[i]
		p := string(rune('A'+i%26)) + string(rune('a'+i/26)) // distinct per layer
		jobs = append(jobs,
			job{&l.InNorm, d, 0.1, 1, p + "in_norm"}, job{&l.PostNorm, d, 0.1, 1, p + "post_norm"},
			job{&l.Q, qd * d, 2 * inv(d), 0, p + "q"}, job{&l.K, kd * d, 2 * inv(d), 0, p + "k"}, job{&l.V, kd * d, inv(d), 0, p + "v"},
			job{&l.O, d * qd, res * inv(qd), 0, p + "o"},
			job{&l.Gate, cfg.FFN * d, inv(d), 0, p + "gate"}, job{&l.Up, cfg.FFN * d, inv(d), 0, p + "up"},
			job{&l.Down, d * cfg.FFN, res * inv(cfg.FFN), 0, p + "down"})
	}
	// every tensor in chunks of 1 << 20 values, each chunk its own stream: any number of
	// workers gives the same values
	const chunk = 1 << 20
	type piece struct {
		j      int
		lo, hi int
	}
	var pieces []piece
	for i := range jobs {
		*jobs[i].dst = make([]uint16, jobs[i].n)
		for lo := 0; lo < jobs[i].n; lo += chunk {
			pieces = append(pieces, piece{i, lo, min(lo+chunk, jobs[i].n)})
		}
	}
	next := make(chan piece)
	var wg sync.WaitGroup
	for t := 0; t < runtime.GOMAXPROCS(0); t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				jb := jobs[p.j]
				h := fnv.New64a()
				h.Write([]byte(jb.name))
				r := rand.New(rand.NewPCG(seed^h.Sum64(), uint64(p.lo)))
				dst := (*jb.dst)[p.lo:p.hi]
				for k := range dst {
					dst[k] = num.F32ToBF16(float32(jb.mean + jb.std*r.NormFloat64()))
				}
			}
		}()
	}
	for _, p := range pieces {
		next <- p
	}
	close(next)
	wg.Wait()
	return w
}

// RandomTokens draws n tokens below vocab.
func RandomTokens(r *rand.Rand, n, vocab int) []int64 {
	t := make([]int64, n)
	for i := range t {
		t[i] = int64(r.IntN(vocab))
	}
	return t
}
