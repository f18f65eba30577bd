// Command ptxgen compiles the CUDA kernels in ptx/src into the committed PTX files ptx/<stem>.ptx,
// sm_37 machine code ptx/<stem>.sm_37.cubin and sm_80 and sm_90 machine code
// ptx/<stem>.sm_80.cubin and ptx/<stem>.sm_90.cubin, and writes ptx/manifest.go (source, PTX and
// cubin hashes, compiler version, flags, every entry point with its parameter types, and the
// entries each cubin holds). `go generate ./ptx` runs it.
//
// Every .cu file is compiled on its own, to PTX with
//
//	nvcc -ptx -arch=compute_80 -fmad=false -prec-div=true -prec-sqrt=true -ftz=false
//
// (IEEE rounding for every float operation, no contraction, no flushing, no approximations;
// see the arithmetic contract in device/num), and to a cubin for each of CubinArchs with
//
//	nvcc -cubin -arch=sm_37 -Wno-deprecated-gpu-targets -fmad=false -prec-div=true -prec-sqrt=true -ftz=false
//
// for the K80, which cannot run compute_80 PTX. A kernel sm_37 cannot run is left out of the
// cubin by a __CUDA_ARCH__ guard in its source; the cubin's entries are read from its symbol
// table, and a module none of whose kernels is left has no cubin.
//
// The PTX itself is assembled for each of AssembledArchs (sm_80: A100; sm_90: H100, H200) by
// ptxas, the assembler the driver's JIT compiler is built on:
//
//	ptxas -arch=sm_90 -O3 -o <stem>.sm_90.cubin <stem>.ptx
//
// so those cubins are the very instructions of the committed PTX, every entry of it, and a GPU
// of exactly that architecture loads them without compiling anything (the PTX stays the
// fallback for every other GPU from sm_80 on). ptxas output depends only on its input bytes and
// flags, not on file names or paths (the tests regenerate and compare them). The compilations
// run in parallel, one per CPU, the longest (the megakernel's) first.
//
// nvcc is found with -nvcc, else in $VERITY_CUDA, else in <repo>/.cache/cuda (tools/cudaenv.sh
// installs it there), else on PATH; ptxas is the one beside it.
//
// With -check nothing is written: the generated files are compared byte for byte with the ones
// in the directory and any difference (or a stale .ptx or .cubin without a source) is an error.
// A summary of what was built (cubins, kernels left out, the megakernel's registers, shared
// memory and spills as ptxas reports them, the slowest compilations) is printed; -v also prints
// each command and ptxas's resource usage for every entry.
//
// Usage:
//
//	ptxgen [-dir ptx] [-nvcc path] [-check] [-v]
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Flags are the nvcc options every kernel is compiled with (besides -o and the input).
var Flags = []string{"-ptx", "-arch=compute_80", "-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"}

// CubinArchs are the architectures that also get machine code compiled from the sources, one
// cubin per module (sm_37: K80, whose Kepler cores cannot run compute_80 PTX).
var CubinArchs = []string{"sm_37"}

// AssembledArchs are the architectures whose machine code ptxas assembles from the PTX, one
// cubin per module holding every entry (sm_80: A100, sm_90: H100 and H200).
var AssembledArchs = []string{"sm_80", "sm_90"}

// PtxasFlags are the ptxas options every assembled cubin was built with, besides -arch=<arch>:
// full optimisation, as the driver's JIT compiles PTX by default. Contraction into FMA and
// flushing are not asked for here because the PTX leaves nothing to choose: every float
// operation in it carries its rounding (.rn), which ptxas keeps as written.
var PtxasFlags = []string{"-O3"}

// CubinFlags are the nvcc options every cubin is compiled with besides -arch=<arch>: the
// arithmetic flags of Flags. nvcc 11.8 warns that sm_37 is deprecated; the warning is turned
// off because any output from nvcc fails the build.
var CubinFlags = []string{"-cubin", "-Wno-deprecated-gpu-targets", "-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"}

