// Command verity is the command-line face of the Verity inference runtime: it inspects and
// re-quantises GGUF files, describes the machine, and (as the runtime grows) computes logits,
// verifies draft trees and benchmarks models.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	root := newRoot()
	root.SetArgs(llamaShortFlags(os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "verity:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "verity",
		Short:         "GPU-first LLM inference runtime with bit-exact CPU twins",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.SetVersionTemplate("verity {{.Version}}\n")
	var profile string
	var profileFile *os.File
	stopSignals := func() {}
	root.PersistentFlags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the command to this file (go tool pprof)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		// serve drains its requests on a signal itself; every other command leaves no partial
		// file behind when it is interrupted.
		if cmd.Name() != "serve" {
			stopSignals = abortOnSignal()
		}
		if err := checkThreads(cmd); err != nil {
			return err
		}
		if profile == "" {
			return nil
		}
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		profileFile = f
		return pprof.StartCPUProfile(f)
	}
	root.PersistentPostRunE = func(*cobra.Command, []string) error {
		stopSignals()
		if profileFile == nil {
			return nil
		}
		pprof.StopCPUProfile()
		return profileFile.Close()
	}
	root.AddCommand(newInfoCmd(), newInspectCmd(), newQuantizeCmd(), newLogitsCmd(), newFixtureCmd(), newBenchCmd(), newCompareCmd(), newScheduleCmd(), newCheckCmd(), newServeCmd(), newTokenizeCmd(), newDriftCmd(), newGenerateCmd(), newLoRACmd(), newKernelsCmd(), newPlanCmd())
	return root
}

// llamaShortFlags rewrites llama.cpp's single-dash spellings of several letters — the cache
// type flags (-ctk f16, -ctv=bf16) and llama-bench's -pg — as the long flags they stand for.
func llamaShortFlags(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for _, f := range []string{"-ctk", "-ctv", "-pg"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				a = "-" + a
			}
		}
		out[i] = a
	}
	return out
}
