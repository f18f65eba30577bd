package ptx

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"sort"
)

// Digest returns a short hash of every embedded module — PTX and cubins, by name and content
// — so that a build's kernels can be named in a version string or a result row.
func Digest() string {
	names, err := fs.Glob(files, "*")
	if err != nil {
		panic(err) // the pattern is valid
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			panic(err) // embedded files are readable
		}
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}
