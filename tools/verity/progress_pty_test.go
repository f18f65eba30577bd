//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// openPTY opens a pseudo-terminal: what is written to tty can be read from master.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if !term.IsTerminal(int(s.Fd())) {
		t.Fatal("the pseudo-terminal is not a terminal")
	}
	return m, s
}

// On a terminal jobProgress draws no lines: a job shorter than barDelay shows nothing, a
// longer one a bar (count, the step running) that rows printed Above do not tear, cleared
// when the job finishes.
func TestJobProgressBar(t *testing.T) {
	defer func(d time.Duration) { barDelay = d }(barDelay)
	barDelay = 100 * time.Millisecond
	master, tty := openPTY(t)
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(master) // until the terminal is closed (EIO)
		got <- string(b)
	}()
	fast := newJobProgress(tty, 2, "quick", true, false)
	fast.Start("a")
	fast.Done()
	fast.Finish()
	j := newJobProgress(tty, 2, "check", true, false)
	j.Start("tiny-one")
	time.Sleep(3 * barDelay)
	j.Above(func() { fmt.Fprintln(tty, "row tiny-one") })
	j.Done()
	j.Start("tiny-two")
	time.Sleep(1200 * time.Millisecond) // a redraw, once a second
	j.Above(func() { fmt.Fprintln(tty, "row tiny-two") })
	j.Done()
	j.Finish()
	tty.Close()
	out := <-got
	master.Close()
	if strings.Contains(out, "quick") || strings.Contains(out, "…") {
		t.Errorf("lines or a bar for a short job on a terminal: %q", out)
	}
	for _, want := range []string{"check tiny-one", "0/2", "row tiny-one", "check tiny-two", "1/2", "row tiny-two"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q: %q", want, out)
		}
	}
	if i, k := strings.Index(out, "row tiny-one"), strings.Index(out, "check tiny-two"); i < 0 || k < i {
		t.Errorf("the bar did not move on: %q", out)
	}
	// The rows start at the beginning of a line: the bar was cleared before each.
	for _, row := range []string{"row tiny-one", "row tiny-two"} {
		i := strings.Index(out, row)
		if i > 0 && !bytes.ContainsAny([]byte{out[i-1]}, "\r\n") {
			t.Errorf("%q printed after the bar on its line: %q", row, out[max(0, i-40):i+len(row)])
		}
	}
}
