package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"verity/device/cuda"
	"verity/host/machine"
)

func newInfoCmd() *cobra.Command {
	var asJSON bool
	var model string
	var threads int
	cmd := &cobra.Command{
		Use:   "info [--json] [--model FILE]",
		Short: "Describe this machine: CPU, cores, SIMD features, memory, bandwidth, GPUs",
		Long: `Describe this machine: the CPU (cores, caches and SIMD features by cpuid), the memory (total,
available, and the limit of this process's cgroup, v1 or v2, which bounds the budget every plan
uses), the host memory copy bandwidth, on a cuda build each GPU's memory, SMs and device copy
bandwidth, and with --model the read speed of the model file's disk, from the file dropped from
the page cache: as a streaming model's prefetcher reads it and as page faults bring it in. The
slow measurements are made once and cached under the machine's identity ($VERITY_CACHE/machine or
the user cache directory); the memory is measured every time. --json prints everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := machine.Load()
			if err != nil {
				return err
			}
			m.CopyBandwidth(threads)
			if model != "" {
				path, _, err := resolveModel(model, cmd)
				if err != nil {
					return err
				}
				if _, err := m.ReadSpeed(path); err != nil {
					return err
				}
			}
			measureGPUs(m)
			if asJSON {
				b, err := json.MarshalIndent(m.Snapshot(), "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			}
			return printInfo(cmd.OutOrStdout(), m.Snapshot())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the measurements as JSON")
	cmd.Flags().StringVar(&model, "model", "", "also measure the read speed of this model file's disk (a file or fixture name)")
	cmd.Flags().IntVar(&threads, "threads", 0, "threads of the memory copy probe (0: all)")
	return cmd
}

// measureGPUs records every CUDA device's measurement (a cuda build with GPUs; none otherwise).
func measureGPUs(m *machine.Machine) {
	for i := range cuda.Count() {
		b, err := cuda.Open(i)
		if err != nil {
			continue
		}
		if _, ok := m.GPU(b.Name()); !ok {
			if g, isGPU, err := machine.MeasureGPU(b); isGPU && err == nil {
				m.SetGPU(g)
			}
		}
		b.Close()
	}
}

func printInfo(w io.Writer, m machine.Facts) error {
	c := m.CPU
	cpu := c.Model
	if cpu == "" {
		cpu = "(unknown)"
	}
	phys := fmt.Sprint(c.PhysicalCores)
	if c.PhysicalCores == 0 {
		phys = "(unknown)"
	}
	feats := strings.Join(c.Features, " ")
	if feats == "" {
		feats = "(none detected)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cpu         %s\nvendor      %s\ncores       %s physical, %d logical (GOMAXPROCS %d)\nfeatures    %s\ntwin        %s\n",
		cpu, c.Vendor, phys, c.LogicalCores, c.GoMaxProcs, feats, c.Twin)
	if c.L2Bytes > 0 || c.L3Bytes > 0 {
		fmt.Fprintf(&b, "caches      L2 %s per core, L3 %s\n", machine.HumanBytes(c.L2Bytes), machine.HumanBytes(c.L3Bytes))
	}
	mem := m.Memory
	fmt.Fprintf(&b, "memory      %s total, %s available", machine.HumanBytes(mem.TotalBytes), machine.HumanBytes(mem.AvailableBytes))
	if cg := mem.Cgroup; cg != nil {
		fmt.Fprintf(&b, "; cgroup v%d limit %s (%s), %s of it free or reclaimable", cg.Version, machine.HumanBytes(cg.LimitBytes), cg.Dir, machine.HumanBytes(cg.RoomBytes))
	}
	fmt.Fprintf(&b, "\nbudget      %s\n", machine.HumanBytes(mem.BudgetBytes))
	for _, cp := range m.Copies {
		fmt.Fprintf(&b, "copy        %.1f GB/s host memory copy, %d threads\n", cp.BytesPerSec/1e9, cp.Threads)
	}
	for _, d := range m.Disks {
		fmt.Fprintf(&b, "disk        %.0f MB/s read ahead, %.0f MB/s faulted in (%s, %s of %s)\n", d.BytesPerSec/1e6, d.FaultBytesPerSec/1e6, d.Method, machine.HumanBytes(d.Bytes), d.Path)
	}
	for _, g := range m.GPUs {
		fmt.Fprintf(&b, "gpu         %s: %s, %d SMs, %.0f GB/s device copy\n", g.Backend, machine.HumanBytes(g.MemoryBytes), g.SMs, g.CopyBytesPerSec/1e9)
	}
	fmt.Fprintf(&b, "arch        %s/%s\nidentity    %s\n", runtime.GOOS, runtime.GOARCH, m.Identity)
	_, err := io.WriteString(w, b.String())
	return err
}
