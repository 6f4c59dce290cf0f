package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A paused function takes submits and hands out nothing: Grab passes it
// by for the worker's other functions, Sleep waits on, a new job wakes
// no one; its running job ends as usual. Resume wakes the sleepers, and
// the jobs go in their order.
func TestPauseResume(t *testing.T) {
	s := newTest(t, Config{FunctionTTL: time.Hour})
	c := s.NewClient(&recorder{})
	running := submit(t, c, "p", "", "run", Normal, true)
	wk := &waker{}
	w := s.NewWorker(wk)
	w.CanDo([]byte("p"), 0)
	w.CanDo([]byte("other"), 0)
	if j := w.Grab(); j == nil || j.ID() != running {
		t.Fatal("no job to run before the pause")
	}
	if err := s.Pause([]byte("p")); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause([]byte("nobody")); err != ErrNoFunction {
		t.Fatalf("pausing an unknown function: %v", err)
	}
	a := submit(t, c, "p", "", "a", Low, true)
	b := submit(t, c, "p", "", "b", High, true)
	o := submit(t, c, "other", "", "o", Normal, true)
	if j := w.Grab(); j == nil || j.ID() != o {
		t.Fatalf("a grab while p is paused took %v, want other's job", j)
	}
	if j := w.Grab(); j != nil {
		t.Fatalf("a paused function handed out job %d", j.ID())
	}
	if w.Sleep() {
		t.Fatal("Sleep says work is ready on a paused function")
	}
	submit(t, c, "p", "", "c", Normal, true)
	if n := wk.n.Load(); n != 0 {
		t.Fatalf("a job of a paused function woke the worker %d times", n)
	}
	st := s.statFor("p")
	if !st.Paused || st.Total() != 4 || st.Running != 1 {
		t.Fatalf("paused p: %+v", st)
	}
	// Its running job ends as usual.
	if err := w.Update(running, &Update{Kind: Complete}); err != nil {
		t.Fatal(err)
	}
	// Idle for ever while paused: a pause is an admin setting.
	if st := s.statFor("p"); st.Running != 0 {
		t.Fatalf("%+v", st)
	}
	if err := s.Resume([]byte("p")); err != nil {
		t.Fatal(err)
	}
	if n := wk.n.Load(); n != 1 {
		t.Fatalf("Resume woke the sleeping worker %d times, want 1", n)
	}
	var got []uint64
	for j := w.Grab(); j != nil; j = w.Grab() {
		got = append(got, j.ID())
	}
	if len(got) != 3 || got[0] != b || got[2] != a {
		t.Fatalf("after Resume the jobs came %v, want b, c, a (b=%d a=%d)", got, b, a)
	}
	if s.statFor("p").Paused {
		t.Fatal("still paused")
	}
}

