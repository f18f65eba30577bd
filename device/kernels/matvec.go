package kernels

import (
	"fmt"
	"sort"
	"sync"

	"verity/device"
	"verity/device/dtype"
	"verity/device/num"
	"verity/repack"
)

// Act is an activation format: how a float32 activation row is presented to a matvec.
type Act uint8

const (
	ActF32  Act = iota // float32 values
	ActF16             // IEEE half bits, rounded to nearest even
	ActBF16            // bfloat16 bits, rounded to nearest even
	ActQ8_0            // ggml block_q8_0: f16 d, 32 × int8 (34 bytes per 32 values)
	ActQ8_1            // ggml block_q8_1: f16 d, f16 s = d·Σq, 32 × int8 (36 bytes per 32)
	ActQ8_K            // ggml block_q8_K: f32 d, 256 × int8, 16 × int16 sums (292 bytes per 256)
)

var actNames = [...]string{"f32", "f16", "bf16", "q8_0", "q8_1", "q8_K"}

func (a Act) String() string { return actNames[a] }

// block returns values per block and bytes per block of the format.
func (a Act) block() (int, int) {
	switch a {
	case ActF32:
		return 1, 4
	case ActF16, ActBF16:
		return 1, 2
	case ActQ8_0:
		return 32, 34
	case ActQ8_1:
		return 32, 36
	default:
		return 256, 292
	}
}

// RowBytes is the size of one converted activation row of n values (n a whole number of
// blocks).
func (a Act) RowBytes(n int) int {
	v, b := a.block()
	return n / v * b
}

// Format is what a weight type contributes to the matvec and embed kernels: its activation
// format, how to decode a row exactly (embedding lookups), and the lane-strided dot product
// of one weight row with one converted activation row (the contract in the package doc).
type Format struct {
	Type dtype.Type
	Act  Act
	// Unit is the number of values in one reduction unit (a divisor of the row length that the
	// format requires; rows must be a whole number of units).
	Unit int
	// Decode writes the exact float32 values of a weight row.
	Decode func(dst []float32, row []byte)
	// Dot returns the matvec result for one weight row and one activation row.
	Dot func(row, x []byte, cols int) float32
	// PackedDot, where a format has one, is Dot for a row in its repack device layout l (the
	// same bits; a test checks them against Dot on the row's GGUF bytes). Formats without one
	// are evaluated by restoring each row's GGUF bytes.
	PackedDot func(l *repack.Layout, row, x []byte) float32

	// portableDot is the Go PackedDot when a vector form (simd.go) replaced it.
	portableDot func(l *repack.Layout, row, x []byte) float32
}

// rowDot evaluates a format's dot products on weight rows in device layout: directly with
// PackedDot where the format has one, else through the row's GGUF bytes (restored once per
// row, for every column).
type rowDot struct {
	f   *Format
	l   *repack.Layout
	row []byte // the current packed row
	buf []byte // its GGUF bytes, for formats without PackedDot
	// xt, where the format has a several-column form over transposed activations
	// (vectorMultiT), is the launch's activation rows transposeQ8K laid out, read by that
	// form in place of dots' own.
	xt []byte
	// acc and vals are dotsInto's scratch: zeroed lane accumulators for a multiIntoFunc
	// form, or the products before they are stored.
	acc  *multiAcc
	vals []float32
	into multiIntoFunc // the format's multiIntoFunc form, if any
}

func newRowDot(f *Format, l *repack.Layout) *rowDot {
	d := &rowDot{f: f, l: l, into: vectorMultiTInto[f.Type]}
	if f.PackedDot == nil {
		d.buf = make([]byte, l.RowBytes)
	}
	return d
}

