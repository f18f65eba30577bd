package machine_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"verity/host/machine"
	"verity/host/machine/machinetest"
)

// A process in a 500 MB memory cgroup has a budget of at most 500 MB, whatever the host has.
func TestBudgetInCgroup(t *testing.T) {
	const limit = 500 << 20
	g := machinetest.Limited(t, limit)
	cmd := exec.Command(os.Args[0], "-test.run=^TestBudgetChild$", "-test.v")
	cmd.Env = append(os.Environ(), "VERITY_BUDGET_CHILD=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	_, js, ok := strings.Cut(out.String(), "memory: ")
	if !ok {
		t.Fatalf("no memory line: %s", out.String())
	}
	js, _, _ = strings.Cut(js, "\n")
	var m machine.Memory
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	if m.Cgroup == nil || m.Cgroup.LimitBytes != limit || m.BudgetBytes > limit || m.BudgetBytes < limit*8/10 {
		t.Fatalf("in a %d MB cgroup (v%d): %+v, cgroup %+v", limit>>20, g.Version, m, m.Cgroup)
	}
	t.Logf("in a %d MB cgroup (v%d) the budget is %s of the host's %s available", limit>>20, g.Version,
		machine.HumanBytes(m.BudgetBytes), machine.HumanBytes(m.AvailableBytes))
}

// TestBudgetChild prints the memory it sees (run by TestBudgetInCgroup inside the group).
func TestBudgetChild(t *testing.T) {
	if os.Getenv("VERITY_BUDGET_CHILD") == "" {
		t.Skip("run by TestBudgetInCgroup")
	}
	m, err := machine.ReadMemory()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	os.Stdout.WriteString("memory: " + string(b) + "\n")
}
