package perf

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"testing"

	"verity/device"
	"verity/device/devicetest"
	_ "verity/device/kernels" // registers the kernels
	"verity/ptx"
)

// TestFactsFresh: the facts files were computed from the committed cubins (regenerate with go
// generate ./ptx), for every module and every entry.
func TestFactsFresh(t *testing.T) {
	for _, arch := range Archs() {
		fs := factSets()[arch]
		if len(fs.Cubins) != len(ptx.Modules()) {
			t.Errorf("sm_%d facts cover %d cubins, ptx has %d modules: run go generate ./ptx", arch, len(fs.Cubins), len(ptx.Modules()))
		}
		for _, stem := range ptx.Modules() {
			name := fmt.Sprintf("sm_%d", arch)
			data, _, err := ptx.Cubin(stem, name)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.Sum256(data)
			if got := fs.Cubins[stem+"."+name+".cubin"]; got != hex.EncodeToString(h[:]) {
				t.Errorf("facts_sm%d.json is stale for %s.%s.cubin: run go generate ./ptx", arch, stem, name)
			}
		}
		for _, e := range ptx.Entries() {
			if _, err := KernelFacts(arch, e.Name); err != nil {
				t.Error(err)
			}
		}
		if len(fs.Kernels) != len(ptx.Entries()) {
			t.Errorf("sm_%d: facts for %d kernels, %d entries in the PTX", arch, len(fs.Kernels), len(ptx.Entries()))
		}
	}
}

// TestEveryKernelModelled: every registered kernel has a traffic function and the model reads
// every one of its real-size launches on every card with facts.
func TestEveryKernelModelled(t *testing.T) {
	for _, k := range device.Kernels() {
		if !HasTraffic(k.ArgsType()) {
			t.Errorf("%s: no traffic function for %v (device/perf/families.go)", k.Entry(), k.ArgsType())
			continue
		}
		for _, name := range []string{"H200", "H100", "A100"} {
			for _, s := range devicetest.RealShapes(k.Entry()) {
				p, err := Predict(Cards[name], k, s.Args)
				if err != nil {
					t.Errorf("%s %s on %s: %v", k.Entry(), s.Name, name, err)
					continue
				}
				if !(p.TimeUS > 0 && p.TimeUS >= p.FloorUS && p.Pct > 0 && p.Pct <= 100) || p.Bytes <= 0 {
					t.Errorf("%s %s on %s: %+v", k.Entry(), s.Name, name, p)
				}
			}
		}
	}
}

// TestTrafficCountsEveryParam: a traffic function names only arguments of its kernel.
func TestTrafficCountsEveryParam(t *testing.T) {
	for _, k := range device.Kernels() {
		for _, s := range devicetest.RealShapes(k.Entry()) {
			tr, err := TrafficOf(k, s.Args)
			if err != nil {
				t.Error(err)
				continue
			}
			fields := map[string]bool{}
			at := reflect.TypeOf(s.Args)
			for i := 0; i < at.NumField(); i++ {
				fields[at.Field(i).Name] = true
			}
			for _, st := range tr.Streams {
				if !fields[st.Param] {
					t.Errorf("%s: traffic names %q, not a field of %v", k.Entry(), st.Param, at)
				}
			}
		}
	}
}
