package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"verity/bench"
	"verity/host/atomicfile"
	"verity/host/treeverify"
)

// protocolHelp describes --protocol.
const protocolHelp = "run a seed workload's protocol instead: seed001 (verify 8-node draft trees of a Llama-3.2-1B-shaped bf16 model after 2048 committed positions, graded as the seed grades; --shape picks a reduced size)"

// seedShapes are the shapes --shape offers for --protocol seed001: the seed's own and reduced
// ones (every feature, fewer bytes) for the twin and the PTX interpreter.
var seedShapes = map[string]struct {
	cfg    treeverify.Config
	maxSeq int
}{
	"full": {treeverify.Seed001, treeverify.Seed001MaxSeq},
	"small": {treeverify.Config{Layers: 2, D: 256, FFN: 512, NQ: 4, NKV: 2, HD: 64, Vocab: 1024,
		Eps: 1e-5, Theta: 500000, WDType: "bf16", Tree: treeverify.Nodes, History: 128}, 256},
	"tiny": {treeverify.Config{Layers: 1, D: 64, FFN: 128, NQ: 4, NKV: 2, HD: 16, Vocab: 256,
		Eps: 1e-5, Theta: 10000, WDType: "bf16", Tree: treeverify.Nodes, History: 24}, 96},
}

// protocolFlags are the flags only --protocol reads.
type protocolFlags struct {
	name, shape       string
	calls, decodeRuns int
	history           int
	treeSeed          uint64
}

func (p *protocolFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&p.name, "protocol", "", protocolHelp)
	cmd.Flags().StringVar(&p.shape, "shape", "full", "with --protocol seed001: full (the seed's), small or tiny")
	cmd.Flags().IntVar(&p.calls, "calls", 8, "with --protocol: verify calls (trees) after the committed history")
	cmd.Flags().IntVar(&p.decodeRuns, "decode-calls", 1, "with --protocol: calls whose eight nodes are also decoded along their paths and compared bit for bit")
	cmd.Flags().IntVar(&p.history, "history", 0, "with --protocol: committed positions before the first tree (0: the shape's own, 2048 for full)")
	cmd.Flags().Uint64Var(&p.treeSeed, "tree-seed", 0, "with --protocol: the trees' seed (0: drawn at random, and reported)")
}

