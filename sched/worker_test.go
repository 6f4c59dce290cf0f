package sched

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// periodicLike submits a background job that retries for ever, as the
// Periodic frontend does.
func foreverJob(t *testing.T, c *Client, fn, key, payload string, when int64, timeout time.Duration) uint64 {
	t.Helper()
	id, err := c.Submit(&SubmitReq{Func: []byte(fn), Unique: []byte(key), Payload: []byte(payload),
		Background: true, RetryForever: true, Replace: true, When: when, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Requeue puts a held job back at once or after a delay, adds to its
// counter, and never uses up Config.JobRetries.
func TestRequeue(t *testing.T) {
	tests := []struct {
		name     string
		req      RequeueReq
		times    int
		counter  int64
		waitTill time.Duration // when it is due again; 0 = at once
	}{
		{name: "at once", req: RequeueReq{}, times: 5},
		{name: "step", req: RequeueReq{Step: 2}, times: 3, counter: 6},
		{name: "later", req: RequeueReq{Delay: 3 * time.Second, Step: 1}, times: 2, counter: 2, waitTill: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			s := newTest(t, Config{Clock: clk, JobRetries: 1})
			c := s.NewClient(&recorder{})
			id := foreverJob(t, c, "f", "n", "p", 0, 0)
			k := &waker{}
			w := s.NewWorker(k)
			w.CanDo([]byte("f"), 0)
			for i := 0; i < tt.times; i++ {
				var a Attempt
				j := w.GrabAttempt(&a)
				if j == nil || j.ID() != id {
					t.Fatalf("round %d: no job", i)
				}
				if err := w.Requeue(id, tt.req); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				if tt.waitTill > 0 {
					if w.Grab() != nil {
						t.Fatalf("round %d: due before its delay", i)
					}
					if w.Sleep() {
						t.Fatal("sleep saw work")
					}
					s.Advance(clk.pass(tt.waitTill - time.Millisecond))
					if k.n.Load() != int32(i) {
						t.Fatalf("round %d: woken early", i)
					}
					s.Advance(clk.pass(time.Millisecond))
					if k.n.Load() != int32(i+1) {
						t.Fatalf("round %d: not woken when due", i)
					}
					v, _ := s.Find([]byte("f"), []byte("n"))
					if want := clk.Wall().Unix(); v.When != want {
						t.Fatalf("due time %d, want %d", v.When, want)
					}
				}
			}
			var a Attempt
			if j := w.GrabAttempt(&a); j == nil {
				t.Fatal("job gone after requeues")
			}
			if a.Counter != tt.counter {
				t.Fatalf("counter %d, want %d", a.Counter, tt.counter)
			}
			if err := w.Update(id, &Update{Kind: Complete}); err != nil || s.Len() != 0 {
				t.Fatalf("complete: %v, %d live", err, s.Len())
			}
			if err := w.Requeue(id, RequeueReq{}); err != ErrNotFound {
				t.Fatalf("requeue of an ended job: %v", err)
			}
		})
	}
}

// A job that retries for ever comes back after a Fail, an Exception, a
// run timeout and a lost worker, whatever -j says, and its listeners hear
// only its completion.
func TestRetryForever(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, JobRetries: 1})
	r := &recorder{}
	c := s.NewClient(r)
	id := foreverJob(t, c, "f", "n", "p", 0, 2*time.Second)
	// A foreground client joins it: it must hear the end, not the failures.
	if got, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("n"), Payload: []byte("p")}); err != nil || got != id {
		t.Fatalf("join: %d %v", got, err)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	for _, kind := range []UpdateKind{Fail, Exception} {
		if j := w.Grab(); j == nil {
			t.Fatalf("%v: no job", kind)
		}
		if err := w.Update(id, &Update{Kind: kind}); err != nil {
			t.Fatal(err)
		}
	}
	// Timeout (the job's own, not the ability's).
	if w.Grab() == nil {
		t.Fatal("no job after failures")
	}
	s.Advance(clk.pass(3 * time.Second))
	if w.Running() != 0 {
		t.Fatal("job timeout did not take the job back")
	}
	// Lost worker.
	w2 := s.NewWorker(&waker{})
	w2.CanDo([]byte("f"), 0)
	if w2.Grab() == nil {
		t.Fatal("no job after timeout")
	}
	w2.Close()
	if j := w.Grab(); j == nil || j.ID() != id {
		t.Fatal("job lost with its worker")
	}
	if got := r.events(); len(got) != 0 {
		t.Fatalf("listener heard %v before the end", got)
	}
	if err := w.Update(id, &Update{Kind: Complete, Data: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	if got := r.events(); len(got) != 1 {
		t.Fatalf("listener heard %v, want the completion", got)
	}
}

// GrabAttempt reports the attempt's attributes: the job's own timeout over
// the ability's, when it began and when the one before began.
func TestGrabAttempt(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk})
	c := s.NewClient(&recorder{})
	when := clk.Wall().Unix() - 10
	id := foreverJob(t, c, "f", "n", "p", when, 5*time.Second)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), time.Second)
	var a Attempt
	if w.GrabAttempt(&a) == nil {
		t.Fatal("no job")
	}
	first := clk.Wall()
	if a.When != when || a.Timeout != 5*time.Second || !a.Started.Equal(first) || !a.PrevStarted.IsZero() {
		t.Fatalf("first attempt %+v", a)
	}
	clk.pass(7 * time.Second)
	w.Requeue(id, RequeueReq{})
	if w.GrabAttempt(&a) == nil {
		t.Fatal("no job")
	}
	if !a.PrevStarted.Equal(first) || !a.Started.Equal(clk.Wall()) {
		t.Fatalf("second attempt %+v, first began %v", a, first)
	}
	// A Gearman-style job: the ability's timeout.
	c.Submit(&SubmitReq{Func: []byte("g"), Background: true})
	w.CanDo([]byte("g"), time.Second)
	if w.GrabAttempt(&a) == nil || a.Timeout != time.Second || a.When != 0 {
		t.Fatalf("plain job attempt %+v", a)
	}
}

