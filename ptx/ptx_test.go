package ptx

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"verity/device"
	"verity/device/kernels" // also registers the kernel specs
	_ "verity/megakernel"   // registers the megakernel
)

// noPTXYet lists the Go kernel specs that have no CUDA kernel yet. A new spec without PTX must
// be added here, and an entry must leave the list when its kernel is written, so the gap stays
// visible.
var noPTXYet = []string{}

// leftOut names, for each of CubinArchs, the kernels its cubins lack and why. A kernel a GPU of
// that architecture cannot run leaves its module's cubin by a __CUDA_ARCH__ guard in its source
// (see the package doc); every kernel missing from a cubin must be listed here with the
// reason, and every kernel listed must be missing. sm_37 runs every kernel but the megakernel:
// f16 and bf16 values are converted by integer bit manipulation (num.cuh), no kernel uses
// tensor cores, and __dp4a, where used, has an exact integer fallback below sm_61.
var leftOut = map[string]map[string]string{
	"sm_37": {
		"megakernel": "its dependency wait sleeps with __nanosleep (sm_70); a K80 runs the eager launches",
	},
}

// notBitExact names the modules exempt from the instruction scan (kernels graded by relative
// error, such as tensor-core ones). None yet.
var notBitExact = map[string]bool{}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestManifestFresh checks that the committed PTX was generated from the sources as they are:
// editing a .cu or .cuh file without running go generate ./ptx fails here.
func TestManifestFresh(t *testing.T) {
	var onDisk []string
	for _, pat := range []string{"src/*.cu", "src/*.cuh"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		onDisk = append(onDisk, m...)
	}
	if len(onDisk) == 0 {
		t.Fatal("no sources in src/")
	}
	for _, p := range onDisk {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.ToSlash(p)
		want, ok := sources[name]
		switch {
		case !ok:
			t.Errorf("%s is not in the manifest: run go generate ./ptx", name)
		case want != sha(data):
			t.Errorf("%s changed since its PTX was generated: run go generate ./ptx", name)
		}
	}
	for name := range sources {
		if !slices.Contains(onDisk, filepath.FromSlash(name)) {
			t.Errorf("the manifest lists %s, which no longer exists: run go generate ./ptx", name)
		}
	}

	var stems []string
	for _, p := range onDisk {
		if stem, ok := strings.CutSuffix(filepath.Base(p), ".cu"); ok {
			stems = append(stems, stem)
		}
	}
	sort.Strings(stems)
	if mods := Modules(); !slices.Equal(mods, stems) {
		t.Errorf("PTX modules %v, sources %v: run go generate ./ptx", mods, stems)
	}
	if len(ptxHashes) != len(Modules()) {
		t.Errorf("manifest has %d PTX hashes for %d modules", len(ptxHashes), len(Modules()))
	}
	var parsed []Entry
	for _, m := range Modules() {
		text, err := Module(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := sha([]byte(text)); got != ptxHashes[m+".ptx"] {
			t.Errorf("%s.ptx does not match the manifest (edited by hand?): run go generate ./ptx", m)
		}
		for _, line := range []string{".version 7.8", ".target sm_80", ".address_size 64"} {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `$`).MatchString(text) {
				t.Errorf("%s.ptx lacks the line %q", m, line)
			}
		}
		es, err := parseEntries(m, text)
		if err != nil {
			t.Errorf("%s.ptx: %v", m, err)
		}
		parsed = append(parsed, es...)
	}
	if !reflect.DeepEqual(parsed, Entries()) {
		t.Errorf("entries in the PTX text:\n%v\nin the manifest:\n%v", parsed, Entries())
	}

	embedded, err := fs.Glob(files, "*.cubin")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range embedded {
		c, ok := cubins[name]
		if !ok {
			t.Errorf("%s is not in the manifest: run go generate ./ptx", name)
			continue
		}
		data, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if sha(data) != c.sha256 {
			t.Errorf("%s does not match the manifest: run go generate ./ptx", name)
		}
	}
	for name := range cubins {
		if !slices.Contains(embedded, name) {
			t.Errorf("the manifest lists %s, which is not in the package: run go generate ./ptx", name)
		}
	}
}

