package load

import (
	"sync"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	b := NewBudget(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for b.Take() {
				n++
			}
			mu.Lock()
			taken += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if taken != 1000 || b.Left() != 0 {
		t.Errorf("taken %d, left %d; want 1000, 0", taken, b.Left())
	}
	var unlimited *Budget
	if !unlimited.Take() {
		t.Error("a nil budget refused a job")
	}
}

func TestProgressMarks(t *testing.T) {
	tests := []struct {
		name  string
		total int64
		adds  []int64
		want  []int // percent marks that must be set
		unset []int // and must not
	}{
		{"one by one", 200, repeat(1, 200), []int{0, 1, 10, 50, 99, 100}, nil},
		{"in bursts", 1000, []int64{95, 10, 395}, []int{9, 10, 50}, []int{51, 100}},
		{"fewer jobs than marks", 3, []int64{1, 1}, []int{33, 66}, []int{67, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewProgress(tt.total)
			var told []int
			p.OnMark = func(pct int) {
				if _, ok := p.Mark(pct); !ok {
					t.Errorf("told of %d%% before its mark was set", pct)
				}
				told = append(told, pct)
			}
			for _, n := range tt.adds {
				p.Add(n)
			}
			for _, pct := range tt.want {
				if _, ok := p.Mark(pct); !ok {
					t.Errorf("mark %d%% not set after %d of %d", pct, p.Done(), tt.total)
				}
			}
			for _, pct := range tt.unset {
				if _, ok := p.Mark(pct); ok {
					t.Errorf("mark %d%% set after %d of %d", pct, p.Done(), tt.total)
				}
			}
			// OnMark heard of every mark set after 0%, once, in order.
			for i, pct := range told {
				if pct != i+1 {
					t.Fatalf("told of marks %v, want 1, 2, 3, ...", told)
				}
			}
			if last := len(told); last < 100 {
				if _, ok := p.Mark(last + 1); ok {
					t.Errorf("mark %d%% set, OnMark not told", last+1)
				}
			}
		})
	}
	var none *Progress
	none.Add(1) // a nil Progress ignores jobs
}

func TestProgressMarksInOrder(t *testing.T) {
	p := NewProgress(100)
	for range 100 {
		p.Add(1)
	}
	prev := time.Time{}
	for pct := 0; pct <= 100; pct++ {
		at, ok := p.Mark(pct)
		if !ok || at.Before(prev) {
			t.Fatalf("mark %d%%: %v, set %v, previous %v", pct, at, ok, prev)
		}
		prev = at
	}
}

func TestCountdown(t *testing.T) {
	fired := 0
	c := NewCountdown(3, func() { fired++ })
	for range 5 {
		c.Dec()
	}
	if fired != 1 {
		t.Errorf("fired %d times, want 1", fired)
	}
	NewCountdown(0, func() { fired++ })
	if fired != 2 {
		t.Error("a countdown of 0 did not fire at once")
	}
	var none *Countdown
	none.Dec()
}

func repeat(v int64, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v
	}
	return s
}
