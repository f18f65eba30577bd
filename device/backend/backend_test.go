package backend

import (
	"errors"
	"strings"
	"testing"

	"verity/device"
	"verity/device/cuda"
)

func TestOpen(t *testing.T) {
	for _, tc := range []struct{ spec, name, err string }{
		{"", "cpu (2 threads)", ""},
		{"cpu", "cpu (2 threads)", ""},
		{"ptxvm", "ptxvm", ""},
		{"ptxvm-weak:7", "ptxvm", ""},
		{"cpu, ptxvm", "cpu (2 threads) → ptxvm", ""},
		{"tpu", "", "want cpu, ptxvm, ptxvm-weak[:SEED], cuda or cuda:N"},
		{"cpu,tpu", "", "want cpu"},
		{"cuda:x", "", "device number"},
		{"cuda:-1", "", "device number"},
		{"ptxvm-weak:x", "", "decimal seed"},
	} {
		bs, err := OpenList(tc.spec, 2)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error saying %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if got := Names(bs); !strings.HasPrefix(got, tc.name) {
			t.Errorf("%q: %q, want %q", tc.spec, got, tc.name)
		}
		CloseAll(bs)
	}
	// Without the cuda tag, cuda is an error that says so.
	if cuda.Count() == 0 {
		if _, err := cuda.Open(0); errors.Is(err, device.ErrNotBuilt) {
			if _, err := Open("cuda", 1); !errors.Is(err, device.ErrNotBuilt) || !strings.Contains(err.Error(), "-tags cuda") {
				t.Errorf("cuda without the tag: %v", err)
			}
		}
	}
}
