package sched

import (
	"fmt"
	"math/rand/v2"
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

// The wheel against a plain model: random timers from one tick to beyond
// the last level's span, random cancels and re-arms, random jumps; every
// timer fires exactly at its tick (or at the first advance past it).
func TestWheelAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := wheel{count: newTimerCount()}
	const n = 5000
	timers := make([]*timer, n)
	due := map[*timer]int64{}
	spans := []int64{1, wheelSlots, wheelSlots * wheelSlots, 1 << 24, 1 << 32, 1 << 34}
	arm := func(tm *timer) {
		e := w.now + 1 + rng.Int64N(spans[rng.IntN(len(spans))])
		w.arm(tm, e)
		due[tm] = e
	}
	for i := range timers {
		timers[i] = &timer{job: &Job{id: uint64(i)}}
		arm(timers[i])
	}
	for len(due) > 0 {
		// Jump: mostly to the next due timer, sometimes past several.
		next := int64(-1)
		for _, e := range due {
			if next < 0 || e < next {
				next = e
			}
		}
		to := next
		if rng.IntN(4) == 0 {
			to += rng.Int64N(3 * wheelSlots)
		}
		w.advance(to, func(tm *timer) {
			e, ok := due[tm]
			if !ok || e > to || e <= to-3*wheelSlots-1 && e < next {
				t.Fatalf("timer %d due %d (armed %v) fired advancing to %d", tm.job.id, e, ok, to)
			}
			delete(due, tm)
			if rng.IntN(3) == 0 {
				arm(tm) // re-arm from the fire callback, as Advance may
			}
		})
		for tm, e := range due {
			if e <= to {
				t.Fatalf("timer %d due %d not fired by %d", tm.job.id, e, to)
			}
		}
		// Cancel or move a few.
		for i := 0; i < 3; i++ {
			tm := timers[rng.IntN(n)]
			if _, ok := due[tm]; ok {
				if rng.IntN(2) == 0 {
					w.cancel(tm)
					delete(due, tm)
				} else {
					arm(tm)
				}
			}
		}
		if w.n != len(due) {
			t.Fatalf("wheel holds %d timers, model %d", w.n, len(due))
		}
	}
}

// Ticking towards a million timers due in an hour costs next to nothing
// per tick: a tick looks at its own slot, a lap boundary at one slot of a
// higher level, and each timer moves down at most once per level. One op
// is the hour walked tick by tick, up to the tick before they are due.
func BenchmarkWheelTickWithFarTimers(b *testing.B) {
	const hour = 360_000 // ticks of 10 ms
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		w := wheel{count: newTimerCount()}
		for k := 0; k < 1_000_000; k++ {
			w.arm(&timer{job: &Job{}}, hour+int64(k%1000))
		}
		b.StartTimer()
		for w.now < hour-1 {
			w.advance(w.now+1, func(*timer) { b.Fatal("fired early") })
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/hour, "ns/tick")
}
