package sched

import (
	"sync"
	"testing"
	"time"
)

// fakeClock has a monotonic reading that only moves forward when the test
// says so, and a wall clock that the test may also step.
type fakeClock struct {
	mu   sync.Mutex
	mono time.Time
	wall time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{mono: time.Unix(0, 0), wall: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.mono }
func (c *fakeClock) Wall() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.wall }

// pass lets d go by on both clocks and returns the new monotonic time.
func (c *fakeClock) pass(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono = c.mono.Add(d)
	c.wall = c.wall.Add(d)
	return c.mono
}

// step moves the wall clock alone, as NTP or a resumed VM does.
func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}

// A delayed job's due time is fixed on the monotonic clock at submit: a
// wall-clock step before the submit or while it waits neither fires it
// early nor strands it.
func TestDelayedJobIgnoresWallClockSteps(t *testing.T) {
	const delay = 5 * time.Second
	for _, tc := range []struct {
		name         string
		before, wait time.Duration // wall steps before the submit, and while the job waits
	}{
		{"none", 0, 0},
		{"forward before submit", time.Hour, 0},
		{"back before submit", -time.Hour, 0},
		{"forward while waiting", 0, time.Hour},
		{"back while waiting", 0, -time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			s := newTest(t, Config{Clock: clk})
			c := s.NewClient(&recorder{})
			w := s.NewWorker(&waker{})
			w.CanDo([]byte("f"), 0)

			clk.pass(time.Minute)
			clk.step(tc.before)
			when := clk.Wall().Add(delay).Unix()
			if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Payload: []byte("later"), Background: true, When: when}); err != nil {
				t.Fatal(err)
			}
			clk.step(tc.wait)
			s.Advance(clk.pass(delay - time.Millisecond))
			if j := w.Grab(); j != nil {
				t.Fatalf("job ran %v early", time.Millisecond)
			}
			s.Advance(clk.pass(time.Millisecond))
			if got := grabPayload(w); got != "later" {
				t.Fatalf("job not run when due: grab %s", got)
			}
		})
	}
}

// A job whose time has come on the wall clock runs at once, whatever the
// monotonic clock says.
func TestDelayedJobAlreadyDue(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk})
	c := s.NewClient(&recorder{})
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	clk.step(-time.Hour)
	for _, when := range []int64{1, clk.Wall().Unix()} {
		if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Payload: []byte("now"), Background: true, When: when}); err != nil {
			t.Fatal(err)
		}
		if got := grabPayload(w); got != "now" {
			t.Fatalf("when=%d: grab %s", when, got)
		}
	}
}

// Waits at the edge of int64 never wrap into the past: a due time near
// MaxInt64 seconds is far away, and Seconds saturates.
func TestHugeWaits(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk})
	for _, when := range []int64{1 << 62, 1<<63 - 1, clk.Wall().Unix() + int64(maxDelay/time.Second) + 5} {
		if _, later := s.dueTick(when); !later {
			t.Errorf("due time %d counted as due", when)
		}
	}
	if _, later := s.dueTick(-5); later {
		t.Error("a negative due time is not due")
	}
	for _, tc := range []struct {
		in   int64
		want time.Duration
	}{{-1, 0}, {0, 0}, {3, 3 * time.Second}, {1<<55 + 1, maxDelay}, {1<<63 - 1, maxDelay}} {
		if got := Seconds(tc.in); got != tc.want {
			t.Errorf("Seconds(%d) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
