package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/dtype"
	"verity/device/kernels"
	"verity/device/num"
	"verity/repack"
)

// tileCase is a packed matrix of rows rows and n activation rows of xb bytes each.
type tileCase struct {
	l     repack.Layout
	w, x  []byte
	xb, n int
}

// newTileCase draws a matrix for format f in newDotCase's modes: the activations and the
// first row as newDotCase draws them, the other rows' quants and fp16 fields likewise (mode 3:
// a NaN or infinite fp16 field in about one row in four).
func newTileCase(r *rand.Rand, f *kernels.Format, mode, n, rows int) tileCase {
	finite16 := []uint16{0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x3c00, 0x7bff, 0xfbff}
	special16 := []uint16{0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00}
	c := newDotCase(r, f, mode, n)
	l, err := repack.NewLayout(f.Type, []int64{c.l.RowValues, int64(rows)})
	if err != nil {
		panic(err)
	}
	w := make([]byte, l.Size())
	copy(w, c.row)
	for row := 1; row < rows; row++ {
		b := w[int64(row)*l.RowStride : int64(row+1)*l.RowStride]
		for i := range b {
			if mode == 1 {
				b[i] = []byte{0x00, 0xff, 0x80, 0x7f}[r.IntN(4)]
			} else {
				b[i] = byte(r.Uint32())
			}
		}
		fields := l.Blocks * l.F16Fields
		for k := int64(0); k < fields; k++ {
			h := uint16(r.IntN(0x7800)) | uint16(r.IntN(2))<<15
			if mode == 2 && r.IntN(4) == 0 {
				h = finite16[r.IntN(len(finite16))]
			}
			binary.LittleEndian.PutUint16(b[l.F16Off+2*k:], h)
		}
		if mode == 3 && r.IntN(4) == 0 {
			binary.LittleEndian.PutUint16(b[l.F16Off+2*r.Int64N(fields):], special16[r.IntN(len(special16))])
		}
	}
	return tileCase{l: l, w: w, x: c.x, xb: c.xb, n: n}
}

// The tile forms give every row and column its PackedDot's bits (newDotCase's modes, 1 to 16
// columns, rows of 1 to 40 super-blocks).
func TestTileMatchesPackedDot(t *testing.T) {
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		r := rand.New(rand.NewPCG(uint64(wt), 101))
		ran, special := 0, 0
		for trial := 0; trial < 120; trial++ {
			mode, n := trial%4, 1+r.IntN(kernels.TileCols)
			c := newTileCase(r, f, mode, n, kernels.TileRows)
			got, ok := kernels.TileDots(wt, &c.l, c.w, c.x, c.xb, n)
			if !ok {
				break
			}
			ran++
			for col := 0; col < n; col++ {
				for row := 0; row < kernels.TileRows; row++ {
					want := f.PackedDot(&c.l, c.w[int64(row)*c.l.RowStride:], c.x[col*c.xb:(col+1)*c.xb])
					if g := got[col][row]; math.Float32bits(g) != math.Float32bits(want) {
						t.Fatalf("%s trial %d (%d blocks, mode %d, %d columns): row %d column %d: %v (%#08x), PackedDot %v (%#08x)",
							wt, trial, c.l.Blocks, mode, n, row, col, g, math.Float32bits(g), want, math.Float32bits(want))
					}
					if math.IsNaN(float64(want)) || math.IsInf(float64(want), 0) {
						special++
					}
				}
			}
		}
		if ran > 0 {
			t.Logf("%s: %d tiles, %d non-finite results", wt, ran, special)
		}
	}
}

