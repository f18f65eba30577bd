// Package ptx holds Verity's CUDA kernels as PTX text and machine code (cubins), compiled from
// the sources in src/ and committed, so that building and testing need no CUDA toolchain.
//
// Each src/<stem>.cu compiles to <stem>.ptx, the PTX module of that stem (a kernel spec's
// ModuleName in package device); its extern "C" kernels are the module's entry points, named
// as the specs' EntryName, with one PTX parameter per field of the spec's argument struct
// (.u64 for Ptr, int64 and uint64, .u32 or .s32 for int32 and uint32, .f32 for float32).
// src/num.cuh is the device side of package device/num. The PTX is generated for compute_80
// with IEEE rounding everywhere (see Flags) and loads on any GPU from sm_80 on, the driver
// compiling it for the GPU (its JIT) when the module is loaded.
//
// Two kinds of cubin save or replace that compilation (see Cubin):
//
//   - <stem>.sm_80.cubin and <stem>.sm_90.cubin (AssembledArchs: A100; H100 and H200) are the
//     committed PTX itself assembled by ptxas 11.8 (PtxasFlags), every entry of it, ready to
//     load. The driver's JIT is a newer ptxas and may schedule the same PTX differently, but
//     every float operation in it is rounded as written, so both compute the same bits (a GPU
//     test compares them). ptxas takes 13 to 22 s of CPU over the megakernel's PTX on this
//     repository's CI machine; the cubin loads without compiling anything.
//   - <stem>.sm_37.cubin (CubinArchs) is the sources compiled with the same arithmetic flags
//     (CubinFlags) for the K80 (compute capability 3.7), which cannot run compute_80 PTX. A
//     kernel a K80 cannot run (one needing bf16 tensor cores, say) is left out of that cubin by
//     wrapping it in `#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800` and is named, with
//     the reason, in the tests' leftOut table; one using an instruction sm_37 lacks, such as
//     __dp4a (sm_61), may instead give the older architectures a fallback with the same
//     results under `#if __CUDA_ARCH__ >= 610`.
//
// manifest.go records the hash of every source, PTX file and cubin, the compilers' flags, every
// entry with its parameter types, and the entries each cubin holds. The package's tests need
// neither a GPU nor nvcc. They check that the manifest is fresh, that the PTX of a bit-exact
// kernel holds no instruction outside the arithmetic contract, that the entries agree with the
// Go kernel specs, and that each cubin is a CUDA ELF file for its architecture holding the
// entries the manifest lists (every kernel of its module for an assembled cubin; for an sm_37
// one, every kernel not named in leftOut); and, with g++, they compile the CUDA sources for the
// host (testdata/host.cpp) and compare num.cuh's functions, each weight format's unit steps,
// and whole kernel launches with the Go twins bit for bit. To change a kernel, edit its .cu file and run `go generate ./ptx`
// (after tools/cudaenv.sh has installed nvcc and ptxas; about a minute on two CPUs, most of it
// ptxas on the megakernel): it also rewrites the static performance model's facts from the new
// sm_80 and sm_90 cubins (device/perf, tools/kernelfacts). tools/ptxcheck.sh is the CI check.
package ptx

//go:generate go run ../tools/mkgen
//go:generate go run ../tools/ptxgen
//go:generate go run ../tools/kernelfacts

import (
	"embed"
	"fmt"
	"slices"
	"sort"
	"strings"
)

//go:embed *.ptx *.cubin
var files embed.FS

// Entry is one kernel entry point: its PTX module, its name, and its parameter types in
// order, as PTX spells them ("u64", "u32", "s32", "f32", …).
type Entry struct {
	Module string
	Name   string
	Params []string
}

// cubinFile is a cubin's record in the manifest.
type cubinFile struct {
	sha256  string
	entries []string // sorted
}

// Module returns the PTX text of the module stem (e.g. "matvec").
func Module(stem string) (string, error) {
	if strings.ContainsAny(stem, "/.") {
		return "", fmt.Errorf("ptx: bad module name %q", stem)
	}
	b, err := files.ReadFile(stem + ".ptx")
	if err != nil {
		return "", fmt.Errorf("ptx: no module %q", stem)
	}
	return string(b), nil
}

// Modules returns the stems of every module, sorted.
func Modules() []string {
	des, err := files.ReadDir(".")
	if err != nil {
		panic(err) // the embedded directory always exists
	}
	var out []string
	for _, de := range des {
		if name, ok := strings.CutSuffix(de.Name(), ".ptx"); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Entries returns every entry point of every module, sorted by module, then name.
func Entries() []Entry {
	out := make([]Entry, len(entries))
	for i, e := range entries {
		e.Params = append([]string(nil), e.Params...)
		out[i] = e
	}
	return out
}

// Lookup returns the entry point called name.
func Lookup(name string) (Entry, bool) {
	for _, e := range entries {
		if e.Name == name {
			e.Params = append([]string(nil), e.Params...)
			return e, true
		}
	}
	return Entry{}, false
}

// Cubin returns the machine code of module stem for arch, one of CubinArchs or AssembledArchs
// (e.g. "sm_90"), and the entries it holds, sorted: for an assembled cubin every entry of the
// module, for an sm_37 one those a K80 can run. A module with no kernel for arch has no cubin.
// The driver loads a cubin as it is (cuModuleLoadData), on a GPU of exactly that major version
// and at least that minor one; package device/cuda loads one only on a GPU of exactly its
// architecture (or, for sm_37, any Kepler GPU).
func Cubin(stem, arch string) ([]byte, []string, error) {
	name := stem + "." + arch + ".cubin"
	c, ok := cubins[name]
	if !ok {
		return nil, nil, fmt.Errorf("ptx: no %s cubin for module %q", arch, stem)
	}
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, nil, fmt.Errorf("ptx: %s is in the manifest but not embedded", name)
	}
	return b, slices.Clone(c.entries), nil
}
