// Package ptx holds Verity's CUDA kernels as PTX text, compiled from the sources in src/ and
// committed, so that building and testing need no CUDA toolchain.
//
// Each src/<stem>.cu compiles to <stem>.ptx, the PTX module of that stem (a kernel spec's
// ModuleName in package device); its extern "C" kernels are the module's entry points, named
// as the specs' EntryName, with one PTX parameter per field of the spec's argument struct
// (.u64 for Ptr, int64 and uint64, .u32 or .s32 for int32 and uint32, .f32 for float32).
// src/num.cuh is the device side of package device/num. The PTX is generated for compute_80
// with IEEE rounding everywhere (see Flags) and loads on any GPU from sm_80 on.
//
// manifest.go records the hash of every source and every PTX file, the compiler and its flags,
// and every entry with its parameter types. The package's tests need neither a GPU nor nvcc.
// They check that the manifest is fresh, that the PTX of a bit-exact kernel holds no
// instruction outside the arithmetic contract, and that the entries agree with the Go kernel
// specs; and, with g++, they compile the CUDA sources for the host (testdata/host.cpp) and
// compare num.cuh's functions, each weight format's unit steps, and whole kernel launches with
// the Go twins bit for bit. To change a kernel, edit its .cu file and run `go generate ./ptx`
// (after tools/cudaenv.sh has installed nvcc); tools/ptxcheck.sh is the CI check.
package ptx

//go:generate go run ../tools/ptxgen

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed *.ptx
var files embed.FS

// Entry is one kernel entry point: its PTX module, its name, and its parameter types in
// order, as PTX spells them ("u64", "u32", "s32", "f32", …).
type Entry struct {
	Module string
	Name   string
	Params []string
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
