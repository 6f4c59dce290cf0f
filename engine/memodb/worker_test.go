package memodb

import (
	"context"
	"testing"
	"time"

	"switchyard/bench/harness"
	codec "switchyard/codec/memodb"
	"switchyard/sched"
)

// An idle worker gets a HEARTBEAT once the heartbeat time has passed, and
// a job once one comes, whether it is parked on its READY or on its answer
// to a HEARTBEAT.
func TestHeartbeatThenJob(t *testing.T) {
	const hb = 100 * time.Millisecond
	f := start(t, Config{Heartbeat: hb})
	w, c := f.peer(f.dial()), f.peer(f.dial())
	began := time.Now()
	m := w.ask(ready("hb"))
	w.id = m.ID
	w.wantType(m, codec.Heartbeat)
	if len(w.id) != codec.IDLen {
		t.Fatalf("a %d-byte id", len(w.id))
	}
	if waited := time.Since(began); waited < hb {
		t.Fatalf("HEARTBEAT after %v, before the heartbeat time %v", waited, hb)
	}
	w.wantType(w.ask(codec.AppendHeartbeat(nil, w.id)), codec.Heartbeat)
	w.send(codec.AppendHeartbeat(nil, w.id))
	c.send(job("hb", 0, "work"))
	if got := w.wantJob(w.recv(), "hb", 0); got != "work" {
		t.Fatalf("payload %q", got)
	}
	w.send(result(w.id, "done"))
	c.wantResult(c.recv(), "done")
}

// A worker that does not answer its HEARTBEAT within the heartbeat time is
// gone: its next request gets DISCONNECT, as do an unknown id's.
func TestSilentWorkerForgotten(t *testing.T) {
	const hb = 50 * time.Millisecond
	f := start(t, Config{Heartbeat: hb})
	w := f.peer(f.dial())
	m := w.ask(ready("quiet"))
	w.id = m.ID
	w.wantType(m, codec.Heartbeat)
	f.noted("forgotten")
	if n := f.srv.Workers(); n != 0 {
		t.Fatalf("%d workers", n)
	}
	if st := statOf(f.sched, "quiet"); st.Workers != 0 {
		t.Fatalf("still registered: %+v", st)
	}
	w.wantType(w.ask(codec.AppendHeartbeat(nil, w.id)), codec.Disconnect)
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"HEARTBEAT", codec.AppendHeartbeat(nil, []byte{9, 9, 9, 9})},
		{"RESULT", result([]byte{9, 9, 9, 9}, "x")},
		{"last RESULT", codec.AppendResultDisconnecting(nil, []byte{9, 9, 9, 9})},
	} {
		u := f.peer(f.dial())
		u.id = []byte{9, 9, 9, 9}
		u.wantType(u.ask(tc.msg), codec.Disconnect)
	}
}

// A job that runs past its timeout goes back to the queue and another
// worker runs it: its client gets that worker's result. The slow worker
// is still known for a heartbeat's time after the timeout: its late
// RESULT is taken (and dropped, the job being done) and it gets work or a
// heartbeat as usual.
func TestJobTimeoutRequeues(t *testing.T) {
	f := start(t, Config{Heartbeat: 5 * time.Second})
	slow, quick, c := f.peer(f.dial()), f.peer(f.dial()), f.peer(f.dial())
	c.send(job("t", 50, "p"))
	slow.wantJob(slow.ask(ready("t")), "t", 50)
	quick.send(ready("t")) // parks; the job comes back to it at 50 ms
	if got := quick.wantJob(quick.recv(), "t", 50); got != "p" {
		t.Fatalf("payload %q", got)
	}
	quick.send(result(quick.id, "from quick"))
	c.wantResult(c.recv(), "from quick")
	// The slow worker's result comes: dropped; it parks.
	slow.send(result(slow.id, "from slow"))
	c2 := f.peer(f.dial())
	c2.send(job("t", 0, "next"))
	// One of the two parked workers gets it.
	var got codec.Message
	var who *peer
	select {
	case got = <-recvAsync(slow):
		who = slow
	case got = <-recvAsync(quick):
		who = quick
	case <-time.After(waitFor):
		t.Fatal("neither worker got the next job")
	}
	who.wantJob(got, "t", 0)
	who.send(result(who.id, "next done"))
	c2.wantResult(c2.recv(), "next done")
}

// recvAsync receives p's reply on a goroutine (for a select between
// peers); a failure there reports on t.
func recvAsync(p *peer) <-chan codec.Message {
	ch := make(chan codec.Message, 1)
	go func() {
		b, err := p.ctx.Recv()
		if err != nil {
			return
		}
		var m codec.Message
		if codec.Decode(b, codec.Reply, &m) == nil {
			ch <- m
		}
	}()
	return ch
}