func main() {
	dir := flag.String("dir", ".", "the ptx package directory (holding src/)")
	nvcc := flag.String("nvcc", "", "nvcc to use (default: $VERITY_CUDA/bin/nvcc, <repo>/.cache/cuda/bin/nvcc, PATH)")
	check := flag.Bool("check", false, "compare with the files in -dir instead of writing them")
	verbose := flag.Bool("v", false, "print each compilation and ptxas's resource usage of every entry")
	flag.Parse()
	if err := run(*dir, *nvcc, *check, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "ptxgen:", err)
		os.Exit(1)
	}
}

// module is one compiled source file.
type module struct {
	stem    string
	ptx     []byte
	entries []entry
	cubins  []cubin // for each of CubinArchs whose build holds a kernel, then each of AssembledArchs
}

// cubin is a module's machine code for one architecture.
type cubin struct {
	arch    string
	data    []byte
	entries []string // sorted
	usage   []usage  // ptxas's resource report, for assembled cubins
	took    time.Duration
}

func (c cubin) file(stem string) string { return stem + "." + c.arch + ".cubin" }

// usage is ptxas's resource report for one entry (ptxas -v).
type usage struct {
	entry                string
	registers, smem      int
	stack, spill, reload int // bytes of stack frame, spill stores and spill loads
}

// entry is one .entry of a PTX file and its parameter types in order.
type entry struct {
	name   string
	params []string
}

func run(dir, nvcc string, check, verbose bool) error {
	src := filepath.Join(dir, "src")
	cus, err := filepath.Glob(filepath.Join(src, "*.cu"))
	if err != nil {
		return err
	}
	if len(cus) == 0 {
		return fmt.Errorf("no .cu files in %s", src)
	}
	sort.Strings(cus)
	headers, err := filepath.Glob(filepath.Join(src, "*.cuh"))
	if err != nil {
		return err
	}
	sort.Strings(headers)

	if nvcc == "" {
		if nvcc, err = findNVCC(dir); err != nil {
			return err
		}
	}
	version, err := nvccVersion(nvcc)
	if err != nil {
		return err
	}
	ptxas := filepath.Join(filepath.Dir(nvcc), "ptxas")
	if !isExec(ptxas) {
		return fmt.Errorf("no ptxas beside %s", nvcc)
	}

	start := time.Now()
	mods, err := compileAll(nvcc, ptxas, dir, cus, verbose)
	if err != nil {
		return err
	}
	manifest, err := renderManifest(dir, version, cus, headers, mods)
	if err != nil {
		return err
	}
	fmt.Print(summary(mods, time.Since(start)))
	if verbose {
		fmt.Fprint(os.Stderr, usageTable(mods))
	}
	if check {
		return compare(dir, mods, manifest)
	}
	return write(dir, mods, manifest)
}

