// Package gguf reads and writes GGUF files (versions 2 and 3, little-endian), the model format
// of ggml and llama.cpp.
//
// # Layout
//
// A file is a header — magic "GGUF", version, tensor count, key-value count — followed by the
// metadata key-value pairs, the tensor infos (name, dims, ggml type, data offset), zero padding to
// the alignment, and the data section. Tensor offsets are relative to the data section and are
// multiples of the alignment (general.alignment, a uint32 power of two, default 32).
//
// Dims are listed fastest-varying first, as ggml's ne: element (i0, i1, i2, i3) of a contiguous
// tensor is at index i0 + ne0·(i1 + ne1·(i2 + ne2·i3)), and the first dim is the row. A weight
// matrix for y = W·x therefore has Dims [in, out]: each of the out rows holds in values. Stacked
// MoE experts have [in, out, n_expert].
//
// # Reading
//
// Parse decodes a byte slice without copying tensor data; Open maps the file read-only (mmap)
// and falls back to reading it whole where mapping is not possible (no mmap on the platform, a
// pipe, an empty file). Parse never panics, and allocates no more than a small multiple of the
// input's size, whatever the counts in it claim. It rejects, with an error naming the problem and
// the key or tensor:
//
//   - a bad magic, version 0, 1 (GGUFv1's 32-bit counts) or above 3, and byte-swapped versions;
//   - a header that ends early anywhere (errors wrap ErrTruncated), and key, tensor, array and
//     string counts larger than the remaining bytes could hold;
//   - empty or duplicate keys, unknown value types, arrays nested more than 8 deep;
//   - general.alignment that is not a uint32 power of two;
//   - tensor names longer than 63 bytes (ggml's GGML_MAX_NAME), containing NUL, or duplicated;
//   - more than 4 dims, negative dims, an element count or byte size that overflows int64, a ggml
//     type id ggml does not define, a first dim that is not a whole number of blocks;
//   - data offsets that are not multiples of the alignment, tensor data that extends past the end
//     of the file, and tensors whose data overlap.
//
// This is what ggml's gguf.cpp checks, with two differences. ggml requires the tensors to be packed
// in table order (each at the aligned end of the previous one); Parse accepts any aligned,
// non-overlapping layout, as the specification does. ggml rejects arrays of arrays; Parse reads
// them (up to the depth limit) as []Value. Like ggml, Parse accepts zero dims (an empty tensor), a
// tensor with no dims (one element), any nonzero byte as a true bool, and strings that are not
// valid UTF-8, which are kept byte for byte.
//
// Metadata values are decoded into Go values that do not refer to the input, so they stay valid
// after Close; tensor data is returned by File.Data as sub-slices of the input or the mapping.
//
// # Writing
//
// Writer produces files in ggml's own layout, which llama.cpp loads; see Writer.
package gguf