// A paused function with nothing in it is not forgotten for idleness;
// once resumed it is.
func TestPauseKeepsFunction(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, FunctionTTL: time.Minute})
	s.CreateFunc([]byte("kept"))
	if err := s.DropFunc([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	c := s.NewClient(&recorder{})
	id := submit(t, c, "f", "", "", Normal, true)
	if err := s.Pause([]byte("f")); err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(id); err != nil {
		t.Fatal(err)
	}
	if n := s.ForgetIdle(clk.pass(time.Hour)); n != 0 {
		t.Fatalf("forgot %d functions, one of them paused", n)
	}
	s.Resume([]byte("f"))
	if n := s.ForgetIdle(clk.pass(time.Hour)); n != 1 {
		t.Fatalf("forgot %d functions after the resume, want 1", n)
	}
}

// DropWaiting ends what waits (queued, due later, blocked) and leaves the
// running job, the workers and the function; the dropped jobs' clients
// hear a Fail.
func TestDropWaiting(t *testing.T) {
	s := newTest(t, Config{})
	rec := &recorder{}
	c := s.NewClient(rec)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("d"), 0)
	running := submit(t, c, "d", "r", "", Normal, false)
	if j := w.Grab(); j == nil || j.ID() != running {
		t.Fatal("no running job")
	}
	fg := submit(t, c, "d", "fg", "", Normal, false)
	for i := range 2*chunk + 10 { // more than a chunk
		submit(t, c, "d", fmt.Sprint("q", i), "", Priority(i%3), true)
	}
	if _, err := c.Submit(&SubmitReq{Func: []byte("d"), Unique: []byte("later"), Background: true,
		When: time.Now().Add(time.Hour).Unix()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(&SubmitReq{Func: []byte("d"), Unique: []byte("blocked"), Background: true,
		After: []Key{{Func: "d", Unique: "r"}}}); err != nil {
		t.Fatal(err)
	}
	submit(t, c, "keep", "", "", Normal, true)
	n, err := s.DropWaiting([]byte("d"))
	if want := 1 + 2*chunk + 10 + 2; err != nil || n != want {
		t.Fatalf("DropWaiting = %d, %v; want %d", n, err, want)
	}
	st := s.statFor("d")
	if st.Total() != 1 || st.Running != 1 || st.Workers != 1 {
		t.Fatalf("after the drop: %+v", st)
	}
	if s.statFor("keep").Total() != 1 {
		t.Fatal("another function's job was dropped")
	}
	if got := rec.events(); !slices.Contains(got, fmt.Sprintf("%d:%d:", fg, Fail)) {
		t.Fatalf("the dropped foreground job's client heard %v", got)
	}
	if err := w.Update(running, &Update{Kind: Complete}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DropWaiting([]byte("nobody")); err != ErrNoFunction {
		t.Fatal(err)
	}
}

// Waiting lists the jobs in the order Grab takes them, with how long each
// has waited; the oldest wait is the longest at the heads of the queues.
func TestWaitingAndOldest(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, Latency: true})
	c := s.NewClient(&recorder{})
	low := submit(t, c, "f", "l", "", Low, true)
	clk.pass(3 * time.Second)
	normal := submit(t, c, "f", "n", "", Normal, true)
	clk.pass(2 * time.Second)
	high := submit(t, c, "f", "h", "", High, true)
	clk.pass(time.Second)
	ws, ok := s.Waiting([]byte("f"), 10)
	if !ok || len(ws) != 3 {
		t.Fatalf("Waiting: %v %v", ws, ok)
	}
	for i, want := range []struct {
		id   uint64
		wait time.Duration
	}{{high, time.Second}, {normal, 3 * time.Second}, {low, 6 * time.Second}} {
		if ws[i].ID != want.id || ws[i].Wait != want.wait {
			t.Errorf("waiting[%d] = %+v, want id %d after %v", i, ws[i], want.id, want.wait)
		}
	}
	if ws, _ := s.Waiting([]byte("f"), 1); len(ws) != 1 {
		t.Fatalf("a limit of 1 listed %d", len(ws))
	}
	if st := s.statFor("f"); st.OldestWait != 6*time.Second {
		t.Fatalf("oldest wait %v, want 6s", st.OldestWait)
	}
	w := s.NewWorker(&waker{})
	w.SetName("host-1")
	w.CanDo([]byte("f"), 0)
	w.Grab() // high
	w.Grab() // normal
	clk.pass(4 * time.Second)
	if st := s.statFor("f"); st.OldestWait != 10*time.Second {
		t.Fatalf("oldest wait %v, want the low job's 10s", st.OldestWait)
	}
	held := w.Held(nil)
	slices.SortFunc(held, func(a, b HeldJob) int { return int(a.ID) - int(b.ID) })
	if len(held) != 2 || held[0].ID != normal || held[0].For != 4*time.Second || held[1].Func != "f" || held[1].Unique != "h" {
		t.Fatalf("held %+v", held)
	}
	if _, ok := s.Waiting([]byte("nobody"), 1); ok {
		t.Fatal("an unknown function waits")
	}
	// Without Latency nothing is timed.
	s2 := newTest(t, Config{Clock: clk})
	submit(t, s2.NewClient(&recorder{}), "f", "", "", Normal, true)
	clk.pass(time.Second)
	if st := s2.statFor("f"); st.OldestWait != 0 {
		t.Fatalf("oldest wait without Latency: %v", st.OldestWait)
	}
}

// A function's recent latency covers its last one to two windows, and
// with FuncHistograms its totals every attempt.
func TestFuncLatency(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, Latency: true, FuncHistograms: true})
	c := s.NewClient(&recorder{})
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	run := func(wait, ran time.Duration) {
		submit(t, c, "f", "", "", Normal, true)
		clk.pass(wait)
		j := w.Grab()
		clk.pass(ran)
		if err := w.Update(j.ID(), &Update{Kind: Complete}); err != nil {
			t.Fatal(err)
		}
	}
	run(time.Millisecond, 2*time.Second)
	l, ok := s.FuncLatencyOf([]byte("f"))
	if !ok || l.RecentWait.Count() != 1 || l.RecentRun.Count() != 1 || l.Wait.Count() != 1 {
		t.Fatalf("%+v", l)
	}
	if b := bucketOf(2 * time.Second); l.RecentRun.Buckets[b] != 1 {
		t.Fatalf("the 2s run is not in its bucket: %v", l.RecentRun.Buckets)
	}
	clk.pass(LatencyWindow)
	run(time.Millisecond, time.Millisecond)
	if l, _ := s.FuncLatencyOf([]byte("f")); l.RecentRun.Count() != 2 {
		t.Fatalf("one window on, the recent run times hold %d, want 2", l.RecentRun.Count())
	}
	clk.pass(2 * LatencyWindow)
	l, _ = s.FuncLatencyOf([]byte("f"))
	if l.RecentRun.Count() != 0 || l.Run.Count() != 2 || l.Run.Sum < 2 {
		t.Fatalf("two windows on: recent %d, total %d (sum %v)", l.RecentRun.Count(), l.Run.Count(), l.Run.Sum)
	}
	var all []FuncLatency
	s.FuncLatencies(func(c []FuncLatency) { all = append(all, c...) })
	if len(all) != 1 || all[0].Name != "f" {
		t.Fatalf("FuncLatencies: %v", all)
	}
	// Without FuncHistograms no totals.
	s2 := newTest(t, Config{Clock: clk, Latency: true})
	w2 := s2.NewWorker(&waker{})
	w2.CanDo([]byte("f"), 0)
	submit(t, s2.NewClient(&recorder{}), "f", "", "", Normal, true)
	w2.Grab()
	if l, _ := s2.FuncLatencyOf([]byte("f")); l.RecentWait.Count() != 1 || l.Wait.Count() != 0 {
		t.Fatalf("%+v", l)
	}
}

