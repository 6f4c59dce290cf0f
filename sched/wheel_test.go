package sched

import (
	"fmt"
	"testing"
)

func TestWheel(t *testing.T) {
	clk := newTimerCount()
	w := wheel{count: clk}
	timers := make([]*timer, 6)
	expires := []int64{1, 5, 5, wheelSlots, wheelSlots + 5, 3 * wheelSlots}
	for i, e := range expires {
		timers[i] = &timer{job: &Job{id: uint64(i)}}
		w.arm(timers[i], e)
	}
	w.cancel(timers[2])
	w.cancel(timers[2]) // twice is harmless
	if clk.armed.Load() != 5 || w.n != 5 {
		t.Fatalf("armed %d, n %d", clk.armed.Load(), w.n)
	}
	fired := func(now int64) string {
		var got []uint64
		w.advance(now, func(tm *timer) { got = append(got, tm.job.id) })
		return fmt.Sprint(got)
	}
	steps := []struct {
		now  int64
		want string
	}{
		{0, "[]"},
		{4, "[0]"},
		{5, "[1]"},          // timer 2 was cancelled
		{wheelSlots, "[3]"}, // same slot as tick 0, one lap later
		{wheelSlots + 4, "[]"},
		{10 * wheelSlots, "[4 5]"}, // a long gap visits every slot once
	}
	for _, s := range steps {
		if got := fired(s.now); got != s.want {
			t.Fatalf("advance(%d) fired %s, want %s", s.now, got, s.want)
		}
	}
	if clk.armed.Load() != 0 || w.n != 0 {
		t.Fatalf("after all fired: armed %d, n %d", clk.armed.Load(), w.n)
	}
	// Arming in the past fires on the next tick; re-arming moves a timer.
	tm := &timer{job: &Job{id: 9}}
	w.arm(tm, 1)
	w.arm(tm, w.now+3)
	if got := fired(w.now + 2); got != "[]" {
		t.Fatalf("re-armed timer fired early: %s", got)
	}
	if got := fired(w.now + 1); got != "[9]" {
		t.Fatalf("re-armed timer: %s", got)
	}
	select {
	case <-clk.kick:
	default:
		t.Fatal("arming with none armed did not kick the ticker")
	}
}
