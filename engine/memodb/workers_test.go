package memodb

import (
	"regexp"
	"testing"
	"time"

	codec "switchyard/codec/memodb"
	"switchyard/engine/internal/servertest"
)

// listed polls f's listing, bounded, until it has n lines: a READY is
// served on the server's receivers, with no reply to wait for while the
// worker waits for a job.
func (f *fixture) listed(n int) []string {
	f.t.Helper()
	for deadline := time.Now().Add(waitFor); ; time.Sleep(time.Millisecond) {
		lines := servertest.WorkerLines(f.srv.ListWorkers())
		if len(lines) == n {
			return lines
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("listing %q, want %d lines", lines, n)
		}
	}
}

func TestListWorkers(t *testing.T) {
	f := start(t, Config{})
	if got := f.listed(0); got != nil {
		t.Fatalf("no worker: %q", got)
	}
	a := f.peer(f.dial())
	a.send(ready("a", "b"))
	f.listed(1)
	c := f.peer(f.dial())
	c.send(ready("c"))
	got := f.listed(2)
	// Newest first.
	for i, re := range []*regexp.Regexp{
		regexp.MustCompile(`^-1 memodb worker-\d+ : c$`),
		regexp.MustCompile(`^-1 memodb worker-\d+ : a b$`),
	} {
		if !re.MatchString(got[i]) {
			t.Errorf("line %d %q, want %s", i, got[i], re)
		}
	}
}

// A worker the server has forgotten (silent past its heartbeat) is not
// listed.
func TestForgottenNotListed(t *testing.T) {
	f := start(t, Config{Heartbeat: 50 * time.Millisecond})
	w := f.peer(f.dial())
	m := w.ask(ready("quiet"))
	w.id = m.ID
	w.wantType(m, codec.Heartbeat)
	f.noted("forgotten")
	if got := f.srv.ListWorkers(); len(got) != 0 {
		t.Fatalf("listing %v after the worker was forgotten", got)
	}
}
