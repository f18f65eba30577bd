package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

// packScaleMin6 packs 6-bit scales and mins as the q4_K/q5_K layout describes, written out
// independently of putScaleMinK4.
func packScaleMin6(q []byte, sc, m *[8]uint8) {
	for j := range 8 {
		if j < 4 {
			q[j] |= sc[j]
			q[4+j] |= m[j]
		} else {
			q[j+4] |= sc[j]&0xf | (m[j]&0xf)<<4
			q[j-4] |= (sc[j] >> 4) << 6
			q[j] |= (m[j] >> 4) << 6
		}
	}
}

// TestQ4KDequantizeDefinition builds a block field by field from the layout and checks every
// value against x = (d·sc)·q − dmin·m, rounded in float32 step by step as ggml does.
func TestQ4KDequantizeDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 1))
	for _, c := range []struct{ d, dmin float32 }{{0.375, 0.0625}, {0.33325195, 1.9990234}, {-3.5, 0.5}, {0x1p-24, 65504}} {
		var sc, m [8]uint8
		var q [qkK]uint8
		block := make([]byte, 144)
		for j := range 8 {
			sc[j], m[j] = uint8(r.IntN(64)), uint8(r.IntN(64))
		}
		packScaleMin6(block[4:16], &sc, &m)
		for v := range qkK {
			q[v] = uint8(r.IntN(16))
			c, hi, l := v/64, v%64/32, v%32
			block[16+32*c+l] |= q[v] << (4 * hi)
		}
		binary.LittleEndian.PutUint16(block[0:], fp16Exact(t, c.d))
		binary.LittleEndian.PutUint16(block[2:], fp16Exact(t, c.dmin))
		want := make([]float32, qkK)
		for v := range want {
			j := v / 32
			want[v] = float32(float32(c.d*float32(sc[j]))*float32(q[v])) - float32(c.dmin*float32(m[j]))
		}
		checkKDequant(t, dtype.Q4_K, block, want)
	}
	// One value by hand: group 5 (values 160…191), d = 0.5, sc = 33, q = 3, dmin = 0.25,
	// m = 17: 0.5·33·3 − 0.25·17 = 45.25.
	block := make([]byte, 144)
	var sc, m [8]uint8
	sc[5], m[5] = 33, 17
	packScaleMin6(block[4:16], &sc, &m)
	block[16+32*2] = 3 << 4 // value 160 = 64·2 + 32 + 0: high nibble of byte 32·2
	binary.LittleEndian.PutUint16(block[0:], 0x3800)
	binary.LittleEndian.PutUint16(block[2:], 0x3400)
	y := make([]float32, qkK)
	q4K{}.Dequantize(y, block)
	if y[160] != 45.25 || y[161] != -4.25 {
		t.Errorf("got %g, %g; want 45.25, −4.25", y[160], y[161])
	}
}
