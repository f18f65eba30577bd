package kernels

import (
	"fmt"

	"verity/device"
	"verity/device/dtype"
)

// EmbedArgs: Out[r] = decode(Table[Tokens[r]]) — one table row of Cols values per token.
type EmbedArgs struct {
	Table  device.Ptr // Vocab rows of Cols values, GGUF block layout
	Tokens device.Ptr // int32 [Rows]
	Out    device.Ptr // float32 [Rows][Cols]
	Rows   int32
	Cols   int32
	Vocab  int32
}

var embedKernels = map[dtype.Type]*device.Kernel[EmbedArgs]{}

// Embed returns the embedding-lookup kernel for table type t.
func Embed(t dtype.Type) (*device.Kernel[EmbedArgs], error) {
	if k, ok := embedKernels[t]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("kernels: no embed for table type %s: %w", t, device.ErrUnsupported)
}

func newEmbed(f *Format) *device.Kernel[EmbedArgs] {
	return &device.Kernel[EmbedArgs]{
		EntryName:  "embed_" + f.Type.String(),
		ModuleName: "embed",
		Shape: func(a EmbedArgs) (device.Geometry, error) {
			if a.Rows <= 0 || a.Cols <= 0 || a.Vocab <= 0 {
				return device.Geometry{}, fmt.Errorf("bad shape rows=%d cols=%d vocab=%d", a.Rows, a.Cols, a.Vocab)
			}
			return device.Geometry{Grid: device.Dim3{X: uint32(a.Rows), Y: 1, Z: 1}, Block: device.Dim3{X: 256, Y: 1, Z: 1}}, nil
		},
		Twin: func(x *device.Exec, a EmbedArgs) error {
			rb, err := f.Type.RowBytes(int64(a.Cols))
			if err != nil {
				return err
			}
			table, err := x.U8(a.Table, int64(a.Vocab)*rb)
			if err != nil {
				return fmt.Errorf("table: %w", err)
			}
			toks, err := x.I32(a.Tokens, int(a.Rows))
			if err != nil {
				return err
			}
			out, err := x.F32(a.Out, int(a.Rows)*int(a.Cols))
			if err != nil {
				return err
			}
			cols := int(a.Cols)
			for r, t := range toks {
				if t < 0 || t >= a.Vocab {
					return fmt.Errorf("row %d: token %d outside vocabulary of %d", r, t, a.Vocab)
				}
			}
			x.For(len(toks), func(lo, hi int) {
				for r := lo; r < hi; r++ {
					t := int64(toks[r])
					f.Decode(out[r*cols:(r+1)*cols], table[t*rb:(t+1)*rb])
				}
			})
			return nil
		},
	}
}
