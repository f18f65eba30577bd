// Package quant implements the block formats of GGUF tensors, bit for bit as ggml defines them:
// dequantisation (ggml's dequantize_row_*), the reference quantisers (ggml's
// quantize_row_*_ref, which llama.cpp's quantize tool uses when it has no importance matrix),
// and a float64 reference dot product per type for the tests of later kernels.
//
// One format is one file: it declares its block layout (with the size asserted against
// device/dtype), implements Format, and registers itself in init. Values are laid out in rows
// along the fastest GGUF dim; a row is a whole number of blocks.
package quant

import (
	"fmt"
	"sort"

	"verity/device/dtype"
)

// Format encodes and decodes one ggml type. Slices hold whole blocks: len(values) is a multiple
// of Type().BlockSize() and len(blocks) == len(values)/BlockSize()*BlockBytes(); the methods
// panic otherwise (callers check shapes with Check first).
type Format interface {
	Type() dtype.Type
	// Dequantize decodes blocks into values, giving exactly ggml's dequantize_row_* results.
	Dequantize(values []float32, blocks []byte)
	// Quantize encodes values into blocks, byte-identical to ggml's quantize_row_*_ref.
	Quantize(blocks []byte, values []float32)
	// DotRef is the float64 reference dot product of the decoded blocks with x: each stored value
	// is decoded exactly (every format's values are exact in float64), multiplied and summed in
	// float64 in index order. It is a test oracle, not a kernel.
	DotRef(blocks []byte, x []float64) float64
}

var formats = map[dtype.Type]Format{}

// Register adds a format. It panics on a duplicate, at init time.
func Register(f Format) {
	t := f.Type()
	if _, dup := formats[t]; dup {
		panic(fmt.Sprintf("quant: format %s registered twice", t))
	}
	formats[t] = f
}

// Lookup returns the format of t, or an error naming the type when Verity has none.
func Lookup(t dtype.Type) (Format, error) {
	if f, ok := formats[t]; ok {
		return f, nil
	}
	if !t.Known() {
		return nil, fmt.Errorf("quant: unknown ggml type id %d", uint32(t))
	}
	return nil, fmt.Errorf("quant: type %s is not supported", t)
}

// Types lists the supported types in increasing id order.
func Types() []dtype.Type {
	out := make([]dtype.Type, 0, len(formats))
	for t := range formats {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Check returns an error unless n values of type t form whole blocks and nbytes is their size.
func Check(t dtype.Type, n int, nbytes int) error {
	want, err := t.RowBytes(int64(n))
	if err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	if int64(nbytes) != want {
		return fmt.Errorf("quant: %d %s values take %d bytes, got %d", n, t, want, nbytes)
	}
	return nil
}

// mustShape panics unless values and blocks are consistent for t; the Format methods call it.
func mustShape(t dtype.Type, values int, blocks int) {
	if err := Check(t, values, blocks); err != nil {
		panic(err)
	}
}
