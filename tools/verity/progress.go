package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// byteProgress reports a long job's progress in bytes (total −1: not known yet): a redrawn
// bar when w is a terminal, else one line when the job starts and one when it ends, so that a
// log file does not fill with frames. Nothing is shown until the job reports (a cached fixture
// reports nothing).
func byteProgress(w io.Writer, total int64, desc string) (update func(done, total int64), finish func()) {
	f, ok := w.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	var bar *progressbar.ProgressBar
	var start time.Time
	var last int64
	update = func(done, n int64) {
		if start.IsZero() {
			start = time.Now()
			if tty {
				bar = progressbar.DefaultBytes(total, desc)
			} else {
				fmt.Fprintf(w, "%s …\n", desc)
			}
		}
		last = done
		if bar != nil {
			if n > 0 {
				bar.ChangeMax64(n)
			}
			_ = bar.Set64(done)
		}
	}
	finish = func() {
		switch {
		case start.IsZero():
		case bar != nil:
			_ = bar.Finish()
			fmt.Fprintln(w)
		default:
			fmt.Fprintf(w, "%s: %.1f MB in %.1f s\n", desc, float64(last)/1e6, time.Since(start).Seconds())
		}
	}
	return update, finish
}
