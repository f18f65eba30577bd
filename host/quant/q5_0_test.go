package quant

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"verity/device/dtype"
)

func TestQ5_0MatchesGGML(t *testing.T) { checkAgainstGGML(t, dtype.Q5_0) }

func TestQ5_0DequantizeRandomBlocksMatchGGML(t *testing.T) {
	blocks, want := readRefDequant(t, dtype.Q5_0)
	f, _ := Lookup(dtype.Q5_0)
	checkDequantAgainst(t, f, blocks, want)
}

// q50Block builds a block from d's bits and the 32 levels q (0…31).
func q50Block(d uint16, q [32]uint8) []byte {
	b := make([]byte, q50BlockBytes)
	binary.LittleEndian.PutUint16(b, d)
	var qh uint32
	for j := 0; j < 16; j++ {
		b[6+j] = q[j]&0xf | q[j+16]<<4
		qh |= uint32(q[j]>>4)<<j | uint32(q[j+16]>>4)<<(j+16)
	}
	binary.LittleEndian.PutUint32(b[2:], qh)
	return b
}

func TestQ5_0DequantizeDefinition(t *testing.T) {
	var ramp, rev [32]uint8
	for j := range ramp {
		ramp[j] = uint8(j)
		rev[j] = uint8(31 - j)
	}
	for _, tc := range []struct {
		name string
		d    uint16
		q    [32]uint8
	}{
		{"d=0.5/ramp", hHalf, ramp},
		{"d=-1/rev", hMinus1, rev},
		{"d=65504/ramp", hMax, ramp},
		{"d=tiny/rev", hTiny, rev},
		{"d=-0/ramp", hNeg0, ramp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := q50Block(tc.d, tc.q)
			exact := make([]float64, 32)
			want := make([]float32, 32)
			for j := range want {
				exact[j] = float64(int(tc.q[j])-16) * halfValue[tc.d] // exact in float32
				want[j] = float32(exact[j])
			}
			f, _ := Lookup(dtype.Q5_0)
			got := make([]float32, 32)
			f.Dequantize(got, b)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Errorf("value %d: %g, want %g", j, got[j], want[j])
				}
			}
			x := randomX(uint64(tc.d), 32)
			if got, want := f.DotRef(b, x), dotExact(exact, x); got != want {
				t.Errorf("DotRef = %g, want %g", got, want)
			}
		})
	}
}

// TestQ5_0QuantizeDefinition checks blocks worked out by hand from quantize_row_q5_0_ref:
// max = the first element of largest |x|, d = max/−16, q = min(31, trunc(x/d + 16.5)).
func TestQ5_0QuantizeDefinition(t *testing.T) {
	levels := func(f func(j int) uint8) (q [32]uint8) {
		for j := range q {
			q[j] = f(j)
		}
		return q
	}
	for _, tc := range []struct {
		name string
		x    func(j int) float32
		want []byte
	}{
		// d = −0, id = 0: every q = 16, so all the high bits are set and the nibbles are 0
		{"zeros", func(int) float32 { return 0 }, q50Block(hNeg0, levels(func(int) uint8 { return 16 }))},
		{
			// max = −16 → d = 1: q = trunc(x + 16.5), 15.5 + 16.5 = 32 clamps to 31
			"max=-16", func(j int) float32 { return -16 + float32(j) },
			q50Block(hOne, levels(func(j int) uint8 { return uint8(j) })),
		},
		{
			"max=+16-halves", func(j int) float32 { return 16 - float32(j)/2 },
			q50Block(hMinus1, levels(func(j int) uint8 { return uint8((j + 1) / 2) })),
		},
		{
			// max = −1e-40, d = 6.25e-42 rounds to fp16 +0 and 1/d overflows: the int8 cast of
			// ±inf and NaN gives −128, min(31, −128) = −128, whose low nibble and bit 4 are 0,
			// so the quants are all zero (see cvtInt8)
			"1/d-overflows", func(j int) float32 { return float32(j%3-1) * 1e-40 },
			make([]byte, q50BlockBytes),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := make([]float32, 32)
			for j := range x {
				x[j] = tc.x(j)
			}
			f, _ := Lookup(dtype.Q5_0)
			got := make([]byte, q50BlockBytes)
			f.Quantize(got, x)
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got  %x\nwant %x", got, tc.want)
			}
		})
	}
}
