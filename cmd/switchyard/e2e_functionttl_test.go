package main

import (
	"testing"
	"time"
)

// TestFunctionTTL: with --function-ttl, a function that a worker registered
// and left, with no job and no admin setting, disappears from "status";
// one with a queued job, a created one and one with a maxqueue stay.
// gearmand keeps every function for ever (switchyard's --function-ttl 0).
func TestFunctionTTL(t *testing.T) {
	if isGearmand(t) {
		t.Skip("--function-ttl is switchyard's")
	}
	addr, _, _ := startServer(t, "--function-ttl", "1")
	w := dialGear(t, addr, "worker")
	w.send(pCanDo, "left")
	w.send(pCanDo, "limited")
	c := dialGear(t, addr, "client")
	c.send(pSubmitJobBg, "queued", "", "x")
	if p := c.recv(10 * time.Second); p.typ != pJobCreated {
		t.Fatalf("submit: %v", p)
	}
	for _, cmd := range []string{"create function created", "maxqueue limited 5"} {
		if got := adminCmd(t, addr, cmd); got != "OK\r\n" {
			t.Fatalf("%s: %q", cmd, got)
		}
	}
	waitWorkers(t, addr, "left", 1)
	w.c.Close()
	waitUntil(t, e2eWaitTimeout, "function 'left' forgotten", func() (bool, string) {
		m, raw := adminStatus(t, addr)
		_, left := m["left"]
		return !left, raw
	})
	m, raw := adminStatus(t, addr)
	for _, fn := range []string{"queued", "created", "limited"} {
		if _, ok := m[fn]; !ok {
			t.Fatalf("function %q forgotten; status:\n%s", fn, raw)
		}
	}
}
