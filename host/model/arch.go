package model

import (
	"fmt"
	"sort"
	"strings"

	"verity/host/gguf"
)

// An Arch compiles a GGUF file of one architecture into a Program.
type Arch func(f *gguf.File) (*Program, error)

var archs = map[string]Arch{}

// Register adds an architecture under its general.architecture name (at init time).
func Register(name string, a Arch) {
	if _, dup := archs[name]; dup {
		panic("model: architecture " + name + " registered twice")
	}
	archs[name] = a
}

// Architectures lists the supported general.architecture names.
func Architectures() []string {
	out := make([]string, 0, len(archs))
	for n := range archs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Build compiles a GGUF model into a Program.
func Build(f *gguf.File) (*Program, error) {
	name, err := f.String("general.architecture")
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	a, ok := archs[name]
	if !ok {
		return nil, fmt.Errorf("model: architecture %q is not supported (supported: %s)", name, strings.Join(Architectures(), ", "))
	}
	p, err := a(f)
	if err != nil {
		return nil, err
	}
	fuseResiduals(p)
	fuseNormConvert(p)
	fuseBinaryConvert(p)
	fuseAttentionConvert(p)
	fuseRopeStore(p)
	return p, nil
}
