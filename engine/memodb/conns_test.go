package memodb

import (
	"testing"
	"time"
)

// Conns counts the connections open to the server: up as peers dial,
// down as they close.
func TestConns(t *testing.T) {
	f := start(t, Config{})
	waitConns := func(want int) {
		t.Helper()
		// mangos reports pipes from its own goroutines: wait for the count.
		for deadline := time.Now().Add(waitFor); f.srv.Conns() != want; {
			if time.Now().After(deadline) {
				t.Fatalf("Conns() = %d, want %d", f.srv.Conns(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	a, b := f.dial(), f.dial()
	waitConns(2)
	a.Close()
	waitConns(1)
	b.Close()
	waitConns(0)
}
