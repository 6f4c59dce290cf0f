package sched

import (
	"strings"
	"testing"
	"time"
)

// Each way a job fails is kept, newest first, with what the worker said
// or the scheduler's words; a function keeps at most Config.Failures, and
// a long text is cut.
func TestFailures(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, Failures: 3, JobRetries: 1})
	c := s.NewClient(&recorder{})
	c.SetSource(2)
	w := s.NewWorker(&waker{})
	w.SetName("w1")
	w.CanDo([]byte("f"), 0)
	grab := func() *Job {
		t.Helper()
		j := w.Grab()
		if j == nil {
			t.Fatal("nothing to grab")
		}
		return j
	}

	fail := submit(t, c, "f", "u1", "", Normal, true)
	grab()
	if err := w.Update(fail, &Update{Kind: Fail, Reason: "WORK_FAIL"}); err != nil {
		t.Fatal(err)
	}
	clk.pass(time.Second)
	exc := submit(t, c, "f", "u2", "", Normal, true)
	grab()
	w.Update(exc, &Update{Kind: Exception, Reason: "WORK_EXCEPTION", Data: []byte("boom")})
	clk.pass(time.Second)
	forever, _ := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("u3"), Background: true, RetryForever: true})
	grab()
	w.Update(forever, &Update{Kind: Fail, Data: []byte(strings.Repeat("x", 2*MaxFailureText))})

	got := s.Failures([]byte("f"), nil)
	if len(got) != 3 {
		t.Fatalf("%d failures kept, want 3: %+v", len(got), got)
	}
	want := []struct {
		id      uint64
		kind    FailKind
		text    string
		retried bool
	}{
		{forever, FailReported, strings.Repeat("x", MaxFailureText), true},
		{exc, FailException, "WORK_EXCEPTION: boom", false},
		{fail, FailReported, "WORK_FAIL", false},
	}
	for i, wnt := range want {
		g := got[i]
		if g.ID != wnt.id || g.Kind != wnt.kind || g.Text != wnt.text || g.Retried != wnt.retried ||
			g.Func != "f" || g.Source != 2 || g.Worker != "w1" {
			t.Errorf("failure %d = %+v, want %+v", i, g, wnt)
		}
	}
	if !got[1].At.Before(got[0].At) {
		t.Errorf("not newest first: %v then %v", got[0].At, got[1].At)
	}

	// A queue timeout, in another function.
	if _, err := c.Submit(&SubmitReq{Func: []byte("g"), Background: true, QueueTimeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	s.Advance(clk.pass(3 * time.Second))
	g := s.Failures([]byte("g"), nil)
	if len(g) != 1 || g[0].Kind != FailQueueTimeout || g[0].Text != "waited in its queue past its queue timeout (2 s)" {
		t.Fatalf("queue timeout: %+v", g)
	}
	var all []Failure
	s.FailuresChunked(func(c []Failure) { all = append(all, c...) })
	if len(all) != 4 {
		t.Fatalf("FailuresChunked gave %d, want 4", len(all))
	}
}

// A job whose workers keep going away fails once its retries are used
// up, and that is kept with the attempts lost.
func TestFailureRetriesUsedUp(t *testing.T) {
	s := newTest(t, Config{Failures: 2, JobRetries: 2})
	c := s.NewClient(&recorder{})
	id := submit(t, c, "f", "", "", Normal, true)
	for range 2 {
		w := s.NewWorker(&waker{})
		w.CanDo([]byte("f"), 0)
		if j := w.Grab(); j == nil || j.ID() != id {
			t.Fatal("no job")
		}
		w.Close()
	}
	got := s.Failures([]byte("f"), nil)
	if len(got) != 1 || got[0].Kind != FailRetries || !strings.HasPrefix(got[0].Text, "lost 2 attempts") {
		t.Fatalf("%+v", got)
	}
	// None kept without Config.Failures.
	s2 := newTest(t, Config{})
	c2 := s2.NewClient(&recorder{})
	id = submit(t, c2, "f", "", "", Normal, true)
	w := s2.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	w.Grab()
	w.Update(id, &Update{Kind: Fail})
	if got := s2.Failures([]byte("f"), nil); len(got) != 0 {
		t.Fatalf("kept %v", got)
	}
}

// Once a function's ring is full, a failure allocates nothing: a failed
// job costs what it costs with no failures kept.
func TestFailureNoAllocation(t *testing.T) {
	allocs := func(keep int) float64 {
		s := newTest(t, Config{Failures: keep})
		c := s.NewClient(&recorder{})
		w := s.NewWorker(&waker{})
		w.CanDo([]byte("f"), 0)
		w.SetName("w")
		u := &Update{Kind: Exception, Reason: "WORK_EXCEPTION", Data: []byte("stack trace")}
		req := &SubmitReq{Func: []byte("f"), Background: true}
		round := func() {
			id, _ := c.Submit(req)
			w.Grab()
			w.Update(id, u)
		}
		for range 8 {
			round()
		}
		return testing.AllocsPerRun(200, round)
	}
	if with, without := allocs(4), allocs(0); with != without {
		t.Fatalf("%v allocations per failed job with failures kept, %v without", with, without)
	}
}
