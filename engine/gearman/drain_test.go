package gearman

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// drainSetup starts a server where worker w holds the foreground job h of
// client c, another job of the same function waits in the queue, and
// worker idle sleeps on that function.
func drainSetup(t *testing.T, cfg Config) (addr string, srv *Server, w, c, idle *peer, h string) {
	t.Helper()
	addr, srv = startServer(t, cfg, sched.Config{})
	w = dial(t, addr)
	w.send(req(codec.CanDo, "f"))
	c = dial(t, addr)
	c.send(req(codec.SubmitJob, "f", "", "held"))
	h = c.handle()
	w.send(req(codec.GrabJob))
	w.expect(res(codec.JobAssign, h, "f", "held"))
	c.send(req(codec.SubmitJobBg, "f", "", "queued"))
	c.handle()
	idle = dial(t, addr)
	idle.send(req(codec.CanDo, "g"), req(codec.PreSleep), req(codec.CanDo, "f"), req(codec.EchoReq, "asleep"))
	idle.expect(res(codec.EchoRes, "asleep"))
	return addr, srv, w, c, idle, h
}

// drain runs srv.Drain(ctx) in the background.
func drain(ctx context.Context, srv *Server) <-chan error {
	done := make(chan error, 1)
	go func() { done <- srv.Drain(ctx) }()
	return done
}

// TestDrain: during a drain, new connections are refused, open ones are
// served, no job is handed out and nobody is woken for one; it ends when
// the running job's result has reached its client.
func TestDrain(t *testing.T) {
	addr, srv, w, c, idle, h := drainSetup(t, Config{})
	done := drain(context.Background(), srv)

	// Refused, once the listener is closed (Drain closes it first thing,
	// but on its own goroutine).
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		switch {
		case err == nil:
			conn.Close()
		case !errors.Is(err, syscall.ECONNRESET): // reset: queued as the listener closed
			t.Fatalf("dial during the drain: %v, want connection refused", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 5s into the drain")
		}
	}

	// The open connections are served, but the queued job stays queued:
	// no NOOP for the sleeping worker, NO_JOB for a grab, and a PRE_SLEEP
	// with work waiting brings no NOOP either.
	c.send(req(codec.SubmitJobBg, "f", "", "new"))
	c.handle()
	idle.send(req(codec.EchoReq, "1"))
	idle.expect(res(codec.EchoRes, "1"))
	w.send(req(codec.GrabJob), req(codec.PreSleep), req(codec.EchoReq, "2"))
	w.expect(res(codec.NoJob))
	w.expect(res(codec.EchoRes, "2"))
	select {
	case err := <-done:
		t.Fatalf("Drain returned %v while a job runs", err)
	default:
	}

	w.send(req(codec.WorkComplete, h, "result"))
	c.expect(res(codec.WorkComplete, h, "result"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain still waiting 5s after the last job completed")
	}
	if n := srv.sched.Len(); n != 2 {
		t.Errorf("%d jobs left, want the 2 queued ones", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop after Drain: %v", err)
	}
	c.closed()
}

// TestDrainEnds: Drain returns at once with no job running, and with its
// context's error while one runs; the server still stops cleanly.
func TestDrainEnds(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		_, srv := startServer(t, Config{}, sched.Config{})
		if err := srv.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		_, srv, _, c, _, _ := drainSetup(t, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		done := drain(ctx, srv)
		c.send(req(codec.EchoReq, "served")) // served, drain begun or not
		c.expect(res(codec.EchoRes, "served"))
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Drain = %v, want context.Canceled", err)
		}
		stop, cancelStop := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelStop()
		if err := srv.Stop(stop); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		c.closed()
	})
}
