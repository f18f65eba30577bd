package gguf

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"verity/device/dtype"
)

// benchFile writes a file with nTensors small tensors named as in a llama model and a tokenizer of
// nVocab tokens and nMerges merges.
func benchFile(b *testing.B, nTensors, nVocab, nMerges int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		s := make([]byte, 2+rng.IntN(8))
		for i := range s {
			s[i] = byte('a' + rng.IntN(26))
		}
		return string(s)
	}
	w := NewWriter()
	w.Set("general.architecture", Str("llama"))
	w.Set("llama.block_count", U32(uint32(nTensors/9+1)))
	if nVocab > 0 {
		tokens := make([]string, nVocab)
		types := make([]int32, nVocab)
		for i := range tokens {
			tokens[i], types[i] = word(), 1
		}
		merges := make([]string, nMerges)
		for i := range merges {
			merges[i] = word() + " " + word()
		}
		w.Set("tokenizer.ggml.tokens", ArrStrings(tokens))
		w.Set("tokenizer.ggml.token_type", ArrInt32s(types))
		w.Set("tokenizer.ggml.merges", ArrStrings(merges))
	}
	names := []string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"}
	data := make([]byte, 16)
	for i := range nTensors {
		name := fmt.Sprintf("blk.%d.%s.weight", i/len(names), names[i%len(names)])
		if err := w.AddTensor(name, dtype.F32, []int64{2, 2}, data); err != nil {
			b.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ tensors, vocab, merges int }{
		{1000, 0, 0},
		{10000, 0, 0},
		{100000, 0, 0},
		{292, 128256, 280147}, // Llama-3-8B's counts
	} {
		b.Run(fmt.Sprintf("tensors=%d/vocab=%d", bc.tensors, bc.vocab), func(b *testing.B) {
			file := benchFile(b, bc.tensors, bc.vocab, bc.merges)
			f := mustParse(b, file)
			b.SetBytes(f.DataOffset) // the header: the part Parse reads
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(file); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(bc.tensors), "ns/tensor")
		})
	}
}
