// Package repack converts GGUF weight tensors into the device layouts read by the
// warp-per-row matvec kernels, and back.
//
// # Contract
//
// Pack(t, dims, data) takes a tensor as a GGUF file stores it — dims fastest first, rows of
// dims[0] values, each row a whole number of blocks of type t — and returns a Packed: its
// Layout and the transformed bytes. Unpack(p) restores the GGUF bytes exactly, byte for byte,
// including bits a decoder never reads. Malformed input (unknown or unsupported type, rows
// that are not whole blocks, a data length that does not match the dims, a Packed whose bytes
// do not match its layout) is reported as an error, never a panic.
//
// Supported types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.
//
// # Layout
//
// A tensor of dims [n, rows, experts...] is a sequence of expert matrices (one matrix for a
// 1-D or 2-D tensor; dims[2:] multiplied together otherwise). Each matrix starts at a
// multiple of Align (256) bytes and is rows rows of RowStride bytes; RowStride is a multiple
// of Align, so every row starts 256-byte aligned. Padding bytes are zero after Pack and are
// ignored by Unpack.
//
// F32, F16 and BF16 rows are the GGUF row bytes unchanged, followed by padding: their matvec
// units are already coalesced element-strided reads.
//
// A quantised row of B blocks and U matvec units (units as in device/kernels: one block of
// 32 values for the legacy types, a 32-value sub-block — eight per super-block — for the
// K-quants) is split into sections ("structure of arrays"):
//
//	F16Off:   the blocks' fp16 fields, field-major: d of blocks 0…B−1, then, where the type
//	          has one, m (q4_1, q5_1) or dmin (q2_K, q4_K, q5_K) of blocks 0…B−1.
//	ScaleOff: (K-quants, 16-byte aligned) ScaleBytes per block, one byte per sub-block:
//	          q2_K: the 16 scales (low nibbles) then the 16 mins (high nibbles);
//	          q3_K: the 16 raw 6-bit scales 0…63 (the kernel subtracts 32);
//	          q4_K, q5_K: the 8 6-bit scales then the 8 6-bit mins, as ggml's
//	          get_scale_min_k4 reads them;
//	          q6_K: the 16 int8 scales as stored.
//	          The 4- and 6-bit packings use every bit of their bytes, so re-packing the
//	          unpacked bytes restores the GGUF bytes exactly.
//	Planes:   the quants, one or two interleaved planes, each 128-byte aligned.
//
// A plane holds Width bytes (4, 8, 16 or 32) of every unit:
//
//	q4_0, q4_1: qs (16 bytes, verbatim)      q5_0, q5_1: qs (16), then qh (4, verbatim)
//	q8_0:       qs (32, verbatim)            q2_K: 2-bit quants (8)
//	q3_K:       low 2 bits (8), hmask bit (4) q4_K: 4-bit quants (16)
//	q5_K:       low 4 bits (16), high bit (4) q6_K: low 4 bits (16), high 2 bits (8)
//
// In the K-quant planes, with b bits per value, a unit has w = 4b bytes and value l (0…31)
// lies in byte l mod w at bits [b·⌊l/w⌋, b·⌊l/w⌋+b) — ggml's own order for 4-bit quants (byte
// j holds values j and j+16), generalised. Then the 32-bit word m of a unit, shifted right by
// b·t and masked to b bits per byte, holds values 4(m + b·t) … 4(m + b·t)+3 in its bytes: the
// four activations of one q8 word, ready for dp4a with no byte shuffles. The quant of value l
// is low | high<<bits(low) (q3_K: low − 4 where the hmask bit is 0, as in ggml).
//
// Interleave: the units l, l+32, l+64, … that lane l of a warp owns (the matvec reduction
// order) form lane l's stream, their plane bytes one after another, cut into 16-byte
// pieces; piece m of lane l lies at byte 512·m + 16·l of the plane. Each 16-byte load of a
// warp thus reads one contiguous 512-byte chunk; a load holds one unit of a 16-byte plane,
// half of a 32-byte one, and two or four consecutive units of an 8- or 4-byte one. Lanes
// past the row's last unit read zero padding; a plane is a whole number of chunks.
package repack
