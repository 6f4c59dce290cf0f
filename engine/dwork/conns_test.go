package dwork

import (
	"testing"

	"switchyard/sched"
)

// Conns counts the connections open to the hub: up as clients dial,
// down as they close.
func TestConns(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	a, b := e.dial(), e.dial()
	e.waitConns(2)
	a.sock.Close()
	e.waitConns(1)
	b.sock.Close()
	e.waitConns(0)
}
