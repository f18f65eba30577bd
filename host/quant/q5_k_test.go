package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

// TestQ5KDequantizeDefinition builds a block field by field from the layout and checks every
// value against x = (d·sc)·q − dmin·m, rounded in float32 step by step as ggml does.
func TestQ5KDequantizeDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	for _, c := range []struct{ d, dmin float32 }{{0.375, 0.0625}, {0.33325195, 1.9990234}, {-3.5, 0.5}, {0x1p-24, 65504}} {
		var sc, m [8]uint8
		var q [qkK]uint8
		block := make([]byte, 176)
		for j := range 8 {
			sc[j], m[j] = uint8(r.IntN(64)), uint8(r.IntN(64))
		}
		packScaleMin6(block[4:16], &sc, &m)
		for v := range qkK {
			q[v] = uint8(r.IntN(32))
			c, hi, l := v/64, v%64/32, v%32
			block[48+32*c+l] |= (q[v] & 0xf) << (4 * hi)
			block[16+l] |= (q[v] >> 4) << (2*c + hi)
		}
		binary.LittleEndian.PutUint16(block[0:], fp16Exact(t, c.d))
		binary.LittleEndian.PutUint16(block[2:], fp16Exact(t, c.dmin))
		want := make([]float32, qkK)
		for v := range want {
			j := v / 32
			want[v] = float32(float32(c.d*float32(sc[j]))*float32(q[v])) - float32(c.dmin*float32(m[j]))
		}
		checkKDequant(t, dtype.Q5_K, block, want)
	}
	// One value by hand: value 255 (group 7), d = 0.5, sc = 2, q = 31, dmin = 0.25, m = 4:
	// 0.5·2·31 − 0.25·4 = 30.
	block := make([]byte, 176)
	var sc, m [8]uint8
	sc[7], m[7] = 2, 4
	packScaleMin6(block[4:16], &sc, &m)
	block[48+32*3+31] = 0xf << 4 // value 255 = 64·3 + 32 + 31: high nibble
	block[16+31] = 1 << 7        // its fifth bit: bit 2·3+1 of qh byte 31
	binary.LittleEndian.PutUint16(block[0:], 0x3800)
	binary.LittleEndian.PutUint16(block[2:], 0x3400)
	y := make([]float32, qkK)
	q5K{}.Dequantize(y, block)
	if y[255] != 30 || y[254] != -1 {
		t.Errorf("got %g, %g; want 30, −1", y[255], y[254])
	}
}
