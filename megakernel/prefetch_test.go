package megakernel_test

import (
	"testing"

	"verity/megakernel"
)

// Each queue's prefetch plan, on random chains and windows: every range lies inside the stream
// of an item at or after the one asking (its part's blocks' bytes); the ranges of a queue, in
// order, ask for its streams in order, each byte once, from where the last ask ended or item
// k's stream began; and before item k waits, what the queue has asked for reaches exactly the
// window past the start of item k's stream (or the queue's end). Streams round-trip.
func TestPrefetchPlanIsTheWindow(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		c := newChain(t, seed, 4, 40)
		for _, window := range []int64{-1, 1, 700, 4096, 50000, 1 << 30} {
			s, err := megakernel.Build(c.ops, megakernel.Config{SMs: int(1 + seed%5), PartBytes: 1 + int64(seed)*1500, PrefetchBytes: window})
			if err != nil {
				t.Fatal(err)
			}
			plan := s.PrefetchPlan()
			for q, items := range s.Queues {
				// the queue's streams end to end
				type span struct {
					instr        int32
					from, to, at int64
				}
				spans := make([]span, len(items))
				at := int64(0)
				for k, it := range items {
					in := &s.Instrs[it.Instr]
					var from, to int64
					if pf := in.Prefetch; pf.Param >= 0 {
						b := int64(in.Blocks())
						lo, hi := int64(it.Part)*b/int64(in.Parts), int64(it.Part+1)*b/int64(in.Parts)
						from, to = lo*pf.PerBlock, max(lo*pf.PerBlock, min(hi*pf.PerBlock, pf.Total))
					}
					spans[k] = span{it.Instr, from, to, at}
					at += to - from
				}
				asked, j := int64(0), 0
				for k, rs := range plan[q] {
					if window <= 0 && len(rs) > 0 {
						t.Fatalf("window %d: queue %d item %d prefetches %v", window, q, k, rs)
					}
					asked = max(asked, spans[k].at) // what an earlier item's window left out, its item read itself
					for _, r := range rs {
						for j < len(spans) && (spans[j].to-spans[j].from == 0 || spans[j].at+spans[j].to-spans[j].from <= asked) {
							j++
						}
						if j < k || j >= len(spans) || r.Instr != spans[j].instr || int64(r.From) != spans[j].from+asked-spans[j].at ||
							r.To <= r.From || int64(r.To) > spans[j].to {
							t.Fatalf("seed %d window %d queue %d item %d: range %+v, want one from byte %d of item %d's stream %+v",
								seed, window, q, k, r, asked, j, spans[min(j, len(spans)-1)])
						}
						asked += int64(r.To - r.From)
					}
					if want := min(spans[k].at+window, at); window > 0 && asked != want {
						t.Fatalf("seed %d window %d queue %d item %d: asked up to %d, want %d", seed, window, q, k, asked, want)
					}
				}
			}
			back, err := megakernel.Decode(s.Encode())
			if err != nil {
				t.Fatalf("window %d: %v", window, err)
			}
			if back.PrefetchBytes != max(window, 0) {
				t.Fatalf("window %d decoded as %d", window, back.PrefetchBytes)
			}
		}
	}
}

// The default window is 256 KiB, or less where the queues' windows would take more than two
// thirds of the machine's L2; a machine that does not say its L2 keeps 256 KiB.
func TestPrefetchWindowDefault(t *testing.T) {
	c := newChain(t, 3, 4, 10)
	h200 := megakernel.H200
	unknown := h200
	unknown.L2Bytes = 0
	for _, tc := range []struct {
		m    *megakernel.Machine
		sms  int
		want int64
	}{
		{&h200, 132, 256 << 10},
		{&h200, 264, (h200.L2Bytes * 2 / 3 / 264) &^ 127},
		{&unknown, 1024, 256 << 10},
	} {
		s, err := megakernel.Build(c.ops, megakernel.Config{SMs: tc.sms, Machine: tc.m})
		if err != nil {
			t.Fatal(err)
		}
		if s.PrefetchBytes != tc.want || int64(tc.sms)*s.PrefetchBytes > max(tc.m.L2Bytes*2/3, int64(tc.sms)<<18) {
			t.Errorf("%d queues, L2 of %d bytes: a window of %d bytes, want %d", tc.sms, tc.m.L2Bytes, s.PrefetchBytes, tc.want)
		}
	}
}
