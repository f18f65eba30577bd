package main

import (
	"fmt"
	"time"
)

// serveLimits are the numeric settings of verity serve that need checking before a model is
// loaded: each one's meaning at 0 and below is its flag's help.
type serveLimits struct {
	context, sessions, step, maxNodes, queue, clientQueue int
	maxBody                                               int64
	idle, queueWait, grace, readTimeout, writeTimeout     time.Duration
	connIdle, requestTimeout                              time.Duration
}

// check refuses settings that have no meaning (negative counts and durations, no sessions, a
// step too small for a draft) instead of serving with them or failing later inside the engine.
func (l serveLimits) check() error {
	for _, c := range []struct {
		flag string
		v    int64
		min  int64
		want string
	}{
		{"--context", int64(l.context), 0, "0 (the model's own, as far as memory allows) or more positions"},
		{"--sessions", int64(l.sessions), 1, "at least 1 session"},
		{"--step", int64(l.step), 2, "at least 2 rows (the next token and one draft node)"},
		{"--max-nodes", int64(l.maxNodes), 0, "0 (the step − 1) or more draft nodes"},
		{"--queue", int64(l.queue), 0, "0 (the default, 256) or more waiting requests"},
		{"--client-queue", int64(l.clientQueue), 0, "0 (a quarter of --queue) or more waiting requests"},
		{"--max-body", l.maxBody, 0, "0 (room for a batch of full prompts) or more bytes"},
	} {
		if c.v < c.min {
			return fmt.Errorf("%s %d: want %s", c.flag, c.v, c.want)
		}
	}
	if l.maxNodes > l.step-1 {
		return fmt.Errorf("--max-nodes %d: a verify step holds the next token and at most --step − 1 = %d draft nodes", l.maxNodes, l.step-1)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		want string
	}{
		{"--idle", l.idle, "0 (never) or a positive duration"},
		{"--queue-wait", l.queueWait, "0 (the default, 30s) or a positive duration"},
		{"--grace", l.grace, "0 (stop at once) or a positive duration"},
		{"--read-timeout", l.readTimeout, "0 (none) or a positive duration"},
		{"--write-timeout", l.writeTimeout, "0 (none) or a positive duration"},
		{"--conn-idle-timeout", l.connIdle, "0 (--read-timeout) or a positive duration"},
		{"--request-timeout", l.requestTimeout, "0 (none) or a positive duration"},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s %v: want %s", d.flag, d.v, d.want)
		}
	}
	return nil
}
