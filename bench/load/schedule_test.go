package load

import (
	"context"
	"testing"
	"time"
)

// A Schedule hands out every job due, in order, each its Pacer due time,
// to whichever taker comes, and closes once the budget is spent and the
// queue taken.
func TestScheduleHandsOutDueJobs(t *testing.T) {
	ctx := context.Background()
	s := StartSchedule(ctx, 2000, time.Now().Add(time.Hour), NewBudget(100))
	var got []time.Time
	for {
		due, ok := s.Next(ctx)
		if !ok {
			break
		}
		if due.After(time.Now()) {
			t.Errorf("job handed out %v before it was due", due.Sub(time.Now()))
		}
		got = append(got, due)
	}
	due, unsent, lag := s.Wait()
	if len(got) != 100 || due != 100 || unsent != 0 || lag.TotalCount() != 100 {
		t.Fatalf("%d jobs taken, %d due, %d unsent, %d lags; want 100 of each and none unsent", len(got), due, unsent, lag.TotalCount())
	}
	for i := 1; i < len(got); i++ {
		if d := got[i].Sub(got[i-1]); d != 500*time.Microsecond {
			t.Fatalf("jobs %d and %d due %v apart, want 500µs", i-1, i, d)
		}
	}
}

// The phase's next and counts: a closed loop times from now and measures
// by when a job finished; under a Schedule from the due time, measured by
// when it was due.
func TestPhaseNextAndCounts(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	closed := &Phase{Start: now, End: now.Add(time.Hour), Budget: NewBudget(1)}
	if start, ok := closed.next(ctx); !ok || start.Before(now) {
		t.Errorf("closed loop: %v, %v", start, ok)
	}
	if _, ok := closed.next(ctx); ok {
		t.Error("closed loop went past its budget")
	}
	late := now.Add(2 * time.Hour)
	if closed.counts(now, late) || !closed.counts(now.Add(-time.Second), now.Add(time.Second)) {
		t.Error("closed loop: measured by when the job finished")
	}
	open := &Phase{Start: now, End: now.Add(time.Hour), Schedule: StartSchedule(ctx, 1000, now.Add(time.Hour), NewBudget(10))}
	if !open.counts(now, late) || open.counts(now.Add(-time.Second), now.Add(time.Second)) {
		t.Error("open loop: measured by when the job was due")
	}
	n := 0
	for _, ok := open.next(ctx); ok; _, ok = open.next(ctx) {
		n++
	}
	if n != 10 {
		t.Errorf("open loop: %d jobs, want 10", n)
	}
}
