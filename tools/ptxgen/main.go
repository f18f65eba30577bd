// Command ptxgen compiles the CUDA kernels in ptx/src into the committed PTX files ptx/<stem>.ptx
// and sm_37 machine code ptx/<stem>.sm_37.cubin, and writes ptx/manifest.go (source, PTX and
// cubin hashes, compiler version, flags, targets, every entry point with its parameter types,
// and the entries each cubin holds). `go generate ./ptx` runs it.
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
// table, and a module none of whose kernels is left has no cubin. nvcc is found with -nvcc,
// else in $VERITY_CUDA, else in <repo>/.cache/cuda (tools/cudaenv.sh installs it there), else
// on PATH.
//
// With -check nothing is written: the generated files are compared byte for byte with the ones
// in the directory and any difference (or a stale .ptx or .cubin without a source) is an error.
// With -ptxas every PTX file is also assembled by ptxas for each of Targets (output discarded),
// and a summary of what was assembled is printed.
//
// Usage:
//
//	ptxgen [-dir ptx] [-nvcc path] [-check] [-ptxas] [-v]
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
)

// Flags are the nvcc options every kernel is compiled with (besides -o and the input).
var Flags = []string{"-ptx", "-arch=compute_80", "-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"}

// Targets are the architectures ptxas must accept the PTX for (sm_80: A100, sm_90: H100/H200).
var Targets = []string{"sm_80", "sm_90"}

// CubinArchs are the architectures that also get machine code, one cubin per module (sm_37:
// K80, whose Kepler cores cannot run compute_80 PTX).
var CubinArchs = []string{"sm_37"}

// CubinFlags are the nvcc options every cubin is compiled with besides -arch=<arch>: the
// arithmetic flags of Flags. nvcc 11.8 warns that sm_37 is deprecated; the warning is turned
// off because any output from nvcc fails the build.
var CubinFlags = []string{"-cubin", "-Wno-deprecated-gpu-targets", "-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"}

func main() {
	dir := flag.String("dir", ".", "the ptx package directory (holding src/)")
	nvcc := flag.String("nvcc", "", "nvcc to use (default: $VERITY_CUDA/bin/nvcc, <repo>/.cache/cuda/bin/nvcc, PATH)")
	check := flag.Bool("check", false, "compare with the files in -dir instead of writing them")
	ptxas := flag.Bool("ptxas", false, "also assemble every PTX file for each target with ptxas")
	verbose := flag.Bool("v", false, "print each compilation, and ptxas's resource usage with -ptxas")
	flag.Parse()
	if err := run(*dir, *nvcc, *check, *ptxas, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "ptxgen:", err)
		os.Exit(1)
	}
}

// module is one compiled source file.
type module struct {
	stem    string
	ptx     []byte
	entries []entry
	cubins  []cubin // for each of CubinArchs whose build holds a kernel
}

// cubin is a module's machine code for one architecture.
type cubin struct {
	arch    string
	data    []byte
	entries []string // sorted
}

func (c cubin) file(stem string) string { return stem + "." + c.arch + ".cubin" }

// entry is one .entry of a PTX file and its parameter types in order.
type entry struct {
	name   string
	params []string
}

