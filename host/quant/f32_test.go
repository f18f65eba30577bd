package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"verity/device/dtype"
)

// This file also holds the helpers that the tests of the float and legacy types share: the
// reference vectors of llama.cpp's ggml and small block builders.

// refVectors are results of llama.cpp's ggml (commit 22dc605, its generic x86-64 build) for
// one type, read from testdata/<type>_ggml.bin (same layout as the K-quant vectors):
//
//	[0:4]   "VQTV"
//	[4:8]   ggml type id, uint32 LE
//	[8:12]  n, the number of rows of 256 values, uint32 LE
//	then    n·256 float32 LE inputs,
//	        the n rows quantised: ggml_quantize_chunk(type, inputs, imatrix = NULL), the function
//	        llama-quantize calls (quantize_row_<type>_ref; ggml_fp32_to_fp16_row and
//	        ggml_fp32_to_bf16_row_ref for f16 and bf16; a copy for f32),
//	        n·256 float32 LE: ggml's to_float (dequantize_row_<type>) of those bytes.
//
// The 32 inputs are the same for every type: 24 edge rows (zeros, per-block constants,
// alternating signs, one outlier per block, exact half steps for every legacy type's scale,
// block scales at and beyond the fp16 range, tiny scales that turn fp16-subnormal or vanish,
// float32 subnormals whose 1/d overflows, first-on-ties of the largest magnitude, integer
// grids, ramps, ±1e30, ±MaxFloat32, large scales, sparse rows, tie products for q8_K, powers
// of two, signed zeros), 6 random rows (gaussian, uniform, Cauchy; scales 1e-6 … 1e4) and, last,
// 2 rows holding NaN and ±inf among gaussian values. Rows with inf or NaN scales are what
// ggml makes of them; the others (all finite scales and inputs) equal the bytes of
// llama-quantize --pure on a GGUF holding the rows, byte for byte, and its --dequant output.
//
// For q8_K, which is no file type, the vectors come from llama-quantize --matmul --act-out and
// --act-f32 (quantize_row_q8_K and dequantize_row_q8_K of index.node). ggml leaves the bsums of
// an all-zero block unwritten; the file holds zeros there.
type refVectors struct {
	inputs  []float32
	blocks  []byte
	dequant []float32
}

func readRefVectors(t *testing.T, typ dtype.Type) refVectors {
	t.Helper()
	path := filepath.Join("testdata", typ.String()+"_ggml.bin")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 12 || string(b[:4]) != "VQTV" {
		t.Fatalf("%s: not a test vector file", path)
	}
	if id := dtype.Type(binary.LittleEndian.Uint32(b[4:])); id != typ {
		t.Fatalf("%s: holds type %s", path, id)
	}
	n := int(binary.LittleEndian.Uint32(b[8:]))
	nv := 256 * n
	nb := nv / typ.BlockSize() * typ.BlockBytes()
	if len(b) != 12+4*nv+nb+4*nv {
		t.Fatalf("%s: %d bytes, want %d", path, len(b), 12+4*nv+nb+4*nv)
	}
	return refVectors{
		inputs:  floatsLE(b[12 : 12+4*nv]),
		blocks:  b[12+4*nv : 12+4*nv+nb],
		dequant: floatsLE(b[12+4*nv+nb:]),
	}
}

// readRefDequant reads testdata/<type>_ggml_deq.bin: blocks the quantiser never writes
// (random quants; scales that are zero, subnormal, the largest finite, ±inf, quiet and
// signalling NaNs; for f16 and bf16 256 patterns of the top exponent and 256 subnormals) and
// ggml's to_float of them (llama-quantize --dequant; for q8_K, which has no to_float,
// index.node's dequantize_row_q8_K):
//
//	[0:4]   "VQTD"
//	[4:8]   ggml type id, uint32 LE
//	[8:12]  n, the number of rows of 256 values, uint32 LE
//	then    the n rows of blocks, and n·256 float32 LE values.
func readRefDequant(t *testing.T, typ dtype.Type) (blocks []byte, values []float32) {
	t.Helper()
	path := filepath.Join("testdata", typ.String()+"_ggml_deq.bin")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 12 || string(b[:4]) != "VQTD" {
		t.Fatalf("%s: not a dequantisation vector file", path)
	}
	if id := dtype.Type(binary.LittleEndian.Uint32(b[4:])); id != typ {
		t.Fatalf("%s: holds type %s", path, id)
	}
	nv := 256 * int(binary.LittleEndian.Uint32(b[8:]))
	nb := nv / typ.BlockSize() * typ.BlockBytes()
	if len(b) != 12+nb+4*nv {
		t.Fatalf("%s: %d bytes, want %d", path, len(b), 12+nb+4*nv)
	}
	return b[12 : 12+nb], floatsLE(b[12+nb:])
}