// findNVCC locates nvcc as the package doc describes.
func findNVCC(dir string) (string, error) {
	var tried []string
	if d := os.Getenv("VERITY_CUDA"); d != "" {
		p := filepath.Join(d, "bin", "nvcc")
		if isExec(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if root, err := repoRoot(dir); err == nil {
		p := filepath.Join(root, ".cache", "cuda", "bin", "nvcc")
		if isExec(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath("nvcc"); err == nil {
		return p, nil
	}
	tried = append(tried, "nvcc on PATH")
	return "", fmt.Errorf("no nvcc (tried %s): run tools/cudaenv.sh", strings.Join(tried, ", "))
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// repoRoot returns the nearest directory at or above dir that holds go.mod.
func repoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("no go.mod above " + dir)
		}
		d = parent
	}
}

var versionRE = regexp.MustCompile(`(?m)^Cuda compilation tools, (release [0-9.]+, V[0-9.]+)\s*$`)

// nvccVersion returns nvcc's "release X.Y, VX.Y.Z".
func nvccVersion(nvcc string) (string, error) {
	out, err := exec.Command(nvcc, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v\n%s", nvcc, err, out)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version: no version line in %q", nvcc, out)
	}
	return string(m[1]), nil
}

// compileAll compiles every source: its PTX first, then its sm_37 cubin and the PTX's
// assembled cubins, each compilation holding one of NumCPU slots. The largest sources start
// first, so that the megakernel's long ptxas runs overlap everything else.
func compileAll(nvcc, ptxas, dir string, cus []string, verbose bool) ([]*module, error) {
	tmp, err := os.MkdirTemp("", "ptxgen")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	order := make([]int, len(cus))
	size := make([]int64, len(cus))
	for i, cu := range cus {
		order[i] = i
		if st, err := os.Stat(cu); err == nil {
			size[i] = st.Size()
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return size[order[a]] > size[order[b]] })

	mods := make([]*module, len(cus))
	errs := make([]error, len(cus))
	slots := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for _, i := range order {
		slots <- struct{}{} // taken here, in order, for the module's PTX compilation
		wg.Add(1)
		go func() {
			defer wg.Done()
			mods[i], errs[i] = compile(nvcc, ptxas, dir, cus[i], tmp, slots, verbose)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return mods, nil
}

// compile compiles one source to PTX, then (concurrently) to a cubin for each of CubinArchs and
// the PTX to a cubin for each of AssembledArchs, and reads the entries of each. Each
// compilation holds a slot; the caller has taken the PTX compilation's.
func compile(nvcc, ptxas, dir, cu, tmp string, slots chan struct{}, verbose bool) (*module, error) {
	stem := strings.TrimSuffix(filepath.Base(cu), ".cu")
	ptx, err := nvccOut(nvcc, dir, stem, stem+".ptx", Flags, tmp, verbose)
	<-slots
	if err != nil {
		return nil, err
	}
	entries, err := parseEntries(ptx)
	if err != nil {
		return nil, fmt.Errorf("%s.ptx: %v", stem, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s.ptx has no .entry", stem)
	}
	m := &module{stem: stem, ptx: ptx, entries: entries}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.name
	}
	sort.Strings(names)

	archs := append(append([]string{}, CubinArchs...), AssembledArchs...)
	built := make([]cubin, len(archs))
	errs := make([]error, len(archs))
	var wg sync.WaitGroup
	for i, arch := range archs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			c := cubin{arch: arch}
			start := time.Now()
			if i < len(CubinArchs) {
				flags := append(append([]string{}, CubinFlags...), "-arch="+arch)
				c.data, errs[i] = nvccOut(nvcc, dir, stem, c.file(stem), flags, tmp, verbose)
			} else {
				c.data, c.usage, errs[i] = assemble(ptxas, stem, arch, ptx, tmp, verbose)
			}
			c.took = time.Since(start)
			if errs[i] != nil {
				return
			}
			if c.entries, errs[i] = cubinEntries(c.data, arch); errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %v", c.file(stem), errs[i])
				return
			}
			for _, name := range c.entries {
				if !slices.Contains(names, name) {
					errs[i] = fmt.Errorf("%s: entry %s is not in %s.ptx", c.file(stem), name, stem)
					return
				}
			}
			if i >= len(CubinArchs) && !slices.Equal(c.entries, names) {
				errs[i] = fmt.Errorf("%s holds the entries %v, %s.ptx has %v", c.file(stem), c.entries, stem, names)
				return
			}
			built[i] = c
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, c := range built {
		if len(c.entries) > 0 {
			m.cubins = append(m.cubins, c)
		}
	}
	return m, nil
}

// assemble runs ptxas on a module's PTX for arch (written to tmp under a name of its own, which
// does not reach the output) and returns the cubin and the resource report.
func assemble(ptxas, stem, arch string, ptx []byte, tmp string, verbose bool) ([]byte, []usage, error) {
	in := filepath.Join(tmp, stem+"."+arch+".in.ptx")
	out := filepath.Join(tmp, stem+"."+arch+".cubin")
	if err := os.WriteFile(in, ptx, 0o644); err != nil {
		return nil, nil, err
	}
	args := append(append([]string{"-arch=" + arch}, PtxasFlags...), "-v", "-o", out, in)
	if verbose {
		fmt.Fprintln(os.Stderr, "ptxas", strings.Join(args, " "))
	}
	msg, err := exec.Command(ptxas, args...).CombinedOutput()
	if err != nil {
		return nil, nil, fmt.Errorf("ptxas %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	us, err := parseUsage(msg, arch)
	if err != nil {
		return nil, nil, fmt.Errorf("ptxas -arch=%s %s.ptx: %v", arch, stem, err)
	}
	data, err := os.ReadFile(out)
	return data, us, err
}

var (
	compilingRE = regexp.MustCompile(`^ptxas info\s*: Compiling entry function '([^']+)' for '(sm_\d+)'`)
	frameRE     = regexp.MustCompile(`^\s*(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	usedRE      = regexp.MustCompile(`^ptxas info\s*: Used (\d+) registers(?:, (\d+) bytes smem)?`)
)

// parseUsage reads ptxas -v's report: for each entry, its registers, static shared memory,
// stack frame and spills. Any line ptxas prints that is not part of that report (a warning) is
// an error, as nvcc's are.
func parseUsage(out []byte, arch string) ([]usage, error) {
	var us []usage
	var cur *usage
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case line == "":
		case compilingRE.MatchString(line):
			m := compilingRE.FindStringSubmatch(line)
			if m[2] != arch {
				return nil, fmt.Errorf("compiled for %s, not %s", m[2], arch)
			}
			us = append(us, usage{entry: m[1]})
			cur = &us[len(us)-1]
		case frameRE.MatchString(line) && cur != nil:
			m := frameRE.FindStringSubmatch(line)
			cur.stack, cur.spill, cur.reload = atoi(m[1]), atoi(m[2]), atoi(m[3])
		case usedRE.MatchString(line) && cur != nil:
			m := usedRE.FindStringSubmatch(line)
			cur.registers, cur.smem = atoi(m[1]), atoi(m[2])
		case strings.HasPrefix(line, "ptxas info"):
			// gmem, function properties, cmem: not recorded
		default:
			return nil, fmt.Errorf("ptxas printed: %s", line)
		}
	}
	return us, nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// nvccOut runs nvcc with flags on src/<stem>.cu (from dir, with a relative path, so that nothing
// about the checkout's location can reach the output) and returns the output file.
func nvccOut(nvcc, dir, stem, out string, flags []string, tmp string, verbose bool) ([]byte, error) {
	out = filepath.Join(tmp, out)
	args := append(append([]string{}, flags...), "-o", out, filepath.ToSlash(filepath.Join("src", stem+".cu")))
	cmd := exec.Command(nvcc, args...)
	cmd.Dir = dir
	if verbose {
		fmt.Fprintln(os.Stderr, "nvcc", strings.Join(args, " "))
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("nvcc %s: %v\n%s", strings.Join(args, " "), err, msg)
	} else if len(bytes.TrimSpace(msg)) > 0 {
		// warnings are errors: the kernels must compile cleanly
		return nil, fmt.Errorf("nvcc %s printed:\n%s", strings.Join(args, " "), msg)
	}
	return os.ReadFile(out)
}

// stoCUDAEntry marks a kernel entry point in a cubin's symbol table (in st_other).
const stoCUDAEntry = 0x10

// cubinEntries checks that data is a 64-bit CUDA ELF file for arch (whose SM number is the low
// byte of e_flags) and returns its kernel entry points, sorted.
func cubinEntries(data []byte, arch string) ([]string, error) {
	// A cubin's e_version holds the toolkit version (118 for 11.8); debug/elf wants 1.
	if len(data) < 64 {
		return nil, errors.New("not an ELF file")
	}
	data = slices.Clone(data)
	binary.LittleEndian.PutUint32(data[20:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_CUDA {
		return nil, fmt.Errorf("not a 64-bit CUDA ELF file (%v, %v)", f.Class, f.Machine)
	}
	sm, err := strconv.Atoi(strings.TrimPrefix(arch, "sm_"))
	if err != nil {
		return nil, fmt.Errorf("bad architecture %q", arch)
	}
	if flags := binary.LittleEndian.Uint32(data[48:]); flags&0xff != uint32(sm) {
		return nil, fmt.Errorf("e_flags %#x: machine code for sm_%d, not %s", flags, flags&0xff, arch)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Other&stoCUDAEntry != 0 {
			out = append(out, s.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

var (
	entryRE = regexp.MustCompile(`^\.visible\s+\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*\(\s*(\))?`)
	paramRE = regexp.MustCompile(`^\.param\s+\.([a-z0-9]+)\s+(?:\.ptr\S*\s+)?(?:\.align\s+\d+\s+)?[A-Za-z_$][A-Za-z0-9_$]*(\[\d+\])?\s*(,|\))?`)
)

// parseEntries finds every `.visible .entry name(` and its `.param .type name` lines.
func parseEntries(ptx []byte) ([]entry, error) {
	var out []entry
	var cur *entry
	for n, line := range strings.Split(string(ptx), "\n") {
		line = strings.TrimSpace(line)
		if cur == nil {
			m := entryRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			out = append(out, entry{name: m[1]})
			if m[2] == "" {
				cur = &out[len(out)-1]
			}
			continue
		}
		if line == ")" {
			cur = nil
			continue
		}
		m := paramRE.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: cannot read parameter of %s: %q", n+1, cur.name, line)
		}
		if m[2] != "" {
			return nil, fmt.Errorf("line %d: array parameter in %s: %q", n+1, cur.name, line)
		}
		cur.params = append(cur.params, m[1])
		if m[3] == ")" {
			cur = nil
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("unterminated parameter list of %s", cur.name)
	}
	return out, nil
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// renderManifest writes manifest.go's text.
func renderManifest(dir, version string, cus, headers []string, mods []*module) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by go run ../tools/ptxgen; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "package ptx\n\n")
	fmt.Fprintf(&b, "// NVCC is the compiler that produced the PTX files.\n")
	fmt.Fprintf(&b, "const NVCC = %q\n\n", "Cuda compilation tools, "+version)
	fmt.Fprintf(&b, "// Flags are the nvcc options every PTX file was compiled with.\n")
	fmt.Fprintf(&b, "var Flags = %#v\n\n", Flags)
	fmt.Fprintf(&b, "// CubinArchs are the architectures with machine code compiled from the sources: a cubin per module.\n")
	fmt.Fprintf(&b, "var CubinArchs = %#v\n\n", CubinArchs)
	fmt.Fprintf(&b, "// CubinFlags are the nvcc options every such cubin was compiled with, besides -arch=<arch>.\n")
	fmt.Fprintf(&b, "var CubinFlags = %#v\n\n", CubinFlags)
	fmt.Fprintf(&b, "// AssembledArchs are the architectures with machine code ptxas assembled from the PTX: a cubin\n")
	fmt.Fprintf(&b, "// per module, holding every entry.\n")
	fmt.Fprintf(&b, "var AssembledArchs = %#v\n\n", AssembledArchs)
	fmt.Fprintf(&b, "// PtxasFlags are the ptxas options every assembled cubin was built with, besides -arch=<arch>.\n")
	fmt.Fprintf(&b, "var PtxasFlags = %#v\n\n", PtxasFlags)
	fmt.Fprintf(&b, "// sources are the SHA-256 of the files the PTX was compiled from.\n")
	fmt.Fprintf(&b, "var sources = map[string]string{\n")
	for _, p := range append(append([]string{}, cus...), headers...) {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\t%q: %q,\n", filepath.ToSlash(rel), sha(data))
	}
	fmt.Fprintf(&b, "}\n\n")
	fmt.Fprintf(&b, "// ptxHashes are the SHA-256 of the generated PTX files.\n")
	fmt.Fprintf(&b, "var ptxHashes = map[string]string{\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "\t%q: %q,\n", m.stem+".ptx", sha(m.ptx))
	}
	fmt.Fprintf(&b, "}\n\n")
	fmt.Fprintf(&b, "// cubins are the generated cubins, by file name: SHA-256 and the entries each holds.\n")
	fmt.Fprintf(&b, "var cubins = map[string]cubinFile{\n")
	for _, m := range mods {
		for _, c := range m.cubins {
			fmt.Fprintf(&b, "\t%q: {\n\t\tsha256: %q,\n\t\tentries: %#v,\n\t},\n", c.file(m.stem), sha(c.data), c.entries)
		}
	}
	fmt.Fprintf(&b, "}\n\n")
	fmt.Fprintf(&b, "// entries lists every kernel entry point, by module and name.\n")
	fmt.Fprintf(&b, "var entries = []Entry{\n")
	for _, m := range mods {
		es := append([]entry(nil), m.entries...)
		sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
		for _, e := range es {
			fmt.Fprintf(&b, "\t{Module: %q, Name: %q, Params: %#v},\n", m.stem, e.name, e.params)
		}
	}
	fmt.Fprintf(&b, "}\n")
	return format.Source(b.Bytes())
}

// summary says what was built: the cubins for each architecture, the kernels any leaves out,
// the megakernel's resources as ptxas reports them, and the slowest compilations.
func summary(mods []*module, took time.Duration) string {
	n := 0
	for _, m := range mods {
		n += len(m.entries)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ptxgen: %d PTX modules (%d entries) in %.1f s on %d CPUs\n", len(mods), n, took.Seconds(), runtime.NumCPU())
	var slow []string
	for _, arch := range append(append([]string{}, CubinArchs...), AssembledArchs...) {
		files, have := 0, 0
		var left []string
		var bytes int
		for _, m := range mods {
			var in []string
			for _, c := range m.cubins {
				if c.arch != arch {
					continue
				}
				files++
				bytes += len(c.data)
				in = c.entries
				if c.took >= 5*time.Second {
					slow = append(slow, fmt.Sprintf("%s %.1f s", c.file(m.stem), c.took.Seconds()))
				}
				for _, u := range c.usage {
					if u.entry == "megakernel" {
						fmt.Fprintf(&b, "ptxgen: %s megakernel: %d registers, %d bytes static shared memory, %d bytes stack frame, %d/%d bytes spilled/reloaded\n",
							arch, u.registers, u.smem, u.stack, u.spill, u.reload)
					}
				}
			}
			have += len(in)
			for _, e := range m.entries {
				if !slices.Contains(in, e.name) {
					left = append(left, e.name)
				}
			}
		}
		how := "nvcc from the sources"
		if slices.Contains(AssembledArchs, arch) {
			how = "ptxas from the PTX"
		}
		fmt.Fprintf(&b, "ptxgen: %d %s cubins (%.1f MB) by %s, holding %d of the %d entries", files, arch, float64(bytes)/1e6, how, have, n)
		if len(left) > 0 {
			fmt.Fprintf(&b, "; left out: %s", strings.Join(left, ", "))
		}
		fmt.Fprintln(&b)
	}
	if len(slow) > 0 {
		fmt.Fprintf(&b, "ptxgen: slowest: %s\n", strings.Join(slow, ", "))
	}
	return b.String()
}

// usageTable lists ptxas's resource report for every assembled entry.
func usageTable(mods []*module) string {
	var b strings.Builder
	for _, m := range mods {
		for _, c := range m.cubins {
			for _, u := range c.usage {
				fmt.Fprintf(&b, "%s %s %s: %d registers, %d bytes smem, %d bytes stack, %d/%d bytes spilled/reloaded\n",
					c.arch, m.stem, u.entry, u.registers, u.smem, u.stack, u.spill, u.reload)
			}
		}
	}
	return b.String()
}

// outputs lists the files ptxgen owns in dir and their new contents.
func outputs(mods []*module, manifest []byte) map[string][]byte {
	files := map[string][]byte{"manifest.go": manifest}
	for _, m := range mods {
		files[m.stem+".ptx"] = m.ptx
		for _, c := range m.cubins {
			files[c.file(m.stem)] = c.data
		}
	}
	return files
}

// stale lists the .ptx and .cubin files in dir that no source produces.
func stale(dir string, files map[string][]byte) ([]string, error) {
	var out []string
	for _, pat := range []string{"*.ptx", "*.cubin"} {
		have, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		for _, p := range have {
			if _, ok := files[filepath.Base(p)]; !ok {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func compare(dir string, mods []*module, manifest []byte) error {
	files := outputs(mods, manifest)
	var bad []string
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		old, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			bad = append(bad, name+": missing")
		case err != nil:
			return err
		case !bytes.Equal(old, files[name]):
			bad = append(bad, name+": differs from the regenerated file")
		}
	}
	st, err := stale(dir, files)
	if err != nil {
		return err
	}
	for _, p := range st {
		bad = append(bad, filepath.Base(p)+": no longer generated from src/")
	}
	if len(bad) > 0 {
		return fmt.Errorf("generated files are not up to date (run go generate ./ptx):\n\t%s", strings.Join(bad, "\n\t"))
	}
	return nil
}

func write(dir string, mods []*module, manifest []byte) error {
	files := outputs(mods, manifest)
	for name, data := range files {
		p := filepath.Join(dir, name)
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	st, err := stale(dir, files)
	if err != nil {
		return err
	}
	for _, p := range st {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}
