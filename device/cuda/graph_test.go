//go:build cuda

package cuda_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"verity/device"
	"verity/device/cuda"
	"verity/device/devicetest"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/repack"
)

// chain is a small decode-like sequence of launches and a copy over its own buffers.
type chain struct {
	b                         *cuda.Backend
	a, bb, norm, x, w, y, out device.Ptr
	all                       []device.Ptr
	sizes                     []int
}

const (
	chainRows, chainCols, chainN = 512, 1024, 4
	chainType                    = dtype.Q4_K
)

// newChain allocates and fills a chain's buffers; every chain gets the same bytes.
func newChain(t *testing.T, b *cuda.Backend) *chain {
	t.Helper()
	f, err := kernels.Lookup(chainType)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := chainType.RowBytes(chainCols)
	w, err := repack.Pack(chainType, []int64{chainCols, chainRows}, devicetest.FiniteBits(7, chainRows*int(rb)))
	if err != nil {
		t.Fatal(err)
	}
	n := chainN * chainCols
	c := &chain{b: b}
	for _, init := range [][]byte{
		device.F32Bytes(randF32(1, n)), device.F32Bytes(randF32(2, n)), device.F32Bytes(randF32(3, chainCols)),
		make([]byte, chainN*f.Act.RowBytes(chainCols)), w.Data, make([]byte, 4*chainN*chainRows), make([]byte, 4*chainN*chainRows),
	} {
		p, err := b.Upload(init)
		if err != nil {
			t.Fatal(err)
		}
		c.all = append(c.all, p)
		c.sizes = append(c.sizes, len(init))
	}
	c.a, c.bb, c.norm, c.x, c.w, c.y, c.out = c.all[0], c.all[1], c.all[2], c.all[3], c.all[4], c.all[5], c.all[6]
	return c
}

func randF32(seed uint64, n int) []float32 {
	v := make([]float32, n)
	bits := devicetest.FiniteBits(seed, 4*n)
	copy(device.F32Bytes(v), bits)
	return v
}

// run enqueues the sequence: a = a + bb; a = swiglu(a, bb); a = rmsnorm(a)·norm; x =
// convert(a); y = W·x; out = y (a device copy).
func (c *chain) run() error {
	f, _ := kernels.Lookup(chainType)
	mv, _ := kernels.MatVec(chainType)
	n := int32(chainN * chainCols)
	steps := []func() error{
		func() error {
			return device.Launch(c.b, kernels.Add, kernels.BinaryArgs{A: c.a, B: c.bb, Y: c.a, N: n})
		},
		func() error {
			return device.Launch(c.b, kernels.SwiGLU, kernels.BinaryArgs{A: c.a, B: c.bb, Y: c.a, N: n})
		},
		func() error {
			return device.Launch(c.b, kernels.RMSNorm, kernels.RMSNormArgs{X: c.a, W: c.norm, Y: c.a, Groups: chainN, Width: chainCols, Eps: 1e-5})
		},
		func() error {
			if k := kernels.Convert(f.Act); k != nil {
				return device.Launch(c.b, k, kernels.ConvertArgs{X: c.a, Out: c.x, Cols: chainCols, N: chainN})
			}
			return c.b.Copy(c.x, c.a, 4*int64(n))
		},
		func() error {
			return device.Launch(c.b, mv, kernels.MatVecArgs{W: c.w, X: c.x, Y: c.y, Rows: chainRows, Cols: chainCols, N: chainN})
		},
		func() error { return c.b.Copy(c.out, c.y, 4*chainN*chainRows) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// bytes reads every buffer of the chain.
func (c *chain) bytes(t *testing.T) [][]byte {
	t.Helper()
	if err := c.b.Sync(); err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(c.all))
	for i, p := range c.all {
		out[i] = make([]byte, c.sizes[i])
		if err := c.b.Read(out[i], p); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A captured sequence of launches, replayed as a graph, gives the bytes of the same launches
// made one by one; replaying it again gives the bytes of running the sequence twice.
func TestGraphMatchesEager(t *testing.T) {
	b := openCUDA(t)
	eager, graphed := newChain(t, b), newChain(t, b)
	if err := eager.run(); err != nil {
		if errors.Is(err, device.ErrUnsupported) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	g, err := b.Capture(graphed.run)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if g.Nodes() != 6 {
		t.Errorf("graph has %d nodes, want 6", g.Nodes())
	}
	// Nothing ran during the capture.
	fresh := newChain(t, b).bytes(t)
	for i, buf := range graphed.bytes(t) {
		if !bytes.Equal(buf, fresh[i]) {
			t.Fatalf("buffer %d changed during capture", i)
		}
	}
	for round := 1; round <= 2; round++ {
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
		want, got := eager.bytes(t), graphed.bytes(t)
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("round %d: buffer %d differs between graph and eager launches", round, i)
			}
		}
		if round == 1 {
			if err := eager.run(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Host time per sequence, eager and as one graph launch (the device work is tiny, so this
	// is mostly launch overhead).
	const reps = 50
	timeIt := func(f func() error) time.Duration {
		start := time.Now()
		for i := 0; i < reps; i++ {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start) / reps
	}
	eagerT, graphT := timeIt(eager.run), timeIt(g.Launch)
	record(t, "graph", map[string]any{"nodes": g.Nodes(), "eager_us_per_sequence": us(eagerT), "graph_us_per_sequence": us(graphT)})
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
