package main

import (
	"os"
	"os/signal"
	"syscall"

	"verity/host/atomicfile"
)

// abortOnSignal makes an interrupt (SIGINT, SIGTERM, SIGHUP) remove the files this process is
// still writing (host/atomicfile: a quantised model, a fixture, a logits file) before it ends
// with the shell's status for the signal, 128 + its number, so that no partial file is left.
// The returned function undoes it.
func abortOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			atomicfile.AbortAll()
			code := 1
			if n, ok := s.(syscall.Signal); ok {
				code = 128 + int(n)
			}
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
