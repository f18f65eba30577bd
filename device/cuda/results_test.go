//go:build cuda

package cuda_test

import (
	"encoding/json"
	"os"
	"testing"

	"verity/device/cuda"
)

// record writes one machine-readable result: a log line "RESULT {json}" and, when
// VERITY_RESULTS names a file, the same JSON as a line appended to it (tools/gpucheck.sh's
// runner collects that file into its report). The JSON is {"kind", "test", "data"}.
func record(t *testing.T, kind string, data any) {
	t.Helper()
	line, err := json.Marshal(struct {
		Kind string `json:"kind"`
		Test string `json:"test"`
		Data any    `json:"data"`
	}{kind, t.Name(), data})
	if err != nil {
		t.Fatalf("record %s: %v", kind, err)
	}
	t.Logf("RESULT %s", line)
	path := os.Getenv("VERITY_RESULTS")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Errorf("record %s: %v", kind, err)
		return
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Errorf("record %s: %v", kind, err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("record %s: %v", kind, err)
	}
}

// openCUDA is open with the concrete backend, for the calls beyond device.Backend.
func openCUDA(t *testing.T) *cuda.Backend {
	t.Helper()
	return open(t).(*cuda.Backend)
}
