package machine

import (
	"os"
	"path/filepath"
	"testing"
)

// ReadSpeed measures a file of a device once, the readMethod way, and keeps it; a cached
// measurement made another way (an older cache's O_DIRECT) is measured again.
func TestReadSpeed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(path, make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Machine{}
	d, err := m.ReadSpeed(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Method != readMethod || d.Bytes != 3<<20 || d.BytesPerSec <= 0 || d.FaultBytesPerSec <= 0 || d.Device != deviceOf(path) {
		t.Fatalf("first measurement %+v", d)
	}
	m.Disks[0].BytesPerSec = 1 // a kept measurement is returned as it is
	if d, _ := m.ReadSpeed(path); d.BytesPerSec != 1 {
		t.Errorf("kept measurement not reused: %+v", d)
	}
	m.Disks[0].Method = "O_DIRECT" // measured another way: measured again, replacing it
	d, err = m.ReadSpeed(path)
	if err != nil {
		t.Fatal(err)
	}
	if d.Method != readMethod || d.BytesPerSec == 1 || len(m.Disks) != 1 {
		t.Errorf("a measurement made another way was kept: %+v (%d disks)", d, len(m.Disks))
	}
	if _, err := m.ReadSpeed(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing file has a read speed")
	}
}