// expirer counts Expired calls.
type expirer struct {
	waker
	expired atomic.Int32
}

func (e *expirer) Expired() { e.expired.Add(1) }

// A worker's deadline fires within a tick of its time, not before; each
// ExpectWithin moves it; when it passes, what the worker held goes back as
// a retry and its Waker hears Expired, once. An idle worker lapses too; a
// cleared deadline, or a closed worker, never does.
func TestWorkerDeadline(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, JobRetries: 3})
	c := s.NewClient(&recorder{})
	id := submit(t, c, "f", "", "p", Normal, false)

	ew := &expirer{}
	w := s.NewWorker(ew)
	w.CanDo([]byte("f"), 0)
	if j := w.Grab(); j == nil || j.ID() != id {
		t.Fatal("no job")
	}
	w.ExpectWithin(2 * time.Second)
	s.Advance(clk.pass(1999 * time.Millisecond))
	w.ExpectWithin(2 * time.Second) // a pulse: due at 3.999 s now
	s.Advance(clk.pass(1999 * time.Millisecond))
	if ew.expired.Load() != 0 || len(w.Holding(nil)) != 1 {
		t.Fatalf("lapsed before its deadline: expired %d, holding %v", ew.expired.Load(), w.Holding(nil))
	}
	s.Advance(clk.pass(time.Millisecond))
	if ew.expired.Load() != 1 || len(w.Holding(nil)) != 0 {
		t.Fatalf("at its deadline: expired %d, holding %v", ew.expired.Load(), w.Holding(nil))
	}
	s.Advance(clk.pass(time.Hour))
	if ew.expired.Load() != 1 {
		t.Fatalf("expired %d times", ew.expired.Load())
	}
	w.Close()
	w2 := s.NewWorker(&waker{})
	w2.CanDo([]byte("f"), 0)
	if j := w2.Grab(); j == nil || j.ID() != id {
		t.Fatal("the lapsed worker's job is not back in its queue")
	}

	idle := &expirer{}
	wi := s.NewWorker(idle)
	wi.ExpectWithin(time.Second)
	cleared := &expirer{}
	wc := s.NewWorker(cleared)
	wc.ExpectWithin(time.Second)
	wc.ExpectWithin(0)
	closed := &expirer{}
	wx := s.NewWorker(closed)
	wx.ExpectWithin(time.Second)
	wx.Close()
	s.Advance(clk.pass(time.Second))
	if idle.expired.Load() != 1 || cleared.expired.Load() != 0 || closed.expired.Load() != 0 {
		t.Fatalf("expired: idle %d, cleared %d, closed %d", idle.expired.Load(), cleared.expired.Load(), closed.expired.Load())
	}
	// A deadline moved after it fired and before its lapse ran: no lapse.
	wi.ExpectWithin(time.Second)
	wi.lapsed = true // as the timer leaves it
	wi.ExpectWithin(time.Second)
	wi.lapse()
	if idle.expired.Load() != 1 {
		t.Fatal("a lapse ran after the worker was heard from")
	}
}

