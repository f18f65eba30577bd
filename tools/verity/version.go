package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"verity/ptx"
)

// versionString says which build this is: the module version and source revision (with
// "+dirty" for a modified tree), the Go release, and the digest of the embedded kernels.
func versionString() string {
	v, rev, dirty := "devel", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev
		if dirty {
			v += "+dirty"
		}
	}
	return fmt.Sprintf("%s (%s %s/%s, kernels %s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH, ptx.Digest())
}
