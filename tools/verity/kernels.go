package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/device"
	"verity/device/devicetest"
	"verity/device/perf"
)

// kernelRow is one line of verity kernels: a kernel at one real model size, or a kernel
// without one (Case empty, Prediction unset).
type kernelRow struct {
	Case string `json:"case,omitempty"`
	perf.Prediction
	Error string `json:"error,omitempty"`
}

func newKernelsCmd() *cobra.Command {
	var sm, card, match string
	var asJSON bool
	var plotPath string
	cmd := &cobra.Command{
		Use:   "kernels [--sm 90 | --card NAME] [--json] [--match TEXT]",
		Short: "Print the static performance model of every kernel at the real model sizes",
		Long: `Print, for every kernel at the real model sizes the GPU conformance check launches
(device/devicetest's real-size cases), what the compiler emitted for the card (registers, shared
memory, resident warps per SM) and what the static model predicts from it: the DRAM bytes and
their floor at the card's bandwidth, the predicted time and its percentage of the floor, and the
limiter (dram, latency: too few bytes in flight for the DRAM latency; lsu: the load/store data
path; issue: instructions), with the bytes in flight per SM against what Little's law needs, the
load/store cycles per KB moved against the SM's budget, and the dependent loads of the hottest
loop. Every figure is modelled from committed facts (device/perf), not measured; the card's
constants are in device/perf/cards.go. --sm 90 is the H200, --sm 80 the A100; --card names one
(H200, H100, A100). --match keeps the kernels or cases whose name contains TEXT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name := card
			if name == "" {
				name = sm
			}
			c, err := perf.CardFor(name)
			if err != nil {
				return err
			}
			if perf.Tools(c.Arch) == "" {
				return fmt.Errorf("no facts for sm_%d (%s): the facts cover %v", c.Arch, c.Name, perf.Archs())
			}
			var rows []kernelRow
			for _, k := range device.Kernels() {
				shapes := devicetest.RealShapes(k.Entry())
				if len(shapes) == 0 {
					if match == "" || strings.Contains(k.Entry(), match) {
						rows = append(rows, kernelRow{Prediction: perf.Prediction{Entry: k.Entry(), Card: c.Name}})
					}
					continue
				}
				for _, s := range shapes {
					if match != "" && !strings.Contains(k.Entry(), match) && !strings.Contains(s.Name, match) {
						continue
					}
					r := kernelRow{Case: s.Name}
					p, err := perf.Predict(c, k, s.Args)
					if err != nil {
						r.Entry, r.Card, r.Error = k.Entry(), c.Name, err.Error()
					} else {
						r.Prediction = p
					}
					rows = append(rows, r)
				}
			}
			if plotPath != "" {
				if err := kernelsPlot(plotPath, c, rows); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Card  perf.Card   `json:"card"`
					Tools string      `json:"tools"`
					Rows  []kernelRow `json:"kernels"`
				}{c, perf.Tools(c.Arch), rows})
			}
			fmt.Fprintf(out, "%s: sm_%d, %d SMs at %.2f GHz, %.0f GB/s (the floor's bandwidth), DRAM latency %d cycles: %.1f KB in flight per SM needed\n",
				c.Name, c.Arch, c.SMs, c.ClockGHz, c.BandwidthGBs, c.DRAMLatency, float64(c.DRAMLatency)*c.BandwidthGBs/float64(c.SMs)/c.ClockGHz/1024)
			fmt.Fprintf(out, "facts: %s over the committed PTX; every time below is modelled, not measured\n\n", perf.Tools(c.Arch))
			tw := tabwriter.NewWriter(out, 0, 0, 1, ' ', 0)
			fmt.Fprintln(tw, "kernel\tcase\tregs\tsmem\twarps/SM\tMB\tfloor µs\tmodel µs\t% floor\tlimiter\tKB in flight/SM\tLSU cyc/KB (budget)\tchain")
			for _, r := range rows {
				switch {
				case r.Error != "":
					fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t\terror: %s\n", r.Entry, r.Case, r.Error)
				case r.Case == "":
					fmt.Fprintf(tw, "%s\t(no real-size case)\t\t\t\t\t\t\t\t\t\t\t\n", r.Entry)
				default:
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d (%s)\t%.1f\t%.1f\t%.1f\t%.0f\t%s\t%.1f/%.1f\t%.0f (%.0f)\t%d\n", r.Entry, r.Case,
						r.Registers, r.Shared, r.ResidentWarps, r.Occupancy, float64(r.Bytes)/1e6, r.FloorUS, r.TimeUS, r.Pct, r.Limiter,
						r.InFlight/1024, r.Needed/1024, r.LSUCyclesPerKB, r.LSUBudgetPerKB, r.Chain)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&sm, "sm", "90", "the SM architecture: 90 (H200) or 80 (A100)")
	cmd.Flags().StringVar(&card, "card", "", "the card by name (H200, H100, A100); overrides --sm")
	cmd.Flags().StringVar(&match, "match", "", "only kernels or cases whose name contains this")
	cmd.Flags().StringVar(&plotPath, "plot", "", plotHelp+": each case's predicted time against its bytes, over the bandwidth floor")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: the card, the facts' tools and every prediction")
	return cmd
}
