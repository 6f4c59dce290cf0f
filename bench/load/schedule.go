package load

import (
	"context"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Schedule turns the closed loops of synchronous clients (HTTPClient, a
// MemoDB context: one request at a time on a connection) into an open
// loop: a Pacer lets jobs fall due at Rate into a queue, and each
// connection, whenever it is free, takes the oldest due job and times it
// from its due time. Jobs due while every connection is busy wait in the
// queue, their latency running, as a request waits for a free connection
// in a pool: no coordinated omission, as long as there are connections
// enough for the rate (a connection's jobs/s is one over its latency).
type Schedule struct {
	due    chan time.Time
	done   chan struct{}
	mu     sync.Mutex
	result PacerResult
	err    error
}

// DefaultScheduleQueue bounds the jobs due and not yet taken: far past
// what a sustained rate keeps waiting, it bounds a run past saturation.
const DefaultScheduleQueue = 1 << 16

// StartSchedule lets jobs fall due at rate from now until end (and within
// budget, if not nil) until ctx ends. A job due when the queue is full
// waits in the Pacer, its due time kept.
func StartSchedule(ctx context.Context, rate float64, end time.Time, budget *Budget) *Schedule {
	s := &Schedule{due: make(chan time.Time, DefaultScheduleQueue), done: make(chan struct{})}
	p := Pacer{Rate: rate, Begin: time.Now(), End: end, Budget: budget}
	go func() {
		defer close(s.done)
		defer close(s.due)
		res, err := p.Run(ctx, func(_ int64, due time.Time) (bool, error) {
			select {
			case s.due <- due:
				return true, nil
			default:
				return false, nil
			}
		}, func() error { return nil })
		s.mu.Lock()
		s.result, s.err = res, err
		s.mu.Unlock()
	}()
	return s
}

// Next blocks until a job is due and returns its due time, or false once
// the schedule is over and its queue empty, or ctx ends.
func (s *Schedule) Next(ctx context.Context) (time.Time, bool) {
	select {
	case due, ok := <-s.due:
		return due, ok
	case <-ctx.Done():
		return time.Time{}, false
	}
}

// Wait waits for the Pacer to end and returns how many jobs fell due and
// how late it released them (Lag, µs), and how many it left in the
// queue (Unsent): due, never taken by a connection.
func (s *Schedule) Wait() (due, unsent int64, lag *hdrhistogram.Histogram) {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result.Due, s.result.Due - s.result.Released + int64(len(s.due)), s.result.Lag
}

// next returns when the next job's latency starts: its due time under a
// Schedule, else now (a closed loop: the job goes when the last one has
// finished), or false when the phase has no more jobs.
func (p *Phase) next(ctx context.Context) (time.Time, bool) {
	if p.Schedule != nil {
		return p.Schedule.Next(ctx)
	}
	now := time.Now()
	if ctx.Err() != nil || (!p.End.IsZero() && !now.Before(p.End)) || !p.Budget.Take() {
		return time.Time{}, false
	}
	return now, true
}

// counts reports whether a job whose latency started at start and that
// finished at done is measured: under a Schedule, those due in the
// window, whenever they finished (a stall past the window's end is
// counted in full); in a closed loop, those that finished in it.
func (p *Phase) counts(start, done time.Time) bool {
	if p.Schedule != nil {
		return p.measured(start)
	}
	return p.measured(done)
}
