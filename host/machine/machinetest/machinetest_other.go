//go:build !linux

package machinetest

import (
	"os/exec"
	"testing"
)

// Group is a memory cgroup made for a test (Linux only).
type Group struct {
	Dir     string
	Version int
	Limit   int64
}

// Limited skips the test: memory cgroups are Linux's.
func Limited(t testing.TB, limit int64) *Group {
	t.Helper()
	t.Skip("a memory-limited run needs Linux's memory cgroups")
	return nil
}

// Start starts cmd (no group to put it in here).
func (g *Group) Start(cmd *exec.Cmd) error { return cmd.Start() }

// Peak is 0: no group.
func (g *Group) Peak() (int64, error) { return 0, nil }

// OOMKills is 0: no group.
func (g *Group) OOMKills() int { return 0 }
