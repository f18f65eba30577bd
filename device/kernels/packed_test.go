package kernels_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
	"verity/device/kernels"
	"verity/repack"
)

// PackedDot gives Dot's bits on the same row's GGUF bytes: random quants, random finite and
// special fp16 scales (zeros, subnormals, ±Inf, NaN), rows from one to many units per lane.
func TestPackedDotMatchesDot(t *testing.T) {
	specials := []uint16{0x0000, 0x8000, 0x0001, 0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x7e00}
	for _, wt := range kernels.WeightTypes() {
		f, err := kernels.Lookup(wt)
		if err != nil {
			t.Fatal(err)
		}
		if f.PackedDot == nil {
			continue
		}
		t.Run(wt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(wt), 31))
			for _, cols := range []int{256, 512, 256 * 5, 256 * 33, 256 * 37} {
				rb, err := wt.RowBytes(int64(cols))
				if err != nil {
					t.Fatal(err)
				}
				for trial := 0; trial < 20; trial++ {
					row := make([]byte, rb)
					for i := range row {
						row[i] = byte(r.Uint32())
					}
					if wt.BlockSize() > 1 { // fp16 fields: mostly finite, some special
						l, _ := repack.NewLayout(wt, []int64{int64(cols)})
						p, _ := repack.Pack(wt, []int64{int64(cols)}, row)
						for b := 0; b < int(l.Blocks*l.F16Fields); b++ {
							h := uint16(r.IntN(0x7800)) | uint16(r.IntN(2))<<15
							if r.IntN(16) == 0 {
								h = specials[r.IntN(len(specials))]
							}
							binary.LittleEndian.PutUint16(p.Data[2*b:], h)
						}
						if row, err = repack.Unpack(p); err != nil {
							t.Fatal(err)
						}
					} else {
						row = f32Row(r, wt, cols)
					}
					p, err := repack.Pack(wt, []int64{int64(cols)}, row)
					if err != nil {
						t.Fatal(err)
					}
					xv := randF32(r, cols, 1)
					if trial%5 == 4 {
						xv[r.IntN(cols)] = float32(math.Inf(1 - 2*r.IntN(2)))
					}
					xa := make([]byte, f.Act.RowBytes(cols))
					kernels.ConvertRow(f.Act, xa, xv)
					got, want := f.PackedDot(&p.Layout, p.Data, xa), f.Dot(row, xa, cols)
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("cols=%d trial %d: packed %v (%#08x), Dot %v (%#08x)", cols, trial, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
			}
		})
	}
}

// f32Row returns a row of random float values stored as type wt (f32, f16 or bf16).
func f32Row(r *rand.Rand, wt dtype.Type, cols int) []byte {
	rb, _ := wt.RowBytes(int64(cols))
	row := make([]byte, rb)
	for i := range row {
		row[i] = byte(r.Uint32())
	}
	for i := 0; i+1 < len(row); i += 2 { // clear exponent-all-ones patterns of 16-bit floats
		if row[i+1]&0x7c == 0x7c {
			row[i+1] ^= 0x40
		}
	}
	return row
}