// A worker that dies holding a job (silent past the job's timeout and a
// heartbeat) is gone: the job, requeued at its timeout, runs on another
// worker; the dead one's RESULT, if it ever comes, gets DISCONNECT.
func TestDeadWorkerRequeues(t *testing.T) {
	f := start(t, Config{Heartbeat: 50 * time.Millisecond})
	dead, c := f.peer(f.dial()), f.peer(f.dial())
	c.send(job("d", 100, "p"))
	dead.wantJob(dead.ask(ready("d")), "d", 100)
	f.noted("forgotten")
	alive := f.peer(f.dial())
	if got := alive.wantJob(alive.ask(ready("d")), "d", 100); got != "p" {
		t.Fatalf("payload %q", got)
	}
	alive.send(result(alive.id, "ok"))
	c.wantResult(c.recv(), "ok")
	dead.wantType(dead.ask(result(dead.id, "late")), codec.Disconnect)
}

// RESULT with disconnecting set completes the job and gets DISCONNECT; the
// worker is unknown from then on.
func TestLastResult(t *testing.T) {
	f := start(t, Config{})
	w, c := f.peer(f.dial()), f.peer(f.dial())
	c.send(job("last", 0, "p"))
	w.wantJob(w.ask(ready("last")), "last", 0)
	w.wantType(w.ask(append(codec.AppendResultDisconnecting(nil, w.id), "bye"...)), codec.Disconnect)
	c.wantResult(c.recv(), "bye")
	f.noted("forgotten")
	w.wantType(w.ask(codec.AppendHeartbeat(nil, w.id)), codec.Disconnect)
}

// A HEARTBEAT from a worker that was sent a JOB is out of step: DISCONNECT,
// and the job goes back for another worker.
func TestHeartbeatWhileRunning(t *testing.T) {
	f := start(t, Config{})
	w, c := f.peer(f.dial()), f.peer(f.dial())
	c.send(job("step", 0, "p"))
	w.wantJob(w.ask(ready("step")), "step", 0)
	w.wantType(w.ask(codec.AppendHeartbeat(nil, w.id)), codec.Disconnect)
	f.noted("forgotten")
	other := f.peer(f.dial())
	other.wantJob(other.ask(ready("step")), "step", 0)
	other.send(result(other.id, "ok"))
	c.wantResult(c.recv(), "ok")
}

// A parked worker's request sent again (NNG's REQ resends a request that
// got no reply) takes the parked one's place: the job goes to the new one,
// and the old one gets no reply.
func TestResentRequestMovesThePark(t *testing.T) {
	f := start(t, Config{Heartbeat: 5 * time.Second, Receivers: 1})
	sock := f.dial()
	first := f.peer(sock)
	first.send(ready("re"))
	f.handled(sock)
	id := f.srv.anyWorkerID(t)
	second := f.peer(sock)
	second.id = id
	second.send(codec.AppendHeartbeat(nil, id))
	f.handled(sock)
	c := f.peer(f.dial())
	c.send(job("re", 0, "p"))
	second.wantJob(second.recv(), "re", 0)
	second.send(result(id, "ok"))
	c.wantResult(c.recv(), "ok")
	first.none()
}

// anyWorkerID is the id of the one worker known.
func (s *Server) anyWorkerID(t *testing.T) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.workers) != 1 {
		t.Fatalf("%d workers, want 1", len(s.workers))
	}
	for _, w := range s.workers {
		return append([]byte(nil), w.id[:]...)
	}
	return nil
}

// Drain keeps workers waiting (heartbeats go on) and still takes results.
func TestDrain(t *testing.T) {
	f := start(t, Config{Heartbeat: 50 * time.Millisecond})
	w, c := f.peer(f.dial()), f.peer(f.dial())
	c.send(job("dr", 0, "before"))
	w.wantJob(w.ask(ready("dr")), "dr", 0)
	f.srv.Drain(context.Background())
	c2 := f.peer(f.dial())
	c2.send(job("dr", 0, "after"))
	w.send(result(w.id, "done"))
	c.wantResult(c.recv(), "done")
	w.wantType(w.recv(), codec.Heartbeat) // not the queued job
	if st := statOf(f.sched, "dr"); st.Queued[sched.Normal] != 1 {
		t.Fatalf("%+v, want the job queued", st)
	}
}