// Workers that sleep on a function paused and resumed over and over while
// jobs come in lose no wake-up: every job is done once the pauses end.
func TestPauseConcurrent(t *testing.T) {
	s := New(Config{}) // a ticker of its own
	defer s.Close()
	const jobs = 3000
	done := make(chan uint64, jobs)
	stop := make(chan struct{})
	for range 3 {
		wake := make(chanWaker, 1)
		w := s.NewWorker(wake)
		w.CanDo([]byte("p"), 0)
		go func() {
			defer w.Close()
			for {
				if j := w.Grab(); j != nil {
					w.Update(j.ID(), &Update{Kind: Complete})
					done <- j.ID()
					continue
				}
				if w.Sleep() {
					continue
				}
				select {
				case <-wake:
				case <-stop:
					return
				}
			}
		}()
	}
	c := s.NewClient(&recorder{})
	go func() {
		for i := range jobs {
			c.Submit(&SubmitReq{Func: []byte("p"), Background: true})
			if i%100 == 0 {
				s.Pause([]byte("p"))
			}
			if i%100 == 50 {
				s.Resume([]byte("p"))
			}
		}
		s.Resume([]byte("p"))
	}()
	deadline := time.After(30 * time.Second)
	for n := 0; n < jobs; n++ {
		select {
		case <-done:
		case <-deadline:
			t.Fatalf("%d of %d jobs done; %+v", n, jobs, s.statFor("p"))
		}
	}
	close(stop)
}

// A worker is idle from its making and from the end of its last job, not
// while it holds one.
func TestWorkerIdle(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, Latency: true})
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	clk.pass(2 * time.Second)
	if d := w.Idle(); d != 2*time.Second {
		t.Fatalf("idle %v after its making, want 2s", d)
	}
	id := submit(t, s.NewClient(&recorder{}), "f", "", "", Normal, true)
	w.Grab()
	clk.pass(time.Second)
	if d := w.Idle(); d != -1 {
		t.Fatalf("idle %v while it holds a job", d)
	}
	w.Update(id, &Update{Kind: Complete})
	clk.pass(3 * time.Second)
	if d := w.Idle(); d != 3*time.Second {
		t.Fatalf("idle %v after its job, want 3s", d)
	}
	if d := newTest(t, Config{Clock: clk}).NewWorker(&waker{}).Idle(); d != -1 {
		t.Fatalf("idle %v without Latency", d)
	}
}
