package bench

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/klauspost/cpuid/v2"

	"verity/device/kernels"
)

// Provenance says what produced a result, so that rows from different builds and machines
// can be told apart and compared.
type Provenance struct {
	Verity  string `json:"verity"`    // the module version and VCS revision of the binary ("devel" if unknown)
	Dirty   bool   `json:"vcs_dirty"` // built from a modified tree
	Go      string `json:"go"`
	OS      string `json:"os"`
	CPU     string `json:"cpu"`     // brand string, cores and threads
	Device  string `json:"device"`  // where the kernels ran (the backend's name)
	Twin    string `json:"twin"`    // the CPU twin's matvec path (vector instruction set or portable Go)
	Time    string `json:"time"`    // RFC 3339, when the row was measured
	Command string `json:"command"` // the command line, if the caller sets it
}

// Host returns the provenance of this binary on this machine, now, for backend device.
func Host(device string) Provenance {
	p := Provenance{Verity: "devel", Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		CPU:    fmt.Sprintf("%s (%d cores, %d threads)", cpuid.CPU.BrandName, cpuid.CPU.PhysicalCores, cpuid.CPU.LogicalCores),
		Device: device, Twin: kernels.TwinPath(), Time: time.Now().UTC().Format(time.RFC3339)}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			p.Verity = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				p.Verity += " " + s.Value
			case "vcs.modified":
				p.Dirty = s.Value == "true"
			}
		}
	}
	return p
}
