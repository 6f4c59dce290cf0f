package harness

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Within is a time bound that a test asserts, from when it was made:
// Bound on a machine that runs nothing else, and on a busy one Bound
// stretched by the share of the machine that processes other than ours
// had since (Stretch). Ours are the test's process and the pids it is
// given: the server under test, whose own time must not stretch its
// bound. A bound of milliseconds of work on an idle machine is not one of
// seconds on a machine that others keep busy (make test's other packages,
// another build): the share tells them apart in the same run, and on an
// idle machine the bound is Bound itself.
type Within struct {
	Fixed time.Duration // before Bound: a timer's, which the machine does not stretch
	Bound time.Duration
	Start time.Time

	load  *Load   // nil if /proc/stat cannot be read: the bound alone
	share float64 // as last read
}

// NewWithin starts a bound of bound on this process and pids.
func NewWithin(bound time.Duration, pids ...int) *Within { return NewWithinAfter(0, bound, pids...) }

// NewWithinAfter is NewWithin for a bound that begins fixed later: a
// server's timer of that long, then bound for what it does when it fires.
func NewWithinAfter(fixed, bound time.Duration, pids ...int) *Within {
	load, err := NewLoad(append([]int{os.Getpid()}, pids...)...)
	if err != nil {
		load = nil
	}
	return &Within{Fixed: fixed, Bound: bound, Start: time.Now(), load: load}
}

// Allowed is the bound stretched by the share others have had so far.
func (w *Within) Allowed() time.Duration { return w.Fixed + w.Stretch(w.Bound) }

// Stretch is d stretched by the share others have had so far.
func (w *Within) Stretch(d time.Duration) time.Duration {
	if w.load == nil {
		return d
	}
	w.share = w.load.Share()
	return Stretch(d, w.share)
}

// Share is the share others had, as last read by Allowed or Stretch.
func (w *Within) Share() float64 { return w.share }

// Over says whether the time since w was made is past what it allows.
func (w *Within) Over() bool { return w.Exceeds(time.Since(w.Start)) }

// Exceeds says whether took, timed from when w was made, is past what it
// allows. Under the bound it reads nothing.
func (w *Within) Exceeds(took time.Duration) bool {
	return took > w.Fixed+w.Bound && took > w.Allowed()
}

// Guard watches conns while reads or writes on them wait for what w
// bounds: once w is over, they fail at once, as at a deadline. stop ends
// the watch (again: nothing) and says whether w was over.
func (w *Within) Guard(conns ...net.Conn) (stop func() bool) {
	done := make(chan struct{})
	var once sync.Once
	var fired atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if w.Over() {
				fired.Store(true)
				for _, c := range conns {
					c.SetDeadline(time.Now())
				}
				return
			}
		}
	})
	return func() bool {
		once.Do(func() { close(done) })
		wg.Wait()
		return fired.Load()
	}
}

// String says what w allowed when last asked, and why.
func (w *Within) String() string {
	if w.share == 0 {
		return (w.Fixed + w.Bound).String()
	}
	return fmt.Sprintf("%v (%v on an idle machine; others had %.0f%% of it)",
		(w.Fixed + Stretch(w.Bound, w.share)).Round(time.Millisecond), w.Fixed+w.Bound, 100*w.share)
}
