package periodic

import (
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	codec "switchyard/codec/periodic"
	"switchyard/engine/internal/servertest"
)

func TestListWorkers(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "p.sock")
	ts := runServer(t, 2, "unix://"+sock)
	if got := ts.ListWorkers(); len(got) != 0 {
		t.Fatalf("no connection: %v", got)
	}
	w := dialKind(t, "tcp", ts.addr, codec.TypeWorker)
	w.send("", codec.CanDo, "f")
	w.send("", codec.CanDo, "g")
	idle := dialKind(t, "tcp", ts.addr, codec.TypeWorker)
	c := dialKind(t, "tcp", ts.addr, codec.TypeClient)
	u := dialKind(t, "unix", sock, codec.TypeWorker)
	u.send("", codec.CanDo, "h")
	for _, p := range []*peer{w, idle, c, u} { // each one's commands are in once it answers
		p.send("p", codec.Ping)
		p.expect("p", codec.Pong)
	}
	// Any order (by fd): the unix worker, the idle one and w; no client.
	got := servertest.WorkerLines(ts.ListWorkers())
	want := []*regexp.Regexp{
		regexp.MustCompile(`^\d+ unix:` + regexp.QuoteMeta(sock) + ` - : h$`),
		regexp.MustCompile(`^\d+ 127\.0\.0\.1 - :$`),
		regexp.MustCompile(`^\d+ 127\.0\.0\.1 - : f g$`),
	}
	if len(got) != len(want) {
		t.Fatalf("listing %q, want %d lines", got, len(want))
	}
	for _, re := range want {
		if !slices.ContainsFunc(got, re.MatchString) {
			t.Errorf("listing %q has no line like %s", got, re)
		}
	}
	w.c.Close()
	// The server notes the close on its loop: poll, bounded.
	for deadline := time.Now().Add(5 * time.Second); len(ts.ListWorkers()) != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the closed worker still listed: %v", ts.ListWorkers())
		}
		time.Sleep(time.Millisecond)
	}
}
