// Command kernelfacts writes what the compiler emitted for every committed kernel, for the
// static performance model (package device/perf): for each of Archs it disassembles every
// committed cubin ptx/<stem>.sm_<arch>.cubin (ptxas's machine code for the committed PTX) with
// nvdisasm, reads each function's registers, shared memory and stack with cuobjdump
// -res-usage, and analyses its SASS (package device/perf/sass): per region of the code
// (outside loops, and each loop's body) its memory instructions with their lane patterns and
// one warp's critical path. It writes device/perf/facts_sm<arch>.json, holding the facts (one
// kernel a line) and the SHA-256 of the cubins they come from (a test fails when they are
// stale). `go generate ./ptx` runs it after ptxgen.
//
// It also compiles the model's test kernels, device/perf/testdata/probes.cu (with ptxgen's nvcc
// flags and ptxas -v), and writes their PTX, SASS and ptxas report beside it, so that the
// model's tests analyse known kernels without a toolchain.
//
// nvdisasm, cuobjdump, nvcc and ptxas are found in $VERITY_CUDA/bin, else
// <repo>/.cache/cuda/bin (tools/cudaenv.sh installs them there), else on PATH. With -check
// nothing is written: the generated files are compared byte for byte with the committed ones.
//
// Usage:
//
//	kernelfacts [-dir ptx] [-out device/perf] [-check] [-v]
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"verity/device/perf/sass"
	"verity/ptx"
)

// Archs are the architectures the facts are for: sm_90 (H100, H200) and sm_80 (A100).
var Archs = []int{90, 80}

func main() {
	dir := flag.String("dir", ".", "the ptx package directory (holding the committed .ptx and .cubin files)")
	out := flag.String("out", "", "the perf package directory (default: <dir>/../device/perf)")
	check := flag.Bool("check", false, "compare with the committed files instead of writing them")
	verbose := flag.Bool("v", false, "print each tool run")
	flag.Parse()
	if *out == "" {
		*out = filepath.Join(*dir, "..", "device", "perf")
	}
	if err := run(*dir, *out, *check, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "kernelfacts:", err)
		os.Exit(1)
	}
}

type tools struct{ nvdisasm, cuobjdump, nvcc, ptxas string }

func findTools(dir string) (tools, error) {
	var cands []string
	if d := os.Getenv("VERITY_CUDA"); d != "" {
		cands = append(cands, filepath.Join(d, "bin"))
	}
	if abs, err := filepath.Abs(dir); err == nil {
		for d := abs; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				cands = append(cands, filepath.Join(d, ".cache", "cuda", "bin"))
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	names := []string{"nvdisasm", "cuobjdump", "nvcc", "ptxas"}
	for _, c := range cands {
		found := true
		for _, n := range names {
			found = found && isExec(filepath.Join(c, n))
		}
		if found {
			return tools{filepath.Join(c, "nvdisasm"), filepath.Join(c, "cuobjdump"), filepath.Join(c, "nvcc"), filepath.Join(c, "ptxas")}, nil
		}
	}
	var paths [4]string
	for i, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			return tools{}, fmt.Errorf("no %s (tried %s and PATH): run tools/cudaenv.sh", n, strings.Join(cands, ", "))
		}
		paths[i] = p
	}
	return tools{paths[0], paths[1], paths[2], paths[3]}, nil
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

var versionRE = regexp.MustCompile(`(?m)^Cuda compilation tools, (release [0-9.]+, V[0-9.]+)\s*$`)

func version(tool string) (string, error) {
	out, err := exec.Command(tool, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v\n%s", tool, err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version: no version line", tool)
	}
	return filepath.Base(tool) + " " + string(m[1]), nil
}

// unit is one module's cubin for one architecture.
type unit struct {
	stem  string
	arch  int
	ptx   []byte // the module's PTX (its entries' parameter types)
	cubin []byte
	facts []*sass.Facts
}

func (u *unit) file() string { return fmt.Sprintf("%s.sm_%d.cubin", u.stem, u.arch) }

