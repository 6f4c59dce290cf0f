// Package servertest starts the frontends' servers in tests: one way, for
// every package, to run a server for a test and stop it after.
package servertest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/engine/workerline"
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

// WorkerLines writes a worker listing as "FD PEER ID : FUNC ..." lines
// ("-" for no id, the functions sorted), for tests' patterns.
func WorkerLines(ws []workerline.Worker) []string {
	var out []string
	for _, w := range ws {
		id := w.ID
		if id == "" {
			id = "-"
		}
		fns := slices.Sorted(slices.Values(w.Funcs))
		out = append(out, strings.TrimSpace(fmt.Sprintf("%d %s %s : %s", w.FD, w.Peer, id, strings.Join(fns, " "))))
	}
	return out
}