// Retry takes a job back as a lost attempt: counted, and failed once the
// retries are used up. Only the worker holding it may.
func TestWorkerRetry(t *testing.T) {
	s := newTest(t, Config{JobRetries: 2})
	rec := &recorder{}
	id := submit(t, s.NewClient(rec), "f", "", "p", Normal, false)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	other := s.NewWorker(&waker{})
	w.Grab()
	if got := fmt.Sprint(w.Holding(nil)); got != fmt.Sprint([]uint64{id}) {
		t.Fatalf("holding %s", got)
	}
	if err := other.Retry(id); err != ErrNotFound {
		t.Fatalf("retry by a worker not holding it: %v", err)
	}
	if err := w.Retry(id); err != nil {
		t.Fatal(err)
	}
	if j := w.Grab(); j == nil || j.ID() != id {
		t.Fatal("not back in the queue after one retry")
	}
	if err := w.Retry(id); err != nil {
		t.Fatal(err)
	}
	if j := w.Grab(); j != nil {
		t.Fatal("still queued after its retries were used up")
	}
	if got, want := fmt.Sprint(rec.events()), fmt.Sprintf("[%d:%d:]", id, Fail); got != want {
		t.Fatalf("client heard %s, want %s", got, want)
	}
	if err := w.Retry(id); err != ErrNotFound {
		t.Fatalf("retry of an ended job: %v", err)
	}
}

// Requeue with Front puts a job the worker turned down back at the head of
// its queue, uncounted.
func TestRequeueFront(t *testing.T) {
	s := newTest(t, Config{JobRetries: 1})
	c := s.NewClient(&recorder{})
	a := submit(t, c, "f", "", "a", Normal, true)
	submit(t, c, "f", "", "b", Normal, true)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	for i := 0; i < 3; i++ {
		if j := w.Grab(); j == nil || j.ID() != a {
			t.Fatalf("round %d: not job a", i)
		}
		if err := w.Requeue(a, RequeueReq{Front: true}); err != nil {
			t.Fatal(err)
		}
	}
	if got := grabPayload(w) + grabPayload(w); got != "ab" {
		t.Fatalf("order %q", got)
	}
}

