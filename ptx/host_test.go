package ptx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"verity/device/kernels"
	"verity/device/num"
	"verity/host/quant"
)

// The device functions of src/num.cuh and src/formats.cuh are transcriptions of device/num and
// of the weight formats' Go Dot functions. Without a GPU their bits can still be checked: the
// tests below compile them as host C++ (testdata/host.cpp; testdata/hostshim.h maps each
// rounding intrinsic to the IEEE operation it names) and compare them with the Go functions,
// NaNs taken as one value. simt_test.go runs whole kernels with the same program. They need g++
// (C++20), and are skipped without it.

var (
	hostDir  string // scratch directory of the test binary
	hostOnce sync.Once
	hostBin  string
	hostErr  error
)

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "ptx-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hostDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// hostCheck builds testdata/host.cpp once per test binary.
func hostCheck(t *testing.T) string {
	t.Helper()
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("g++ not found: the host transcription checks need it")
	}
	hostOnce.Do(func() {
		hostBin = filepath.Join(hostDir, "host")
		out, err := exec.Command(gxx, "-std=c++20", "-O1", "-ffp-contract=off", "-fno-fast-math", "-pthread", "-w",
			"-Isrc", "-Itestdata", "-o", hostBin, "testdata/host.cpp").CombinedOutput()
		if err != nil {
			hostErr = &buildError{err, out}
		}
	})
	if hostErr != nil {
		t.Fatal(hostErr)
	}
	return hostBin
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "g++ testdata/host.cpp: " + e.err.Error() + "\n" + string(e.out)
}

// runHost runs the host check in one mode on in and returns its output.
func runHost(t *testing.T, mode string, in []byte) []byte {
	t.Helper()
	cmd := exec.Command(hostCheck(t), mode)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("host %s: %v\n%s", mode, err, stderr.Bytes())
	}
	return out
}

// same reports whether two float32 bit patterns are equal, every NaN counting as one value.
func same(a, b uint32) bool {
	na, nb := a&0x7fffffff > 0x7f800000, b&0x7fffffff > 0x7f800000
	if na || nb {
		return na && nb
	}
	return a == b
}