func run(dir, out string, check, verbose bool) error {
	t, err := findTools(dir)
	if err != nil {
		return err
	}
	v, err := version(t.nvdisasm)
	if err != nil {
		return err
	}
	// the cubins are ptxgen's: ptxas of the toolkit that compiled the PTX, with ptxgen's flags
	versions := []string{"ptxas " + strings.TrimPrefix(ptx.NVCC, "Cuda compilation tools, ") + " " + strings.Join(ptx.PtxasFlags, " "), v}
	files, err := filepath.Glob(filepath.Join(dir, "*.ptx"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no .ptx files in %s", dir)
	}
	sort.Strings(files)
	tmp, err := os.MkdirTemp("", "kernelfacts")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var units []*unit
	for _, arch := range Archs {
		for _, f := range files {
			u := &unit{stem: strings.TrimSuffix(filepath.Base(f), ".ptx"), arch: arch}
			if u.ptx, err = os.ReadFile(f); err != nil {
				return err
			}
			if u.cubin, err = os.ReadFile(filepath.Join(dir, u.file())); err != nil {
				return fmt.Errorf("%v (run go generate ./ptx)", err)
			}
			units = append(units, u)
		}
	}
	errs := make([]error, len(units))
	sem := make(chan struct{}, min(2, runtime.NumCPU()))
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = u.analyse(t, filepath.Join(dir, u.file()), verbose)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	gen := map[string][]byte{}
	for _, arch := range Archs {
		var us []*unit
		for _, u := range units {
			if u.arch == arch {
				us = append(us, u)
			}
		}
		src, err := render(arch, versions, us)
		if err != nil {
			return err
		}
		gen[filepath.Join(out, fmt.Sprintf("facts_sm%d.json", arch))] = src
	}
	probes, err := compileProbes(t, filepath.Join(out, "testdata"), tmp, verbose)
	if err != nil {
		return err
	}
	for k, v := range probes {
		gen[k] = v
	}

	names := make([]string, 0, len(gen))
	for k := range gen {
		names = append(names, k)
	}
	sort.Strings(names)
	var stale []string
	for _, name := range names {
		old, err := os.ReadFile(name)
		if check {
			if err != nil || !bytes.Equal(old, gen[name]) {
				stale = append(stale, name)
			}
			continue
		}
		if err == nil && bytes.Equal(old, gen[name]) {
			continue
		}
		if err := os.WriteFile(name, gen[name], 0o644); err != nil {
			return err
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("generated files are not up to date (run go generate ./ptx):\n\t%s", strings.Join(stale, "\n\t"))
	}
	return nil
}

func runTool(verbose bool, name string, args ...string) ([]byte, error) {
	if verbose {
		fmt.Fprintln(os.Stderr, filepath.Base(name), strings.Join(args, " "))
	}
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.Bytes())
	}
	return append(stdout.Bytes(), stderr.Bytes()...), nil
}

var (
	resFuncRE = regexp.MustCompile(`^\s*Function (\S+):\s*$`)
	resLineRE = regexp.MustCompile(`REG:(\d+) STACK:(\d+) SHARED:(\d+)`)
)

// resources reads cuobjdump -res-usage: each function's registers, stack and shared memory.
func resources(report string) map[string]sass.Resources {
	out := map[string]sass.Resources{}
	cur := ""
	for _, line := range strings.Split(report, "\n") {
		if m := resFuncRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if m := resLineRE.FindStringSubmatch(line); m != nil && cur != "" {
			var r sass.Resources
			r.Registers, _ = strconv.Atoi(m[1])
			r.Stack, _ = strconv.Atoi(m[2])
			r.Shared, _ = strconv.Atoi(m[3])
			out[cur] = r
		}
	}
	return out
}