func floatsLE(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// sameFloatBits reports whether a and b have the same bits. Off x86-64, where the reference
// was made, two NaNs need only both be NaN: the sign and payload of a NaN that an operation
// creates (0·inf) depend on the CPU.
func sameFloatBits(a, b float32) bool {
	if runtime.GOARCH != "amd64" && a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// checkAgainstGGML asserts that Quantize reproduces ggml's bytes for the reference inputs
// (without touching the inputs) and that Dequantize reproduces ggml's values bit for bit.
func checkAgainstGGML(t *testing.T, typ dtype.Type) {
	t.Helper()
	v := readRefVectors(t, typ)
	f, err := Lookup(typ)
	if err != nil {
		t.Fatal(err)
	}
	in := append([]float32(nil), v.inputs...)
	got := make([]byte, len(v.blocks))
	f.Quantize(got, in)
	bb, bs := typ.BlockBytes(), typ.BlockSize()
	bad := 0
	for i := 0; i < len(got)/bb; i++ {
		g, w := got[i*bb:(i+1)*bb], v.blocks[i*bb:(i+1)*bb]
		if !bytes.Equal(g, w) {
			if bad++; bad <= 5 {
				t.Errorf("Quantize: block %d (row %d) differs from ggml\n in   %g\n got  %x\n want %x",
					i, i*bs/256, in[i*bs:(i+1)*bs], g, w)
			}
		}
	}
	if bad > 0 {
		t.Errorf("Quantize: %d of %d blocks differ", bad, len(got)/bb)
	}
	for i := range in {
		if math.Float32bits(in[i]) != math.Float32bits(v.inputs[i]) {
			t.Fatalf("Quantize changed its input at %d", i)
		}
	}
	checkDequantAgainst(t, f, v.blocks, v.dequant)
}

// checkDequantAgainst asserts that f decodes blocks to want, bit for bit.
func checkDequantAgainst(t *testing.T, f Format, blocks []byte, want []float32) {
	t.Helper()
	got := make([]float32, len(want))
	f.Dequantize(got, blocks)
	bad := 0
	for i := range got {
		if !sameFloatBits(got[i], want[i]) {
			if bad++; bad <= 8 {
				t.Errorf("Dequantize: value %d (block %d) = %g (%#08x), ggml %g (%#08x)", i,
					i/f.Type().BlockSize(), got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("Dequantize: %d of %d values differ", bad, len(got))
	}
}

// dotExact is the reference for DotRef: Σ v[i]·x[i] in float64, in index order, from values
// the test knows exactly.
func dotExact(v []float64, x []float64) float64 {
	var s float64
	for i := range v {
		s += float64(v[i] * x[i])
	}
	return s
}

// randomX returns n seeded gaussian float64 activations.
func randomX(seed uint64, n int) []float64 {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	x := make([]float64, n)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	return x
}

func TestF32MatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.F32) }

func TestF32CopiesBits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	f, _ := Lookup(dtype.F32)
	in := make([]float32, 1000)
	for i := range in {
		in[i] = math.Float32frombits(r.Uint32()) // NaNs with payloads, infs, subnormals included
	}
	in[0] = math.Float32frombits(0x7f800001) // signalling NaN
	in[1] = math.Float32frombits(0x80000000) // −0
	blocks := make([]byte, 4*len(in))
	f.Quantize(blocks, in)
	for i, v := range in {
		if got := binary.LittleEndian.Uint32(blocks[4*i:]); got != math.Float32bits(v) {
			t.Fatalf("Quantize %d: %#08x, want %#08x", i, got, math.Float32bits(v))
		}
	}
	out := make([]float32, len(in))
	f.Dequantize(out, blocks)
	for i := range in {
		if math.Float32bits(out[i]) != math.Float32bits(in[i]) {
			t.Fatalf("Dequantize %d: %#08x, want %#08x", i, math.Float32bits(out[i]), math.Float32bits(in[i]))
		}
	}

	// DotRef over finite values
	r2 := rand.New(rand.NewPCG(3, 4))
	vals := make([]float64, 512)
	fin := make([]float32, len(vals))
	for i := range fin {
		fin[i] = float32(r2.NormFloat64() * 100)
		vals[i] = float64(fin[i])
	}
	fb := make([]byte, 4*len(fin))
	f.Quantize(fb, fin)
	x := randomX(3, len(fin))
	if got, want := f.DotRef(fb, x), dotExact(vals, x); got != want {
		t.Errorf("DotRef = %g, want %g", got, want)
	}
}

// TestFloatLegacyNoAllocs checks that the float, legacy and q8_K formats work in place.
func TestFloatLegacyNoAllocs(t *testing.T) {
	for _, typ := range []dtype.Type{dtype.F32, dtype.F16, dtype.BF16, dtype.Q4_0, dtype.Q4_1,
		dtype.Q5_0, dtype.Q5_1, dtype.Q8_0, dtype.Q8_K} {
		f, err := Lookup(typ)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, 1024)
		for i := range x {
			x[i] = float32(i%37) - 18
		}
		blocks := make([]byte, len(x)/typ.BlockSize()*typ.BlockBytes())
		y := make([]float32, len(x))
		xs := randomX(1, len(x))
		if n := testing.AllocsPerRun(5, func() { f.Quantize(blocks, x) }); n != 0 {
			t.Errorf("%s Quantize: %v allocations", typ, n)
		}
		if n := testing.AllocsPerRun(5, func() { f.Dequantize(y, blocks) }); n != 0 {
			t.Errorf("%s Dequantize: %v allocations", typ, n)
		}
		if n := testing.AllocsPerRun(5, func() { f.DotRef(blocks, xs) }); n != 0 {
			t.Errorf("%s DotRef: %v allocations", typ, n)
		}
	}
}
