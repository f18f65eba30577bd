package quant

import (
	"encoding/binary"
	"math"
	"testing"

	"verity/device/dtype"
)

func TestF16MatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.F16) }

// TestF16DequantizeSpecialsMatchGGML covers ±inf, signalling and quiet NaNs with many
// payloads, subnormals and random halves, decoded by ggml_fp16_to_fp32_row.
func TestF16DequantizeSpecialsMatchGGML(t *testing.T) {
	blocks, want := readRefDequant(t, dtype.F16)
	f, _ := Lookup(dtype.F16)
	checkDequantAgainst(t, f, blocks, want)
}

// TestF16DequantizeExhaustive decodes all 65536 halves and compares with the definition:
// (−1)^s·2^(e−15)·(1 + m/1024), subnormals 2^−24·m, inf, and NaN with the payload kept
// and the quiet bit set (ggml widens with a float multiply, which quiets signalling NaNs).
func TestF16DequantizeExhaustive(t *testing.T) {
	f, _ := Lookup(dtype.F16)
	blocks := make([]byte, 2<<16)
	for i := 0; i < 1<<16; i++ {
		binary.LittleEndian.PutUint16(blocks[2*i:], uint16(i))
	}
	got := make([]float32, 1<<16)
	f.Dequantize(got, blocks)
	for i := range got {
		h := uint16(i)
		sign, exp, man := uint32(h>>15), int(h>>10&0x1f), uint32(h&0x3ff)
		var want uint32
		switch {
		case exp == 31 && man != 0:
			want = sign<<31 | 0x7fc00000 | man<<13
		case exp == 31:
			want = sign<<31 | 0x7f800000
		case exp == 0:
			want = math.Float32bits(float32(math.Ldexp(float64(man), -24))) | sign<<31
		default:
			want = math.Float32bits(float32(math.Ldexp(1+float64(man)/1024, exp-15))) | sign<<31
		}
		if math.Float32bits(got[i]) != want {
			t.Fatalf("%#04x: got %#08x, want %#08x", h, math.Float32bits(got[i]), want)
		}
	}
	x := randomX(9, 1<<16)
	var want float64
	for i, v := range got {
		if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			want += float64(float64(v) * x[i])
		} else {
			x[i] = 0 // keep the sum finite; 0·inf is NaN, so also zero those blocks
			blocks[2*i], blocks[2*i+1] = 0, 0
		}
	}
	if got := f.DotRef(blocks, x); got != want {
		t.Errorf("DotRef = %g, want %g", got, want)
	}
}

// TestF16QuantizeDefinition checks ggml's rounding of float32 to half on the cases that
// matter: ties to even, overflow at the midpoint 65520, gradual underflow, signed zeros, NaN.
func TestF16QuantizeDefinition(t *testing.T) {
	for _, tc := range []struct {
		f    float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{1 + 1.0/2048, 0x3c00}, // tie, to even
		{1 + 3.0/2048, 0x3c02}, // tie, to even (up)
		{65504, 0x7bff},        // largest half
		{65519.996, 0x7bff},    // just below the midpoint to inf
		{65520, 0x7c00},        // the midpoint overflows (ties to even → inf)
		{-1e30, 0xfc00},        // overflow keeps the sign
		{float32(math.Ldexp(1, -24)), 0x0001},
		{float32(math.Ldexp(1, -25)), 0x0000},    // tie between 0 and the smallest subnormal
		{float32(math.Ldexp(3, -25)), 0x0002},    // tie between 1 and 2 subnormal units → 2
		{float32(math.Ldexp(1, -14)), 0x0400},    // smallest normal
		{float32(math.Ldexp(1023, -24)), 0x03ff}, // largest subnormal
		{1e-40, 0x0000},                          // float32 subnormal
		{float32(math.Inf(-1)), 0xfc00},
		{math.Float32frombits(0x7f800001), 0x7e00}, // signalling NaN → quiet 0x7e00
		{math.Float32frombits(0xffc12345), 0xfe00}, // the sign is kept, the payload dropped
	} {
		f, _ := Lookup(dtype.F16)
		b := make([]byte, 2)
		f.Quantize(b, []float32{tc.f})
		if got := binary.LittleEndian.Uint16(b); got != tc.want {
			t.Errorf("F16 of %g (%#08x) = %#04x, want %#04x", tc.f, math.Float32bits(tc.f), got, tc.want)
		}
	}
}