func run(dir, nvcc string, check, ptxas, verbose bool) error {
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

	mods, err := compileAll(nvcc, dir, cus, verbose)
	if err != nil {
		return err
	}
	manifest, err := renderManifest(dir, version, cus, headers, mods)
	if err != nil {
		return err
	}

	if ptxas {
		if err := assembleAll(filepath.Join(filepath.Dir(nvcc), "ptxas"), mods, verbose); err != nil {
			return err
		}
		fmt.Print(summary(mods))
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

// compileAll compiles every source, a few at a time.
func compileAll(nvcc, dir string, cus []string, verbose bool) ([]*module, error) {
	tmp, err := os.MkdirTemp("", "ptxgen")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	mods := make([]*module, len(cus))
	errs := make([]error, len(cus))
	sem := make(chan struct{}, min(2, runtime.NumCPU()))
	var wg sync.WaitGroup
	for i, cu := range cus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			mods[i], errs[i] = compile(nvcc, dir, cu, tmp, verbose)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return mods, nil
}

// compile compiles one source to PTX and to a cubin for each of CubinArchs, and reads the
// entries of each.
func compile(nvcc, dir, cu, tmp string, verbose bool) (*module, error) {
	stem := strings.TrimSuffix(filepath.Base(cu), ".cu")
	ptx, err := nvccOut(nvcc, dir, stem, stem+".ptx", Flags, tmp, verbose)
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
	for _, arch := range CubinArchs {
		c := cubin{arch: arch}
		flags := append(append([]string{}, CubinFlags...), "-arch="+arch)
		if c.data, err = nvccOut(nvcc, dir, stem, c.file(stem), flags, tmp, verbose); err != nil {
			return nil, err
		}
		if c.entries, err = cubinEntries(c.data, arch); err != nil {
			return nil, fmt.Errorf("%s: %v", c.file(stem), err)
		}
		for _, name := range c.entries {
			if !slices.ContainsFunc(entries, func(e entry) bool { return e.name == name }) {
				return nil, fmt.Errorf("%s: entry %s is not in %s.ptx", c.file(stem), name, stem)
			}
		}
		if len(c.entries) > 0 {
			m.cubins = append(m.cubins, c)
		}
	}
	return m, nil
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
	fmt.Fprintf(&b, "// Targets are the architectures ptxas assembles every PTX file for in CI.\n")
	fmt.Fprintf(&b, "var Targets = %#v\n\n", Targets)
	fmt.Fprintf(&b, "// CubinArchs are the architectures with machine code: a cubin per module.\n")
	fmt.Fprintf(&b, "var CubinArchs = %#v\n\n", CubinArchs)
	fmt.Fprintf(&b, "// CubinFlags are the nvcc options every cubin was compiled with, besides -arch=<arch>.\n")
	fmt.Fprintf(&b, "var CubinFlags = %#v\n\n", CubinFlags)
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

// assembleAll runs ptxas on every module for every target.
func assembleAll(ptxas string, mods []*module, verbose bool) error {
	tmp, err := os.MkdirTemp("", "ptxgen")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var errs []error
	for _, m := range mods {
		p := filepath.Join(tmp, m.stem+".ptx")
		if err := os.WriteFile(p, m.ptx, 0o644); err != nil {
			return err
		}
		for _, t := range Targets {
			args := []string{"-arch=" + t, "-o", os.DevNull}
			if verbose {
				args = append(args, "-v")
			}
			out, err := exec.Command(ptxas, append(args, p)...).CombinedOutput()
			if err != nil {
				errs = append(errs, fmt.Errorf("ptxas -arch=%s %s.ptx: %v\n%s", t, m.stem, err, out))
				continue
			}
			if verbose {
				fmt.Fprintf(os.Stderr, "ptxas -arch=%s %s.ptx\n%s", t, m.stem, out)
			}
		}
	}
	return errors.Join(errs...)
}

// summary says what was assembled: the PTX by ptxas for each of Targets, and the cubins by
// nvcc, naming the kernels they leave out.
func summary(mods []*module) string {
	n := 0
	for _, m := range mods {
		n += len(m.entries)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ptxgen: %d PTX modules (%d entries) assembled by ptxas for %s\n", len(mods), n, strings.Join(Targets, ", "))
	for _, arch := range CubinArchs {
		files, have := 0, 0
		var left []string
		for _, m := range mods {
			var in []string
			for _, c := range m.cubins {
				if c.arch == arch {
					files++
					in = c.entries
				}
			}
			have += len(in)
			for _, e := range m.entries {
				if !slices.Contains(in, e.name) {
					left = append(left, e.name)
				}
			}
		}
		fmt.Fprintf(&b, "ptxgen: %d %s cubins built by nvcc, holding %d of the %d entries", files, arch, have, n)
		if len(left) > 0 {
			fmt.Fprintf(&b, "; left out: %s", strings.Join(left, ", "))
		}
		fmt.Fprintln(&b)
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