// The rows forms (each the CPU runs) give every row its PackedDot's bits (newDotCase's modes,
// rows of 1 to 40 super-blocks, runs of 1 to 70 rows, the matrix going on past the run or not,
// with and without prefetching).
func TestRowsMatchPackedDot(t *testing.T) {
	defer kernels.SetRowsPrefetch(true)
	for _, wt := range kernels.WeightTypes() {
		f, _ := kernels.Lookup(wt)
		r := rand.New(rand.NewPCG(uint64(wt), 107))
		ran, special := map[string]int{}, map[string]int{}
		for trial := 0; trial < 120; trial++ {
			mode, n := trial%4, 1+r.IntN(70)
			extra := []int{0, 1, 5}[trial%3]
			kernels.SetRowsPrefetch(trial%5 != 0)
			c := newTileCase(r, f, mode, 1, n+extra)
			forms := kernels.RowsDots(wt, &c.l, c.w, c.x, n)
			if len(forms) == 0 {
				break
			}
			for name, got := range forms {
				ran[name]++
				for row := 0; row < n; row++ {
					want := f.PackedDot(&c.l, c.w[int64(row)*c.l.RowStride:], c.x)
					if g := got[row]; math.Float32bits(g) != math.Float32bits(want) {
						t.Fatalf("%s %s trial %d (%d blocks, mode %d, %d rows): row %d: %v (%#08x), PackedDot %v (%#08x)",
							wt, name, trial, c.l.Blocks, mode, n, row, g, math.Float32bits(g), want, math.Float32bits(want))
					}
					if math.IsNaN(float64(want)) || math.IsInf(float64(want), 0) {
						special[name]++
					}
				}
			}
		}
		for name, k := range ran {
			t.Logf("%s %s: %d runs, %d non-finite results", wt, name, k, special[name])
		}
	}
}

// The matvec kernels give every row PackedDot's bits, stored and added (Acc), whatever the
// row count (whole tiles and the rows after them) and the column count (several passes of
// TileCols), with 1 and 3 workers, with the tile forms and without them (one column: the rows
// forms, where a type has one, for any matrix), and for K-quant rows of 1 to 40 super-blocks
// (a third of the trials 1 to 3: a row of one folds only its first lanes).
func TestMatVecTilesMatchPackedDot(t *testing.T) {
	for _, tiles := range []bool{true, false} {
		t.Run(fmt.Sprintf("tiles=%v", tiles), func(t *testing.T) {
			defer kernels.UseTiles(tiles)()
			testMatVecTiles(t)
		})
	}
}

func testMatVecTiles(t *testing.T) {
	for _, workers := range []int{1, 3} {
		b := cpu.New(workers)
		for _, wt := range []dtype.Type{dtype.Q4_K, dtype.Q5_K, dtype.Q6_K, dtype.Q8_0, dtype.Q4_0} {
			f, _ := kernels.Lookup(wt)
			r := rand.New(rand.NewPCG(uint64(wt), 103))
			for trial := 0; trial < 18; trial++ {
				rows, n := []int{1, 15, 16, 17, 40, 64, 100}[trial%7], []int{1, 2, 8, 16, 17, 40}[trial%6]
				c := newTileCase(r, f, trial%4, n, rows)
				for trial >= 12 && wt.BlockSize() == 256 && c.l.Blocks > 3 { // short rows: 1 to 3 super-blocks
					c = newTileCase(r, f, trial%4, n, rows)
				}
				for _, acc := range []int32{0, 1} {
					y0 := randF32(r, n*rows, 1)
					name := fmt.Sprintf("%s/workers=%d/rows=%d/n=%d/acc=%d", wt, workers, rows, n, acc)
					wp, xp := upload(t, b, c.w), upload(t, b, c.x)
					yd, _ := b.Alloc(int64(4 * n * rows))
					if err := b.Write(yd, device.F32Bytes(y0)); err != nil {
						t.Fatal(err)
					}
					k, _ := kernels.MatVecFor(wt, n)
					a := kernels.MatVecArgs{W: wp, X: xp, Y: yd, Rows: int32(rows), Cols: int32(c.l.RowValues), N: int32(n), Acc: acc}
					if err := device.Launch(b, k, a); err != nil {
						t.Fatal(err)
					}
					got := readF32(t, b, yd, n*rows)
					for col := 0; col < n; col++ {
						for row := 0; row < rows; row++ {
							want := f.PackedDot(&c.l, c.w[int64(row)*c.l.RowStride:], c.x[col*c.xb:(col+1)*c.xb])
							if acc != 0 {
								want = num.Canon(y0[col*rows+row] + want)
							}
							if g := got[col*rows+row]; math.Float32bits(g) != math.Float32bits(want) {
								t.Fatalf("%s: row %d column %d: %v (%#08x), want %v (%#08x)", name, row, col, g, math.Float32bits(g), want, math.Float32bits(want))
							}
						}
					}
				}
			}
		}
		b.Close()
	}
}

