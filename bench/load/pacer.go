package load

import (
	"context"
	"runtime"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// Pacer is the clock of an open-loop load, as wrk2's: job k is due at
// Begin + k/Rate whatever became of the jobs before it, and a job's
// latency runs from when it was due, not from when it could be sent. A
// server that stalls delays every job due meanwhile, and each of them
// counts the stall in full: no coordinated omission, which a closed loop
// (a client that sends its next job once one has finished) suffers.
type Pacer struct {
	Rate  float64   // jobs per second, > 0
	Begin time.Time // when job 0 is due
	// End: no job due at or after it is released.
	End time.Time
	// Budget, when set, bounds the count: a job it refuses ends the run.
	Budget *Budget
}

// PacerResult is what a Pacer did.
type PacerResult struct {
	// Due is the jobs the run reached (due before End, within the
	// budget); Released, those of them released. The others were held
	// back until the end (or ctx ended first).
	Due, Released int64
	// Lag is how late each released job left: its release less its due
	// time (µs). It is part of the job's latency, so it bounds how well
	// a latency is measured: the server cannot be faster than the lag.
	Lag *hdrhistogram.Histogram
}

// Due is when job k is due.
func (p *Pacer) Due(k int64) time.Time {
	return p.Begin.Add(time.Duration(float64(k) * 1e9 / p.Rate))
}

// holdRetry is how soon a job held back is offered again.
const holdRetry = 100 * time.Microsecond

// maxSleep bounds one sleep, so that a slow schedule still sees its
// context end.
const maxSleep = 50 * time.Millisecond

// Run releases the jobs as they fall due until End, the budget or ctx
// stops it. Each time it wakes it calls release for every job due by
// then, in order, and then flush once, so that the jobs due together go
// out in one write per connection. release returns false to hold a job
// back (its connection has too many jobs out): it is offered again
// shortly, its due time unchanged, and nothing after it is released
// before it. An error from release or flush ends the run.
//
// Run sleeps on an OS thread of its own, with nanosleep and a timer slack
// of 1 ns: Go's timers wake an idle process up to a millisecond late
// (the netpoller's epoll timeout counts whole milliseconds), which would
// be most of the latency measured here. The lag that remains (the
// kernel's wake-up, tens of µs on a VM) is in PacerResult.Lag.
func (p *Pacer) Run(ctx context.Context, release func(k int64, due time.Time) (bool, error), flush func() error) (PacerResult, error) {
	res := PacerResult{Lag: NewLatencyHistogram()}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Best effort: without it the kernel may add up to 50 µs per sleep.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	var k int64
	// next takes the next job from the schedule, if there is one.
	next := func() (time.Time, bool) {
		due := p.Due(k)
		if !due.Before(p.End) || !p.Budget.Take() {
			return due, false
		}
		res.Due++
		return due, true
	}
	due, ok := next()
	for ok && ctx.Err() == nil {
		if wait := time.Until(due); wait > 0 {
			sleep(min(wait, maxSleep))
			continue
		}
		held := false
		for ok && !due.After(time.Now()) {
			sent, err := release(k, due)
			if err != nil {
				return res, err
			}
			if !sent {
				held = true
				break
			}
			recordLatency(res.Lag, time.Since(due))
			res.Released++
			k++
			due, ok = next()
		}
		if err := flush(); err != nil {
			return res, err
		}
		if held {
			// A job held to the end stays due and unreleased: the
			// run is over when no more jobs may leave.
			if !time.Now().Before(p.End) {
				break
			}
			sleep(holdRetry)
		}
	}
	return res, ctx.Err()
}

// sleep blocks the calling thread for d, resumed after a signal (the Go
// runtime's preemption signals interrupt it).
func sleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}