// TestHeldListAndQueueLinks: a job's prev and next link it into its queue
// while it waits and into its worker's held list while it runs. Jobs go
// back and forth between the two (grabs, requeues to the front and the
// back, retries, completions) and after every step each worker's held
// list and the queue hold exactly the jobs a model says, in its order.
func TestHeldListAndQueueLinks(t *testing.T) {
	type step struct {
		w    int    // which worker
		op   string // grab, back, front, retry, done
		slot int    // which of the worker's held jobs (newest first), for all but grab
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"grab all, complete newest first", []step{{0, "grab", 0}, {0, "grab", 0}, {0, "grab", 0}, {0, "done", 0}, {0, "done", 0}, {0, "done", 0}}},
		{"complete from the middle and the tail", []step{{0, "grab", 0}, {0, "grab", 0}, {0, "grab", 0}, {0, "done", 1}, {0, "done", 1}, {0, "done", 0}}},
		{"requeue to the back and grab again", []step{{0, "grab", 0}, {0, "grab", 0}, {0, "back", 1}, {0, "grab", 0}, {0, "grab", 0}, {0, "back", 0}, {0, "grab", 0}}},
		{"requeue to the front", []step{{0, "grab", 0}, {0, "grab", 0}, {0, "front", 0}, {0, "front", 0}, {0, "grab", 0}}},
		{"two workers trade jobs", []step{{0, "grab", 0}, {1, "grab", 0}, {0, "grab", 0}, {0, "back", 1}, {1, "grab", 0}, {1, "retry", 0}, {0, "grab", 0}, {1, "grab", 0}, {0, "done", 1}, {1, "front", 0}, {0, "grab", 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTest(t, Config{})
			c := s.NewClient(&recorder{})
			var queue []uint64 // the model: the queue, front first
			for i := range 5 {
				queue = append(queue, submit(t, c, "f", "", fmt.Sprint(i), Normal, true))
			}
			workers := []*Worker{s.NewWorker(&waker{}), s.NewWorker(&waker{})}
			held := make([][]uint64, len(workers)) // newest first, as Holding lists them
			for _, w := range workers {
				w.CanDo([]byte("f"), 0)
			}
			for i, st := range tt.steps {
				w := workers[st.w]
				if st.op == "grab" {
					j := w.Grab()
					if j == nil || j.ID() != queue[0] {
						t.Fatalf("step %d: grabbed %v, want %d", i, j, queue[0])
					}
					held[st.w] = append([]uint64{queue[0]}, held[st.w]...)
					queue = queue[1:]
				} else {
					id := held[st.w][st.slot]
					held[st.w] = append(held[st.w][:st.slot:st.slot], held[st.w][st.slot+1:]...)
					var err error
					switch st.op {
					case "back":
						err = w.Requeue(id, RequeueReq{})
						queue = append(queue, id)
					case "front":
						err = w.Requeue(id, RequeueReq{Front: true})
						queue = append([]uint64{id}, queue...)
					case "retry":
						err = w.Retry(id)
						queue = append(queue, id)
					case "done":
						err = w.Update(id, &Update{Kind: Complete})
					}
					if err != nil {
						t.Fatalf("step %d: %s %d: %v", i, st.op, id, err)
					}
				}
				for k, w := range workers {
					if got := w.Holding(nil); !slices.Equal(got, held[k]) && len(got)+len(held[k]) > 0 {
						t.Fatalf("step %d (%s): worker %d holds %v, want %v", i, st.op, k, got, held[k])
					}
					if w.Running() != len(held[k]) {
						t.Fatalf("step %d: worker %d Running %d, want %d", i, k, w.Running(), len(held[k]))
					}
				}
				sh := s.shardFor([]byte("f"))
				sh.mu.Lock()
				var got []uint64
				for j := sh.funcs["f"].queues[Normal].head; j != nil; j = j.next {
					got = append(got, j.id)
				}
				sh.mu.Unlock()
				if !slices.Equal(got, queue) && len(got)+len(queue) > 0 {
					t.Fatalf("step %d (%s): queue %v, want %v", i, st.op, got, queue)
				}
			}
		})
	}
}