// BenchmarkMatVec: one matvec launch on one thread, with the tile forms and with the one-row
// forms, at decode (1 column), tree (8) and prefill-chunk (64) widths: a 2048×2048 matrix
// (cache-resident) and a 8192×2048 one.
func BenchmarkMatVec(b *testing.B) {
	r := rand.New(rand.NewPCG(41, 42))
	be := cpu.New(1)
	defer be.Close()
	for _, wt := range []dtype.Type{dtype.Q4_K, dtype.Q6_K} {
		f, _ := kernels.Lookup(wt)
		for _, shape := range [][2]int{{2048, 2048}, {8192, 2048}} {
			rows, cols := shape[0], shape[1]
			l, _ := repack.NewLayout(wt, []int64{int64(cols), int64(rows)})
			w := make([]byte, l.Size())
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			for row := 0; row < rows; row++ {
				for i := int64(0); i < l.Blocks*l.F16Fields; i++ {
					binary.LittleEndian.PutUint16(w[int64(row)*l.RowStride+l.F16Off+2*i:], uint16(r.IntN(0x3800)))
				}
			}
			wp := upload(b, be, w)
			for _, n := range []int{1, 8, 64} {
				x := make([]byte, n*f.Act.RowBytes(cols))
				for c := 0; c < n; c++ {
					kernels.ConvertRow(f.Act, x[c*f.Act.RowBytes(cols):], randF32(r, cols, 1))
				}
				xp := upload(b, be, x)
				yp, _ := be.Alloc(int64(4 * rows * n))
				k, _ := kernels.MatVecFor(wt, n)
				a := kernels.MatVecArgs{W: wp, X: xp, Y: yp, Rows: int32(rows), Cols: int32(cols), N: int32(n)}
				for _, tiles := range []bool{false, true} {
					b.Run(fmt.Sprintf("%s/%dx%d/n=%d/tiles=%v", wt, rows, cols, n, tiles), func(b *testing.B) {
						defer kernels.UseTiles(tiles)()
						b.SetBytes(l.Size())
						for b.Loop() {
							if err := device.Launch(be, k, a); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		}
	}
}

// BenchmarkMatVecStream: a matrix far larger than the caches, one thread, one column: the
// twin's path, and each of the tile forms and the rows (or one-row) forms where the CPU has them.
func BenchmarkMatVecStream(b *testing.B) {
	r := rand.New(rand.NewPCG(43, 44))
	be := cpu.New(1)
	defer be.Close()
	for _, wt := range []dtype.Type{dtype.Q4_K, dtype.Q6_K} {
		f, _ := kernels.Lookup(wt)
		rows, cols := 32768, 2048
		l, _ := repack.NewLayout(wt, []int64{int64(cols), int64(rows)})
		w := make([]byte, l.Size())
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		for row := 0; row < rows; row++ { // finite fp16 scales
			for i := int64(0); i < l.Blocks*l.F16Fields; i++ {
				binary.LittleEndian.PutUint16(w[int64(row)*l.RowStride+l.F16Off+2*i:], uint16(r.IntN(0x3800)))
			}
		}
		wp := upload(b, be, w)
		x := make([]byte, f.Act.RowBytes(cols))
		kernels.ConvertRow(f.Act, x, randF32(r, cols, 1))
		xp := upload(b, be, x)
		yp, _ := be.Alloc(int64(4 * rows))
		k, _ := kernels.MatVecFor(wt, 1)
		a := kernels.MatVecArgs{W: wp, X: xp, Y: yp, Rows: int32(rows), Cols: int32(cols), N: 1}
		// twin: the twin's choice; tiles: the tile forms, with and without prefetching the next
		// tile; rows: without the tile forms (the rows form where the type has one, else the
		// one-row forms)
		for _, path := range []string{"twin", "tiles/prefetch=true", "tiles/prefetch=false", "rows"} {
			b.Run(fmt.Sprintf("%s/%s", wt, path), func(b *testing.B) {
				defer kernels.UseTiles(path != "rows")()
				defer kernels.UseRows(!strings.HasPrefix(path, "tiles"))()
				kernels.SetTilePrefetch(path != "tiles/prefetch=false")
				defer kernels.SetTilePrefetch(true)
				b.SetBytes(l.Size())
				timeCalls(b, func() error { return device.Launch(be, k, a) })
			})
		}
	}
}

// BenchmarkMatVecSmall: a small model's decode matvecs (256 columns, 256 and 768 rows), 12
// different matrices in turn (1.5 MB in all: beyond a core's L2, within the L3), one thread,
// with and without the prefetch setting (which matrices this small skip); it reports the
// median and fastest launch.
func BenchmarkMatVecSmall(b *testing.B) {
	r := rand.New(rand.NewPCG(45, 46))
	be := cpu.New(1)
	defer be.Close()
	f, _ := kernels.Lookup(dtype.Q4_K)
	const cols = 256
	var args []kernels.MatVecArgs
	x := make([]byte, f.Act.RowBytes(cols))
	kernels.ConvertRow(f.Act, x, randF32(r, cols, 1))
	xp := upload(b, be, x)
	yp, _ := be.Alloc(4 * 768)
	for i := 0; i < 12; i++ {
		rows := []int{256, 768}[i%2]
		l, _ := repack.NewLayout(dtype.Q4_K, []int64{cols, int64(rows)})
		w := make([]byte, l.Size())
		for j := range w {
			w[j] = byte(r.Uint32())
		}
		for row := 0; row < rows; row++ {
			for j := int64(0); j < l.Blocks*l.F16Fields; j++ {
				binary.LittleEndian.PutUint16(w[int64(row)*l.RowStride+l.F16Off+2*j:], uint16(r.IntN(0x3800)))
			}
		}
		args = append(args, kernels.MatVecArgs{W: upload(b, be, w), X: xp, Y: yp, Rows: int32(rows), Cols: cols, N: 1})
	}
	k, _ := kernels.MatVec(dtype.Q4_K)
	for _, pf := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", pf), func(b *testing.B) {
			kernels.SetTilePrefetch(pf)
			defer kernels.SetTilePrefetch(true)
			i := 0
			timeCalls(b, func() error {
				i++
				return device.Launch(be, k, args[i%len(args)])
			})
		})
	}
}

// BenchmarkTileCompute: the tile forms and the one-row forms on matrices that stay in a core's
// L2 (128 rows of 2048 values; 256 of 256, a small model's), 1 and 8 columns, one thread: their
// arithmetic rate, which the fastest launch shows even on a busy machine.
func BenchmarkTileCompute(b *testing.B) {
	r := rand.New(rand.NewPCG(47, 48))
	be := cpu.New(1)
	defer be.Close()
	for _, wt := range []dtype.Type{dtype.Q4_K, dtype.Q5_K, dtype.Q6_K} {
		f, _ := kernels.Lookup(wt)
		for _, shape := range [][2]int{{128, 2048}, {256, 256}} {
			rows, cols := shape[0], shape[1]
			l, _ := repack.NewLayout(wt, []int64{int64(cols), int64(rows)})
			w := make([]byte, l.Size())
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			for row := 0; row < rows; row++ {
				for i := int64(0); i < l.Blocks*l.F16Fields; i++ {
					binary.LittleEndian.PutUint16(w[int64(row)*l.RowStride+l.F16Off+2*i:], uint16(r.IntN(0x3800)))
				}
			}
			wp := upload(b, be, w)
			for _, n := range []int{1, 8} {
				x := make([]byte, n*f.Act.RowBytes(cols))
				for c := 0; c < n; c++ {
					kernels.ConvertRow(f.Act, x[c*f.Act.RowBytes(cols):], randF32(r, cols, 1))
				}
				xp := upload(b, be, x)
				yp, _ := be.Alloc(int64(4 * rows * n))
				k, _ := kernels.MatVecFor(wt, n)
				a := kernels.MatVecArgs{W: wp, X: xp, Y: yp, Rows: int32(rows), Cols: int32(cols), N: int32(n)}
				for _, tiles := range []bool{false, true} {
					b.Run(fmt.Sprintf("%s/%dx%d/n=%d/tiles=%v", wt, rows, cols, n, tiles), func(b *testing.B) {
						defer kernels.UseTiles(tiles)()
						b.SetBytes(l.Size())
						timeCalls(b, func() error { return device.Launch(be, k, a) })
					})
				}
			}
		}
	}
}
