package quant

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

// TestQ2KDequantizeDefinition builds a block field by field from the layout and checks every
// value against x = (d·sc)·q − dmin·m, rounded in float32 step by step as ggml does.
func TestQ2KDequantizeDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 1))
	for _, c := range []struct{ d, dmin float32 }{{0.375, 0.0625}, {0.33325195, 1.9990234}, {-3.5, 0.5}, {0x1p-24, 65504}} {
		var sc, m [16]uint8
		var q [qkK]uint8
		block := make([]byte, 84)
		for j := range 16 {
			sc[j], m[j] = uint8(r.IntN(16)), uint8(r.IntN(16))
			block[j] = sc[j] | m[j]<<4
		}
		for v := range qkK {
			q[v] = uint8(r.IntN(4))
			h, s, l := v/128, v%128/32, v%32
			block[16+32*h+l] |= q[v] << (2 * s)
		}
		binary.LittleEndian.PutUint16(block[80:], fp16Exact(t, c.d))
		binary.LittleEndian.PutUint16(block[82:], fp16Exact(t, c.dmin))
		want := make([]float32, qkK)
		for v := range want {
			j := v / 16
			want[v] = float32(float32(c.d*float32(sc[j]))*float32(q[v])) - float32(c.dmin*float32(m[j]))
		}
		checkKDequant(t, dtype.Q2_K, block, want)
	}
	// One value by hand: d = 0.5, sc = 3, q = 2, dmin = 0.25, m = 4: 0.5·3·2 − 0.25·4 = 2.
	block := make([]byte, 84)
	block[0] = 3 | 4<<4
	block[16] = 2
	binary.LittleEndian.PutUint16(block[80:], 0x3800)
	binary.LittleEndian.PutUint16(block[82:], 0x3400)
	y := make([]float32, qkK)
	q2K{}.Dequantize(y, block)
	if y[0] != 2 || y[1] != -1 {
		t.Errorf("got %g, %g; want 2, −1", y[0], y[1])
	}
}
