package repack

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"verity/device/dtype"
	"verity/device/num"
	"verity/host/quant"
)

var types = []dtype.Type{
	dtype.F32, dtype.F16, dtype.BF16, dtype.Q8_0, dtype.Q4_0, dtype.Q4_1, dtype.Q5_0, dtype.Q5_1,
	dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K,
}

func randomBytes(r *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func tensorBytes(t *testing.T, ty dtype.Type, dims []int64) int64 {
	t.Helper()
	n, err := ty.TensorBytes(dims)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkLayout verifies the alignment promises of the package doc.
func checkLayout(t *testing.T, l *Layout) {
	t.Helper()
	if l.RowStride%Align != 0 || l.ExpertStride%Align != 0 || l.RowStride < l.RowBytes {
		t.Fatalf("%s %v: row stride %d, expert stride %d", l.Type, l.Dims, l.RowStride, l.ExpertStride)
	}
	if !l.Type.Quantized() {
		return
	}
	s := schemes[l.Type]
	covered := 2*l.F16Fields + int64(s.scales.n)
	for _, p := range l.Planes {
		if p.Off%128 != 0 {
			t.Fatalf("%s %v: plane at %d", l.Type, l.Dims, p.Off)
		}
		covered += int64(s.units) * p.Width
	}
	if l.ScaleOff%16 != 0 || l.Units != l.Blocks*int64(s.units) {
		t.Fatalf("%s %v: scales at %d, %d units", l.Type, l.Dims, l.ScaleOff, l.Units)
	}
	if covered != int64(l.Type.BlockBytes()) {
		t.Fatalf("%s: sections cover %d bytes per block, want %d", l.Type, covered, l.Type.BlockBytes())
	}
}

func TestRoundTripRandomBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, ty := range types {
		bs := int64(ty.BlockSize())
		if bs == 1 {
			bs = 32 // exercise rows that are not a multiple of 256 for the float types too
		}
		shapes := [][]int64{
			{256},
			{256, 1},
			{256, 33},
			{512, 7},
			{1024, 3},
			{4096, 2},
			{8192, 2},
			{256 * 33, 1}, // 33 K-quant blocks: a partly filled second lane group
			{bs, 5},       // one block per row
			{bs * 41, 3},  // 41 blocks
			{512, 3, 4},   // experts
			{256, 2, 3, 2},
			{4096, 300},   // over 1 MiB: rows split across goroutines
			{2048, 50, 3}, // experts split across goroutines
		}
		for _, dims := range shapes {
			data := randomBytes(r, tensorBytes(t, ty, dims))
			p, err := Pack(ty, dims, data)
			if err != nil {
				t.Fatalf("%s %v: %v", ty, dims, err)
			}
			checkLayout(t, &p.Layout)
			if int64(len(p.Data)) != p.Layout.Size() {
				t.Fatalf("%s %v: %d bytes, layout says %d", ty, dims, len(p.Data), p.Layout.Size())
			}
			back, err := Unpack(p)
			if err != nil {
				t.Fatalf("%s %v: %v", ty, dims, err)
			}
			if !bytes.Equal(back, data) {
				t.Fatalf("%s %v: round trip changed the bytes", ty, dims)
			}
		}
	}
}

// TestRoundTripQuantised round-trips blocks made by the quantisers, whose scale fields
// carry realistic values.
func TestRoundTripQuantised(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ty := range types {
		if !ty.Quantized() {
			continue
		}
		f, err := quant.Lookup(ty)
		if err != nil {
			t.Fatal(err)
		}
		dims := []int64{2048, 5, 2}
		vals := make([]float32, 2048*10)
		for i := range vals {
			vals[i] = float32(r.NormFloat64())
		}
		data := make([]byte, tensorBytes(t, ty, dims))
		f.Quantize(data, vals)
		p, err := Pack(ty, dims, data)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unpack(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, data) {
			t.Fatalf("%s: round trip changed the bytes", ty)
		}
	}
}

// planeAt is the documented position of byte i of unit u = 32j + l in a plane of width w:
// the 16-byte load of lane l at offset 16·l of a 512-byte chunk holds 16/w of its units
// (w ≤ 16), or a w-byte unit spans w/16 chunks.
func planeAt(p Plane, u, i int64) int64 {
	j, l := u/32, u%32
	switch p.Width {
	case 32:
		return p.Off + 512*(2*j+i/16) + 16*l + i%16
	case 16:
		return p.Off + 512*j + 16*l + i
	case 8:
		return p.Off + 512*(j/2) + 16*l + 8*(j%2) + i
	case 4:
		return p.Off + 512*(j/4) + 16*l + 4*(j%4) + i
	}
	panic("unexpected plane width")
}

// TestLegacyInterleave checks that the legacy types' quant planes hold the blocks' bytes
// verbatim at the documented positions.
func TestLegacyInterleave(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, ty := range []dtype.Type{dtype.Q8_0, dtype.Q4_0, dtype.Q4_1, dtype.Q5_0, dtype.Q5_1} {
		const blocks = 150
		bb := ty.BlockBytes()
		data := randomBytes(r, int64(blocks*bb))
		p, err := Pack(ty, []int64{int64(blocks * ty.BlockSize())}, data)
		if err != nil {
			t.Fatal(err)
		}
		for pi, pl := range p.Layout.Planes {
			off := schemes[ty].planes[pi].base(0)
			for u := int64(0); u < blocks; u++ {
				for i := int64(0); i < pl.Width; i++ {
					if got, want := p.Data[planeAt(pl, u, i)], data[u*int64(bb)+int64(off)+i]; got != want {
						t.Fatalf("%s plane %d block %d byte %d: %d, want %d", ty, pi, u, i, got, want)
					}
				}
			}
		}
	}
}

// TestKQuantDecode decodes K-quant rows from the packed bytes alone, following the package
// doc, and compares with the kernels' decoders of the GGUF bytes bit for bit.
func TestKQuantDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, ty := range []dtype.Type{dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K} {
		for _, n := range []int64{256, 256 * 5, 256 * 37} {
			data := randomBytes(r, tensorBytes(t, ty, []int64{n}))
			// Keep the fp16 fields finite so that decoded values compare by bits.
			for b := 0; b < int(n)/256; b++ {
				for _, off := range schemes[ty].f16 {
					binary.LittleEndian.PutUint16(data[b*ty.BlockBytes()+off:], num.F32ToF16(float32(r.NormFloat64())))
				}
			}
			p, err := Pack(ty, []int64{n}, data)
			if err != nil {
				t.Fatal(err)
			}
			qf, err := quant.Lookup(ty)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, n)
			qf.Dequantize(want, data)
			got := decodePacked(&p)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s n=%d value %d: %g, want %g", ty, n, i, got[i], want[i])
				}
			}
		}
	}
}

