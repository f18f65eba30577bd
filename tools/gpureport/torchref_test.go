package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"verity/fixtures"
)

// python returns python3, or skips the test where there is none.
func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: tools/torchref.py is not checked here")
	}
	return p
}

// tools/torchref.py compiles, and without torch it says so and exits 3 (what the runner
// reports as "unavailable") rather than failing.
func TestTorchrefCompiles(t *testing.T) {
	py := python(t)
	if out, err := exec.Command(py, "-c", "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')", "../torchref.py").CombinedOutput(); err != nil {
		t.Fatalf("torchref.py does not compile: %v\n%s", err, out)
	}
	if exec.Command(py, "-c", "import torch").Run() == nil {
		t.Skip("torch is installed here: the no-torch path is not checked")
	}
	out, err := exec.Command(py, "../torchref.py", "--out", t.TempDir()+"/t.json").Output()
	ee, ok := err.(*exec.ExitError)
	var res map[string]any
	if !ok || ee.ExitCode() != 3 || json.Unmarshal(out, &res) != nil || res["ok"] != false || !strings.Contains(fmt.Sprint(res["error"]), "no torch") {
		t.Errorf("without torch: %v, %s", err, out)
	}
}

// The peer's model is the llama-1b-bf16 fixture's shape: the same matrices, the same parameter
// count; its tree is a tree (every parent earlier, depths and ancestor mask consistent).
func TestTorchrefPlan(t *testing.T) {
	py := python(t)
	out, err := exec.Command(py, "../torchref.py", "--plan", "--seed", "7").Output()
	if err != nil {
		t.Fatalf("--plan: %v", err)
	}
	var plan struct {
		Config   map[string]float64
		Params   int64
		Weight   int64 `json:"weight_bytes"`
		KV       int64 `json:"kv_read_bytes"`
		Matrices []struct {
			Name              string
			Rows, Cols, Count int64
		}
		Tree struct {
			Parents, Depth []int
			Mask           [][]bool
		}
	}
	if err := json.Unmarshal(out, &plan); err != nil {
		t.Fatalf("--plan printed %s: %v", out, err)
	}
	s, err := fixtures.Lookup("llama-1b-bf16")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Params != s.Params() || plan.Weight != 2*s.Params() {
		t.Errorf("the peer has %d parameters (%d bytes), the fixture %d", plan.Params, plan.Weight, s.Params())
	}
	dims := map[string][]int64{}
	counts := map[string]int64{}
	for _, tn := range s.Tensors() {
		name := tn.Name
		if i := strings.Index(name, "."); strings.HasPrefix(name, "blk.") && i > 0 {
			name = name[strings.Index(name[i+1:], ".")+i+2:]
		}
		name = strings.TrimSuffix(name, ".weight")
		if name == "token_embd" && s.Tied {
			name = "output"
		}
		dims[name] = tn.Dims
		counts[name]++
	}
	for _, m := range plan.Matrices {
		if d := dims[m.Name]; len(d) != 2 || d[0] != m.Cols || d[1] != m.Rows || counts[m.Name] != m.Count {
			t.Errorf("%s: the peer's %d×%d (%d of them), the fixture's %v (%d)", m.Name, m.Rows, m.Cols, m.Count, d, counts[m.Name])
		}
	}
	if int(plan.Config["layers"]) != s.NLayer || int(plan.Config["d"]) != s.NEmbd || int(plan.Config["vocab"]) != s.NVocab {
		t.Errorf("config %v, fixture %d layers, d %d, vocab %d", plan.Config, s.NLayer, s.NEmbd, s.NVocab)
	}
	if want := int64(16 * 2 * 8 * (2048 + 8) * 64 * 2); plan.KV != want {
		t.Errorf("K/V bytes read %d, want %d", plan.KV, want)
	}
	tr := plan.Tree
	if len(tr.Parents) != 8 || tr.Parents[0] != -1 {
		t.Fatalf("tree %+v", tr)
	}
	for i := 1; i < 8; i++ {
		p := tr.Parents[i]
		if p < 0 || p >= i || tr.Depth[i] != tr.Depth[p]+1 {
			t.Errorf("node %d: parent %d, depth %d", i, p, tr.Depth[i])
		}
		for j := range 8 {
			anc := j == i
			for k := i; k >= 0 && !anc; k = tr.Parents[k] {
				anc = k == j
			}
			if tr.Mask[i][j] != anc {
				t.Errorf("mask[%d][%d] = %v", i, j, tr.Mask[i][j])
			}
		}
	}
}
