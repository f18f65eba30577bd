// Package dtype names the tensor element types of GGUF files — ggml's type ids — and their
// block geometry: how many values one block holds and how many bytes it takes.
//
// The ids, names and sizes are ggml's (ggml.h, ggml.c type traits) and are part of the GGUF
// format: a file stores the id, and a reader derives a tensor's byte size from the block size
// and the row length. The table lists every id that ggml still defines, including types Verity
// cannot compute with, so that files using them can still be inspected.
package dtype

import (
	"fmt"
	"math/bits"
)

// Type is a ggml tensor type id as stored in a GGUF tensor table.
type Type uint32

// The ggml type ids. Gaps are ids ggml removed (4, 5, 31–33, 36–38).
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
	Q1_0    Type = 41
	Q2_0    Type = 42
)

// QK is the number of values in a super-block of the K-quant family.
const QK = 256

type traits struct {
	name       string // ggml_type_name
	blockSize  int    // values per block (ggml_blck_size)
	blockBytes int    // bytes per block (ggml_type_size)
	quantized  bool
}

var table = map[Type]traits{
	F32: {"f32", 1, 4, false}, F16: {"f16", 1, 2, false},
	Q4_0: {"q4_0", 32, 18, true}, Q4_1: {"q4_1", 32, 20, true},
	Q5_0: {"q5_0", 32, 22, true}, Q5_1: {"q5_1", 32, 24, true},
	Q8_0: {"q8_0", 32, 34, true}, Q8_1: {"q8_1", 32, 36, true},
	Q2_K: {"q2_K", 256, 84, true}, Q3_K: {"q3_K", 256, 110, true},
	Q4_K: {"q4_K", 256, 144, true}, Q5_K: {"q5_K", 256, 176, true},
	Q6_K: {"q6_K", 256, 210, true}, Q8_K: {"q8_K", 256, 292, true},
	IQ2_XXS: {"iq2_xxs", 256, 66, true}, IQ2_XS: {"iq2_xs", 256, 74, true},
	IQ3_XXS: {"iq3_xxs", 256, 98, true}, IQ1_S: {"iq1_s", 256, 50, true},
	IQ4_NL: {"iq4_nl", 32, 18, true}, IQ3_S: {"iq3_s", 256, 110, true},
	IQ2_S: {"iq2_s", 256, 82, true}, IQ4_XS: {"iq4_xs", 256, 136, true},
	I8: {"i8", 1, 1, false}, I16: {"i16", 1, 2, false},
	I32: {"i32", 1, 4, false}, I64: {"i64", 1, 8, false},
	F64: {"f64", 1, 8, false}, IQ1_M: {"iq1_m", 256, 56, true},
	BF16: {"bf16", 1, 2, false}, TQ1_0: {"tq1_0", 256, 54, true},
	TQ2_0: {"tq2_0", 256, 66, true}, MXFP4: {"mxfp4", 32, 17, true},
	NVFP4: {"nvfp4", 64, 36, true}, Q1_0: {"q1_0", 128, 18, true},
	Q2_0: {"q2_0", 64, 18, true},
}

// Known reports whether t is a type id ggml defines.
func (t Type) Known() bool { _, ok := table[t]; return ok }

// String returns ggml's name for the type ("q4_K", "bf16"), or "type(N)" for an unknown id.
func (t Type) String() string {
	if tr, ok := table[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of values in one block (1 for plain float and integer types);
// 0 for an unknown id.
func (t Type) BlockSize() int { return table[t].blockSize }

// BlockBytes is the size in bytes of one block; 0 for an unknown id.
func (t Type) BlockBytes() int { return table[t].blockBytes }

// Quantized reports whether values are stored in scaled blocks rather than one by one.
func (t Type) Quantized() bool { return table[t].quantized }

// RowBytes returns the bytes taken by a row of n values. n must be a multiple of the block
// size; otherwise, or for an unknown type, it returns an error naming both.
func (t Type) RowBytes(n int64) (int64, error) {
	tr, ok := table[t]
	if !ok {
		return 0, fmt.Errorf("dtype: unknown ggml type id %d", uint32(t))
	}
	if n < 0 || n%int64(tr.blockSize) != 0 {
		return 0, fmt.Errorf("dtype: row of %d values is not a whole number of %s blocks of %d", n, tr.name, tr.blockSize)
	}
	blocks := n / int64(tr.blockSize)
	if blocks > (1<<63-1)/int64(tr.blockBytes) {
		return 0, fmt.Errorf("dtype: row of %d %s values overflows int64 bytes", n, tr.name)
	}
	return blocks * int64(tr.blockBytes), nil
}

// TensorBytes returns the bytes of a tensor with dims ne (fastest first), checking that the
// first dim is a whole number of blocks and that the byte count does not overflow int64.
func (t Type) TensorBytes(ne []int64) (int64, error) {
	if len(ne) == 0 {
		return 0, fmt.Errorf("dtype: tensor has no dims")
	}
	for i, d := range ne {
		if d < 0 {
			return 0, fmt.Errorf("dtype: dim %d is negative (%d)", i, d)
		}
	}
	n, err := t.RowBytes(ne[0])
	if err != nil {
		return 0, err
	}
	for _, d := range ne[1:] {
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > 1<<63-1 {
			return 0, fmt.Errorf("dtype: %s tensor of dims %v overflows int64 bytes", t, ne)
		}
		n = int64(lo)
	}
	return n, nil
}

// Parse returns the type whose ggml name is s (case-insensitive: "Q4_K", "q4_k", "bf16").
func Parse(s string) (Type, error) {
	for t, tr := range table {
		if equalFold(tr.name, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("dtype: unknown type name %q", s)
}

// All returns every known type id in increasing order.
func All() []Type {
	out := make([]Type, 0, len(table))
	for t := Type(0); t < 64; t++ {
		if t.Known() {
			out = append(out, t)
		}
	}
	return out
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
