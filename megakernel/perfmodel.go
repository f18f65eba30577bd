package megakernel

import (
	"fmt"

	"verity/device"
	"verity/device/perf"
)

// MachineFor is the cost model's machine for a card of the kernels' static model: its SMs,
// clock, bandwidth and latencies are the card's (device/perf/cards.go, where they are sourced);
// the loop's own costs are read off the megakernel's sm_90 SASS (model.go).
func MachineFor(c perf.Card) Machine {
	return Machine{Name: c.Name, SMs: c.SMs, ClockGHz: c.ClockGHz, BandwidthGBs: c.BandwidthGBs, L2GBs: c.L2GBs, L2Bytes: c.L2Bytes, L2Latency: c.L2Latency,
		DRAMLatency: c.DRAMLatency, ItemCycles: loopItemCycles, WakeCycles: loopWakeCycles, HotWakeCycles: loopHotWake, HotWaitCycles: HotPolls * c.L2Latency,
		LaunchUS:   loopLaunchUS + float64(loopStartCycles)/(c.ClockGHz*1e3),
		StageBytes: StageBytes(int64(LaunchShared(int64(c.SharedPerSM - c.SharedReserved))))}
}

// KernelModel is the PartModel of the kernels' static model (device/perf): each instruction
// predicted as its own launch (registers, the SASS's chain of waits, load/store cycles and
// instructions per warp), and a part of it timed as the megakernel runs it — the part's
// blocks on one queue, whose thread block of MaxThreads threads holds as many of the
// instruction's blocks at once as fit in groups of whole warps, sharing its SM's bandwidth,
// load/store path and issue slots with the SM's other queues. A part's time is the largest of
//
//	DRAM     its bytes at a queue's share of the bandwidth
//	latency  its warps' lifetimes over the warps the queue holds at once (Little's law), its
//	         blocks priced by their kind (perf.Prediction.LeadCycles for the grid's leading
//	         region), a block that follows the one before it in the part sooner where that one asked
//	         the L2 for its data (perf.Prediction.PartCycles), and any part longer by a
//	         merging block's work (MergeCycles: the part that ends last merges)
//	lsu      its load/store cycles, the SM's path shared by its queues
//	issue    its instructions over the SM's schedulers, shared likewise
//
// Instructions the static model has no facts for fall back to BytesModel.
//
// A KernelModel times the instructions of one step, each first in program order (as Build's
// placement and Predict's replay ask for them): an instruction reads a buffer an earlier one
// wrote, at least as many bytes of it (an activation the previous op produced), from the L2,
// where the write left it moments before, not from DRAM as a launch of its own would find it.
type KernelModel struct {
	Card    perf.Card
	preds   map[*Instr]*perf.Prediction
	written map[uint64]int64 // the bytes the instructions seen so far wrote at each address
}

// NewKernelModel returns the static model's PartModel on card c.
func NewKernelModel(c perf.Card) *KernelModel {
	return &KernelModel{Card: c, preds: map[*Instr]*perf.Prediction{}, written: map[uint64]int64{}}
}

// Prediction is the static model's prediction of in as the megakernel runs it (nil if it has
// none): an eager launch less the standalone kernel's prefetches, which the megakernel's bodies
// do not make, its reads of what earlier instructions wrote found in the L2.
func (k *KernelModel) Prediction(in *Instr) *perf.Prediction {
	if p, ok := k.preds[in]; ok {
		return p
	}
	var pp *perf.Prediction
	spec := Kernels()[in.Kernel]
	if args, err := device.Unflatten(spec.ArgsType(), in.Params); err == nil {
		opts := perf.Options{Unprefetched: true, Resident: map[string]bool{}}
		tr, terr := perf.TrafficOf(spec, args)
		ps, perr := device.Params(args)
		addr := map[string]uint64{}
		if terr == nil && perr == nil {
			for _, p := range ps {
				addr[p.Name] = p.Bits
			}
			for _, st := range tr.Streams {
				if a, ok := addr[st.Param]; ok && !st.Write && st.Bytes > 0 && k.written[a] >= st.Bytes {
					opts.Resident[st.Param] = true
				}
			}
		}
		if p, err := perf.PredictWith(k.Card, spec, args, opts); err == nil {
			pp = &p
		}
		if terr == nil && perr == nil {
			for _, st := range tr.Streams {
				if a, ok := addr[st.Param]; ok && st.Write && a != 0 {
					k.written[a] = max(k.written[a], st.Bytes)
				}
			}
		}
	}
	k.preds[in] = pp
	return pp
}

func (k *KernelModel) PartUS(in *Instr, lo, hi, qps, queues int) (float64, string) {
	p := k.Prediction(in)
	if p == nil || p.Blocks <= 0 || p.WarpsPerBlock <= 0 {
		return BytesModel{MachineFor(k.Card)}.PartUS(in, lo, hi, qps, queues)
	}
	c := k.Card
	n := float64(hi - lo)
	clock := c.ClockGHz * 1e3 // cycles per µs
	warps := n * float64(p.WarpsPerBlock)
	groups := max(1, MaxThreads/(p.WarpsPerBlock*32)) // the instruction's blocks one queue holds at once
	resident := min(n, float64(groups)) * float64(p.WarpsPerBlock)
	times := []struct {
		us   float64
		name string
	}{
		{float64(p.Bytes) * n / float64(p.Blocks) / (c.BandwidthGBs * 1e3 / float64(c.SMs*qps)), "dram"},
		{(p.PartCycles(lo, hi, min(hi-lo, groups))/resident + p.MergeCycles) / clock, "latency"},
		{warps * p.WarpLSUCycles * float64(qps) / clock, "lsu"},
		{warps * p.WarpInstrs / float64(c.Schedulers) * float64(qps) / clock, "issue"},
	}
	best := times[0]
	for _, t := range times[1:] {
		if t.us > best.us {
			best = t
		}
	}
	return best.us, best.name
}

// String names the model.
func (k *KernelModel) String() string {
	return fmt.Sprintf("the kernels' static model (device/perf, %s)", k.Card.Name)
}
