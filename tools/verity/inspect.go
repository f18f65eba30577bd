package main

import "github.com/spf13/cobra"

func newInspectCmd() *cobra.Command {
	return &cobra.Command{Use: "inspect FILE", Short: "Print a GGUF file's metadata and tensor table", Args: cobra.ExactArgs(1)}
}
