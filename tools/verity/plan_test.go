package main

import (
	"encoding/json"
	"strings"
	"testing"

	"verity/host/machine"
)

func TestInfoJSON(t *testing.T) {
	path := tinyModel(t, "tiny-llama-q8_0")
	out, err := run(t, "info", "--json", "--model", path)
	if err != nil {
		t.Fatal(err)
	}
	var m machine.Facts
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if m.CPU.LogicalCores < 1 || m.Memory.BudgetBytes <= 0 || len(m.Copies) == 0 || m.Copies[0].BytesPerSec <= 0 || m.Identity == "" {
		t.Errorf("info --json: %s", out)
	}
	if len(m.Disks) == 0 || m.Disks[0].BytesPerSec <= 0 {
		t.Errorf("no read speed measured for --model: %+v", m.Disks)
	}
	text, err := run(t, "info")
	if err != nil || !strings.Contains(text, "budget") || !strings.Contains(text, m.Identity) {
		t.Errorf("info: %v %q", err, text)
	}
}
