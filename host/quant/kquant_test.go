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
	"verity/device/num"
)

var kTypes = []dtype.Type{dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K}

// kVectors are reference results of llama.cpp's ggml (commit 22dc605, generic x86-64 build)
// for one type, read from testdata/<type>_ggml.bin:
//
//	[0:4]   "VQTV"
//	[4:8]   ggml type id, uint32 LE
//	[8:12]  n, the number of super-blocks, uint32 LE
//	then    n·256 float32 LE inputs,
//	        n·BlockBytes bytes: ggml_quantize_chunk(type, inputs, imatrix = NULL), i.e.
//	        quantize_row_<type>_ref, what llama-quantize --pure writes,
//	        n·256 float32 LE: dequantize_row_<type> of those bytes.
//
// The 40 inputs are the same for every type: 28 edge cases (zeros, constants, ±MaxFloat32,
// values beyond the fp16 range and near it, denormals, 1e-20 … 3e-16 around GROUP_MAX_EPS, one
// outlier, alternating signs, ±1e30, groups of zeros, one-sided and offset data, ramps, one-hot,
// few levels, per-group scales 1e-8 … 1e7, sparse, groups of one value) and 12 random rows
// (gaussian, uniform, Cauchy, Laplace, shifted, Student-t, integer grids with ties, exact fp16
// values, per-group scales, few distinct values; scales 1e-6 … 1e4). Several of them drive
// ggml to inf or NaN scales, which must be reproduced too. For the rows with finite scales the
// bytes equal those of llama-quantize --pure on a GGUF holding the rows.
type kVectors struct {
	typ     dtype.Type
	inputs  []float32
	blocks  []byte
	dequant []float32
}

func readKVectors(t *testing.T, typ dtype.Type) kVectors {
	t.Helper()
	path := filepath.Join("testdata", typ.String()+"_ggml.bin")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 12 || string(b[:4]) != "VQTV" {
		t.Fatalf("%s: not a test vector file", path)
	}
	id, n := binary.LittleEndian.Uint32(b[4:]), int(binary.LittleEndian.Uint32(b[8:]))
	if dtype.Type(id) != typ {
		t.Fatalf("%s: holds type %s", path, dtype.Type(id))
	}
	nv, nb := n*qkK, n*typ.BlockBytes()
	if len(b) != 12+4*nv+nb+4*nv {
		t.Fatalf("%s: %d bytes, want %d", path, len(b), 12+4*nv+nb+4*nv)
	}
	v := kVectors{typ: typ, inputs: leFloats(b[12 : 12+4*nv])}
	v.blocks = b[12+4*nv : 12+4*nv+nb]
	v.dequant = leFloats(b[12+4*nv+nb:])
	return v
}

func leFloats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// sameBitsOrNaN reports whether a and b have the same bits. Off x86-64, where the reference
// was made, two NaNs need only both be NaN: the sign and payload of a NaN that an operation
// creates (inf·0 and the like) depend on the CPU.
func sameBitsOrNaN(a, b float32) bool {
	if runtime.GOARCH != "amd64" && a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func TestKQuantMatchesGGML(t *testing.T) {
	for _, typ := range kTypes {
		t.Run("type="+typ.String(), func(t *testing.T) {
			v := readKVectors(t, typ)
			f, err := Lookup(typ)
			if err != nil {
				t.Fatal(err)
			}
			bb := typ.BlockBytes()
			in := append([]float32(nil), v.inputs...)
			got := make([]byte, len(v.blocks))
			f.Quantize(got, in)
			for i := 0; i < len(v.blocks)/bb; i++ {
				g, w := got[i*bb:(i+1)*bb], v.blocks[i*bb:(i+1)*bb]
				if !bytes.Equal(g, w) {
					j := 0
					for g[j] == w[j] {
						j++
					}
					t.Errorf("Quantize: super-block %d differs from ggml first at byte %d\n got  %x\n want %x", i, j, g, w)
				}
			}
			for i := range in {
				if math.Float32bits(in[i]) != math.Float32bits(v.inputs[i]) {
					t.Fatalf("Quantize changed its input at %d", i)
				}
			}

			deq := make([]float32, len(v.dequant))
			f.Dequantize(deq, v.blocks)
			bad := 0
			for i := range deq {
				if !sameBitsOrNaN(deq[i], v.dequant[i]) {
					if bad++; bad <= 8 {
						t.Errorf("Dequantize: value %d (super-block %d) = %#08x (%g), ggml %#08x (%g)", i, i/qkK,
							math.Float32bits(deq[i]), deq[i], math.Float32bits(v.dequant[i]), v.dequant[i])
					}
				}
			}
			if bad > 8 {
				t.Errorf("Dequantize: %d values differ", bad)
			}
		})
	}
}

// TestKQuantDotRef checks DotRef with one-hot x against Dequantize (which rounds the same
// decoded value in float32 up to three times: d·sc, ·q, − dmin·m) and with a dense x against
// the float64 sum of those one-hot values.
func TestKQuantDotRef(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	for _, typ := range kTypes {
		t.Run("type="+typ.String(), func(t *testing.T) {
			f, _ := Lookup(typ)
			x := make([]float32, 2*qkK)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			blocks := make([]byte, 2*typ.BlockBytes())
			f.Quantize(blocks, x)
			deq := make([]float32, len(x))
			f.Dequantize(deq, blocks)
			var amax float64
			for _, v := range deq {
				amax = max(amax, math.Abs(float64(v)))
			}
			e := make([]float64, len(x))
			dense := make([]float64, len(x))
			var want, bound float64
			for i := range e {
				e[i] = 1
				v := f.DotRef(blocks, e)
				e[i] = 0
				if math.Abs(v-float64(deq[i])) > 8*amax*0x1p-24 {
					t.Errorf("DotRef(e_%d) = %g, Dequantize gives %g", i, v, deq[i])
				}
				dense[i] = r.NormFloat64()
				want += v * dense[i]
				bound += math.Abs(v * dense[i])
			}
			if got := f.DotRef(blocks, dense); math.Abs(got-want) > 1e-12*bound {
				t.Errorf("DotRef = %g, sum of the one-hot values times x: %g", got, want)
			}
		})
	}
}

func TestScaleMinK4RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		var sc, m [8]uint8
		for j := range 8 {
			sc[j], m[j] = uint8(r.IntN(64)), uint8(r.IntN(64))
		}
		var q [12]byte
		putScaleMinK4(q[:], &sc, &m)
		for j := range 8 {
			if s, mm := scaleMinK4(j, q[:]); s != sc[j] || mm != m[j] {
				t.Fatalf("group %d of %v/%v: got %d/%d", j, sc, m, s, mm)
			}
		}
	}
	// The layout, spelled out for one case: sc_5 = 0b110101, m_6 = 0b101011.
	var sc, m [8]uint8
	sc[5], m[6] = 0b110101, 0b101011
	var q [12]byte
	putScaleMinK4(q[:], &sc, &m)
	want := [12]byte{1: 0b11 << 6, 6: 0b10 << 6, 9: 0b0101, 10: 0b1011 << 4}
	if q != want {
		t.Errorf("packed %08b, want %08b", q, want)
	}
}