// runProtocol runs --protocol and prints its report.
func runProtocol(cmd *cobra.Command, p protocolFlags, backend string, threads int, megakernel bool, sms int, asJSON bool, jsonOut string) error {
	if p.name != "seed001" {
		return fmt.Errorf("--protocol %q: the protocols are seed001", p.name)
	}
	sh, ok := seedShapes[p.shape]
	if !ok {
		names := make([]string, 0, len(seedShapes))
		for n := range seedShapes {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("--shape %q: want one of %s", p.shape, strings.Join(names, ", "))
	}
	if p.history < 0 {
		return fmt.Errorf("--history %d: want a count of positions", p.history)
	}
	if p.history > 0 {
		sh.cfg.History = p.history
	}
	if p.calls < 1 || p.decodeRuns < 0 || p.decodeRuns > p.calls {
		return fmt.Errorf("--calls %d, --decode-calls %d: want at least one call, and no more checked calls than calls", p.calls, p.decodeRuns)
	}
	if strings.Contains(backend, ",") {
		return fmt.Errorf("--protocol runs on one backend, not %s", backend)
	}
	b, err := openBackend(backend, threads)
	if err != nil {
		return err
	}
	defer b.Close()
	bw, what, err := probeBandwidth(b, threads)
	if err != nil {
		return fmt.Errorf("bandwidth probe: %w", err)
	}
	errw := cmd.ErrOrStderr()
	r, err := bench.Seed001(bench.Seed001Options{Config: sh.cfg, MaxSeq: max(sh.maxSeq, sh.cfg.History+treeverify.Nodes*p.calls),
		Calls: p.calls, DecodeRuns: p.decodeRuns, Backend: b, Megakernel: megakernel, SMs: sms, TreeSeed: p.treeSeed,
		Bandwidth: bw, Progress: func(s string) { fmt.Fprintf(errw, "seed001: %s …\n", s) }})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if jsonOut != "" { // as a list of one, like the bench's rows
		if err := writeJSONValue(jsonOut, []*bench.Seed001Result{r}); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else if err := printSeed001(out, r, p.shape, what); err != nil {
		return err
	}
	if !r.Passed() {
		return fmt.Errorf("seed001: the protocol's checks failed (see the report)")
	}
	return nil
}

// printSeed001 writes the protocol's report.
func printSeed001(w io.Writer, r *bench.Seed001Result, shape, probe string) error {
	c := r.Config
	mode := "eager, one launch per op"
	if r.Megakernel {
		mode = "megakernel, one launch per step"
	}
	fmt.Fprintf(w, "seed001 (megakernel-spec-decode-verify), %s shape: %d layers, d %d, ffn %d, %d/%d heads of %d, vocab %d, bf16 weights, 8-node trees after %d committed positions (cache of %d); %s, %s; trees from seed %d\n\n",
		shape, c.Layers, c.D, c.FFN, c.NQ, c.NKV, c.HD, c.Vocab, c.History, r.MaxSeq, r.Backend, mode, r.TreeSeed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "call\tpos\tdepths\tµs\terror\tcausal triangle\tno mask\tchain positions\tdecode == tree\t")
	for i, k := range r.Calls {
		dec := "-"
		if k.DecodeEqual >= 0 {
			dec = fmt.Sprintf("%d/8", k.DecodeEqual)
		}
		d := make([]string, len(k.Depths))
		for j, x := range k.Depths {
			d[j] = fmt.Sprint(x)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%.2e\t%.3f\t%.3f\t%.3f\t%s\t\n", i+1, k.Pos, strings.Join(d, ""), k.US, k.Error,
			k.Wrong[treeverify.Causal.String()], k.Wrong[treeverify.Unmasked.String()], k.Wrong[treeverify.ChainRoPE.String()], dec)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	fmt.Fprintf(w, "\ntime: %.0f µs per call (median of calls 2…%d; the first %.0f µs), %.0f verified positions/s\n", r.US, len(r.Calls), r.FirstUS, r.PositionsPS)
	if r.ModelledUS > 0 {
		fmt.Fprintf(w, "modelled (the megakernel's cost model of the last call's schedule on an H200, parts timed by the kernels' static model; verity schedule has the breakdown): %.0f µs, its bytes' floor %.0f µs; %d schedules built and %d patched in all\n",
			r.ModelledUS, r.ModelledFloor, r.Builds, r.Patched)
	}
	if r.FloorUS > 0 {
		fmt.Fprintf(w, "floor: %.1f MB per call (the weights once and the bf16 history's K/V) at %.0f GB/s (%s) = %.0f µs: %.1f%% of the floor\n",
			float64(r.Bytes)/1e6, r.Bandwidth/1e9, probe, r.FloorUS, 100*r.OfFloor)
	}
	fmt.Fprintf(w, "grade (the seed's: relative Frobenius error of all 8 × vocab logits against the float64 reference, ≤ %.1e): worst %.2e — %s\n",
		r.Tolerance, r.MaxError, verdict(r.Graded))
	fmt.Fprintf(w, "wrong variants through the same grader, all %d calls together (each must fail):", len(r.Calls))
	for _, v := range r.Wrong {
		fmt.Fprintf(w, " %s %.3f (caught by %d of %d calls alone, the smallest %.3f);", v.Name, v.Error, v.Caught, len(r.Calls), v.Min)
	}
	if r.WrongCaught {
		fmt.Fprintln(w, " — all caught")
	} else {
		fmt.Fprintln(w, " — NOT all caught: the gate cannot tell a variant from the tree with these weights and this history")
	}
	_, err := fmt.Fprintf(w, "every node's row bit-identical to decoding its path: %d of %d nodes — %s\n", r.DecodeEqual, r.DecodeNodes,
		verdict(r.DecodeEqual == r.DecodeNodes))
	return err
}

// writeJSONValue writes v as indented JSON to path, atomically.
func writeJSONValue(path string, v any) error {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return f.Commit()
}
