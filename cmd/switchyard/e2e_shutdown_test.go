package main

// The "shutdown" admin command, which only switchyard has and only with
// --admin-shutdown (without it, see TestE2EAdminShutdown).

import (
	"testing"
	"time"
)

// skipGearmand skips a test of an option gearmand 1.1.20 does not have.
func skipGearmand(t *testing.T) {
	t.Helper()
	if isGearmand(t) {
		t.Skip("gearmand 1.1.20 has no shutdown command")
	}
}

// holdJob connects a worker for "f" and a foreground client, and has the
// worker take the client's job. It returns both connections and the handle.
func holdJob(t *testing.T, addr string) (w, c *gearConn, handle string) {
	t.Helper()
	w = dialGear(t, addr, "worker")
	w.send(pCanDo, "f")
	c = dialGear(t, addr, "client")
	handle = c.submit(pSubmitJob, "f", "", "payload")
	if got := w.grabJob(10 * time.Second); got[0] != handle || got[2] != "payload" {
		t.Fatalf("worker got %q, want the job %s", got, handle)
	}
	return w, c, handle
}

// Plain "shutdown" stops at once, whatever is running: the client of the
// job in hand is disconnected without a result.
func TestE2EAdminShutdownNow(t *testing.T) {
	t.Parallel()
	skipGearmand(t)
	srv := startServerProc(t, "--admin-shutdown")
	w, c, _ := holdJob(t, srv.addr)
	if got := adminCmd(t, srv.addr, "shutdown"); got != "OK\r\n" {
		t.Fatalf("shutdown -> %q", got)
	}
	code, ok := srv.exited(10 * time.Second)
	if !ok {
		t.Fatal("server still running 10s after shutdown")
	}
	if code != 0 {
		t.Errorf("exit status %d after shutdown, want 0", code)
	}
	for _, g := range []*gearConn{w, c} {
		if err := g.waitClosed(5 * time.Second); err != nil {
			t.Errorf("%s: connection after shutdown: %v", g.name, err)
		}
	}
}
