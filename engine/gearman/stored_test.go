package gearman

import (
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
	"switchyard/sched/durable"
	"switchyard/sched/storetest"
)

// JOB_CREATED waits for the store, and the replies pipelined after it wait
// behind it, in order; a write that fails becomes QUEUE_ERROR and its job
// is gone.
func TestJobCreatedWaitsForStore(t *testing.T) {
	st := storetest.NewGate(64)
	addr, srv := startServer(t, Config{}, sched.Config{Store: st})
	p := dial(t, addr)
	p.send(req(codec.SubmitJobBg, "f", "u1", "a"), req(codec.EchoReq, "one"),
		req(codec.SubmitJobBg, "f", "u2", "b"), req(codec.EchoReq, "two"),
		req(codec.SubmitJob, "f", "u3", "c"), req(codec.EchoReq, "three"))
	<-st.Queued
	<-st.Queued // both writes queued: the server has read both submits
	// Nothing may come before the store answers (a read with a deadline:
	// the check for what must not happen).
	p.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if b, err := p.r.ReadByte(); err == nil {
		t.Fatalf("got %q before the store answered", b)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatal(err)
	}
	h1 := "H:lap:" + itoa(srv, "u1")
	st.Answer(nil)
	p.expect(res(codec.JobCreated, h1))
	p.expect(res(codec.EchoRes, "one"))
	st.Answer(errors.New("no space left on device"))
	p.expect(res(codec.Error, "QUEUE_ERROR", "no space left on device"))
	p.expect(res(codec.EchoRes, "two"))
	// A foreground job is not stored: the rest came with the last answer.
	if got := p.packet(); codec.Type(got[7]) != codec.JobCreated {
		t.Fatalf("foreground submit answered %q", got)
	}
	p.expect(res(codec.EchoRes, "three"))
	if st := srv.sched.StatusUnique([]byte("u2")); st.Known {
		t.Fatal("a job that never reached the store is still queued")
	}
}

// itoa finds the id of the job with the given unique.
func itoa(srv *Server, unique string) string {
	for _, j := range srv.sched.Jobs() {
		if j.Unique == unique {
			return strconv.FormatUint(j.ID, 10)
		}
	}
	return "?"
}

// With the real store: every job a client was told about is there after a
// restart, under the handle it was given.
func TestDurableJobsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	st, err := durable.Open(dir, durable.SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startServer(t, Config{}, sched.Config{Store: st})
	p := dial(t, addr)
	const n = 200
	var pkts [][]byte
	for i := 0; i < n; i++ {
		pkts = append(pkts, req(codec.SubmitJobBg, "f", "u"+strconv.Itoa(i), "payload"))
	}
	p.send(pkts...)
	var handles []string
	for i := 0; i < n; i++ {
		pkt := p.packet()
		if codec.Type(pkt[7]) != codec.JobCreated {
			t.Fatalf("reply %d: %q", i, pkt)
		}
		handles = append(handles, string(pkt[12:]))
	}
	p.c.Close()
	st.Close() // the server's scheduler still holds it: nothing more is written

	st, err = durable.Open(dir, durable.SyncBatch)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := sched.New(sched.Config{Tick: -1, Store: st})
	defer s.Close()
	if got, err := s.Replay(); err != nil || got != n {
		t.Fatalf("replay: %d jobs, %v", got, err)
	}
	hs := codec.NewHandles("H:lap")
	for _, h := range handles {
		id, ok := hs.Parse([]byte(h))
		if !ok || !s.Status(id).Known {
			t.Fatalf("job %s lost in the restart", h)
		}
	}
}

// A large result that another loop hands over by reference waits, like
// every reply, behind a JOB_CREATED the store has yet to answer.
func TestLargeResultWaitsForStore(t *testing.T) {
	st := storetest.NewGate(64)
	addr, srv := startServer(t, Config{Loops: 2}, sched.Config{Store: st})
	w, c := dial(t, addr), dial(t, addr) // one on each loop
	w.send(req(codec.CanDo, "f"), req(codec.EchoReq, "w"))
	w.expect(res(codec.EchoRes, "w"))
	c.send(req(codec.SubmitJob, "f", "", "p"))
	h := c.handle()
	c.send(req(codec.SubmitJobBg, "g", "s1", "stored"))
	<-st.Queued
	wc, cc := serverConn(t, srv, w), serverConn(t, srv, c)
	if wc.Loop() == cc.Loop() {
		t.Fatal("client and worker on one loop: the result would not cross")
	}
	big := strings.Repeat("r", largeTail+1)
	w.send(req(codec.GrabJob))
	w.expect(res(codec.JobAssign, h, "f", "p"))
	w.send(req(codec.WorkComplete, h, big), req(codec.EchoReq, "done"))
	w.expect(res(codec.EchoRes, "done")) // the result is in c's outbox
	for deadline := time.Now().Add(5 * time.Second); ; {
		cc.Lock()
		taken := len(cc.tails) == 0
		cc.Unlock()
		if taken { // by c's loop, while the JOB_CREATED waits
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("c's loop never took the result")
		}
		runtime.Gosched()
	}
	st.Answer(nil)
	c.expect(res(codec.JobCreated, "H:lap:"+itoa(srv, "s1")))
	c.expect(res(codec.WorkComplete, h, big))
}

// serverConn finds the server's end of p.
func serverConn(t *testing.T, srv *Server, p *peer) *conn {
	t.Helper()
	for _, cn := range srv.snapshot() {
		if cn.C.RemoteAddr().String() == p.c.LocalAddr().String() {
			return cn
		}
	}
	t.Fatalf("no connection from %s", p.c.LocalAddr())
	return nil
}
