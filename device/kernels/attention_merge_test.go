package kernels_test

import (
	"bytes"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/devicetest"
	"verity/device/kernels"
)

// An attention whose merge is deferred to AttentionMerge (the same arguments, DeferMerge 1)
// writes the bytes the single launch writes, for every attention case: trees over a shared
// history, rows sharing no chunk, windows, soft caps, every cache and output type — and where
// every chunk is the merge's (one chunk a row), the first launch is one block that returns.
func TestAttentionMergeEqualsOneLaunch(t *testing.T) {
	for _, c := range devicetest.Cases("attention_f32") {
		run := func(deferMerge int32) []byte {
			b := cpu.New(1)
			defer b.Close()
			a := attentionArgsOn(t, b, c)
			a.DeferMerge = deferMerge
			if err := b.Launch(kernels.Attention, a); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			if deferMerge != 0 {
				if err := b.Launch(kernels.AttentionMerge, a); err != nil {
					t.Fatalf("%s: merge: %v", c.Name, err)
				}
			}
			out := make([]byte, len(c.Buffers[5].Data)) // Out
			if err := b.Read(out, a.Out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		if !bytes.Equal(run(0), run(1)) {
			t.Errorf("%s: the deferred merge's output differs from the single launch's", c.Name)
		}
	}
	a := kernels.AttentionArgs{Rows: 3, NHead: 4, NKV: 2, HeadDim: 8, NSlots: 10, Chunks: 1, DeferMerge: 1}
	for _, k := range []device.Spec{kernels.Attention, kernels.AttentionMerge} {
		g, err := k.Geometry(a)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]uint32{true: 1, false: 6}[k == device.Spec(kernels.Attention)]; g.Grid.X != want {
			t.Errorf("%s of one chunk a row, deferred: %d blocks, want %d", k.Entry(), g.Grid.X, want)
		}
	}
	if _, err := kernels.AttentionMerge.Geometry(kernels.AttentionArgs{Rows: 1, NHead: 1, NKV: 1, HeadDim: 8, NSlots: 10, Chunks: 1}); err == nil {
		t.Error("the merge of a launch that did not defer it is accepted")
	}
}

// attentionArgsOn writes attention case c's buffers to backend b and returns its arguments.
func attentionArgsOn(tb testing.TB, b device.Backend, c devicetest.Case) kernels.AttentionArgs {
	tb.Helper()
	ps := make([]device.Ptr, len(c.Buffers))
	for i, buf := range c.Buffers {
		p, err := b.Alloc(int64(len(buf.Data)))
		if err == nil {
			err = b.Write(p, buf.Data)
		}
		if err != nil {
			tb.Fatal(err)
		}
		ps[i] = p
	}
	return c.Args(ps).(kernels.AttentionArgs)
}