// CUDA ELF values (cuobjdump -elf prints them): a cubin's e_flags hold EF_CUDA_SM(sm) = sm in
// bits 0-7 and EF_CUDA_VIRTUAL_SM(sm) = sm << 16, the PTX architecture it was compiled from.
const (
	elfOSABICUDA    = 0x33
	efCUDA64BitAddr = 0x400 // EF_CUDA_64BIT_ADDRESS
	stoCUDAEntry    = 0x10  // st_other of a kernel's symbol
)

// readCubin parses a cubin and returns its e_flags and its kernel entries, sorted.
func readCubin(data []byte) (*elf.File, uint32, []string, error) {
	if len(data) < 64 {
		return nil, 0, nil, fmt.Errorf("%d bytes: not an ELF file", len(data))
	}
	// e_version holds the toolkit version (118 for CUDA 11.8); debug/elf wants 1.
	data = slices.Clone(data)
	binary.LittleEndian.PutUint32(data[20:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, 0, nil, err
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, 0, nil, err
	}
	var entries []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Other&stoCUDAEntry != 0 {
			entries = append(entries, s.Name)
		}
	}
	sort.Strings(entries)
	return f, binary.LittleEndian.Uint32(data[48:]), entries, nil
}

// checkCubin checks that a cubin is a 64-bit CUDA ELF executable of machine code for sm_<sm>,
// compiled from PTX for compute_<virtual>, whose kernels are those listed.
func checkCubin(t *testing.T, name string, sm, virtual uint32, data []byte, listed []string) {
	t.Helper()
	f, flags, have, err := readCubin(data)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.OSABI != elfOSABICUDA || f.Machine != elf.EM_CUDA || f.Type != elf.ET_EXEC {
		t.Errorf("%s: %v %v OS/ABI %#x %v %v, want a 64-bit little-endian CUDA executable", name, f.Class, f.Data, byte(f.OSABI), f.Machine, f.Type)
	}
	if flags&0xff00ff != virtual<<16|sm || flags&efCUDA64BitAddr == 0 {
		t.Errorf("%s: e_flags %#x: sm_%d from compute_%d, want sm_%d from compute_%d with 64-bit addresses", name, flags, flags&0xff, flags>>16&0xff, sm, virtual)
	}
	if !slices.Equal(have, listed) {
		t.Errorf("%s holds the entries %v, the manifest lists %v", name, have, listed)
	}
}

