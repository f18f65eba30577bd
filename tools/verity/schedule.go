package main

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/spf13/cobra"

	"verity/device"
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
			eo := engine.ExecOptions(p, engine.LoadOptions{MaxRows: rows, Context: context + rows, Sessions: 1})
			ex, err := exec.New(&planner{}, p, eo)
			if err != nil {
				return err
			}
			defer ex.Close()
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
	cmd.Flags().IntVar(&sms, "sms", 132, "SMs (an H200 has 132)")
	cmd.Flags().IntVar(&rows, "rows", 8, "rows in the step: a tree's nodes, 1 for decoding")
	cmd.Flags().IntVar(&context, "context", 2048, "positions of history each row attends to")
	cmd.Flags().Float64Var(&bandwidth, "bandwidth", 4300, "memory bandwidth in GB/s (an H200's measured copy rate is about 4300)")
	cmd.Flags().Float64Var(&syncUS, "sync-us", 1, "µs per level: a dependency wait across SMs")
	return cmd
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
