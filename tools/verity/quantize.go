package main

import "github.com/spf13/cobra"

func newQuantizeCmd() *cobra.Command {
	return &cobra.Command{Use: "quantize IN OUT", Short: "Re-quantise a GGUF file's 2-D weights", Args: cobra.ExactArgs(2)}
}
