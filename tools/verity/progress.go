package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// byteProgress reports a long job's progress in bytes (total −1: not known yet): a redrawn
// bar when w is a terminal, once the job has run barDelay (a shorter one shows nothing), else
// one line when the job starts and one when it ends, so that a log file does not fill with
// frames. Nothing is shown until the job reports (a cached fixture reports nothing).
func byteProgress(w io.Writer, total int64, desc string) (update func(done, total int64), finish func()) {
	f, ok := w.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	var bar *progressbar.ProgressBar
	var start time.Time
	var last int64
	update = func(done, n int64) {
		if start.IsZero() {
			start = time.Now()
			if !tty {
				fmt.Fprintf(w, "%s …\n", desc)
			}
		}
		last = done
		if tty && bar == nil && time.Since(start) >= barDelay {
			bar = progressbar.DefaultBytes(total, desc)
		}
		if bar != nil {
			if n > 0 {
				bar.ChangeMax64(n)
			}
			_ = bar.Set64(done)
		}
	}
	finish = func() {
		switch {
		case start.IsZero(), tty && bar == nil:
		case bar != nil:
			_ = bar.Finish()
			fmt.Fprintln(w)
		default:
			fmt.Fprintf(w, "%s: %.1f MB in %.1f s\n", desc, float64(last)/1e6, time.Since(start).Seconds())
		}
	}
	return update, finish
}

// barDelay is how long a job runs before its bar appears: shorter jobs show none (a
// variable for tests).
var barDelay = 2 * time.Second

// jobProgress reports a job of a known number of steps (fixtures checked, bench runs): on a
// terminal, a bar that appears once the job has run barDelay and is redrawn every second; on
// another file (a log), one line as each step starts and one as it ends if asked; nothing into
// a writer that is not a file (the CLI run in-process) unless asked.
type jobProgress struct {
	mu          sync.Mutex
	w           io.Writer
	tty, lines  bool
	desc        string
	total, done int
	what        string
	start, step time.Time
	bar         *progressbar.ProgressBar
	stop        chan struct{}
	finished    bool
}

// newJobProgress starts reporting a job of total steps to w. logLines: lines on a file that is
// not a terminal (a job whose output is not already a line per step); lines: lines whatever w
// is (llama-bench's --progress).
func newJobProgress(w io.Writer, total int, desc string, logLines, lines bool) *jobProgress {
	j := &jobProgress{w: w, desc: desc, total: total, start: time.Now(), stop: make(chan struct{})}
	f, isFile := w.(*os.File)
	j.tty = !lines && isFile && term.IsTerminal(int(f.Fd()))
	j.lines = lines || (logLines && isFile && !j.tty)
	if j.tty {
		go j.tick()
	}
	return j
}

// tick draws the bar from barDelay on, once a second, until the job finishes.
func (j *jobProgress) tick() {
	t := time.NewTimer(barDelay)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
		}
		j.mu.Lock()
		if j.bar == nil {
			j.bar = progressbar.NewOptions(j.total, progressbar.OptionSetWriter(j.w), progressbar.OptionSetDescription(j.desc),
				progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(true),
				progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
			_ = j.bar.Set(j.done)
		}
		j.bar.Describe(j.desc + " " + j.what)
		_ = j.bar.RenderBlank()
		j.mu.Unlock()
		t.Reset(time.Second)
	}
}

// Start says step what begins.
func (j *jobProgress) Start(what string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.what, j.step = what, time.Now()
	if j.lines {
		fmt.Fprintf(j.w, "%s %d/%d: %s …\n", j.desc, j.done+1, j.total, what)
	}
}

// Done says the step begun last has ended.
func (j *jobProgress) Done() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.done++
	if j.lines {
		fmt.Fprintf(j.w, "%s %d/%d: %s: %.1f s\n", j.desc, j.done, j.total, j.what, time.Since(j.step).Seconds())
	}
	if j.bar != nil {
		_ = j.bar.Set(j.done)
	}
}

// Above runs print, which writes to the terminal the bar is on, with the bar taken off (it
// returns on the next second's redraw).
func (j *jobProgress) Above(print func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.bar != nil {
		_ = j.bar.Clear()
	}
	print()
}

// Finish ends the report, taking the bar away (again: nothing).
func (j *jobProgress) Finish() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.finished {
		return
	}
	j.finished = true
	close(j.stop)
	if j.bar != nil {
		_ = j.bar.Finish()
		j.bar = nil
	}
}
