//go:build linux

// Package machinetest runs test processes under a memory limit: a child memory cgroup (the v1
// memory controller or v2's memory.max, whichever the machine has and lets this process write)
// that a test creates, starts a command in, and removes.
package machinetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"verity/host/machine"
)

// Group is a memory cgroup made for a test.
type Group struct {
	Dir     string
	Version int
	Limit   int64
}

var groups atomic.Int64

// Limited makes a child memory cgroup of the process's own, limited to limit bytes, removed
// when the test ends. It skips the test, saying why, where there is no memory cgroup this
// process may create and limit (not root, or neither controller mounted writable).
func Limited(t testing.TB, limit int64) *Group {
	t.Helper()
	own, version, err := machine.MemoryCgroup()
	if err != nil || version == 0 {
		t.Skipf("no memory cgroup here (%v): a memory-limited run needs the cgroup v1 memory controller or cgroup v2", err)
	}
	g := &Group{Dir: filepath.Join(own, fmt.Sprintf("verity-test-%d-%d", os.Getpid(), groups.Add(1))), Version: version, Limit: limit}
	if err := os.Mkdir(g.Dir, 0o755); err != nil {
		t.Skipf("cannot create a memory cgroup under %s (run as root to test under a memory limit): %v", own, err)
	}
	t.Cleanup(func() { g.remove(t) })
	files := []string{"memory.limit_in_bytes"}
	if version == 2 {
		files = []string{"memory.max", "memory.swap.max"}
	} else if _, err := os.Stat(filepath.Join(g.Dir, "memory.memsw.limit_in_bytes")); err == nil {
		files = append(files, "memory.memsw.limit_in_bytes") // no swapping past the limit either
	}
	for i, f := range files {
		v := strconv.FormatInt(limit, 10)
		if f == "memory.swap.max" {
			v = "0"
		}
		if err := os.WriteFile(filepath.Join(g.Dir, f), []byte(v), 0o644); err != nil && i == 0 {
			t.Skipf("cannot limit the cgroup %s: %v", g.Dir, err)
		}
	}
	return g
}

// Start starts cmd inside the group: on cgroup v2 the child is created in it
// (CLONE_INTO_CGROUP); on v1 through a shell that moves itself in before it execs the command.
func (g *Group) Start(cmd *exec.Cmd) error {
	if g.Version == 2 {
		fd, err := syscall.Open(g.Dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		return cmd.Start()
	}
	args := append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, g.Dir, cmd.Path}, cmd.Args[1:]...)
	sh, err := exec.LookPath("sh")
	if err != nil {
		return err
	}
	cmd.Path, cmd.Args = sh, append([]string{"sh"}, args...)
	return cmd.Start()
}

// Peak is the most memory the group has been charged (page cache included), where the
// kernel reports it.
func (g *Group) Peak() (int64, error) {
	f := "memory.max_usage_in_bytes"
	if g.Version == 2 {
		f = "memory.peak"
	}
	b, err := os.ReadFile(filepath.Join(g.Dir, f))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// OOMKills is how many processes the kernel killed in the group for want of memory.
func (g *Group) OOMKills() int {
	f, key := "memory.oom_control", "oom_kill "
	if g.Version == 2 {
		f, key = "memory.events", "oom_kill "
	}
	b, err := os.ReadFile(filepath.Join(g.Dir, f))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func (g *Group) remove(t testing.TB) {
	// the group is empty once its processes have exited; its page cache charges move up
	var err error
	for range 100 {
		if err = os.Remove(g.Dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
	}
	t.Logf("removing the cgroup %s: %v", g.Dir, err)
}
