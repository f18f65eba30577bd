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
// bar when standard error is a terminal, else one line when it starts and one when it ends, so
// that a log file does not fill with frames.
func byteProgress(w io.Writer, total int64, desc string) (update func(done, total int64), finish func()) {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.DefaultBytes(total, desc)
		return func(done, total int64) {
				if total > 0 {
					bar.ChangeMax64(total)
				}
				_ = bar.Set64(done)
			}, func() {
				_ = bar.Finish()
				fmt.Fprintln(w)
			}
	}
	start := time.Now()
	var last int64
	fmt.Fprintf(w, "%s …\n", desc)
	return func(done, _ int64) { last = done }, func() {
		fmt.Fprintf(w, "%s: %.1f MB in %.1f s\n", desc, float64(last)/1e6, time.Since(start).Seconds())
	}
}