// scalarInputs: specials, every bit pattern of the low 16 bits (all halves for f16_to_f32), and
// a spread of float32 bit patterns from a fixed-seed generator.
func scalarInputs(n int) []uint32 {
	xs := []uint32{
		0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fffffff, 0xffc00001, 1, 0x80000001,
		0x007fffff, 0x00800000, 0x3f800000, 0xbf800000, 0x43000000, 0xc3000000, 0x43000001,
		0xc3000001, 0x41a00000, 0x41a00001, 0x3eaaaaab, 0xbeaaaaab, 0x3f000000, 0xbf000000,
		0x3effffff, 0x3fc00000, 0x40200000, 0xc0200000, 0x4b000000, 0x4b7fffff, 0x4effffff,
		0xcf000000, 0x477ff000, 0x477fefff, 0x33000000, 0x33000001, 0x38800000, 0x387fffff,
	}
	for i := uint32(0); i < 1<<16; i++ {
		xs = append(xs, i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range n {
		xs = append(xs, rng.Uint32())
		// values of moderate size are the interesting ones for exp, sigmoid and log
		xs = append(xs, math.Float32bits(float32(rng.NormFloat64()*float64(uint32(1)<<rng.IntN(8)))))
	}
	return xs
}

// TestHostScalars compares num.cuh's functions with device/num's.
func TestHostScalars(t *testing.T) {
	xs := scalarInputs(200000)
	in := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(in[4*i:], x)
	}
	out := runHost(t, "scalar", in)
	const per = 14
	if len(out) != 4*per*len(xs) {
		t.Fatalf("host gave %d bytes for %d inputs", len(out), len(xs))
	}
	bits := math.Float32bits
	funcs := []struct {
		name string
		want func(x float32, b uint32) (uint32, bool)
	}{
		{"exp32", func(x float32, _ uint32) (uint32, bool) { return bits(num.Exp32(x)), true }},
		{"sigmoid32", func(x float32, _ uint32) (uint32, bool) { return bits(num.Sigmoid32(x)), true }},
		{"silu32", func(x float32, _ uint32) (uint32, bool) { return bits(num.SiLU32(x)), true }},
		{"log32", func(x float32, _ uint32) (uint32, bool) { return bits(num.Log32(x)), true }},
		{"log1p32", func(x float32, _ uint32) (uint32, bool) { return bits(num.Log1p32(x)), true }},
		{"softplus32", func(x float32, _ uint32) (uint32, bool) { return bits(num.Softplus32(x)), true }},
		{"sqrt32", func(x float32, _ uint32) (uint32, bool) { return bits(num.Sqrt32(x)), true }},
		{"rsqrt32", func(x float32, _ uint32) (uint32, bool) { return bits(num.Rsqrt32(x)), true }},
		{"f32_to_f16", func(x float32, _ uint32) (uint32, bool) { return uint32(num.F32ToF16(x)), true }},
		{"f32_to_bf16", func(x float32, _ uint32) (uint32, bool) { return uint32(num.F32ToBF16(x)), true }},
		{"f16_to_f32", func(_ float32, b uint32) (uint32, bool) { return bits(num.F16ToF32(uint16(b))), true }},
		{"round_away", func(x float32, _ uint32) (uint32, bool) {
			if x != x || math.Abs(float64(x)) >= 1<<31 {
				return 0, false
			}
			return uint32(int32(math.Round(float64(x)))), true
		}},
		{"tanh32", func(x float32, _ uint32) (uint32, bool) { return bits(num.Tanh32(x)), true }},
		{"gelu32", func(x float32, _ uint32) (uint32, bool) { return bits(num.GELU32(x)), true }},
	}
	for k, f := range funcs {
		bad := 0
		for i, b := range xs {
			want, ok := f.want(math.Float32frombits(b), b)
			if !ok {
				continue
			}
			got := binary.LittleEndian.Uint32(out[4*(per*i+k):])
			exact := f.name == "f32_to_f16" || f.name == "f32_to_bf16" || f.name == "round_away" || f.name == "f16_to_f32"
			if exact && got != want || !exact && !same(got, want) {
				if bad < 5 {
					t.Errorf("%s(%#08x): device code gives %#08x, Go %#08x", f.name, b, got, want)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d inputs differ", f.name, bad, len(xs))
		}
	}
}

// TestHostMaxMin compares max32 and min32 with num.Max32 and num.Min32, signed zeros and NaNs
// included, and max32 as the integer maximum of max_key's keys (max_unkey) with num.Max32 bit
// for bit: the same value, or the canonical NaN where both inputs are NaNs.
func TestHostMaxMin(t *testing.T) {
	specials := []uint32{0, 0x80000000, 0x7fc00000, 0x7fffffff, 0xffc00000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, 1}
	rng := rand.New(rand.NewPCG(3, 4))
	var pairs [][2]uint32
	for _, a := range specials {
		for _, b := range specials {
			pairs = append(pairs, [2]uint32{a, b})
		}
	}
	for range 20000 {
		a, b := rng.Uint32(), rng.Uint32()
		if rng.IntN(3) == 0 {
			b = a ^ 0x80000000
		}
		pairs = append(pairs, [2]uint32{a, b})
	}
	var in []byte
	for _, p := range pairs {
		in = binary.LittleEndian.AppendUint32(in, p[0])
		in = binary.LittleEndian.AppendUint32(in, p[1])
	}
	out := runHost(t, "pair", in)
	for i, p := range pairs {
		x, y := math.Float32frombits(p[0]), math.Float32frombits(p[1])
		gmax, gmin, gkey := binary.LittleEndian.Uint32(out[12*i:]), binary.LittleEndian.Uint32(out[12*i+4:]), binary.LittleEndian.Uint32(out[12*i+8:])
		wmax, wmin := math.Float32bits(num.Max32(x, y)), math.Float32bits(num.Min32(x, y))
		// with a NaN input the result is the other input's exact bits, or the canonical NaN
		if !same(gmax, wmax) || (gmax != wmax && wmax&0x7fffffff <= 0x7f800000) {
			t.Errorf("max32(%#08x, %#08x) = %#08x, num.Max32 %#08x", p[0], p[1], gmax, wmax)
		}
		if !same(gmin, wmin) || (gmin != wmin && wmin&0x7fffffff <= 0x7f800000) {
			t.Errorf("min32(%#08x, %#08x) = %#08x, num.Min32 %#08x", p[0], p[1], gmin, wmin)
		}
		if want := wmax; gkey != want && (want&0x7fffffff <= 0x7f800000 || gkey != 0x7fffffff) {
			t.Errorf("max_unkey(max(max_key(%#08x), max_key(%#08x))) = %#08x, num.Max32 %#08x", p[0], p[1], gkey, want)
		}
	}
}

// TestHostMatVec compares the packed unit steps of packed.cuh (the matvec kernels' arithmetic),
// folded and summed as a matvec warp does over a row in repack's layout, with each weight
// format's Go Dot on the row's GGUF bytes: rows quantised by host/quant from random values, and
// rows of random bytes (which include NaN and infinite scales).
func TestHostMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	type row struct {
		name string
		cols int
		want float32
	}
	var rows []row
	var in bytes.Buffer
	for _, ty := range kernels.WeightTypes() {
		f, err := kernels.Lookup(ty)
		if err != nil {
			t.Fatal(err)
		}
		q, err := quant.Lookup(ty)
		if err != nil {
			t.Fatal(err)
		}
		for trial := range 16 {
			cols := 256 * (1 + rng.IntN(24))
			if trial == 0 {
				cols = 256 * 64 // several units per lane
			}
			rb, err := ty.RowBytes(int64(cols))
			if err != nil {
				t.Fatal(err)
			}
			w := make([]byte, rb)
			x := make([]byte, f.Act.RowBytes(cols))
			v := make([]float32, cols)
			for i := range v {
				v[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(8)-4))
			}
			kernels.ConvertRow(f.Act, x, v)
			switch trial % 4 {
			case 0, 1:
				for i := range v {
					v[i] = float32(rng.NormFloat64() * 0.05)
				}
				q.Quantize(w, v)
			case 2:
				for i := range w {
					w[i] = byte(rng.Uint32())
				}
			case 3:
				for i := range w {
					w[i] = byte(rng.Uint32())
				}
				for i := range x {
					x[i] = byte(rng.Uint32())
				}
			}
			rows = append(rows, row{ty.String(), cols, f.Dot(w, x, cols)})
			pw := pack(t, ty, w, int64(cols))
			in.WriteString(ty.String())
			in.WriteByte(0)
			for _, n := range []int{cols, len(pw), len(x)} {
				in.Write(binary.LittleEndian.AppendUint32(nil, uint32(n)))
			}
			in.Write(pw)
			in.Write(x)
		}
	}
	out := runHost(t, "matvec", in.Bytes())
	if len(out) != 4*len(rows) {
		t.Fatalf("host gave %d bytes for %d rows", len(out), len(rows))
	}
	for i, r := range rows {
		got, want := binary.LittleEndian.Uint32(out[4*i:]), math.Float32bits(r.want)
		if !same(got, want) {
			t.Errorf("%s row %d (%d values): device code gives %#08x, Go Dot %#08x", r.name, i, r.cols, got, want)
		}
	}
}