// decodePacked decodes row 0 of a 1-D K-quant tensor from its packed bytes.
func decodePacked(p *Packed) []float32 {
	l := &p.Layout
	row := p.Data[:l.RowStride]
	f16 := func(f, b int64) float32 {
		return num.F16ToF32(binary.LittleEndian.Uint16(row[l.F16Off+2*(f*l.Blocks+b):]))
	}
	// value returns the bits of value v of unit u in plane k.
	value := func(k int, u, v int64, bits int64) int32 {
		pl := l.Planes[k]
		w := 4 * bits // bytes per unit
		return int32(row[planeAt(pl, u, v%w)] >> (bits * (v / w)) & (1<<bits - 1))
	}
	out := make([]float32, l.RowValues)
	for b := int64(0); b < l.Blocks; b++ {
		sc := row[l.ScaleOff+b*l.ScaleBytes:][:l.ScaleBytes]
		d := f16(0, b)
		for i := int64(0); i < 256; i++ {
			s, g, v := i/32, i/16, i%32
			u := 8*b + s
			var y float32
			switch l.Type {
			case dtype.Q2_K:
				q := value(0, u, v, 2)
				y = float32(d*float32(sc[g]))*float32(q) - float32(f16(1, b)*float32(sc[16+g]))
			case dtype.Q3_K:
				q := value(0, u, v, 2)
				if value(1, u, v, 1) == 0 {
					q -= 4
				}
				y = float32(d*float32(int32(sc[g])-32)) * float32(q)
			case dtype.Q4_K:
				q := value(0, u, v, 4)
				y = float32(d*float32(sc[s]))*float32(q) - float32(f16(1, b)*float32(sc[8+s]))
			case dtype.Q5_K:
				q := value(0, u, v, 4) | value(1, u, v, 1)<<4
				y = float32(d*float32(sc[s]))*float32(q) - float32(f16(1, b)*float32(sc[8+s]))
			case dtype.Q6_K:
				q := value(0, u, v, 4) | value(1, u, v, 2)<<4 - 32
				y = float32(d*float32(int8(sc[g]))) * float32(q)
			}
			out[256*b+i] = y
		}
	}
	return out
}

