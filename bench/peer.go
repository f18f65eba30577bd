package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"verity/host/engine"
)

// A peer is another engine's benchmark run on the same file, interleaved with Verity's
// measurements so that both see the same machine: llama.cpp's llama-bench (its CPU backend
// built for this machine, see shared/peers/llama-bench.sh in the project's tooling).

// PeerSample is one llama-bench run of the three tests Verity is compared on: a prompt of
// Prompt tokens, Decode generated tokens, and a batch of Batch tokens (a tree verify's
// counterpart: Batch tokens in one pass). llama-bench runs each from an empty context.
type PeerSample struct {
	PrefillTPS float64 // tok/s
	DecodeTPS  float64 // tok/s
	BatchMS    float64 // ms for the Batch tokens
	Build      string  // llama.cpp's build commit
}

// FindLlamaBench returns the llama-bench to run for --peer spec: spec itself if it names a
// file, else "llama-bench" on the PATH, else the build that the peer script leaves in
// ~/.cache/verity-peers.
func FindLlamaBench(spec string) (string, error) {
	if spec != "llama-bench" {
		if st, err := os.Stat(spec); err != nil || st.IsDir() {
			return "", fmt.Errorf("bench: peer %q is not a file", spec)
		}
		return spec, nil
	}
	if p, err := exec.LookPath("llama-bench"); err == nil {
		return p, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cache", "verity-peers", "llama.cpp", "build", "bin", "llama-bench")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("bench: no llama-bench on the PATH or in ~/.cache/verity-peers (give its path to --peer; the project's peers/llama-bench.sh builds one)")
}

// RunLlamaBench runs llama-bench once (one repetition of each test) on model with threads
// threads.
func RunLlamaBench(path, model string, threads, prompt, decode, batch int) (PeerSample, error) {
	args := []string{"-m", model, "-t", strconv.Itoa(threads), "-r", "1", "-o", "json",
		"-p", fmt.Sprintf("%d,%d", prompt, batch), "-n", strconv.Itoa(decode)}
	cmd := exec.Command(path, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return PeerSample{}, fmt.Errorf("bench: %s %s: %v: %s", path, strings.Join(args, " "), err, msg)
	}
	return parseLlamaBench(out.Bytes(), prompt, decode, batch)
}

// parseLlamaBench reads llama-bench's -o json output: one object per test.
func parseLlamaBench(b []byte, prompt, decode, batch int) (PeerSample, error) {
	var tests []struct {
		Build  string  `json:"build_commit"`
		Prompt int     `json:"n_prompt"`
		Gen    int     `json:"n_gen"`
		AvgNS  float64 `json:"avg_ns"`
		AvgTS  float64 `json:"avg_ts"`
	}
	if err := json.Unmarshal(b, &tests); err != nil {
		return PeerSample{}, fmt.Errorf("bench: llama-bench output: %w", err)
	}
	var s PeerSample
	for _, t := range tests {
		s.Build = t.Build
		switch {
		case t.Gen == 0 && t.Prompt == prompt:
			s.PrefillTPS = t.AvgTS
		case t.Gen == 0 && t.Prompt == batch:
			s.BatchMS = t.AvgNS / 1e6
		case t.Prompt == 0 && t.Gen == decode:
			s.DecodeTPS = t.AvgTS
		}
	}
	if s.PrefillTPS == 0 || s.DecodeTPS == 0 || (batch != prompt && s.BatchMS == 0) {
		return s, errors.New("bench: llama-bench output lacks a test that was asked for")
	}
	if batch == prompt {
		s.BatchMS = float64(batch) / s.PrefillTPS * 1e3
	}
	return s, nil
}

// Spread is a measurement's median and range over interleaved rounds.
type Spread struct {
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
	Samples []float64 `json:"samples"`
}

func spreadOf(x []float64) Spread {
	s := slices.Clone(x)
	slices.Sort(s)
	sp := Spread{Min: s[0], Max: s[len(s)-1], Samples: x}
	if n := len(s); n%2 == 1 {
		sp.Median = s[n/2]
	} else {
		sp.Median = (s[n/2-1] + s[n/2]) / 2
	}
	return sp
}

// PeerRow is one workload measured by both engines.
type PeerRow struct {
	Workload string `json:"workload"`
	Unit     string `json:"unit"`
	Peer     Spread `json:"llama_cpp"`
	Verity   Spread `json:"verity"`
	// Ratio is Verity's speed over the peer's, the median of the rounds' ratios (each
	// round's two runs are neighbours in time): above 1, Verity is faster.
	Ratio Spread `json:"ratio"`
}

// PeerComparison is Verity and llama-bench measured in turn on the same file.
type PeerComparison struct {
	Model   string    `json:"model"`
	Threads int       `json:"threads"`
	Rounds  int       `json:"rounds"`
	Build   string    `json:"llama_cpp_build"`
	Command string    `json:"llama_bench"`
	Rows    []PeerRow `json:"rows"`
}

// ComparePeer alternates Verity's measurement (Run with one repetition; o's prompt, decode
// and tree sizes) and one llama-bench run on the same file, rounds times, and returns the
// medians, ranges and per-round ratios of prefill, decode and tree verification against
// llama-bench's batch of as many tokens.
func ComparePeer(e *engine.Engine, name, file, llamaBench string, threads, rounds int, o Options) (PeerComparison, error) {
	if rounds < 1 {
		return PeerComparison{}, fmt.Errorf("bench: %d rounds", rounds)
	}
	if o.Prompt == 0 {
		o.Prompt = 128
	}
	if o.Decode == 0 {
		o.Decode = 32
	}
	if o.TreeNodes == 0 {
		o.TreeNodes = 8
	}
	o.Repetitions = 1
	o.Ops, o.Spec, o.Batch, o.Widths = 0, nil, nil, nil
	var vp, vd, vv, pp, pd, pv []float64
	var build string
	for r := 0; r < rounds; r++ {
		res, err := Run(e, name, 0, o)
		if err != nil {
			return PeerComparison{}, err
		}
		o.NoWarmup = true // once is enough
		ps, err := RunLlamaBench(llamaBench, file, threads, o.Prompt, o.Decode, o.TreeNodes)
		if err != nil {
			return PeerComparison{}, err
		}
		build = ps.Build
		vp, vd, vv = append(vp, res.PrefillTPS), append(vd, res.DecodeTPS), append(vv, res.VerifyMS)
		pp, pd, pv = append(pp, ps.PrefillTPS), append(pd, ps.DecodeTPS), append(pv, ps.BatchMS)
	}
	ratio := func(a, b []float64, inverse bool) Spread {
		q := make([]float64, len(a))
		for i := range a {
			q[i] = a[i] / b[i]
			if inverse {
				q[i] = b[i] / a[i]
			}
		}
		return spreadOf(q)
	}
	c := PeerComparison{Model: name, Threads: threads, Rounds: rounds, Build: build,
		Command: fmt.Sprintf("%s -m %s -t %d -r 1 -p %d,%d -n %d", llamaBench, file, threads, o.Prompt, o.TreeNodes, o.Decode)}
	c.Rows = []PeerRow{
		{Workload: fmt.Sprintf("prefill %d tokens", o.Prompt), Unit: "tok/s", Peer: spreadOf(pp), Verity: spreadOf(vp), Ratio: ratio(vp, pp, false)},
		{Workload: fmt.Sprintf("decode %d tokens", o.Decode), Unit: "tok/s", Peer: spreadOf(pd), Verity: spreadOf(vd), Ratio: ratio(vd, pd, false)},
		{Workload: fmt.Sprintf("%d-node tree verify / %d-token batch", o.TreeNodes, o.TreeNodes), Unit: "ms", Peer: spreadOf(pv), Verity: spreadOf(vv), Ratio: ratio(vv, pv, true)},
	}
	return c, nil
}
