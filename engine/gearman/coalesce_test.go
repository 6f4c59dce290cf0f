package gearman

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// waitClients polls GET_STATUS_UNIQUE until the job of unique u has n
// waiting clients: a closed connection's detach happens on its own loop.
func waitClients(t *testing.T, p *peer, u string, n int) {
	t.Helper()
	want := res(codec.StatusResUnique, u, "1", "0", "0", "0", string(rune('0'+n)))
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		p.send(req(codec.GetStatusUnique, u))
		if bytes.Equal(p.packet(), want) {
			return
		}
	}
	t.Fatalf("job %q never had %d clients", u, n)
}

// TestBackgroundJoinSurvivesForegroundClient: SUBMIT_JOB_BG that coalesces
// with a queued foreground job gets JOB_CREATED, so the job runs even after
// the foreground client hangs up (gearmand 1.1.20 drops it).
func TestBackgroundJoinSurvivesForegroundClient(t *testing.T) {
	addr, _ := startServer(t, Config{}, sched.Config{})
	fg, bg, w := dial(t, addr), dial(t, addr), dial(t, addr)

	fg.send(req(codec.SubmitJob, "f", "u", "payload"))
	h := fg.handle()
	bg.send(req(codec.SubmitJobBg, "f", "u", "other"))
	if got := bg.handle(); got != h {
		t.Fatalf("background submit got %q, want to join %q", got, h)
	}
	fg.c.Close()
	waitClients(t, bg, "u", 0)

	w.send(req(codec.CanDo, "f"), req(codec.GrabJob))
	got := w.packet()
	if binary.BigEndian.Uint32(got[4:]) != uint32(codec.JobAssign) {
		t.Fatalf("worker got %q, want the joined job", got)
	}
	w.send(req(codec.WorkComplete, h, "done"))
	waitGone(t, bg, h)
}

// waitGone polls GET_STATUS until handle h is unknown.
func waitGone(t *testing.T, p *peer, h string) {
	t.Helper()
	want := res(codec.StatusRes, h, "0", "0", "0", "0")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		p.send(req(codec.GetStatus, h))
		if bytes.Equal(p.packet(), want) {
			return
		}
	}
	t.Fatalf("job %s still known", h)
}