// TestCubins checks every module's cubin for each of CubinArchs (checkCubin): its entries are
// entries of the module's PTX and Go kernel specs, and every kernel of the module it lacks is
// named in leftOut with a reason.
func TestCubins(t *testing.T) {
	if !slices.Equal(CubinArchs, []string{"sm_37"}) {
		t.Errorf("CubinArchs = %v, want [sm_37] (the K80)", CubinArchs)
	}
	for arch := range leftOut {
		if !slices.Contains(CubinArchs, arch) {
			t.Errorf("leftOut lists %s, which has no cubins", arch)
		}
	}
	specs := map[string]device.Spec{}
	for _, s := range device.Kernels() {
		specs[s.Entry()] = s
	}
	for _, arch := range CubinArchs {
		sm, err := strconv.ParseUint(strings.TrimPrefix(arch, "sm_"), 10, 8)
		if err != nil {
			t.Fatalf("bad architecture %q", arch)
		}
		missing := map[string]bool{}
		for _, m := range Modules() {
			name := m + "." + arch + ".cubin"
			data, listed, err := Cubin(m, arch)
			if err == nil { // else no kernel of m runs on arch, and all must be in leftOut
				checkCubin(t, name, uint32(sm), uint32(sm), data, listed)
			}
			for _, e := range listed {
				if got, ok := Lookup(e); !ok || got.Module != m {
					t.Errorf("%s: entry %s is not in %s.ptx", name, e, m)
				}
				if s, ok := specs[e]; !ok || s.Module() != m {
					t.Errorf("%s: entry %s is not a Go kernel spec of module %s", name, e, m)
				}
			}
			for _, e := range Entries() {
				if e.Module == m && !slices.Contains(listed, e.Name) {
					missing[e.Name] = true
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(missing)) {
			if leftOut[arch][name] == "" {
				t.Errorf("kernel %s is not in its module's %s cubin: add it to leftOut[%q] with the reason", name, arch, arch)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(leftOut[arch])) {
			if !missing[name] {
				t.Errorf("leftOut[%q] lists %s, which is in its module's %s cubin (or is no kernel): remove it", arch, name, arch)
			}
		}
	}
}

// TestAssembledCubins checks every module's cubin for each of AssembledArchs: machine code for
// that architecture assembled from the compute_80 PTX, holding every entry of the module.
func TestAssembledCubins(t *testing.T) {
	if !slices.Equal(AssembledArchs, []string{"sm_80", "sm_90"}) {
		t.Errorf("AssembledArchs = %v, want [sm_80 sm_90] (A100; H100 and H200)", AssembledArchs)
	}
	for _, arch := range AssembledArchs {
		if slices.Contains(CubinArchs, arch) {
			t.Errorf("%s is in both CubinArchs and AssembledArchs", arch)
		}
		sm, err := strconv.ParseUint(strings.TrimPrefix(arch, "sm_"), 10, 8)
		if err != nil {
			t.Fatalf("bad architecture %q", arch)
		}
		for _, m := range Modules() {
			name := m + "." + arch + ".cubin"
			data, listed, err := Cubin(m, arch)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			var want []string
			for _, e := range Entries() {
				if e.Module == m {
					want = append(want, e.Name)
				}
			}
			if !slices.Equal(listed, want) {
				t.Errorf("%s: the manifest lists %v, the module's entries are %v", name, listed, want)
			}
			checkCubin(t, name, uint32(sm), 80, data, want)
		}
	}
	for _, f := range PtxasFlags {
		if strings.Contains(f, "fmad=true") || strings.Contains(f, "ftz") || strings.Contains(f, "fast") || strings.HasPrefix(f, "-arch") ||
			strings.HasPrefix(f, "-O") && f != "-O3" {
			t.Errorf("forbidden ptxas flag %s", f)
		}
	}
}

// TestFlags checks the recorded compiler flags against the arithmetic contract.
func TestFlags(t *testing.T) {
	for _, f := range []string{"-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false", "-arch=compute_80"} {
		if !slices.Contains(Flags, f) {
			t.Errorf("Flags %v lack %s", Flags, f)
		}
	}
	for _, f := range Flags {
		if strings.Contains(f, "fast") || strings.Contains(f, "fmad=true") || strings.Contains(f, "ftz=true") {
			t.Errorf("forbidden flag %s", f)
		}
	}
	for _, f := range []string{"-cubin", "-fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"} {
		if !slices.Contains(CubinFlags, f) {
			t.Errorf("CubinFlags %v lack %s", CubinFlags, f)
		}
	}
	for _, f := range CubinFlags {
		if strings.Contains(f, "fast") || strings.Contains(f, "fmad=true") || strings.Contains(f, "ftz=true") || strings.HasPrefix(f, "-arch") {
			t.Errorf("forbidden cubin flag %s", f)
		}
	}
	if !strings.Contains(NVCC, "release 11.8") {
		t.Errorf("NVCC = %q, want CUDA 11.8 (the toolchain tools/cudaenv.sh installs)", NVCC)
	}
}

var (
	entryLine = regexp.MustCompile(`^\.visible\s+\.entry\s+(\w+)\s*\(\s*(\))?$`)
	paramLine = regexp.MustCompile(`^\.param\s+\.(\w+)\s+\w+\s*(,|\))?$`)
)

// parseEntries reads the entries of one PTX module and their parameter types (sorted by name).
func parseEntries(module, text string) ([]Entry, error) {
	var out []Entry
	open := false
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !open {
			if m := entryLine.FindStringSubmatch(line); m != nil {
				out = append(out, Entry{Module: module, Name: m[1]})
				open = m[2] == ""
			}
			continue
		}
		if line == ")" {
			open = false
			continue
		}
		m := paramLine.FindStringSubmatch(line)
		if m == nil {
			return nil, &parseError{n + 1, line}
		}
		e := &out[len(out)-1]
		e.Params = append(e.Params, m[1])
		open = m[2] != ")"
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type parseError struct {
	line int
	text string
}

func (e *parseError) Error() string { return "cannot read parameter line " + e.text }

// paramTypes are the PTX parameter types each Go parameter kind may have.
var paramTypes = map[device.ParamKind][]string{
	device.U64: {"u64", "s64", "b64"},
	device.U32: {"u32", "s32", "b32"},
	device.F32: {"f32"},
}

// TestEntriesMatchSpecs checks every PTX entry against the Go kernel spec of the same name (the
// module, and the parameters in order), and that every spec without PTX is in noPTXYet.
func TestEntriesMatchSpecs(t *testing.T) {
	specs := map[string]device.Spec{}
	for _, s := range device.Kernels() {
		specs[s.Entry()] = s
	}
	have := map[string]bool{}
	for _, e := range Entries() {
		have[e.Name] = true
		s, ok := specs[e.Name]
		if !ok {
			t.Errorf("%s.ptx: entry %s has no Go kernel spec", e.Module, e.Name)
			continue
		}
		if s.Module() != e.Module {
			t.Errorf("%s: PTX in module %s, Go spec says module %s", e.Name, e.Module, s.Module())
		}
		ps, err := device.Params(reflect.Zero(s.ArgsType()).Interface())
		if err != nil {
			t.Errorf("%s: %v", e.Name, err)
			continue
		}
		if len(ps) != len(e.Params) {
			t.Errorf("%s: PTX has %d parameters %v, Go spec %v has %d", e.Name, len(e.Params), e.Params, s.ArgsType(), len(ps))
			continue
		}
		for i, p := range ps {
			if !slices.Contains(paramTypes[p.Kind], e.Params[i]) {
				t.Errorf("%s: parameter %d (%s) is .%s in the PTX, Go kind %v", e.Name, i, p.Name, e.Params[i], p.Kind)
			}
		}
	}

	var missing []string
	for name := range specs {
		if !have[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		if !slices.Contains(noPTXYet, name) {
			t.Errorf("Go kernel %s (module %s) has no PTX entry: write it, or add it to noPTXYet", name, specs[name].Module())
		}
	}
	for _, name := range noPTXYet {
		switch {
		case specs[name] == nil:
			t.Errorf("noPTXYet lists %s, which is not a Go kernel spec", name)
		case have[name]:
			t.Errorf("noPTXYet lists %s, which now has a PTX entry: remove it", name)
		}
	}
}

// forbidden returns why a PTX instruction breaks the arithmetic contract, or "".
func forbidden(op string) string {
	parts := strings.Split(op, ".")
	base := parts[0]
	has := func(s ...string) bool {
		for _, p := range parts[1:] {
			if slices.Contains(s, p) {
				return true
			}
		}
		return false
	}
	float := has("f16", "f16x2", "bf16", "bf16x2", "f32", "f64")
	switch {
	case has("approx"):
		return "approximation"
	case has("ftz"):
		return "flushes subnormals"
	case slices.Contains([]string{"ex2", "lg2", "sin", "cos", "tanh", "rsqrt"}, base):
		return "approximate function"
	case (base == "atom" || base == "red") && float:
		return "float atomic (order-dependent)"
	case slices.Contains([]string{"add", "sub", "mul", "fma", "mad", "div", "sqrt", "rcp"}, base) && float && !has("rn"):
		return "float arithmetic without .rn (may be contracted or approximated)"
	}
	return ""
}

// instructions returns the opcode of every instruction in a PTX text, with its line number.
func instructions(text string) (ops []string, lines []int) {
	inComment := false
	for n, line := range strings.Split(text, "\n") {
		if inComment {
			end := strings.Index(line, "*/")
			if end < 0 {
				continue
			}
			line, inComment = line[end+2:], false
		}
		if i := strings.Index(line, "/*"); i >= 0 {
			if j := strings.Index(line[i:], "*/"); j >= 0 {
				line = line[:i] + line[i+j+2:]
			} else {
				line, inComment = line[:i], true
			}
		}
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		for _, stmt := range strings.Split(line, ";") {
			f := strings.Fields(stmt)
			if len(f) > 0 && strings.HasPrefix(f[0], "@") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			op := f[0]
			if strings.HasSuffix(op, ":") { // a label
				continue
			}
			if op[0] == '.' || op[0] == '{' || op[0] == '}' || op[0] == ')' || op[0] == '(' || op[0] == '$' {
				continue
			}
			ops = append(ops, op)
			lines = append(lines, n+1)
		}
	}
	return ops, lines
}

func TestForbiddenRule(t *testing.T) {
	for _, c := range []struct {
		line string
		bad  bool
	}{
		{"add.rn.f32 %f1, %f2, %f3;", false},
		{"add.f32 %f1, %f2, %f3;", true},
		{"@%p1 sub.f32 %f1, %f2, %f3;", true},
		{"@!%p2 mul.f32 %f1, %f2, %f3;", true},
		{"mul.rn.f32 %f1, %f2, %f3;", false},
		{"fma.rn.f32 %f1, %f2, %f3, %f4;", false},
		{"fma.rn.ftz.f32 %f1, %f2, %f3, %f4;", true},
		{"fma.rz.f32 %f1, %f2, %f3, %f4;", true},
		{"mad.f32 %f1, %f2, %f3, %f4;", true},
		{"mad.lo.s32 %r1, %r2, %r3, %r4;", false},
		{"mul.wide.s32 %rd1, %r2, 4;", false},
		{"div.rn.f32 %f1, %f2, %f3;", false},
		{"div.full.f32 %f1, %f2, %f3;", true},
		{"div.approx.f32 %f1, %f2, %f3;", true},
		{"div.s32 %r1, %r2, %r3;", false},
		{"sqrt.rn.f32 %f1, %f2;", false},
		{"sqrt.approx.f32 %f1, %f2;", true},
		{"rcp.rn.f32 %f1, %f2;", false},
		{"rcp.approx.ftz.f64 %fd1, %fd2;", true},
		{"rsqrt.approx.f32 %f1, %f2;", true},
		{"ex2.approx.ftz.f32 %f1, %f2;", true},
		{"lg2.approx.f32 %f1, %f2;", true},
		{"tanh.approx.f32 %f1, %f2;", true},
		{"atom.global.add.f32 %f1, [%rd1], %f2;", true},
		{"red.global.add.f32 [%rd1], %f2;", true},
		{"atom.global.add.u32 %r1, [%rd1], 1;", false},
		{"setp.lt.ftz.f32 %p1, %f1, %f2;", true},
		{"setp.lt.f32 %p1, %f1, %f2;", false},
		{"max.f32 %f1, %f2, %f3;", false},
		{"cvt.rzi.s32.f32 %r1, %f1;", false},
		{"add.f64 %fd1, %fd2, %fd3;", true},
		{"add.s32 %r1, %r2, %r3;", false},
		{"// add.f32 in a comment", false},
		{"$L__BB0_2:", false},
		{"ld.param.f32 %f1, [k_param_2];", false},
	} {
		ops, _ := instructions(c.line)
		bad := false
		for _, op := range ops {
			if forbidden(op) != "" {
				bad = true
			}
		}
		if bad != c.bad {
			t.Errorf("%q: forbidden = %v, want %v (ops %v)", c.line, bad, c.bad, ops)
		}
	}
}

// TestNoForbiddenInstructions scans the PTX of every bit-exact module.
func TestNoForbiddenInstructions(t *testing.T) {
	for _, m := range Modules() {
		if notBitExact[m] {
			continue
		}
		text, err := Module(m)
		if err != nil {
			t.Fatal(err)
		}
		ops, lines := instructions(text)
		if len(ops) == 0 {
			t.Errorf("%s.ptx: no instructions found", m)
		}
		for i, op := range ops {
			if why := forbidden(op); why != "" {
				t.Errorf("%s.ptx:%d: %s: %s", m, lines[i], op, why)
			}
		}
	}
}

func TestModule(t *testing.T) {
	for _, bad := range []string{"nope", "", "../ptx/matvec", "matvec.ptx"} {
		if _, err := Module(bad); err == nil {
			t.Errorf("Module(%q) gave no error", bad)
		}
	}
	for _, e := range Entries() {
		text, err := Module(e.Module)
		if err != nil {
			t.Fatalf("entry %s: %v", e.Name, err)
		}
		if !strings.Contains(text, ".visible .entry "+e.Name+"(") {
			t.Errorf("module %s has no entry %s", e.Module, e.Name)
		}
		got, ok := Lookup(e.Name)
		if !ok || !reflect.DeepEqual(got, e) {
			t.Errorf("Lookup(%s) = %v, %v", e.Name, got, ok)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup(nope) found an entry")
	}
	for _, c := range [][2]string{{"nope", "sm_37"}, {"matvec", "sm_35"}, {"matvec", "compute_80"}, {"../ptx/matvec", "sm_37"}, {"", ""}} {
		if _, _, err := Cubin(c[0], c[1]); err == nil {
			t.Errorf("Cubin(%q, %q) gave no error", c[0], c[1])
		}
	}
	if data, names, err := Cubin("matvec", "sm_37"); err != nil || len(names) == 0 || len(data) == 0 {
		t.Errorf("Cubin(matvec, sm_37) = %d bytes, %v, %v", len(data), names, err)
	} else {
		data[0], names[0] = 0, "changed"
		if again, names, _ := Cubin("matvec", "sm_37"); again[0] == 0 || names[0] == "changed" {
			t.Error("Cubin returns the package's own bytes or entry list")
		}
	}
	es := Entries()
	es[0].Params[0] = "changed"
	if Entries()[0].Params[0] == "changed" {
		t.Error("Entries returns the manifest's own slices")
	}
}

// The shared-memory convention of src/grid.cuh: no body declares shared variables, so the only
// ones in the committed PTX are each ENTRY_SHARED entry's own struct (named `shared`, declared
// in its entry, 16-byte aligned) and the megakernel's one dynamic buffer.
func TestSharedMemoryConvention(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^\s*(\.extern\s+)?\.shared\s+(.*);`)
	entry := regexp.MustCompile(`\.entry (\w+)\(`)
	for _, m := range Modules() {
		text, err := Module(m)
		if err != nil {
			t.Fatal(err)
		}
		starts := entry.FindAllStringSubmatchIndex(text, -1)
		for _, d := range decl.FindAllStringSubmatchIndex(text, -1) {
			line := strings.TrimSpace(text[d[0]:d[1]])
			if m == "megakernel" {
				if line != ".extern .shared .align 16 .b8 mk_shared[];" {
					t.Errorf("megakernel.ptx: %s: the megakernel's only shared variable is its dynamic buffer", line)
				}
				continue
			}
			// the entry the declaration lies in
			name := ""
			for _, s := range starts {
				if s[0] < d[0] {
					name = text[s[2]:s[3]]
				}
			}
			want := fmt.Sprintf(`^\.shared \.align 16 \.b8 _ZZ%d%sE6shared\[\d+\];$`, len(name), name)
			if name == "" || !regexp.MustCompile(want).MatchString(line) {
				t.Errorf("%s.ptx: %s: shared memory belongs in the entry's ENTRY_SHARED struct (grid.cuh)", m, line)
			}
		}
	}
}

// TestMatVec8Rows checks that the rows per warp of each matvec8 kernel in src/matvec.cu (its
// MATVEC line's G, the launch's grid) are kernels.MatVec8Rows of its weight type, its block's
// warps kernels.MatVec8Warps (a staged form's MV8_STAGED_WARPS, the MMA form's MV8_MMA_WARPS),
// and that the megakernel's rows per pass divide them.
func TestMatVec8Rows(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("src", "matvec.cu"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^MATVEC\((\w+), \w+, \w+, \d+, \d+, [01], (\d+|MV8_MMA_ROWS), (MV8_\w+), [01], (\d+), (MV8_\w+)\)$`)
	define := func(name string) int {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindStringSubmatch(string(src))
		if m == nil {
			t.Fatalf("src/matvec.cu defines no %s", name)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	stagedWarps, mmaWarps, mmaRows := define("MV8_STAGED_WARPS"), define("MV8_MMA_WARPS"), define("MV8_MMA_ROWS")
	ms := line.FindAllStringSubmatch(string(src), -1)
	if len(ms) != len(kernels.WeightTypes()) {
		t.Fatalf("src/matvec.cu has %d MATVEC lines, the kernels %d weight types", len(ms), len(kernels.WeightTypes()))
	}
	for _, m := range ms {
		g, _ := strconv.Atoi(m[2])
		if m[2] == "MV8_MMA_ROWS" {
			g = mmaRows
		}
		mk, _ := strconv.Atoi(m[4])
		found := false
		for _, ty := range kernels.WeightTypes() {
			if f, err := kernels.Lookup(ty); err == nil && ty.String()+"_"+f.Act.String() == m[1] {
				found = true
				if r := kernels.MatVec8Rows(ty); r != g {
					t.Errorf("matvec8 %s: %d rows a warp in src/matvec.cu, kernels.MatVec8Rows %d", ty, g, r)
				}
				mma := m[3] == "MV8_MMA_FORM"
				if staged := mma || strings.HasPrefix(m[3], "MV8_STAGED"); staged != kernels.MatVec8Staged(ty) {
					t.Errorf("matvec8 %s: form %s in src/matvec.cu, kernels.MatVec8Staged %v", ty, m[3], kernels.MatVec8Staged(ty))
				} else if mma && kernels.MatVec8Warps(ty) != mmaWarps {
					t.Errorf("matvec8 %s: %d warps an MMA block in src/matvec.cu, kernels.MatVec8Warps %d", ty, mmaWarps, kernels.MatVec8Warps(ty))
				} else if staged && !mma && kernels.MatVec8Warps(ty) != stagedWarps {
					t.Errorf("matvec8 %s: %d warps a staged block in src/matvec.cu, kernels.MatVec8Warps %d", ty, stagedWarps, kernels.MatVec8Warps(ty))
				}
			}
		}
		if !found {
			t.Errorf("MATVEC line for %s: no such weight type", m[1])
		}
		if strings.HasPrefix(m[5], "MV8_STAGED") {
			t.Errorf("matvec8 %s: the megakernel's form is staged (its bodies share one block-wide buffer)", m[1])
		}
		if mk < 1 || g%mk != 0 {
			t.Errorf("matvec8 %s: the megakernel's %d rows a pass do not divide the warp's %d", m[1], mk, g)
		}
	}
}

// TestAttentionConstants checks that src/attention.cu's constants are the Go side's.
func TestAttentionConstants(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("src", "attention.cu"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want int
	}{{"ATT_CHUNK", kernels.AttnChunk}, {"ATT_THREADS", kernels.AttnBlockThreads}, {"ATT_GROUP", kernels.AttnGroup},
		{"ATT_OUT_F16", int(kernels.ActF16)}, {"ATT_OUT_BF16", int(kernels.ActBF16)}} {
		m := regexp.MustCompile(`(?m)^#define ` + c.name + ` (\d+)\b`).FindStringSubmatch(string(src))
		if m == nil {
			t.Errorf("src/attention.cu defines no %s", c.name)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); got != c.want {
			t.Errorf("%s is %d in src/attention.cu, %d in package kernels", c.name, got, c.want)
		}
	}
}
