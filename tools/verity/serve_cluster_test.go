package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Three replicas behind HAProxy with the shipped configuration (host/serve/deploy): sessions
// and completions through it, one replica stopped (SIGTERM) mid-run. Nothing in flight is
// lost: the stopped replica drains — its open sessions go on there until their clients close
// them (HAProxy keeps routing them to it), so none is ever told 404 and started over — and
// every output equals the request's alone (sessions on the other replicas go on unchanged);
// the stopped replica exits 0, and new work started after the signal goes only to the others.
// Needs Debian's haproxy (.ci/run installs it); skipped without it.
func TestServeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test")
	}
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed (apt-get install haproxy): the replica test needs it")
	}
	d := loadSeconds(t, 6)
	model := tinyModel(t, "tiny-llama-q8_0")
	var rs []*replica
	for _, name := range []string{"r1", "r2", "r3"} {
		rs = append(rs, startReplica(t, name, model, append(loadReplicaArgs, "--client-header", "X-Client")...))
	}
	lb := freeAddr(t)
	cfg, err := filepath.Abs("../../host/serve/deploy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	hp := exec.Command(haproxy, "-f", cfg, "-db")
	hp.Env = append(os.Environ(), "VERITY_LB="+lb, "VERITY_R1="+rs[0].addr, "VERITY_R2="+rs[1].addr, "VERITY_R3="+rs[2].addr)
	hlog, _ := os.Create(filepath.Join(t.TempDir(), "haproxy.log"))
	hp.Stdout, hp.Stderr = hlog, hlog
	if err := hp.Start(); err != nil {
		t.Fatal(err)
	}
	hdone := make(chan error, 1)
	go func() { hdone <- hp.Wait() }()
	t.Cleanup(func() { hp.Process.Kill(); <-hdone; hlog.Close() })
	base := "http://" + lb
	waitReady(t, base, hdone)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) { // every replica checked up
		seen := map[string]bool{}
		for range 12 {
			if resp, err := http.Get(base + "/v1/models"); err == nil {
				seen[resp.Header.Get("X-Verity-Replica")] = true
				resp.Body.Close()
			}
		}
		if len(seen) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy reaches only %v", seen)
		}
	}
	small, big := loadTasks()
	want := references(t, base, small, big)

	var mu sync.Mutex
	var stopped time.Time // when r2 was signalled
	after := map[string]int{}
	openOnR2 := 0    // sessions on r2 that have not ended
	openedOnR2 := 0  // sessions opened on r2
	hadOpen := false // r2 held open sessions when it was signalled
	drained := 0     // verify rounds the stopped replica ran after the signal
	hooks := loadHooks{
		open: func(replica string, began time.Time) { // a session opened or a completion served
			mu.Lock()
			defer mu.Unlock()
			if !stopped.IsZero() && began.After(stopped) {
				after[replica]++
			}
		},
		verify: func(replica string) {
			mu.Lock()
			defer mu.Unlock()
			if !stopped.IsZero() && replica == "r2" {
				drained++
			}
		},
	}
	hooks.session = func(replica string) func() { // sessions open on r2, from their opening to their end
		if replica != "r2" {
			return nil
		}
		mu.Lock()
		openOnR2++
		openedOnR2++
		mu.Unlock()
		return func() {
			mu.Lock()
			openOnR2--
			mu.Unlock()
		}
	}
	go func() {
		time.Sleep(d / 3)
		// signal r2 as soon as a session opens on it (waiting up to d/3 more), so that the
		// drain is tested, not merely an idle stop: a session just opened has all its verify
		// rounds (of 16 or 40 tokens) ahead, which r2 must run after the signal
		mu.Lock()
		n0 := openedOnR2
		mu.Unlock()
		for until := time.Now().Add(d / 3); time.Now().Before(until); time.Sleep(time.Millisecond) {
			mu.Lock()
			n := openedOnR2
			mu.Unlock()
			if n > n0 {
				break
			}
		}
		mu.Lock()
		stopped = time.Now()
		hadOpen = openOnR2 > 0
		mu.Unlock()
		rs[1].cmd.Process.Signal(syscall.SIGTERM)
	}()
	stats := drive(t, base, 48, d, small, big, want, true, hooks)
	stats.check(t, 200, 204, 410, 429, 503) // no 404: no session was lost
	if stats.lost != 0 {
		t.Errorf("%d sessions lost: their replica no longer had them", stats.lost)
	}
	select {
	case err := <-rs[1].done:
		if err != nil {
			t.Errorf("the stopped replica: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("the stopped replica has not exited 30 s after the load")
	}
	b, _ := os.ReadFile(rs[1].log)
	if !strings.Contains(string(b), "verity: stopped") {
		t.Errorf("the stopped replica's log:\n%s", b)
	}
	mu.Lock()
	defer mu.Unlock()
	if after["r2"] > 0 || after["r1"]+after["r3"] == 0 {
		t.Errorf("new work after the signal went to %v", after)
	}
	if hadOpen && drained == 0 { // its sessions open at the signal went on there
		t.Error("the stopped replica held open sessions at the signal but ran no verify round after it")
	}
	if !hadOpen {
		t.Log("r2 held no open session in the time it was watched: its stop was not a drain of sessions")
	}
	t.Logf("%v: %d requests (%v), %d tasks done, %d refusals retried, %d evictions; r2 ran %d rounds of its open sessions after the signal; new work after the signal: %v",
		d, stats.requests.Load(), stats.byStatus, stats.completed, stats.refused, stats.evicted, drained, after)
}
