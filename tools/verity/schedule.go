package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/spf13/cobra"

	"verity/device"
	"verity/device/perf"
	"verity/host/engine"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/model"
	"verity/megakernel"
)

func newScheduleCmd() *cobra.Command {
	var modelName string
	var sms, qps, rows, context int
	var bandwidth float64
	var prefetch, stage int64
	var asJSON bool
	var parts, card string
	var plotPath string
	var cache cacheFlags
	cmd := &cobra.Command{
		Use:   "schedule [--model FILE|FIXTURE]",
		Short: "Compile one step for the megakernel and report its schedule and its modelled time, with the breakdown",
		Long: `Compile one step of a model — rows rows (a draft tree's nodes; 1 for decoding) over
a history of --context positions — into the megakernel's instruction stream for --sms SMs
with --queues-per-sm thread blocks (queues) each, without running it, and report its
instructions, parts, dependencies and levels (the longest chain of instructions that wait for
each other), and the step's modelled time on an H200 with where it goes: the megakernel's
cost model (megakernel/model.go) replays the schedule — each queue's items in order, every
item paying its own start (reading its record, polling, two barriers), every wait for a
dependency paying the hand-off (the release reaching L2, the poll seeing it), each part timed
by the part model, the parts' weights prefetched into L2 while their blocks wait (and a waiting
matvec's own weights staged in shared memory, the window moving on past them) — and walks
the critical path: its parts by kernel, its items' starts, its hand-offs. With --parts kernels
(the default) each part is timed by the kernels' static model (device/perf, verity kernels):
its bytes at the queue's share of the bandwidth, its warps' chain of waits over the warps the
queue holds at once, its load/store cycles and instructions on its SM's share; with --parts
bytes, by its bytes alone (a floor, blind to bytes in flight and issue limits). Every figure
is modelled, not measured: verity bench --megakernel (and --protocol seed001) measures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case sms < 0:
				return fmt.Errorf("--sms %d: want at least 1 (0: the card's)", sms)
			case qps < 1 || max(sms, 132)*qps > megakernel.MaxSMs:
				return fmt.Errorf("--queues-per-sm %d: want 1 or more, and at most %d queues in all", qps, megakernel.MaxSMs)
			case rows < 1:
				return fmt.Errorf("--rows %d: want at least 1", rows)
			case context < 0:
				return fmt.Errorf("--context %d: want 0 or more positions", context)
			case !(bandwidth >= 0) || math.IsInf(bandwidth, 0):
				return fmt.Errorf("--bandwidth %g: want a positive rate in GB/s (0: the card's)", bandwidth)
			case parts != "kernels" && parts != "bytes":
				return fmt.Errorf("--parts %q: want kernels or bytes", parts)
			}
			c, ok := perf.Cards[card]
			if !ok {
				return fmt.Errorf("--card %q: the cards are H200, H100 and A100", card)
			}
			if c.Arch != 90 && c.Arch != 80 {
				return fmt.Errorf("--card %s: the megakernel does not run there", card)
			}
			if optin := int64(c.SharedPerSM - c.SharedReserved); stage > optin {
				return fmt.Errorf("--stage %d: a block of the %s may have at most %d bytes of shared memory", stage, c.Name, optin)
			}
			path, name, err := resolveModel(modelName, cmd)
			if err != nil {
				return err
			}
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			p, err := model.Build(f)
			if err != nil {
				return err
			}
			kt, vt, err := cache.typesFor(true) // a GPU's plan
			if err != nil {
				return err
			}
			if err := p.SetCacheTypes(kt, vt); err != nil {
				return err
			}
			eo := engine.ExecOptions(p, engine.LoadOptions{MaxRows: rows, Context: context + rows, Sessions: 1})
			ex, err := exec.New(&planner{}, p, eo)
			if err != nil {
				return err
			}
			defer ex.Close()
			if plotPath != "" {
				if err := scheduleRoofline(plotPath, name, ex, rows, context); err != nil {
					return err
				}
			}
			if bandwidth > 0 {
				c.BandwidthGBs = bandwidth
			}
			if sms > 0 {
				c.SMs = sms
			}
			m := megakernel.MachineFor(c)
			switch {
			case stage < 0:
				m.StageBytes = 0
			case stage > 0:
				m.StageBytes = megakernel.StageBytes(stage &^ 15)
			}
			var pm megakernel.PartModel = megakernel.BytesModel{Machine: m}
			if parts == "kernels" {
				pm = megakernel.NewKernelModel(c)
			}
			// the replay credits every line a window asks for, so the windows must fit the L2
			// together: a line evicted before its part reads it is read from DRAM twice
			if windows := prefetch * int64(c.SMs*qps); windows > c.L2Bytes {
				return fmt.Errorf("a prefetch window of %d KiB on %d queues asks for %.1f MiB at once; the %s's L2 holds %.1f MiB",
					prefetch>>10, c.SMs*qps, float64(windows)/(1<<20), c.Name, float64(c.L2Bytes)/(1<<20))
			}
			cfg := megakernel.Config{SMs: c.SMs * qps, QueuesPerSM: qps, Machine: &m, Model: pm, PrefetchBytes: prefetch}
			s, err := ex.Schedule(rows, rows, rows*(context+1), cfg)
			if err != nil {
				return err
			}
			pr, err := megakernel.Predict(s, m, qps, pm)
			if err != nil {
				return err
			}
			st := s.Stats()
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Model      string                `json:"model"`
					Rows       int                   `json:"rows"`
					Context    int                   `json:"context"`
					Stats      megakernel.Stats      `json:"stats"`
					Prediction megakernel.Prediction `json:"prediction"`
				}{name, rows, context, st, pr})
			}
			return printSchedule(out, s, st, pr, name, rows, context, qps, m, pm)
		},
	}
	cmd.Flags().StringVar(&modelName, "model", defaultBenchModel, "GGUF file or fixture name")
	cache.add(cmd)
	cmd.Flags().IntVar(&sms, "sms", 0, "SMs (0: the card's; an H200 has 132)")
	cmd.Flags().StringVar(&card, "card", perf.DefaultCard, "the card modelled: H200, H100 or A100 (device/perf)")
	cmd.Flags().StringVar(&parts, "parts", "kernels", "what times a part: kernels (the kernels' static model) or bytes (its bytes at a queue's share of the bandwidth)")
	cmd.Flags().IntVar(&qps, "queues-per-sm", 1, "megakernel thread blocks (queues) per SM")
	cmd.Flags().IntVar(&rows, "rows", 8, "rows in the step: a tree's nodes, 1 for decoding")
	cmd.Flags().IntVar(&context, "context", 2048, "positions of history each row attends to")
	cmd.Flags().Float64Var(&bandwidth, "bandwidth", 0, "memory bandwidth in GB/s (0: the card's; an H200's measured copy rate is about 4300)")
	cmd.Flags().Int64Var(&stage, "stage", 0, "the dynamic shared memory of a block alone on its SM, in bytes: what it stages its part's weights in while it waits, its window moving on past them (0: as the runner launches, what the card lets a block opt in to less 32 KiB left to the L1: 195 KiB on an H200; negative: no staging)")
	cmd.Flags().Int64Var(&prefetch, "prefetch", 0, "each queue's prefetch window: how far into its coming parts' weights a block asks the L2 for before it waits (0: the default, 256 KiB or less, as the queues' windows fit two thirds of the card's L2; negative: none); all queues' windows must fit the card's L2")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the statistics and the prediction as JSON")
	cmd.Flags().StringVar(&plotPath, "plot", "", plotHelp+": the step's launches on the card's roofline (flops and bytes against its bandwidth and compute)")
	return cmd
}

// printSchedule writes the schedule's report.
func printSchedule(out io.Writer, s *megakernel.Schedule, st megakernel.Stats, pr megakernel.Prediction, name string, rows, context, qps int,
	m megakernel.Machine, pm megakernel.PartModel) error {
	fmt.Fprintf(out, "%s: a step of %d rows after %d positions, on %d SMs × %d queues (%s, %.0f GB/s; modelled, not measured)\n",
		name, rows, context, m.SMs, qps, m.Name, m.BandwidthGBs)
	fmt.Fprintf(out, "  %d instructions in %d parts (items), %d dependencies, %d levels; the busiest queue runs %d items\n",
		st.Instrs, st.Parts, st.Deps, st.Levels, pr.MaxItems)
	fmt.Fprintf(out, "  %.1f MB moved: the floor is %.0f µs at %.0f GB/s\n", float64(st.Bytes)/1e6, pr.FloorUS, m.BandwidthGBs)
	perHandoff := 0.0
	if pr.Handoffs > 0 {
		perHandoff = pr.WakesUS / float64(pr.Handoffs)
	}
	fmt.Fprintf(out, "  modelled: %.0f µs — the critical path's parts %.0f µs + its %d item starts %.0f µs (%.2f µs each) + its %d hand-offs %.0f µs (%.2f µs each on average) + the launch %.0f µs",
		pr.US, pr.PartsUS, countStarts(pr), pr.ItemsUS, float64(m.ItemCycles)/(m.ClockGHz*1e3), pr.Handoffs, pr.WakesUS, perHandoff, pr.LaunchUS)
	if pr.FloorUS > pr.ScheduleUS {
		fmt.Fprintf(out, " (the floor, %.0f µs, is longer than the path, %.0f µs)", pr.FloorUS, pr.ScheduleUS)
	}
	fmt.Fprintf(out, "; %.0f%% of the floor\n", 100*pr.FloorUS/pr.US)
	fmt.Fprint(out, "  the critical path's parts by kernel:")
	for _, k := range pr.Path {
		fmt.Fprintf(out, " %s %.0f µs (%d parts, %s);", k.Entry, k.US, k.Parts, k.Limiter)
	}
	if km, ok := pm.(*megakernel.KernelModel); ok {
		fmt.Fprintf(out, "\n  parts timed by %s, each kernel's part at the warps one queue holds", km)
		if err := kernelRates(out, s, km, qps); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "\n  parts timed at a queue's share of the bandwidth, %.1f GB/s (blind to bytes in flight and issue limits)", m.BandwidthGBs/float64(m.SMs*qps))
	}
	fmt.Fprintf(out, "; %.1f MB of weights in L2 or shared memory before their parts began, prefetched through a window of %d KiB a queue", float64(pr.Prefetched)/1e6, s.PrefetchBytes>>10)
	if pr.StageBytes > 0 {
		fmt.Fprintf(out, " that moves on past what a waiting block stages (up to %.0f KiB)", float64(pr.StageBytes)/1024)
	}
	fmt.Fprintln(out)
	// where the bytes go, by kernel module
	by := map[string]int64{}
	for _, in := range s.Instrs {
		by[megakernel.Kernels()[in.Kernel].Module()] += in.Bytes
	}
	mods := make([]string, 0, len(by))
	for m := range by {
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return by[mods[i]] > by[mods[j]] })
	fmt.Fprint(out, "  bytes by kernel module:")
	for _, m := range mods {
		fmt.Fprintf(out, " %s %.1f MB (%.0f%%)", m, float64(by[m])/1e6, 100*float64(by[m])/float64(st.Bytes))
	}
	fmt.Fprintln(out)
	// the largest parts: work one queue does alone, which no SM count shortens
	idx := make([]int, len(s.Instrs))
	for i := range idx {
		idx[i] = i
	}
	per := func(i int) float64 { return float64(s.Instrs[i].Bytes) / float64(s.Instrs[i].Parts) }
	sort.Slice(idx, func(a, b int) bool { return per(idx[a]) > per(idx[b]) })
	fmt.Fprint(out, "  largest parts:")
	for _, i := range idx[:min(5, len(idx))] {
		in := s.Instrs[i]
		fmt.Fprintf(out, " %s (%s) %.0f KB × %d;", in.Name, megakernel.Kernels()[in.Kernel].Entry(), per(i)/1e3, in.Parts)
	}
	_, err := fmt.Fprintln(out)
	return err
}

// kernelRates prints, for the kernels that move the most bytes, what one queue sustains on a
// full part of them in the static model (GB/s against its share) and what limits it.
func kernelRates(out io.Writer, s *megakernel.Schedule, km *megakernel.KernelModel, qps int) error {
	type rate struct {
		entry      string
		bytes      int64
		gbs, share float64
		limiter    string
	}
	by := map[string]*rate{}
	for i := range s.Instrs {
		in := &s.Instrs[i]
		entry := megakernel.Kernels()[in.Kernel].Entry()
		r := by[entry]
		if r == nil {
			r = &rate{entry: entry}
			by[entry] = r
		}
		r.bytes += in.Bytes
		lo, hi := 0, (in.Blocks()+in.Parts-1)/in.Parts
		us, lim := km.PartUS(in, lo, hi, qps, len(s.Queues))
		if p := km.Prediction(in); p != nil && us > 0 && in.Bytes >= r.bytes-in.Bytes { // the largest instruction's part speaks for the kernel
			r.gbs, r.limiter = float64(p.Bytes)*float64(hi-lo)/float64(p.Blocks)/us/1e3, lim
		}
	}
	rs := make([]*rate, 0, len(by))
	for _, r := range by {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(a, b int) bool { return rs[a].bytes > rs[b].bytes })
	share := km.Card.BandwidthGBs / float64(km.Card.SMs*qps)
	fmt.Fprintf(out, " (a queue's share of the bandwidth %.1f GB/s):", share)
	sep := " "
	for _, r := range rs[:min(4, len(rs))] {
		if r.limiter != "" {
			fmt.Fprintf(out, "%s%s %.1f GB/s (%.0f%%, %s)", sep, r.entry, r.gbs, 100*r.gbs/share, r.limiter)
			sep = "; "
		}
	}
	return nil
}

// countStarts is the items on the critical path that began after their queue's previous
// item rather than after a dependency.
func countStarts(pr megakernel.Prediction) int {
	n := 0
	for _, k := range pr.Path {
		n += k.Parts
	}
	return n - pr.Handoffs
}

// planner is a backend that only hands out addresses: enough to lay a step out, never to run it.
type planner struct {
	next device.Ptr
}

func (p *planner) Name() string { return "planner (no memory)" }
func (p *planner) Alloc(n int64) (device.Ptr, error) {
	if p.next == 0 {
		p.next = 1 << 32
	}
	ptr := p.next
	p.next += device.Ptr((n + 4096 + 255) &^ 255)
	return ptr, nil
}
func (p *planner) Upload(data []byte) (device.Ptr, error) { return p.Alloc(int64(len(data))) }
func (p *planner) Free(device.Ptr) error                  { return nil }
func (p *planner) Write(device.Ptr, []byte) error         { return nil }
func (p *planner) Read([]byte, device.Ptr) error          { return nil }
func (p *planner) Launch(device.Spec, any) error {
	return errors.New("planner: nothing runs here")
}
func (p *planner) Sync() error  { return nil }
func (p *planner) Close() error { return nil }