// goneWithin is how soon a worker whose connection closes must be gone
// (issue 24: "within a second"), on a machine that runs nothing else.
const goneWithin = time.Second

// gone polls, bounded by goneWithin (stretched by what other processes
// have of the machine meanwhile: harness.Within), until no MemoDB worker
// is known, the scheduler counts none for service and the listing is
// empty.
func (f *fixture) gone(service string) {
	f.t.Helper()
	w := harness.NewWithin(goneWithin)
	for ; ; time.Sleep(time.Millisecond) {
		n, st, listing := f.srv.Workers(), statOf(f.sched, service), f.srv.ListWorkers()
		if n == 0 && st.Workers == 0 && len(listing) == 0 {
			return
		}
		if w.Over() {
			f.t.Fatalf("%v after the connection closed: %d workers, %+v, listing %v", w, n, st, listing)
		}
	}
}

// A worker whose connection closes is gone at once: it leaves Workers,
// the scheduler's counts and the listing, and a job it was running goes
// back to the queue for another worker, whose result reaches the client.
func TestWorkerConnectionCloses(t *testing.T) {
	t.Run("running a job", func(t *testing.T) {
		f := start(t, Config{Heartbeat: time.Minute})
		c := f.peer(f.dial())
		c.send(job("mid", 0, "p"))
		wsock := f.dial()
		w := f.peer(wsock)
		w.wantJob(w.ask(ready("mid")), "mid", 0)
		if st := statOf(f.sched, "mid"); st.Running != 1 || st.Workers != 1 {
			t.Fatalf("before: %+v", st)
		}
		wsock.Close()
		f.gone("mid")
		f.noted("forgotten")
		if st := statOf(f.sched, "mid"); st.Running != 0 || st.Total() != 1 {
			t.Fatalf("the job after its worker left: %+v, want it queued", st)
		}
		other := f.peer(f.dial())
		if got := other.wantJob(other.ask(ready("mid")), "mid", 0); got != "p" {
			t.Fatalf("payload %q", got)
		}
		other.send(result(other.id, "done"))
		c.wantResult(c.recv(), "done")
	})
	t.Run("waiting for a job", func(t *testing.T) {
		f := start(t, Config{Heartbeat: time.Minute})
		wsock := f.dial()
		f.peer(wsock).send(ready("idle"))
		f.listed(1)
		wsock.Close()
		f.gone("idle")
		f.noted("forgotten")
	})
	t.Run("its RESULT, then the close", func(t *testing.T) {
		// Whichever the server sees first, the result counts, and the job
		// is not run again.
		f := start(t, Config{Heartbeat: time.Minute})
		c := f.peer(f.dial())
		c.send(job("last", 0, "p"))
		raw := f.raw()
		if err := raw.request(1, ready("last")); err != nil {
			t.Fatal(err)
		}
		_, body, err := raw.reply()
		var m codec.Message
		if err == nil {
			err = codec.Decode(body, codec.Reply, &m)
		}
		if err != nil || m.Type != codec.Job {
			t.Fatalf("READY got % x (%v), want a JOB", body, err)
		}
		if err := raw.request(2, result(m.ID, "bye")); err != nil {
			t.Fatal(err)
		}
		raw.c.Close()
		f.gone("last")
		f.noted("forgotten")
		c.wantResult(c.recv(), "bye")
		if st := statOf(f.sched, "last"); st.Total() != 0 {
			t.Fatalf("after the result: %+v", st)
		}
	})
	t.Run("its messages moved to another connection", func(t *testing.T) {
		// A worker is known by its id: the connection that counts is the
		// one its last message came on.
		f := start(t, Config{Heartbeat: time.Minute})
		c := f.peer(f.dial())
		c.send(job("moved", 0, "p1"))
		first := f.dial()
		w := f.peer(first)
		w.wantJob(w.ask(ready("moved")), "moved", 0)
		second := f.peer(f.dial())
		second.id = w.id
		second.send(result(w.id, "r1")) // parks on the second connection
		c.wantResult(c.recv(), "r1")
		first.Close()
		for deadline := time.Now().Add(waitFor); f.srv.Conns() != 2; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("Conns() = %d, want 2", f.srv.Conns())
			}
		}
		c.send(job("moved", 0, "p2"))
		if got := second.wantJob(second.recv(), "moved", 0); got != "p2" {
			t.Fatalf("payload %q", got)
		}
		second.send(result(w.id, "r2"))
		c.wantResult(c.recv(), "r2")
		if n := f.srv.Workers(); n != 1 {
			t.Fatalf("%d workers, want the one still connected", n)
		}
	})
}
