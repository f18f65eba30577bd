package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/klauspost/cpuid/v2"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"verity/device/kernels"
)

func newInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Describe this machine: CPU, cores, SIMD features, memory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printInfo(cmd.OutOrStdout())
		},
	}
}

// machineInfo is what the CPU planner and the bench reports need to know about the host.
type machineInfo struct {
	CPU           string
	Vendor        string
	PhysicalCores int
	LogicalCores  int
	GoMaxProcs    int
	Features      []string // the SIMD features Verity's CPU paths care about
	RAMBytes      uint64
}

func readMachineInfo() machineInfo {
	c := cpuid.CPU
	m := machineInfo{
		CPU:           strings.TrimSpace(c.BrandName),
		Vendor:        c.VendorString,
		PhysicalCores: c.PhysicalCores,
		LogicalCores:  c.LogicalCores,
		GoMaxProcs:    runtime.GOMAXPROCS(0),
	}
	for _, f := range []struct {
		id   cpuid.FeatureID
		name string
	}{
		{cpuid.SSE4, "SSE4.1"}, {cpuid.AVX, "AVX"}, {cpuid.AVX2, "AVX2"}, {cpuid.FMA3, "FMA"},
		{cpuid.F16C, "F16C"}, {cpuid.AVX512F, "AVX-512F"}, {cpuid.AVX512BW, "AVX-512BW"},
		{cpuid.AVX512VNNI, "AVX-512VNNI"}, {cpuid.AVX512BF16, "AVX-512BF16"}, {cpuid.AVXVNNI, "AVX-VNNI"},
		{cpuid.ASIMD, "NEON"}, {cpuid.ASIMDDP, "NEON-dotprod"},
	} {
		if c.Supports(f.id) {
			m.Features = append(m.Features, f.name)
		}
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.RAMBytes = uint64(si.Totalram) * uint64(si.Unit)
	}
	return m
}

func printInfo(w io.Writer) error {
	m := readMachineInfo()
	cpu := m.CPU
	if cpu == "" {
		cpu = "(unknown)"
	}
	phys := fmt.Sprint(m.PhysicalCores)
	if m.PhysicalCores == 0 {
		phys = "(unknown)"
	}
	feats := strings.Join(m.Features, " ")
	if feats == "" {
		feats = "(none detected)"
	}
	_, err := fmt.Fprintf(w, "cpu         %s\nvendor      %s\ncores       %s physical, %d logical (GOMAXPROCS %d)\nfeatures    %s\ntwin        %s\nmemory      %.1f GiB\narch        %s/%s\n",
		cpu, m.Vendor, phys, m.LogicalCores, m.GoMaxProcs, feats, kernels.TwinPath(), float64(m.RAMBytes)/(1<<30), runtime.GOOS, runtime.GOARCH)
	return err
}
