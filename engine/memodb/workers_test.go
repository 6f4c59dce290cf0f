package memodb

import (
	"regexp"
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/memodb"
)

// listed polls f's listing, bounded, until it has n lines: a READY is
// served on the server's receivers, with no reply to wait for while the
// worker waits for a job.
func (f *fixture) listed(n int) []string {
	f.t.Helper()
	for deadline := time.Now().Add(waitFor); ; time.Sleep(time.Millisecond) {
		out := string(f.srv.AppendWorkers(nil))
		if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Count(out, "\n") == n {
			if n == 0 {
				return nil
			}
			return lines
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("listing %q, want %d lines", out, n)
		}
	}
}

func TestAppendWorkers(t *testing.T) {
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
	// Newest first; services in any order (a worker's abilities are a set).
	for i, re := range []*regexp.Regexp{
		regexp.MustCompile(`^-1 memodb worker-\d+ : c$`),
		regexp.MustCompile(`^-1 memodb worker-\d+ : (a b|b a)$`),
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
	if got := string(f.srv.AppendWorkers(nil)); got != "" {
		t.Fatalf("listing %q after the worker was forgotten", got)
	}
}
