package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

func TestBF16MatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.BF16) }

// TestBF16DequantizeSpecialsMatchGGML covers ±inf, NaNs with many payloads (signalling ones
// stay signalling: ggml widens by shifting bits), subnormals and random values.
func TestBF16DequantizeSpecialsMatchGGML(t *testing.T) {
	blocks, want := readRefDequant(t, dtype.BF16)
	f, _ := Lookup(dtype.BF16)
	checkDequantAgainst(t, f, blocks, want)
}

func TestBF16DequantizeExhaustive(t *testing.T) {
	f, _ := Lookup(dtype.BF16)
	blocks := make([]byte, 2<<16)
	for i := 0; i < 1<<16; i++ {
		binary.LittleEndian.PutUint16(blocks[2*i:], uint16(i))
	}
	got := make([]float32, 1<<16)
	f.Dequantize(got, blocks)
	for i, v := range got {
		if want := uint32(i) << 16; math.Float32bits(v) != want {
			t.Fatalf("%#04x: got %#08x, want %#08x", i, math.Float32bits(v), want)
		}
	}
}

// bf16Nearest is the reference rounding: of the two bfloat16 neighbours of a finite f (the
// one that truncates it and the next one away from zero), the nearer by exact float64
// distance, the even one on a tie. Past the largest finite bfloat16 the next one is 2¹²⁸,
// i.e. inf.
func bf16Nearest(f float32) uint16 {
	u := math.Float32bits(f)
	if math.IsInf(float64(f), 0) {
		return uint16(u >> 16)
	}
	lo := u &^ 0xffff
	value := func(bits uint32) float64 {
		if bits&0x7fffffff == 0x7f800000 {
			return math.Copysign(math.Ldexp(1, 128), float64(f))
		}
		return float64(math.Float32frombits(bits))
	}
	dlo := math.Abs(float64(f) - value(lo))
	dhi := math.Abs(value(lo+0x10000) - float64(f))
	switch {
	case dlo < dhi, dlo == dhi && (lo>>16)&1 == 0:
		return uint16(lo >> 16)
	}
	return uint16((lo + 0x10000) >> 16)
}

func TestBF16QuantizeRoundsToNearestEven(t *testing.T) {
	f, _ := Lookup(dtype.BF16)
	r := rand.New(rand.NewPCG(30, 1))
	in := make([]float32, 0, 1<<16)
	for _, u := range []uint32{
		0x00000000, 0x80000000, 0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, // ties, near ties
		0x00008000, 0x00018000, 0x00010000, 0x0000ffff, 0x807fffff, // subnormals are kept
		0x7f7fffff, 0x7f7f8000, 0x7f7f7fff, 0xff7f8000, // overflow to inf at the midpoint
		0x7f800000, 0xff800000,
	} {
		in = append(in, math.Float32frombits(u))
	}
	for len(in) < cap(in) {
		u := r.Uint32()
		if u&0x7f800000 == 0x7f800000 {
			continue // NaNs are checked below
		}
		in = append(in, math.Float32frombits(u))
	}
	b := make([]byte, 2*len(in))
	f.Quantize(b, in)
	for i, v := range in {
		if got, want := binary.LittleEndian.Uint16(b[2*i:]), bf16Nearest(v); got != want {
			t.Fatalf("BF16 of %g (%#08x) = %#04x, want %#04x", v, math.Float32bits(v), got, want)
		}
	}
	// NaN: the top half with bit 6 set (quiet), sign and upper payload kept, never rounded
	// into an infinity.
	for _, u := range []uint32{0x7f800001, 0x7fc00000, 0xff80ffff, 0x7fbfffff, 0xffffffff} {
		f.Quantize(b[:2], []float32{math.Float32frombits(u)})
		if got, want := binary.LittleEndian.Uint16(b), uint16(u>>16)|0x40; got != want {
			t.Errorf("BF16 of NaN %#08x = %#04x, want %#04x", u, got, want)
		}
	}
}

func TestBF16DotRef(t *testing.T) {
	f, _ := Lookup(dtype.BF16)
	r := rand.New(rand.NewPCG(5, 6))
	b := make([]byte, 2*300)
	exact := make([]float64, 300)
	for i := range exact {
		h := uint16(r.Uint32()) &^ 0x4000 // exponents below 128 keep every value finite
		binary.LittleEndian.PutUint16(b[2*i:], h)
		exact[i] = float64(math.Float32frombits(uint32(h) << 16))
	}
	x := randomX(5, 300)
	if got, want := f.DotRef(b, x), dotExact(exact, x); got != want {
		t.Errorf("DotRef = %g, want %g", got, want)
	}
}
