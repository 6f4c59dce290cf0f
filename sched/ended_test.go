package sched

import (
	"fmt"
	"testing"
	"time"
)

// A job submitted with Remember leaves a note when it ends: its id, when,
// and the worker that ran it. A later submit of its name is late: ErrEnded
// with that id, and nothing runs. Jobs without Remember leave none.
func TestEndedNotes(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, EndedRetention: time.Minute})
	c := s.NewClient(&recorder{})
	w := s.NewWorker(&waker{})
	w.SetName("host-1")
	w.CanDo([]byte("f"), 0)
	id, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("t"), Background: true, Remember: true})
	if err != nil {
		t.Fatal(err)
	}
	plain := submit(t, c, "f", "plain", "", Normal, true)
	j := w.Grab()
	if v, _ := s.Find([]byte("f"), []byte("t")); !v.Running || v.Worker != "host-1" {
		t.Fatalf("running: %+v", v)
	}
	w.Update(j.ID(), &Update{Kind: Complete})
	w.Update(w.Grab().ID(), &Update{Kind: Complete})
	e, ok := s.EndedJob([]byte("f"), []byte("t"))
	if !ok || e.ID != id || e.Worker != "host-1" || !e.At.Equal(clk.Wall()) {
		t.Fatalf("note %+v %v", e, ok)
	}
	if _, ok := s.EndedJob([]byte("f"), []byte("plain")); ok {
		t.Fatalf("job %d without Remember left a note", plain)
	}
	again, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("t"), Background: true, Remember: true})
	if err != ErrEnded || again != id || w.Grab() != nil {
		t.Fatalf("late submit: %d, %v", again, err)
	}
	// Without Remember the name is free to run again.
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("t"), Background: true}); err != nil {
		t.Fatal(err)
	}
	w.Update(w.Grab().ID(), &Update{Kind: Complete})
	s.Advance(clk.pass(time.Minute))
	if _, ok := s.EndedJob([]byte("f"), []byte("t")); ok {
		t.Fatal("a note outlived the retention")
	}
}

// The notes are bounded: past EndedMax the oldest go first, and memory
// does not grow with the number of jobs that ended.
func TestEndedNotesBounded(t *testing.T) {
	s := newTest(t, Config{Shards: 1, EndedMax: 100})
	c := s.NewClient(&recorder{})
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	for i := 0; i < 10_000; i++ {
		c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte(fmt.Sprint(i)), Background: true, Remember: true})
		w.Update(w.Grab().ID(), &Update{Kind: Complete})
	}
	sh := &s.shards[0]
	if n := len(sh.ended.byKey); n > 100 {
		t.Fatalf("%d notes kept, max 100", n)
	}
	if n := cap(sh.ended.fifo); n > 4096 {
		t.Fatalf("fifo capacity %d", n)
	}
	if _, ok := s.EndedJob([]byte("f"), []byte("9899")); ok {
		t.Fatal("the 101st newest note survived")
	}
	if _, ok := s.EndedJob([]byte("f"), []byte("9900")); !ok {
		t.Fatal("the 100th newest note is gone")
	}
}

// Remember is in a job's record: a job replayed after a restart still
// leaves its note when it ends, so a late submit of its name is known to be
// late; one submitted without Remember still leaves none.
func TestEndedNotesAfterReplay(t *testing.T) {
	st := newTestStore()
	s1 := newTest(t, Config{Store: st})
	c1 := s1.NewClient(&recorder{})
	for _, u := range []string{"kept", "plain"} {
		if _, err := c1.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte(u), Background: true, Remember: u == "kept"}); err != nil {
			t.Fatal(err)
		}
	}
	s2 := newTest(t, Config{Store: st})
	if n, err := s2.Replay(); n != 2 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	w := s2.NewWorker(&waker{})
	w.SetName("host-2")
	w.CanDo([]byte("f"), 0)
	for range 2 {
		w.Update(w.Grab().ID(), &Update{Kind: Complete})
	}
	if e, ok := s2.EndedJob([]byte("f"), []byte("kept")); !ok || e.Worker != "host-2" {
		t.Fatalf("note of the replayed job: %+v %v", e, ok)
	}
	if _, ok := s2.EndedJob([]byte("f"), []byte("plain")); ok {
		t.Fatal("a replayed job without Remember left a note")
	}
	c2 := s2.NewClient(&recorder{})
	if _, err := c2.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("kept"), Background: true, Remember: true}); err != ErrEnded {
		t.Fatalf("late submit after the replay: %v, want ErrEnded", err)
	}
}
