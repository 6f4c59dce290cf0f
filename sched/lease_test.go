package sched

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// While the lease lapses the scheduler hands out nothing: Grab finds no
// job, Sleep finds none waiting, and neither a new job nor one coming due
// wakes a worker; submits queue and running jobs end as usual. Once the
// lease holds again, the next tick wakes each worker asleep on a function
// with jobs waiting, once, and every job is handed out.
func TestLease(t *testing.T) {
	var held atomic.Bool
	held.Store(true)
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, Lease: held.Load})
	c := s.NewClient(&recorder{})
	running := submit(t, c, "f", "", "run", Normal, true)
	wk := &waker{}
	w := s.NewWorker(wk)
	w.CanDo([]byte("f"), 0)
	if j := w.Grab(); j == nil || j.ID() != running {
		t.Fatal("no job handed out while the lease holds")
	}
	idle := s.NewWorker(&waker{}) // asleep on g, which gets no job
	idle.CanDo([]byte("g"), 0)
	if idle.Sleep() {
		t.Fatal("work ready for g")
	}

	held.Store(false)
	a := submit(t, c, "f", "", "a", Normal, true)
	if j := w.Grab(); j != nil {
		t.Fatalf("job %d handed out while the lease lapsed", j.ID())
	}
	if w.Sleep() {
		t.Fatal("Sleep found work ready while the lease lapsed")
	}
	b := submit(t, c, "f", "", "b", Normal, true)
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Payload: []byte("later"), Background: true, When: clk.Wall().Add(time.Second).Unix()}); err != nil {
		t.Fatal(err)
	}
	s.Advance(clk.pass(2 * time.Second)) // the job due later comes due: no wake either
	if n := wk.n.Load(); n != 0 {
		t.Fatalf("the worker was woken %d times while the lease lapsed", n)
	}
	if err := w.Update(running, &Update{Kind: Complete}); err != nil {
		t.Fatalf("a running job's end while the lease lapsed: %v", err)
	}
	if st := s.statFor("f"); st.Total() != 3 {
		t.Fatalf("jobs waiting: %+v", st)
	}

	held.Store(true)
	s.Advance(clk.Now())
	if n := wk.n.Load(); n != 1 {
		t.Fatalf("the lease back woke the worker %d times, want 1", n)
	}
	if s.timers.armed.Load() != 0 {
		t.Fatalf("%d timers armed once the lease is back", s.timers.armed.Load())
	}
	var got []uint64
	for j := w.Grab(); j != nil; j = w.Grab() {
		got = append(got, j.ID())
	}
	if ia, ib := slices.Index(got, a), slices.Index(got, b); len(got) != 3 || ia < 0 || ib < ia {
		t.Fatalf("after the lease came back the jobs came %v, want all three, %d before %d", got, a, b)
	}
	s.Advance(clk.Now())
	if n := wk.n.Load(); n != 1 {
		t.Fatalf("woken %d times", n)
	}
}

// A worker lying down while the lease comes back is not left asleep with
// work waiting. The tick that sees the lease back may look for sleepers
// between the worker's look at the lease and its lying down among them,
// and then never looks again: Sleep looks at the lease once more. (A
// drain through a leader back from a pause waited forever so.)
func TestLeaseBackWhileLyingDown(t *testing.T) {
	var held atomic.Bool
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, Lease: held.Load})
	c := s.NewClient(&recorder{})
	submit(t, c, "f", "", "x", Normal, true)
	wk := &waker{}
	w := s.NewWorker(wk)
	w.CanDo([]byte("f"), 0)
	if j := w.Grab(); j != nil {
		t.Fatal("a job handed out while the lease lapsed")
	}
	s.lyingDown = func() { // the lease back, and a tick, at the worst time
		held.Store(true)
		s.Advance(clk.Now())
	}
	ready := w.Sleep()
	s.lyingDown = nil
	s.Advance(clk.Now()) // later ticks
	if !ready && wk.n.Load() == 0 {
		t.Fatal("the worker lies asleep with a job waiting and the lease held")
	}
	if j := w.Grab(); j == nil {
		t.Fatal("no job handed out once the lease held")
	}
}
