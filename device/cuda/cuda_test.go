//go:build cuda

package cuda_test

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/cuda"
	"verity/device/devicetest"
	"verity/fixtures"
	"verity/host/engine"
	"verity/host/gguf"
)

// open returns a backend on device 0, or skips the test when there is none.
func open(t *testing.T) device.Backend {
	t.Helper()
	if cuda.Count() == 0 {
		t.Skip("no CUDA device")
	}
	b, err := cuda.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// TestProbe logs what the driver reports.
func TestProbe(t *testing.T) {
	t.Logf("%d device(s)", cuda.Count())
	b := open(t)
	t.Logf("backend: %s", b.Name())
}

func TestOpenBadOrdinal(t *testing.T) {
	if cuda.Count() == 0 {
		t.Skip("no CUDA device")
	}
	for _, ord := range []int{-1, cuda.Count()} {
		if _, err := cuda.Open(ord); !errors.Is(err, device.ErrNoDevice) {
			t.Errorf("Open(%d): %v, want ErrNoDevice", ord, err)
		}
	}
}

// Memory round trips, zeroing, alignment and the errors of bad accesses.
func TestMemory(t *testing.T) {
	b := open(t)
	for _, n := range []int64{0, 1, 255, 256, 257, 1 << 20} {
		p, err := b.Alloc(n)
		if err != nil {
			t.Fatalf("Alloc(%d): %v", n, err)
		}
		if p%256 != 0 {
			t.Errorf("Alloc(%d) = %#x, not 256-byte aligned", n, uint64(p))
		}
		got := make([]byte, n)
		for i := range got {
			got[i] = 0xff
		}
		if err := b.Read(got, p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, n)) {
			t.Errorf("Alloc(%d) is not zeroed", n)
		}
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(i*7 + 1)
		}
		if err := b.Write(p, want); err != nil {
			t.Fatal(err)
		}
		if err := b.Read(got, p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Alloc(%d): read back differs", n)
		}
		var oor *device.OutOfRangeError
		if err := b.Read(make([]byte, n+1), p); !errors.As(err, &oor) {
			t.Errorf("read past allocation of %d: %v", n, err)
		}
		if err := b.Free(p); err != nil {
			t.Fatal(err)
		}
		if err := b.Free(p); err == nil {
			t.Errorf("double free of %d bytes: no error", n)
		}
	}
	data := []byte("weights")
	p, err := b.Upload(data)
	if err != nil {
		t.Fatal(err)
	}
	data[0] = 'W' // Upload copies
	got := make([]byte, len(data))
	if err := b.Read(got, p); err != nil {
		t.Fatal(err)
	}
	if string(got) != "weights" {
		t.Errorf("upload read back %q", got)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
}

// Every kernel with test cases gives its twin's bits.
func TestConformance(t *testing.T) {
	record(t, "conformance", devicetest.Run(t, open(t)))
}

// load builds a catalogue fixture in memory and an engine over it on backend b.
func load(t *testing.T, name string, b device.Backend) *engine.Model {
	t.Helper()
	s, err := fixtures.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := fixtures.WriteTo(&buf, s, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.FromFile(f, b, engine.LoadOptions{MaxRows: 8, Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// A whole forward pass on the GPU gives the CPU twin's logits bit for bit. A model that
// needs a kernel without PTX yet is skipped, naming it.
func TestForwardMatchesTwin(t *testing.T) {
	b := open(t)
	prompt := []int32{1, 5, 9, 100, 200, 7, 3, 42}
	for _, c := range []struct {
		name   string
		tokens int
	}{{"tiny-llama-f32", 8}, {"tiny-qwen3-f32", 8}, {"tiny-q35moe-f32", 4}, {"small-llama-q4_k_m", 2}} {
		t.Run("model="+c.name, func(t *testing.T) {
			got, err := load(t, c.name, b).NewSession().Prefill(prompt[:c.tokens], true)
			if errors.Is(err, device.ErrUnsupported) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := load(t, c.name, cpu.New(1)).NewSession().Prefill(prompt[:c.tokens], true)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("position %d logit %d: %g, want %g", i, j, got[i][j], want[i][j])
					}
				}
			}
		})
	}
}
