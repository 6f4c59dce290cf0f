package harness

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// Without a reading of the machine (load nil) a Within is its bound.
func TestWithinExceeds(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		fixed, bound, took time.Duration
		want               bool
	}{
		{0, 100 * ms, 50 * ms, false},
		{0, 100 * ms, 100 * ms, false},
		{0, 100 * ms, 101 * ms, true},
		{time.Second, 100 * ms, 1050 * ms, false},
		{time.Second, 100 * ms, 1101 * ms, true},
	}
	for _, tt := range tests {
		w := &Within{Fixed: tt.fixed, Bound: tt.bound, Start: time.Now()}
		if got := w.Exceeds(tt.took); got != tt.want {
			t.Errorf("%v then %v: Exceeds(%v) = %v, want %v", tt.fixed, tt.bound, tt.took, got, tt.want)
		}
	}
}

func TestWithinString(t *testing.T) {
	w := &Within{Fixed: 30 * time.Second, Bound: 20 * time.Second}
	if got, want := w.String(), "50s"; got != want {
		t.Errorf("unread: %q, want %q", got, want)
	}
	w.share = 0.5
	if got, want := w.String(), "1m10s (50s on an idle machine; others had 50% of it)"; got != want {
		t.Errorf("others half: %q, want %q", got, want)
	}
}

// Guard ends a read that waits past the bound, and only then.
func TestWithinGuard(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	early := &Within{Bound: time.Hour, Start: time.Now()}
	if stop := early.Guard(a); stop() {
		t.Error("a guard stopped within its bound says it fired")
	}
	w := &Within{Bound: 20 * time.Millisecond, Start: time.Now()}
	stop := w.Guard(a)
	_, err := a.Read(make([]byte, 1))
	if fired := stop(); !fired || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past the bound: %v, guard fired %v", err, fired)
	}
	if !stop() {
		t.Error("stopped again, the guard forgot it fired")
	}
	if took := time.Since(w.Start); took < w.Bound {
		t.Errorf("the guard fired after %v, within the bound %v", took, w.Bound)
	}
}