// analyse disassembles the unit's cubin and computes the facts of each of its entries.
func (u *unit) analyse(t tools, cubin string, verbose bool) error {
	text, err := runTool(verbose, t.nvdisasm, "-c", cubin)
	if err != nil {
		return err
	}
	report, err := runTool(verbose, t.cuobjdump, "-res-usage", cubin)
	if err != nil {
		return err
	}
	res := resources(string(report))
	fns, err := sass.ParseSASS(bytes.NewReader(text))
	if err != nil {
		return fmt.Errorf("%s: %v", u.file(), err)
	}
	params := sass.PTXParams(string(u.ptx))
	for i := range fns {
		f := &fns[i]
		types, ok := params[f.Name]
		if !ok {
			continue // not an entry
		}
		facts, err := sass.Analyse(f, sass.ParamSlots(sass.ParamBase(u.arch), types))
		if err != nil {
			return fmt.Errorf("%s: %v", u.file(), err)
		}
		r, ok := res[f.Name]
		if !ok {
			return fmt.Errorf("%s: cuobjdump reports no resources for %s", u.file(), f.Name)
		}
		facts.Arch, facts.Registers, facts.Shared, facts.Local = u.arch, r.Registers, r.Shared, r.Stack
		u.facts = append(u.facts, facts)
	}
	if len(u.facts) != len(params) {
		return fmt.Errorf("%s: %d entries in the PTX, %d functions analysed", u.file(), len(params), len(u.facts))
	}
	return nil
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// interpreters are the entries whose regions are left out of their facts: the megakernel, an
// interpreter whose regions are the instruction bodies the other kernels' facts already
// describe. (A kernel is never left out for its size: attention_f32's chunked body is over
// 20000 instructions, and the model must read it.)
var interpreters = map[string]bool{"megakernel": true}

// factsFile is facts_sm<arch>.json.
type factsFile struct {
	Notice  string            `json:"notice"`
	Arch    int               `json:"arch"`
	Tools   string            `json:"tools"`
	Cubins  map[string]string `json:"cubins"` // SHA-256 of the cubins the facts come from
	Kernels []*sass.Facts     `json:"kernels"`
}

// render writes facts_sm<arch>.json: one kernel a line.
func render(arch int, versions []string, units []*unit) ([]byte, error) {
	ff := factsFile{Notice: "Code generated by go run ../tools/kernelfacts; DO NOT EDIT.", Arch: arch,
		Tools: strings.Join(versions, "; "), Cubins: map[string]string{}}
	for _, u := range units {
		ff.Cubins[u.file()] = sha(u.cubin)
		for _, f := range u.facts {
			if interpreters[f.Entry] {
				f.Regions = nil
			}
			ff.Kernels = append(ff.Kernels, f)
		}
	}
	sort.Slice(ff.Kernels, func(i, j int) bool { return ff.Kernels[i].Entry < ff.Kernels[j].Entry })
	head, err := json.Marshal(struct {
		Notice string            `json:"notice"`
		Arch   int               `json:"arch"`
		Tools  string            `json:"tools"`
		Cubins map[string]string `json:"cubins"`
	}{ff.Notice, ff.Arch, ff.Tools, ff.Cubins})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	b.WriteString(",\n\"kernels\": [\n")
	for i, k := range ff.Kernels {
		line, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(line)
		if i < len(ff.Kernels)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}

// compileProbes compiles testdata/probes.cu as ptxgen compiles a kernel source, assembles it
// for sm_90, and returns the files that go beside it: probes.ptx, probes.sm_90.sass and
// probes.sm_90.ptxas (the resources report).
func compileProbes(t tools, dir, tmp string, verbose bool) (map[string][]byte, error) {
	src := filepath.Join(dir, "probes.cu")
	if _, err := os.Stat(src); err != nil {
		return nil, err
	}
	ptxFile := filepath.Join(tmp, "probes.ptx")
	args := append(append([]string{}, ptx.Flags...), "-o", ptxFile, "probes.cu")
	if verbose {
		fmt.Fprintln(os.Stderr, "nvcc", strings.Join(args, " "))
	}
	cmd := exec.Command(t.nvcc, args...)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(msg)) > 0 {
		return nil, fmt.Errorf("nvcc %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	ptxText, err := os.ReadFile(ptxFile)
	if err != nil {
		return nil, err
	}
	cubin := filepath.Join(tmp, "probes.cubin")
	report, err := runTool(verbose, t.ptxas, append(append([]string{"-v"}, ptx.PtxasFlags...), "-arch=sm_90", "-o", cubin, ptxFile)...)
	if err != nil {
		return nil, err
	}
	text, err := runTool(verbose, t.nvdisasm, "-c", cubin)
	if err != nil {
		return nil, err
	}
	// the report names the temporary file; keep only the per-function lines
	var lines []string
	for _, l := range strings.Split(string(report), "\n") {
		if strings.Contains(l, "entry function") || strings.Contains(l, "Function properties") ||
			strings.Contains(l, "stack frame") || strings.Contains(l, "Used ") {
			lines = append(lines, l)
		}
	}
	return map[string][]byte{
		filepath.Join(dir, "probes.ptx"):         ptxText,
		filepath.Join(dir, "probes.sm_90.sass"):  text,
		filepath.Join(dir, "probes.sm_90.ptxas"): []byte(strings.Join(lines, "\n") + "\n"),
	}, nil
}