// load makes the packed row at row[0:RowStride] current, and asks the caches for the row
// after it (where row extends that far), which the twins' loops read next: streaming a
// matrix without it runs at a third to a half of the rate on some CPUs.
func (d *rowDot) load(row []byte) {
	d.row = row[:d.l.RowStride]
	if next := row[d.l.RowStride:]; len(next) > 0 {
		prefetch(next[:min(int64(len(next)), d.l.RowStride)])
	}
	if d.buf != nil {
		d.l.UnpackRow(d.buf, d.row)
	}
}

// dots sets out[c] to the current row's product with activation row xs[c·xb:], for every
// c < len(out), with the format's several-column vector form where it has one (the same
// bits as dot, the weight row read once for up to maxMultiColumns columns): over xt, the
// launch's activations transposed, where the format has that form and the caller set it.
func (d *rowDot) dots(xs []byte, xb int, out []float32) {
	if m := vectorMultiT[d.f.Type]; m != nil && d.xt != nil && len(out) > 1 {
		for c0 := 0; c0 < len(out); c0 += maxMultiColumns {
			c1 := min(c0+maxMultiColumns, len(out))
			m(d.l, d.row, d.xt[c0*xb:c1*xb], xb, out[c0:c1])
		}
		return
	}
	if m := vectorMulti[d.f.Type]; m != nil && d.buf == nil && len(out) > 1 {
		for c0 := 0; c0 < len(out); c0 += maxMultiColumns {
			c1 := min(c0+maxMultiColumns, len(out))
			m(d.l, d.row, xs[c0*xb:c1*xb], xb, out[c0:c1])
		}
		return
	}
	for c := range out {
		out[c] = d.dot(xs[c*xb : (c+1)*xb])
	}
}

// dotsInto puts the current row's products with the n activation rows xs[c·xb:] at
// y[c·stride]: stored or, with add, added to the value there (a NaN the canonical one, as the
// add kernel gives). Over xt, where the format has a multiIntoFunc form, the products go
// there straight from the assembly.
func (d *rowDot) dotsInto(xs []byte, xb, n int, y []float32, stride int, add bool) {
	if into := d.into; into != nil && d.xt != nil && n > 1 {
		if d.acc == nil {
			d.acc = multiAccs.Get().(*multiAcc)
		}
		step := intoColumns(d.l.Blocks)
		for c0 := 0; c0 < n; c0 += step {
			m := min(step, n-c0)
			into(d.l, d.row, d.xt[c0*xb:(c0+m)*xb], xb, m, d.acc, y[c0*stride:], stride, add)
		}
		return
	}
	if cap(d.vals) < n {
		d.vals = make([]float32, n)
	}
	vals := d.vals[:n]
	d.dots(xs, xb, vals)
	for c, v := range vals {
		if add {
			v = num.Canon(y[c*stride] + v) // the GPU's NaN, as the add kernel gives
		}
		y[c*stride] = v
	}
}

// release returns dotsInto's accumulators (zeroed, as the forms leave them) for reuse.
func (d *rowDot) release() {
	if d.acc != nil {
		multiAccs.Put(d.acc)
		d.acc = nil
	}
}

// dot is the current row's product with activation row x.
func (d *rowDot) dot(x []byte) float32 {
	if d.buf == nil {
		return d.f.PackedDot(d.l, d.row, x)
	}
	return d.f.Dot(d.buf, x, int(d.l.RowValues))
}

var formats = map[dtype.Type]*Format{}

// registerFormat adds a weight format and registers its matvec and embed kernels.
func registerFormat(f *Format) {
	if _, dup := formats[f.Type]; dup {
		panic("kernels: weight format " + f.Type.String() + " registered twice")
	}
	if f.PackedDot == nil && f.Type.BlockSize() == 1 {
		// float rows are their GGUF bytes followed by padding
		f.PackedDot = func(l *repack.Layout, row, x []byte) float32 { return f.Dot(row[:l.RowBytes], x, int(l.RowValues)) }
	}
	if v := vectorDots[f.Type]; v != nil && f.PackedDot != nil {
		f.portableDot, f.PackedDot = f.PackedDot, v
	}
	formats[f.Type] = f
	matvecKernels[f.Type] = device.Register(newMatVec(f, "matvec_"))
	matvec8Kernels[f.Type] = device.Register(newMatVec(f, "matvec8_"))
	embedKernels[f.Type] = device.Register(newEmbed(f))
	moeMatVecKernels[f.Type] = device.Register(newMoEMatVec(f))
	registerMoE(f)
}

