package sched

import (
	"fmt"
	"testing"
	"time"
)

// A job with a QueueTimeout that no worker takes in time ends, and its
// client hears a Fail; each wait in the queue counts afresh (after a
// worker gives it back, or once a delayed job comes due); a grabbed job is
// past it.
func TestQueueTimeout(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, JobRetries: 5})
	rec := &recorder{}
	c := s.NewClient(rec)
	submitQT := func(u string, when int64) uint64 {
		id, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte(u), QueueTimeout: 10 * time.Second, When: when})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	a := submitQT("a", 0)
	s.Advance(clk.pass(9999 * time.Millisecond))
	if len(rec.events()) != 0 {
		t.Fatalf("expired early: %v", rec.events())
	}
	s.Advance(clk.pass(time.Millisecond))
	if got, want := fmt.Sprint(rec.events()), fmt.Sprintf("[%d:%d:]", a, Fail); got != want {
		t.Fatalf("heard %s, want %s", got, want)
	}
	if st := s.statFor("f"); st.Total() != 0 {
		t.Fatalf("left %+v", st)
	}

	b := submitQT("b", 0)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	s.Advance(clk.pass(5 * time.Second))
	if j := w.Grab(); j == nil || j.ID() != b {
		t.Fatal("no b")
	}
	s.Advance(clk.pass(time.Minute)) // running: no queue timeout
	if err := w.Requeue(b, RequeueReq{}); err != nil {
		t.Fatal(err)
	}
	s.Advance(clk.pass(9 * time.Second)) // a fresh wait
	if len(rec.events()) != 1 {
		t.Fatalf("b expired on its old clock: %v", rec.events())
	}
	s.Advance(clk.pass(time.Second))
	if got := rec.events(); len(got) != 2 || got[1] != fmt.Sprintf("%d:%d:", b, Fail) {
		t.Fatalf("heard %v", got)
	}

	d := submitQT("d", clk.Wall().Unix()+60) // due in a minute, then 10 s to be taken
	s.Advance(clk.pass(60 * time.Second))    // due: queued now
	s.Advance(clk.pass(9999 * time.Millisecond))
	if len(rec.events()) != 2 {
		t.Fatalf("d expired before it came due and waited: %v", rec.events())
	}
	s.Advance(clk.pass(time.Millisecond))
	if got := rec.events(); len(got) != 3 || got[2] != fmt.Sprintf("%d:%d:", d, Fail) {
		t.Fatalf("heard %v", got)
	}
}