func TestMakeQuantsEdgeCases(t *testing.T) {
	var L, laux [32]uint8
	zeros := make([]float32, 16)
	tiny := make([]float32, 16)
	tiny[3] = 9e-16 // below GROUP_MAX_EPS: treated as all zero
	for _, x := range [][]float32{zeros, tiny} {
		for i := range L {
			L[i] = 99
		}
		if s := makeQXQuants(32, x, L[:]); s != 0 || L[0] != 0 || L[15] != 0 || L[16] != 99 {
			t.Errorf("makeQXQuants(%g…) = %g, L = %v", x[3], s, L)
		}
		if s := makeQ3Quants(4, x, L[:]); s != 0 || L[0] != 0 || L[15] != 0 {
			t.Errorf("makeQ3Quants(%g…) = %g, L = %v", x[3], s, L)
		}
	}

	// Values on the grid 0.5·l are reproduced exactly: the first scale has zero error and no
	// candidate beats it.
	x := make([]float32, 32)
	w := make([]float32, 32)
	for i := range x {
		x[i], w[i] = 0.5*float32(i%16), 1
	}
	s, m := makeQKX2Quants(15, x, w, L[:], laux[:], -1, 0.1, 20, false)
	if s != 0.5 || m != 0 {
		t.Errorf("makeQKX2Quants on a grid: scale %g, min %g; want 0.5, 0", s, m)
	}
	for i := range x {
		if L[i] != uint8(i%16) {
			t.Fatalf("makeQKX2Quants on a grid: L = %v", L)
		}
	}
	// A constant negative group: scale 0, the min carries the value.
	for i := range x {
		x[i] = -2
	}
	if s, m := makeQKX2Quants(15, x, w, L[:], laux[:], -1, 0.1, 20, false); s != 0 || m != 2 {
		t.Errorf("makeQKX2Quants(const −2) = %g, %g; want 0, 2", s, m)
	}
}

// fp16Exact is the fp16 encoding of f, which must be exact in fp16.
func fp16Exact(t *testing.T, f float32) uint16 {
	t.Helper()
	h := num.F32ToF16(f)
	if num.F16ToF32(h) != f {
		t.Fatalf("%g is not an fp16 value", f)
	}
	return h
}

// checkKDequant compares Dequantize of one hand-built block with the values its definition gives.
func checkKDequant(t *testing.T, typ dtype.Type, block []byte, want []float32) {
	t.Helper()
	f, err := Lookup(typ)
	if err != nil {
		t.Fatal(err)
	}
	if len(block) != typ.BlockBytes() {
		t.Fatalf("hand-built block has %d bytes", len(block))
	}
	got := make([]float32, qkK)
	f.Dequantize(got, block)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("value %d: got %g (%#08x), want %g (%#08x)", i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

func TestKQuantBlockGeometry(t *testing.T) {
	for _, c := range []struct {
		typ   dtype.Type
		bytes int
	}{{dtype.Q2_K, q2KBytes}, {dtype.Q3_K, q3KBytes}, {dtype.Q4_K, q4KBytes}, {dtype.Q5_K, q5KBytes}, {dtype.Q6_K, q6KBytes}} {
		if c.typ.BlockSize() != qkK || c.typ.BlockBytes() != c.bytes {
			t.Errorf("%s: dtype says %d values in %d bytes, the layout %d in %d", c.typ, c.typ.BlockSize(), c.typ.BlockBytes(), qkK, c.bytes)
		}
	}
}

func TestKQuantNoAllocs(t *testing.T) {
	x := make([]float32, 2*qkK)
	for i := range x {
		x[i] = float32(i%37) - 18
	}
	y := make([]float32, len(x))
	for _, typ := range kTypes {
		f, _ := Lookup(typ)
		blocks := make([]byte, 2*typ.BlockBytes())
		if n := testing.AllocsPerRun(5, func() { f.Quantize(blocks, x) }); n != 0 {
			t.Errorf("%s: Quantize allocates %v times", typ, n)
		}
		if n := testing.AllocsPerRun(5, func() { f.Dequantize(y, blocks) }); n != 0 {
			t.Errorf("%s: Dequantize allocates %v times", typ, n)
		}
	}
}
