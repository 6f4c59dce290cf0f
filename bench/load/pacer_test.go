package load

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPacerReleasesOnSchedule(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64
		span     time.Duration
		budget   int64 // 0: none
		holdAt   int64 // release refuses job holdAt this many times; -1: never
		holds    int
		wantJobs int64
	}{
		{"the end bounds it", 2000, 100 * time.Millisecond, 0, -1, 0, 200},
		{"the budget bounds it", 2000, time.Minute, 50, -1, 0, 50},
		{"a held job goes later, in order", 1000, 50 * time.Millisecond, 0, 5, 3, 50},
		{"a slow rate", 40, 100 * time.Millisecond, 0, -1, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			begin := time.Now().Add(5 * time.Millisecond)
			p := Pacer{Rate: tt.rate, Begin: begin, End: begin.Add(tt.span)}
			if tt.budget > 0 {
				p.Budget = NewBudget(tt.budget)
			}
			var next int64
			holds, flushes := 0, 0
			res, err := p.Run(context.Background(), func(k int64, due time.Time) (bool, error) {
				if now := time.Now(); now.Before(due) {
					t.Errorf("job %d released %v before it was due", k, due.Sub(now))
				}
				if k != next {
					t.Errorf("job %d released, want %d", k, next)
				}
				if want := p.Due(k); !due.Equal(want) {
					t.Errorf("job %d due %v, want %v", k, due, want)
				}
				if k == tt.holdAt && holds < tt.holds {
					holds++
					return false, nil
				}
				next++
				return true, nil
			}, func() error { flushes++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if res.Due != tt.wantJobs || res.Released != tt.wantJobs || next != tt.wantJobs || res.Lag.TotalCount() != tt.wantJobs {
				t.Errorf("due %d, released %d, %d calls, %d lags; want %d", res.Due, res.Released, next, res.Lag.TotalCount(), tt.wantJobs)
			}
			if flushes == 0 || holds != tt.holds {
				t.Errorf("%d flushes, %d holds; want some flushes and %d holds", flushes, holds, tt.holds)
			}
		})
	}
}

func TestPacerStops(t *testing.T) {
	t.Run("a job held to the end is due, not released", func(t *testing.T) {
		begin := time.Now()
		p := Pacer{Rate: 1000, Begin: begin, End: begin.Add(20 * time.Millisecond)}
		res, err := p.Run(context.Background(), func(k int64, _ time.Time) (bool, error) { return k < 3, nil }, func() error { return nil })
		if err != nil || res.Due != 4 || res.Released != 3 {
			t.Errorf("due %d, released %d, %v; want 4 due, 3 released, no error", res.Due, res.Released, err)
		}
	})
	t.Run("an error from release ends it", func(t *testing.T) {
		broken := errors.New("broken pipe")
		p := Pacer{Rate: 1000, Begin: time.Now(), End: time.Now().Add(time.Minute)}
		res, err := p.Run(context.Background(), func(k int64, _ time.Time) (bool, error) {
			if k == 2 {
				return false, broken
			}
			return true, nil
		}, func() error { return nil })
		if !errors.Is(err, broken) || res.Released != 2 {
			t.Errorf("released %d, %v; want 2 and the error", res.Released, err)
		}
	})
	t.Run("the context ends it", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		// One job a minute: the run must not sleep past its context.
		p := Pacer{Rate: 1.0 / 60, Begin: time.Now(), End: time.Now().Add(time.Hour)}
		done := make(chan error, 1)
		go func() {
			res, err := p.Run(ctx, func(int64, time.Time) (bool, error) { return true, nil }, func() error { return nil })
			if res.Released != 1 {
				t.Errorf("released %d, want the first job only", res.Released)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want the context's error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the pacer outlived its context")
		}
	})
}