func TestErrors(t *testing.T) {
	good, err := Pack(dtype.Q4_K, []int64{256, 2}, make([]byte, 288))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"unknown type", func() error { _, err := Pack(dtype.Type(99), []int64{32}, nil); return err }, "unknown ggml type"},
		{"unsupported type", func() error { _, err := Pack(dtype.IQ2_XXS, []int64{256}, make([]byte, 66)); return err }, "not supported"},
		{"q8_K unsupported", func() error { _, err := Pack(dtype.Q8_K, []int64{256}, make([]byte, 292)); return err }, "not supported"},
		{"partial block", func() error { _, err := Pack(dtype.Q4_K, []int64{300}, make([]byte, 144)); return err }, "whole number"},
		{"partial legacy block", func() error { _, err := Pack(dtype.Q4_0, []int64{33, 2}, make([]byte, 36)); return err }, "whole number"},
		{"no dims", func() error { _, err := Pack(dtype.F32, nil, nil); return err }, "dims"},
		{"five dims", func() error { _, err := Pack(dtype.F32, []int64{1, 1, 1, 1, 1}, make([]byte, 4)); return err }, "dims"},
		{"zero dim", func() error { _, err := Pack(dtype.F32, []int64{4, 0}, nil); return err }, "dim 1"},
		{"negative dim", func() error { _, err := Pack(dtype.F16, []int64{-2}, nil); return err }, "dim 0"},
		{"short data", func() error { _, err := Pack(dtype.Q8_0, []int64{64}, make([]byte, 67)); return err }, "67 bytes, want 68"},
		{"huge", func() error { _, err := Pack(dtype.F32, []int64{1 << 40, 1 << 20}, nil); return err }, "large"},
		{"empty packed", func() error { _, err := Unpack(Packed{}); return err }, "no layout"},
		{"short packed", func() error {
			p := good
			p.Data = p.Data[:len(p.Data)-1]
			_, err := Unpack(p)
			return err
		}, "bytes, want"},
		{"edited layout", func() error {
			p := good
			p.Layout.RowStride += 256
			_, err := Unpack(p)
			return err
		}, "does not match"},
		{"edited dims", func() error {
			p := good
			p.Layout.Dims = []int64{512}
			_, err := Unpack(p)
			return err
		}, "does not match"},
	}
	for _, tc := range tests {
		err := tc.err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(10), uint8(1), uint8(0), uint8(0), uint64(1), []byte{0xff, 0x00, 0x3f})
	f.Add(uint8(8), uint8(40), uint8(3), uint8(2), uint64(2), []byte{})
	f.Add(uint8(0), uint8(3), uint8(1), uint8(1), uint64(3), []byte{1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, ti, blocks, rows, experts uint8, seed uint64, raw []byte) {
		ty := types[int(ti)%len(types)]
		dims := []int64{int64(1+blocks%40) * int64(ty.BlockSize()), int64(1 + rows%4)}
		if experts%3 != 0 {
			dims = append(dims, int64(experts%3))
		}
		n, err := ty.TensorBytes(dims)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(seed, 7))
		data := randomBytes(r, n)
		copy(data, raw)
		p, err := Pack(ty, dims, data)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unpack(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, data) {
			t.Fatalf("%s %v: round trip changed the bytes", ty, dims)
		}
	})
}

func BenchmarkPack(b *testing.B) {
	for _, ty := range []dtype.Type{dtype.F16, dtype.Q8_0, dtype.Q4_K, dtype.Q6_K} {
		dims := []int64{4096, 1024}
		n, _ := ty.TensorBytes(dims)
		data := randomBytes(rand.New(rand.NewPCG(9, 9)), n)
		p, err := Pack(ty, dims, data)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("pack/"+ty.String(), func(b *testing.B) {
			b.SetBytes(n)
			for b.Loop() {
				if _, err := Pack(ty, dims, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("unpack/"+ty.String(), func(b *testing.B) {
			b.SetBytes(n)
			for b.Loop() {
				if _, err := Unpack(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