// TestHeldListsConcurrent runs workers that each hold several jobs of
// functions on different shards, giving them back and completing them,
// while other goroutines list what each holds and clear their timeouts:
// under -race, a job's links, shared by its queue and its held list, are
// never touched by two goroutines without one of their locks between them.
func TestHeldListsConcurrent(t *testing.T) {
	s := newTest(t, Config{Shards: 8})
	funcs := []string{"a", "b", "c", "d"}
	c := s.NewClient(&recorder{})
	const jobs, rounds = 64, 300
	for i := range jobs {
		submit(t, c, funcs[i%len(funcs)], "", "p", Normal, true)
	}
	workers := make([]*Worker, 3)
	for i := range workers {
		workers[i] = s.NewWorker(&waker{})
		for _, f := range funcs {
			workers[i].CanDo([]byte(f), time.Hour)
		}
	}
	stop := make(chan struct{})
	var watchers sync.WaitGroup
	for _, w := range workers {
		watchers.Go(func() {
			var ids []uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				ids = w.Holding(ids[:0])
				w.ClearTimeouts()
			}
		})
	}
	var wg sync.WaitGroup
	for k, w := range workers {
		wg.Go(func() {
			var mine []uint64
			for r := range rounds {
				for len(mine) < 4 {
					j := w.Grab()
					if j == nil {
						break
					}
					mine = append(mine, j.ID())
				}
				if len(mine) == 0 {
					continue
				}
				id := mine[r%len(mine)]
				mine = slices.DeleteFunc(mine, func(x uint64) bool { return x == id })
				var err error
				switch (r + k) % 3 {
				case 0:
					err = w.Requeue(id, RequeueReq{})
				case 1:
					err = w.Requeue(id, RequeueReq{Front: true})
				default:
					err = w.Retry(id)
				}
				if err != nil {
					t.Errorf("worker %d: %v", k, err)
					return
				}
			}
			for _, id := range mine {
				if err := w.Update(id, &Update{Kind: Complete}); err != nil {
					t.Errorf("worker %d: complete %d: %v", k, id, err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	watchers.Wait()
	total := 0
	for _, w := range workers {
		if n := w.Running(); n != 0 {
			t.Errorf("a worker still holds %d jobs", n)
		}
	}
	for _, f := range funcs {
		sh := s.shardFor([]byte(f))
		sh.mu.Lock()
		n := 0
		for j := sh.funcs[f].queues[Normal].head; j != nil; j = j.next {
			n++
		}
		if n != sh.funcs[f].queues[Normal].n {
			t.Errorf("%s: %d jobs linked, %d counted", f, n, sh.funcs[f].queues[Normal].n)
		}
		sh.mu.Unlock()
		total += n
	}
	if done := jobs - total; done < 0 || done > len(workers)*4 {
		t.Errorf("%d jobs left queued of %d; at most %d completed", total, jobs, len(workers)*4)
	}
}

// wakeCounts is how many times each waker was woken.
func wakeCounts(ks []*waker) []int32 {
	out := make([]int32, len(ks))
	for i, k := range ks {
		out[i] = k.n.Load()
	}
	return out
}

func sum(ns []int32) (n int32) {
	for _, v := range ns {
		n += v
	}
	return n
}

// sleepers registers n workers for fn and puts them to sleep.
func sleepers(t *testing.T, s *Sched, fn string, n int) ([]*Worker, []*waker) {
	t.Helper()
	var ws []*Worker
	var ks []*waker
	for range n {
		k := &waker{}
		w := s.NewWorker(k)
		w.CanDo([]byte(fn), 0)
		if w.Sleep() {
			t.Fatal("sleep with no work reported work")
		}
		ws, ks = append(ws, w), append(ks, k)
	}
	return ws, ks
}

// Under WakeDemand a job wakes one sleeper, and each job beyond the
// workers woken and not yet heard from one more; a woken worker that
// grabs is no longer counted, so the next job wakes another.
func TestWakeDemand(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, WorkerWakeup: WakeDemand})
	c := s.NewClient(&recorder{})
	ws, ks := sleepers(t, s, "f", 4)

	submit(t, c, "f", "", "1", Normal, true)
	if n := sum(wakeCounts(ks)); n != 1 {
		t.Fatalf("one job woke %d workers, want 1", n)
	}
	submit(t, c, "f", "", "2", Normal, true)
	if n := sum(wakeCounts(ks)); n != 2 {
		t.Fatalf("two jobs woke %d workers, want 2", n)
	}
	// The two woken grab a job each; a third job wakes a third worker.
	var awake []*Worker
	for i, k := range ks {
		if k.n.Load() == 1 {
			if grabPayload(ws[i]) == "<none>" {
				t.Fatalf("woken worker %d found no job", i)
			}
			awake = append(awake, ws[i])
		}
	}
	submit(t, c, "f", "", "3", Normal, true)
	if n := sum(wakeCounts(ks)); n != 3 {
		t.Fatalf("after both grabbed, a third job woke %d in all, want 3", n)
	}
	// Nothing fires for the ones heard from; the third's rewake is
	// armed until it grabs.
	s.Advance(clk.pass(time.Second))
	if n := sum(wakeCounts(ks)); n != 4 {
		t.Fatalf("the third, not heard from in %v: %d woken in all, want the last sleeper too (4)", RewakeAfter, n)
	}
	if grabPayload(awake[0]) != "3" {
		t.Fatal("job 3 is not waiting")
	}
}

// A woken worker that does not ask for work in time is given up on: the
// function's other sleepers are all woken, as gearmand would at once.
// One that answers in time leaves nothing to fire.
func TestWakeDemandRewake(t *testing.T) {
	tests := []struct {
		name   string
		answer func(t *testing.T, w *Worker) // what the woken worker does in time, if anything
		want   int32                         // wakes in all after a second
	}{
		{"no answer", nil, 5},
		{"grabs", func(t *testing.T, w *Worker) { w.Grab() }, 1},
		// PRE_SLEEP without a grab: told at once that work waits (NOOP).
		{"sleeps again", func(t *testing.T, w *Worker) {
			if !w.Sleep() {
				t.Error("slept with its job waiting")
			}
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			s := newTest(t, Config{Clock: clk, WorkerWakeup: WakeDemand})
			c := s.NewClient(&recorder{})
			ws, ks := sleepers(t, s, "f", 5)
			submit(t, c, "f", "", "x", Normal, true)
			first := slices.IndexFunc(ks, func(k *waker) bool { return k.n.Load() == 1 })
			if first < 0 || sum(wakeCounts(ks)) != 1 {
				t.Fatalf("woken %v, want one", wakeCounts(ks))
			}
			if tt.answer != nil {
				tt.answer(t, ws[first])
			}
			s.Advance(clk.pass(RewakeAfter / 2))
			if n := sum(wakeCounts(ks)); tt.answer == nil && n != 1 {
				t.Fatalf("rewoken before %v: %v", RewakeAfter, wakeCounts(ks))
			}
			s.Advance(clk.pass(time.Second))
			if n := sum(wakeCounts(ks)); n != tt.want {
				t.Fatalf("after a second: %v woken, want %d in all", wakeCounts(ks), tt.want)
			}
		})
	}
}

// A woken worker that takes another function's job, or goes away, leaves
// the job it was woken for to another sleeper at once.
func TestWakeDemandCover(t *testing.T) {
	for _, tc := range []string{"takes another job", "cant do", "closes"} {
		t.Run(tc, func(t *testing.T) {
			clk := newFakeClock()
			s := newTest(t, Config{Clock: clk, WorkerWakeup: WakeDemand})
			c := s.NewClient(&recorder{})
			kb := &waker{}
			both := s.NewWorker(kb)
			both.CanDo([]byte("f"), 0)
			both.CanDo([]byte("g"), 0) // tried first: registered last
			both.Sleep()
			_, ks := sleepers(t, s, "f", 2) // behind it on f's list
			submit(t, c, "f", "", "f1", Normal, true)
			submit(t, c, "g", "", "g1", Normal, true)
			if kb.n.Load() != 1 || sum(wakeCounts(ks)) != 0 {
				t.Fatalf("woken: the two-function worker %d times, f's others %v; want it alone, once", kb.n.Load(), wakeCounts(ks))
			}
			switch tc {
			case "takes another job":
				if j := both.Grab(); j == nil || string(j.Payload()) != "g1" {
					t.Fatalf("grabbed %v, want g1", j)
				}
			case "cant do":
				both.CantDo([]byte("f"))
			case "closes":
				both.Close()
			}
			if n := sum(wakeCounts(ks)); n != 1 {
				t.Fatalf("f's job: %v of its other workers woken, want one", wakeCounts(ks))
			}
		})
	}
}

// Workers that sleep, wake, grab and finish on goroutines of their own
// while jobs arrive on others, under WakeDemand, with a real ticker for
// the rewakes: every job is run, however the wake-ups and grabs interleave
// (-race checks the woken marks and hints), and at the end no function
// counts a woken worker nobody has settled.
func TestWakeDemandConcurrent(t *testing.T) {
	s := newTest(t, Config{WorkerWakeup: WakeDemand, Shards: 4})
	const workers, submitters, each = 6, 3, 400
	funcs := []string{"f", "g"}
	var done atomic.Int64
	all := make(chan struct{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		k := make(chanWaker, 1)
		w := s.NewWorker(k)
		for _, f := range funcs[:1+i%2] {
			w.CanDo([]byte(f), 0)
		}
		wg.Go(func() {
			for {
				if j := w.Grab(); j != nil {
					if err := w.Update(j.ID(), &Update{Kind: Complete}); err != nil {
						t.Error(err)
						return
					}
					if done.Add(1) == submitters*each {
						close(all)
					}
					continue
				}
				if w.Sleep() {
					continue
				}
				select {
				case <-k:
				case <-stop:
					return
				}
			}
		})
	}
	var ticker sync.WaitGroup
	ticker.Go(func() {
		for {
			select {
			case <-stop:
				return
			case now := <-time.After(time.Millisecond):
				s.Advance(now)
			}
		}
	})
	for i := range submitters {
		wg.Go(func() {
			c := s.NewClient(&recorder{})
			for n := range each {
				if _, err := c.Submit(&SubmitReq{Func: []byte(funcs[(i+n)%2]), Payload: []byte("p"), Background: true}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		t.Errorf("%d of %d jobs run after a minute", done.Load(), submitters*each)
	}
	close(stop)
	wg.Wait()
	ticker.Wait()
	for _, name := range funcs {
		sh := s.shardFor([]byte(name))
		sh.mu.Lock()
		f := sh.funcs[name]
		if f.queued() != 0 || f.woken < 0 {
			t.Errorf("%s: %d queued, %d woken", name, f.queued(), f.woken)
		}
		sh.mu.Unlock()
	}
}
