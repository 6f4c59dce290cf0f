// Package servertest starts the frontends' servers in tests: one way, for
// every package, to run a server for a test and stop it after.
package servertest

import (
	"context"
	"net"
	"testing"
	"time"
)

// Server is a frontend as the tests start it.
type Server interface {
	Start() error
	Stop(context.Context) error
	Addrs() []net.Addr
}

// Start starts srv and returns its first address, failing the test if it
// cannot start. Nothing stops it: for a server shared by a fuzz run.
func Start(t testing.TB, srv Server) string {
	t.Helper()
	if err := srv.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	if a := srv.Addrs(); len(a) > 0 {
		return a[0].String()
	}
	return ""
}

// Run starts srv, stops it when the test ends (failing the test if the
// stop fails), and returns its first address.
func Run(t testing.TB, srv Server) string {
	t.Helper()
	addr := Start(t, srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return addr
}
