package main

import (
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
	var sms, rows, context int
	var bandwidth, syncUS float64
	var plotPath string
	var cache cacheFlags
	cmd := &cobra.Command{
		Use:   "schedule [--model FILE|FIXTURE]",
		Short: "Compile one step for the megakernel and report its schedule and a modelled time",
		Long: `Compile one step of a model — rows rows (a draft tree's nodes; 1 for decoding) over
a history of --context positions — into the megakernel's instruction stream for --sms SMs, without
running it, and report its instructions, parts, dependencies and levels (the longest chain of
instructions that wait for each other), the bytes the busiest SM moves, and a modelled time: the
busiest SM's bytes at its share of --bandwidth, plus --sync-us for each level. The model is a
plan, not a measurement: verity bench --megakernel measures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case sms < 1:
				return fmt.Errorf("--sms %d: want at least 1", sms)
			case rows < 1:
				return fmt.Errorf("--rows %d: want at least 1", rows)
			case context < 0:
				return fmt.Errorf("--context %d: want 0 or more positions", context)
			case !(bandwidth > 0) || math.IsInf(bandwidth, 0):
				return fmt.Errorf("--bandwidth %g: want a positive rate in GB/s", bandwidth)
			case !(syncUS >= 0) || math.IsInf(syncUS, 0):
				return fmt.Errorf("--sync-us %g: want 0 or more µs", syncUS)
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
			cfg := megakernel.Config{SMs: sms}
			s, err := ex.Schedule(rows, rows, rows*(context+1), cfg)
			if err != nil {
				return err
			}
			st := s.Stats(cfg)
			perSM := bandwidth * 1e9 / float64(sms)
			data := float64(st.Estimate) / perSM * 1e6
			waits := float64(st.Levels) * syncUS
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: a step of %d rows after %d positions, on %d SMs\n", name, rows, context, sms)
			fmt.Fprintf(out, "  %d instructions in %d parts, %d dependencies, %d levels\n", st.Instrs, st.Parts, st.Deps, st.Levels)
			fmt.Fprintf(out, "  %.1f MB moved; the busiest SM %.2f MB with waits and part costs (%.2f MB if perfectly balanced)\n",
				float64(st.Bytes)/1e6, float64(st.Estimate)/1e6, float64(st.Balanced)/1e6)
			fmt.Fprintf(out, "  modelled: %.0f µs on the busiest SM at %.0f GB/s + %.0f µs of waits at %.2f µs per level = %.0f µs\n",
				data, bandwidth, waits, syncUS, data+waits)
			if err := kernelModel(out, ex, s, rows, cfg, syncUS); err != nil {
				return err
			}
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
			// the largest parts: work one SM does alone, which no SM count shortens
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
			_, err = fmt.Fprintln(out)
			return err
		},
	}
	cmd.Flags().StringVar(&modelName, "model", defaultBenchModel, "GGUF file or fixture name")
	cache.add(cmd)
	cmd.Flags().IntVar(&sms, "sms", 132, "SMs (an H200 has 132)")
	cmd.Flags().IntVar(&rows, "rows", 8, "rows in the step: a tree's nodes, 1 for decoding")
	cmd.Flags().IntVar(&context, "context", 2048, "positions of history each row attends to")
	cmd.Flags().Float64Var(&bandwidth, "bandwidth", 4300, "memory bandwidth in GB/s (an H200's measured copy rate is about 4300)")
	cmd.Flags().Float64Var(&syncUS, "sync-us", 1, "µs per level: a dependency wait across SMs")
	cmd.Flags().StringVar(&plotPath, "plot", "", plotHelp+": the step's launches on the card's roofline (flops and bytes against its bandwidth and compute)")
	return cmd
}

// kernelModel prints the step costed by the kernels' static model (device/perf) on its default
// card: the ops' predicted times as eager launches, and the schedule s with each part timed by
// the model (Prediction.PartUS, plus the schedule's part cost at the card's bandwidth),
// replayed in its placement and order, each part starting when its SM is free and its
// instruction's dependencies have finished.
func kernelModel(out io.Writer, ex *exec.Executor, s *megakernel.Schedule, rows int, cfg megakernel.Config, syncUS float64) error {
	ls, err := ex.Lower(rows, rows)
	if err != nil {
		return err
	}
	if len(ls) != len(s.Instrs) {
		return fmt.Errorf("schedule: %d launches, %d instructions", len(ls), len(s.Instrs))
	}
	card := perf.Cards[perf.DefaultCard]
	var eager, floor float64
	preds := make([]perf.Prediction, len(ls))
	for i, l := range ls {
		if preds[i], err = perf.Predict(card, l.Kernel, l.Args); err != nil {
			return err
		}
		eager, floor = eager+preds[i].TimeUS, floor+preds[i].FloorUS
	}
	pc := cfg.PartCost
	if pc <= 0 {
		pc = 16 << 10 // megakernel.Config's default
	}
	partCost := float64(pc) / (card.BandwidthGBs * 1e3 / float64(cfg.SMs)) // µs
	clock := make([]float64, len(s.Queues))
	finish := make([]float64, len(s.Instrs))
	next := make([]int, len(s.Queues)) // each queue's next item
	var end float64
	for i, in := range s.Instrs {
		var ready float64
		for _, d := range in.Deps {
			ready = max(ready, finish[d])
		}
		for sm, q := range s.Queues {
			for next[sm] < len(q) && int(q[next[sm]].Instr) == i {
				lo, hi := device.Part(in.Blocks(), int(q[next[sm]].Part), in.Parts)
				clock[sm] = max(clock[sm], ready) + preds[i].PartUS(card, hi-lo) + partCost
				finish[i] = max(finish[i], clock[sm])
				next[sm]++
			}
		}
		end = max(end, finish[i])
	}
	waits := float64(s.Stats(cfg).Levels) * syncUS
	_, err = fmt.Fprintf(out, "  the kernels' static model (%s, modelled; verity kernels): the ops as eager launches %.0f µs (their floor %.0f µs, %.0f%%) plus a launch gap each; this schedule with each part timed by it %.0f µs + %.0f µs of waits = %.0f µs\n",
		card.Name, eager, floor, 100*floor/eager, end, waits, end+waits)
	return err
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