// Lookup returns the weight format of t.
func Lookup(t dtype.Type) (*Format, error) {
	if f, ok := formats[t]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("kernels: no matvec for weight type %s: %w", t, device.ErrUnsupported)
}

// WeightTypes lists the weight types the kernels support, in id order.
func WeightTypes() []dtype.Type {
	out := make([]dtype.Type, 0, len(formats))
	for t := range formats {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// MatVecArgs: Y[c][r] = Σ_i W[r][i]·X[c][i] for r < Rows, c < N.
//
// W is the weight matrix in its device layout: the bytes repack.Pack gives for the GGUF
// tensor of dims [Cols, Rows] (256-byte aligned rows of repack.Layout.RowStride bytes, the
// quants in lane-interleaved planes). Each weight type has two kernels with the same bits:
// MatVec, for decoding, makes one pass over the weights per column; MatVec8 reads each weight
// unit once and applies it to up to MaxColumns activation rows (a tree verify's nodes) before
// moving on, so a launch makes one weight pass per MaxColumns columns. Each column's
// arithmetic is the one-column kernel's (the contract in the package doc), so Y's bits depend
// neither on N nor on the kernel.
type MatVecArgs struct {
	W    device.Ptr // Rows weight rows of Cols values, repack layout
	X    device.Ptr // N activation rows of Cols values in the format's Act layout
	Y    device.Ptr // float32 [N][Rows]
	Rows int32
	Cols int32
	N    int32
	// Acc 1 adds the products to Y (y = y + dot, one rounded add: a residual connection
	// fused into its matvec, with the bits of the separate add); 0 stores them.
	Acc int32
}

// MaxColumns is the number of activation rows a matvec applies each weight unit to in one
// pass over the weights.
const MaxColumns = 8

// WeightLayout is the device layout of a weight tensor of type t and GGUF dims: the layout
// MatVec and MoEMatVec read (see repack).
func WeightLayout(t dtype.Type, dims ...int64) (repack.Layout, error) {
	return repack.NewLayout(t, dims)
}

var matvecKernels, matvec8Kernels = map[dtype.Type]*device.Kernel[MatVecArgs]{}, map[dtype.Type]*device.Kernel[MatVecArgs]{}

// MatVec returns the matvec kernel for weight type t that makes a weight pass per column.
func MatVec(t dtype.Type) (*device.Kernel[MatVecArgs], error) {
	if k, ok := matvecKernels[t]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kernels: no matvec for weight type %s: %w", t, device.ErrUnsupported)
}

// MatVec8 returns the matvec kernel for weight type t that makes a weight pass per MaxColumns
// columns.
func MatVec8(t dtype.Type) (*device.Kernel[MatVecArgs], error) {
	if k, ok := matvec8Kernels[t]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kernels: no matvec for weight type %s: %w", t, device.ErrUnsupported)
}

// MatVecFor returns the matvec kernel for weight type t and n columns: MatVec for one, MatVec8
// for more.
func MatVecFor(t dtype.Type, n int) (*device.Kernel[MatVecArgs], error) {
	if n > 1 {
		return MatVec8(t)
	}
	return MatVec(t)
}

// rowsPerBlock is the number of weight rows one thread block of MatVec handles (4 warps, one
// per row); a block of MatVec8 handles MatVec8Warps·MatVec8Rows.
const rowsPerBlock = 4

// MatVec8Rows is the number of weight rows one warp of MatVec8 handles for weight type t
// (ptx/src/matvec.cu): the standalone kernel reads each column's activations once per that many
// rows. The megakernel's instantiation of the same body keeps this grid but may fold a warp's
// rows in several passes of fewer rows, to stay within its register budget: the same bits.
func MatVec8Rows(t dtype.Type) int {
	if g, ok := matvec8Geometry[t]; ok {
		return g.rows
	}
	return 1
}

// MatVec8Staged reports whether MatVec8 for weight type t stages its activations: the block
// copies each column's activations to shared memory once and its warps read them from there
// (the quantised formats), instead of every warp reading them from global memory.
func MatVec8Staged(t dtype.Type) bool { return matvec8Geometry[t].staged }

// MatVec8Warps is the number of warps in a block of MatVec8 for weight type t: the block of
// the MMA form (q4_0, q8_0: MV8_MMA_WARPS in ptx/src/matvec.cu), a staged block's stagedWarps
// (MV8_STAGED_WARPS), others rowsPerBlock.
func MatVec8Warps(t dtype.Type) int {
	if w := matvec8Geometry[t].warps; w > 0 {
		return w
	}
	if MatVec8Staged(t) {
		return stagedWarps
	}
	return rowsPerBlock
}

// stagedWarps is the number of warps in a block of a staged MatVec8: one per column of a pass,
// each copying its column's activations.
const stagedWarps = MaxColumns

// matvec8Geometry: rows per warp of matvec8, whether it stages its activations and, where
// its block is not the form's default, its warps, as the MATVEC lines of ptx/src/matvec.cu have
// them (G, and the forms MV8_STAGED and MV8_MMA; the static model's best at ffn_up and ffn_down
// of eight columns).
var matvec8Geometry = map[dtype.Type]struct {
	rows   int
	staged bool
	warps  int
}{
	dtype.F32: {4, false, 0}, dtype.F16: {4, false, 0}, dtype.BF16: {4, false, 0},
	dtype.Q4_1: {2, true, 0}, dtype.Q5_0: {1, true, 0}, dtype.Q5_1: {2, true, 0},
	dtype.Q4_0: {4, true, 4}, dtype.Q8_0: {4, true, 4}, // MV8_MMA: MV8_MMA_ROWS rows a warp, MV8_MMA_WARPS warps a block
	dtype.Q2_K: {2, true, 0}, dtype.Q3_K: {2, true, 0}, dtype.Q4_K: {2, true, 0}, dtype.Q5_K: {2, true, 0}, dtype.Q6_K: {2, true, 0},
}

func newMatVec(f *Format, prefix string) *device.Kernel[MatVecArgs] {
	return &device.Kernel[MatVecArgs]{
		EntryName:  prefix + f.Type.String() + "_" + f.Act.String(),
		ModuleName: "matvec",
		Shape: func(a MatVecArgs) (device.Geometry, error) {
			if a.Rows <= 0 || a.Cols <= 0 || a.N <= 0 {
				return device.Geometry{}, fmt.Errorf("bad shape rows=%d cols=%d n=%d", a.Rows, a.Cols, a.N)
			}
			if int(a.Cols)%f.Unit != 0 || int(a.Cols)%f.Type.BlockSize() != 0 {
				return device.Geometry{}, fmt.Errorf("row length %d is not a multiple of the %s block %d and unit %d", a.Cols, f.Type, f.Type.BlockSize(), f.Unit)
			}
			warps, per := rowsPerBlock, rowsPerBlock
			if prefix == "matvec8_" {
				warps = MatVec8Warps(f.Type)
				per = warps * MatVec8Rows(f.Type)
			}
			return device.Geometry{
				Grid:  device.Dim3{X: uint32((int(a.Rows) + per - 1) / per), Y: 1, Z: 1},
				Block: device.Dim3{X: uint32(32 * warps), Y: 1, Z: 1},
			}, nil
		},
		Twin: func(x *device.Exec, a MatVecArgs) error { return matvecTwin(x, f, a) },
	}
}

func matvecTwin(x *device.Exec, f *Format, a MatVecArgs) error {
	rows, cols, n := int(a.Rows), int(a.Cols), int(a.N)
	l, err := cachedLayout(f.Type, int64(cols), int64(rows))
	if err != nil {
		return err
	}
	w, err := x.U8(a.W, l.Size())
	if err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	xb := f.Act.RowBytes(cols)
	xs, err := x.U8(a.X, int64(n*xb))
	if err != nil {
		return fmt.Errorf("activations: %w", err)
	}
	y, err := x.F32(a.Y, n*rows)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if rf := vectorRows[f.Type]; rf != nil && n == 1 && preferRows(f.Type, l, rows) {
		x.For(rows, func(lo, hi int) { matvecRows(rf, l, w, xs, lo, hi, y, a.Acc != 0) })
		return nil
	}
	if tf := vectorTile[f.Type]; tf != nil && rows >= tileRows {
		x.For((rows+tileRows-1)/tileRows, func(lo, hi int) {
			matvecTiles(tf, f, l, w, xs, xb, n, rows, lo*tileRows, min(hi*tileRows, rows), y, a.Acc != 0)
		})
		return nil
	}
	var xt []byte // the activations transposed once for every row, where the format's form wants them so
	if vectorMultiT[f.Type] != nil && n > 1 {
		p := transposedPool.Get().(*[]byte)
		defer transposedPool.Put(p)
		if cap(*p) < n*xb {
			*p = make([]byte, n*xb)
		}
		xt = (*p)[:n*xb]
		transposeQ8K(xt, xs, xb, n, int(l.Blocks))
	}
	x.For(rows, func(lo, hi int) {
		rd := newRowDot(f, l)
		defer rd.release()
		rd.xt = xt
		if rd.into != nil && xt != nil && n > intoColumns(l.Blocks) {
			rd.intoTiles(w, xb, n, lo, hi, y, rows, a.Acc != 0)
			return
		}
		for r := lo; r < hi; r++ {
			rd.load(w[int64(r)*l.RowStride:])
			rd.dotsInto(xs, xb, n, y[r:], rows, a.Acc != 0)
		}
	})
	return nil
}

// intoRowTile is how many weight rows intoTiles takes through each pass of columns: 8 and 16
// measured alike, 1 (every row through all the passes) 8 % slower (BenchmarkPrefillWide).
const intoRowTile = 8

// intoTiles is dotsInto over rows [lo, hi) of the matrix w (row r's products at y[r:], column
// c at stride apart) for more columns than one pass takes: a tile of intoRowTile rows at a
// time meets one pass's columns after another, so that a pass's activations stay in the L1
// from row to row rather than every row reading all the columns' from L2. The products are
// dotsInto's, each computed once: the order of rows and passes changes no bits.
func (d *rowDot) intoTiles(w []byte, xb, n, lo, hi int, y []float32, stride int, add bool) {
	if d.acc == nil {
		d.acc = multiAccs.Get().(*multiAcc)
	}
	step := intoColumns(d.l.Blocks)
	for r0 := lo; r0 < hi; r0 += intoRowTile {
		r1 := min(hi, r0+intoRowTile)
		for c0 := 0; c0 < n; c0 += step {
			m := min(step, n-c0)
			for r := r0; r < r1; r++ {
				d.load(w[int64(r)*d.l.RowStride:])
				d.into(d.l, d.row, d.xt[c0*xb:(c0+m)*xb], xb, m, d.acc, y[c0*stride+r:], stride, add)
			}
		}
	}
}

// transposedPool holds buffers for the matvec twin's transposed activations.
var transposedPool = sync.Pool{New: func() any { return new([]byte) }}

// laneSum folds the 32 lane accumulators with the warp butterfly (num.WarpTotal; its vector
// form where the dot products have one).
func laneSum(acc *[32]float32) float32 {
	if vectorCPU {
		return vectorWarpTotal(acc)
	}
	return num.WarpTotal(acc)
}
