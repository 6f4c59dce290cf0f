package dwork

import (
	"testing"
	"time"

	"switchyard/sched"
)

// Conns counts the connections open to the hub: up as clients dial,
// down as they close.
func TestConns(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	waitConns := func(want int) {
		t.Helper()
		// zmq4 dials and closes on goroutines of its own: wait for the count.
		for deadline := time.Now().Add(replyTimeout); e.srv.Conns() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("Conns() = %d, want %d", e.srv.Conns(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	a, b := e.dial(), e.dial()
	waitConns(2)
	a.sock.Close()
	waitConns(1)
	b.sock.Close()
	waitConns(0)
}
