package sched

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// statsRig is a scheduler with a manual clock and two clients tagged with
// sources 1 and 2, for the counters' tests.
type statsRig struct {
	t    *testing.T
	s    *Sched
	clk  *fakeClock
	a, b *Client // sources 1 and 2
}

func newStatsRig(t *testing.T, cfg Config) *statsRig {
	r := &statsRig{t: t, clk: newFakeClock()}
	if cfg.Clock == nil {
		cfg.Clock = r.clk
	}
	r.s = newTest(t, cfg)
	r.a, r.b = r.s.NewClient(&recorder{}), r.s.NewClient(&recorder{})
	r.a.SetSource(1)
	r.b.SetSource(2)
	return r
}

func (r *statsRig) submit(c *Client, req SubmitReq) uint64 {
	r.t.Helper()
	if req.Func == nil {
		req.Func = []byte("f")
	}
	id, err := c.Submit(&req)
	if err != nil {
		r.t.Fatalf("submit: %v", err)
	}
	return id
}

func (r *statsRig) worker(timeout time.Duration) *Worker {
	w := r.s.NewWorker(&waker{})
	w.CanDo([]byte("f"), timeout)
	return w
}

func (r *statsRig) grab(w *Worker) *Job {
	r.t.Helper()
	j := w.Grab()
	if j == nil {
		r.t.Fatal("no job to grab")
	}
	return j
}

func (r *statsRig) report(w *Worker, j *Job, k UpdateKind) {
	r.t.Helper()
	if err := w.Update(j.ID(), &Update{Kind: k}); err != nil {
		r.t.Fatalf("update %d: %v", k, err)
	}
}

// pass moves the clock on and fires the timers due.
func (r *statsRig) pass(d time.Duration) { r.s.Advance(r.clk.pass(d)) }

// counts builds a Counts from event/count pairs.
func counts(pairs ...any) Counts {
	var c Counts
	for i := 0; i < len(pairs); i += 2 {
		c[pairs[i].(Event)] = uint64(pairs[i+1].(int))
	}
	return c
}

// Every event is counted once, under the source of the job's submitter
// (a join or a replace under the joiner's), and in the function's own
// counts.
func TestStatsEvents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		run     func(r *statsRig)
		a, b, f Counts // source 1's, source 2's, function f's
	}{
		{
			name: "complete",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{})
				w := r.worker(0)
				r.report(w, r.grab(w), Complete)
			},
			a: counts(EventSubmitted, 1, EventCompleted, 1),
			f: counts(EventSubmitted, 1, EventCompleted, 1),
		},
		{
			name: "fail and exception",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{})
				r.submit(r.b, SubmitReq{Background: true})
				w := r.worker(0)
				r.report(w, r.grab(w), Fail)
				r.report(w, r.grab(w), Exception)
			},
			a: counts(EventSubmitted, 1, EventFailed, 1),
			b: counts(EventSubmitted, 1, EventException, 1),
			f: counts(EventSubmitted, 2, EventFailed, 1, EventException, 1),
		},
		{
			name: "a join counts for its submitter, the job's end for the first",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Unique: []byte("u")})
				r.submit(r.b, SubmitReq{Unique: []byte("u")})
				w := r.worker(0)
				r.report(w, r.grab(w), Complete)
			},
			a: counts(EventSubmitted, 1, EventCompleted, 1),
			b: counts(EventSubmitted, 1),
			f: counts(EventSubmitted, 2, EventCompleted, 1),
		},
		{
			name: "a replace counts as a submit",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Unique: []byte("u"), Background: true, Replace: true})
				r.submit(r.b, SubmitReq{Unique: []byte("u"), Background: true, Replace: true})
			},
			a: counts(EventSubmitted, 1),
			b: counts(EventSubmitted, 1),
			f: counts(EventSubmitted, 2),
		},
		{
			name: "a refused submit is not counted",
			run: func(r *statsRig) {
				r.s.CreateFunc([]byte("f"))
				r.s.SetMaxQueue([]byte("f"), [3]int{1, 1, 1})
				r.submit(r.a, SubmitReq{Background: true})
				if _, err := r.a.Submit(&SubmitReq{Func: []byte("f"), Background: true}); err != ErrQueueFull {
					r.t.Fatalf("second submit: %v, want ErrQueueFull", err)
				}
			},
			a: counts(EventSubmitted, 1),
			f: counts(EventSubmitted, 1),
		},
		{
			name: "a lost worker's job is retried",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Background: true})
				w := r.worker(0)
				r.grab(w)
				w.Close()
				w2 := r.worker(0)
				r.report(w2, r.grab(w2), Complete)
			},
			a: counts(EventSubmitted, 1, EventRetried, 1, EventCompleted, 1),
			f: counts(EventSubmitted, 1, EventRetried, 1, EventCompleted, 1),
		},
		{
			name: "the last retry fails the job",
			cfg:  Config{JobRetries: 2},
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Background: true})
				for range 2 {
					w := r.worker(0)
					r.grab(w)
					w.Close()
				}
			},
			a: counts(EventSubmitted, 1, EventRetried, 1, EventFailed, 1),
			f: counts(EventSubmitted, 1, EventRetried, 1, EventFailed, 1),
		},
		{
			name: "Worker.Retry is a retry, Requeue is not",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Background: true})
				w := r.worker(0)
				if err := w.Retry(r.grab(w).ID()); err != nil {
					r.t.Fatal(err)
				}
				if err := w.Requeue(r.grab(w).ID(), RequeueReq{}); err != nil {
					r.t.Fatal(err)
				}
				r.report(w, r.grab(w), Complete)
			},
			a: counts(EventSubmitted, 1, EventRetried, 1, EventCompleted, 1),
			f: counts(EventSubmitted, 1, EventRetried, 1, EventCompleted, 1),
		},
		{
			name: "a run timeout, then the late result wins once",
			run: func(r *statsRig) {
				r.submit(r.b, SubmitReq{Background: true})
				w := r.worker(time.Second)
				j := r.grab(w)
				r.pass(2 * time.Second)
				w2 := r.worker(0)
				j2 := r.grab(w2)
				r.report(w, j, Complete)
				if err := w2.Update(j2.ID(), &Update{Kind: Complete}); err != nil {
					r.t.Fatal(err) // dropped without an error, and not counted
				}
			},
			b: counts(EventSubmitted, 1, EventTimedOut, 1, EventRetried, 1, EventCompleted, 1),
			f: counts(EventSubmitted, 1, EventTimedOut, 1, EventRetried, 1, EventCompleted, 1),
		},
		{
			name: "a failure of a job that retries for ever is a retry too",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Background: true, RetryForever: true})
				w := r.worker(0)
				r.report(w, r.grab(w), Fail)
				r.report(w, r.grab(w), Exception)
				r.report(w, r.grab(w), Complete)
			},
			a: counts(EventSubmitted, 1, EventFailed, 1, EventException, 1, EventRetried, 2, EventCompleted, 1),
			f: counts(EventSubmitted, 1, EventFailed, 1, EventException, 1, EventRetried, 2, EventCompleted, 1),
		},
		{
			name: "a queue timeout fails the job",
			run: func(r *statsRig) {
				r.submit(r.b, SubmitReq{QueueTimeout: time.Second})
				r.pass(2 * time.Second)
			},
			b: counts(EventSubmitted, 1, EventFailed, 1),
			f: counts(EventSubmitted, 1, EventFailed, 1),
		},
		{
			name: "a cancel is no failure",
			run: func(r *statsRig) {
				id := r.submit(r.a, SubmitReq{Background: true})
				if err := r.s.Cancel(id); err != nil {
					r.t.Fatal(err)
				}
			},
			a: counts(EventSubmitted, 1),
			f: counts(EventSubmitted, 1),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newStatsRig(t, tc.cfg)
			tc.run(r)
			var st Stats
			r.s.Stats(&st)
			want := [MaxSources]Counts{1: tc.a, 2: tc.b}
			if st.Events != want {
				t.Errorf("Stats.Events:\n got %v\nwant %v", st.Events, want)
			}
			if got := r.s.statFor("f").Events; got != tc.f {
				t.Errorf("f's Events = %v, want %v", got, tc.f)
			}
			if n := st.QueueWait.Count() + st.RunTime.Count(); n != 0 {
				t.Errorf("%d latencies measured without Config.Latency", n)
			}
		})
	}
}

// Jobs Replay restores count under source 0, whoever submitted them.
func TestStatsReplayedJobs(t *testing.T) {
	st := newTestStore()
	r := newStatsRig(t, Config{Store: st})
	r.submit(r.a, SubmitReq{Background: true})
	s2 := newTest(t, Config{Store: st})
	if n, err := s2.Replay(); err != nil || n != 1 {
		t.Fatalf("Replay: %d, %v", n, err)
	}
	w := s2.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	if err := w.Update(w.Grab().ID(), &Update{Kind: Complete}); err != nil {
		t.Fatal(err)
	}
	var got Stats
	s2.Stats(&got)
	if want := ([MaxSources]Counts{0: counts(EventCompleted, 1)}); got.Events != want {
		t.Errorf("Events = %v, want %v", got.Events, want)
	}
}

// With Config.Latency each attempt's wait in the queue and its run time
// land in their buckets: a wait runs from the submit, the due time or the
// requeue to the grab.
func TestStatsLatency(t *testing.T) {
	for _, tc := range []struct {
		name       string
		run        func(r *statsRig)
		wait, runs map[time.Duration]int // observations by their bucket's bound (0: beyond every bound)
	}{
		{
			name: "one job",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{})
				r.clk.pass(3 * time.Millisecond)
				w := r.worker(0)
				j := r.grab(w)
				r.clk.pass(40 * time.Millisecond)
				r.report(w, j, Complete)
			},
			wait: map[time.Duration]int{5 * time.Millisecond: 1},
			runs: map[time.Duration]int{50 * time.Millisecond: 1},
		},
		{
			name: "a bound is in its own bucket",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{})
				r.clk.pass(time.Millisecond)
				w := r.worker(0)
				j := r.grab(w)
				r.clk.pass(2 * time.Hour)
				r.report(w, j, Complete)
			},
			wait: map[time.Duration]int{time.Millisecond: 1},
			runs: map[time.Duration]int{0: 1},
		},
		{
			name: "a requeued job waits again from its requeue",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Background: true})
				r.clk.pass(20 * time.Millisecond)
				w := r.worker(0)
				j := r.grab(w)
				r.clk.pass(200 * time.Millisecond)
				if err := w.Requeue(j.ID(), RequeueReq{}); err != nil {
					r.t.Fatal(err)
				}
				r.clk.pass(2 * time.Second)
				j = r.grab(w)
				r.report(w, j, Fail)
			},
			wait: map[time.Duration]int{25 * time.Millisecond: 1, 2500 * time.Millisecond: 1},
			runs: map[time.Duration]int{250 * time.Millisecond: 1, 100 * time.Microsecond: 1},
		},
		{
			name: "a delayed job waits from its due time",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Background: true, When: r.clk.Wall().Unix() + 10})
				r.pass(10 * time.Second) // due now: it enters its queue
				r.clk.pass(7 * time.Millisecond)
				w := r.worker(0)
				r.report(w, r.grab(w), Complete)
			},
			wait: map[time.Duration]int{10 * time.Millisecond: 1},
			runs: map[time.Duration]int{100 * time.Microsecond: 1},
		},
		{
			name: "a lost attempt's run ends when its worker goes",
			run: func(r *statsRig) {
				r.submit(r.a, SubmitReq{Background: true})
				w := r.worker(0)
				r.grab(w)
				r.clk.pass(time.Minute)
				w.Close()
			},
			wait: map[time.Duration]int{100 * time.Microsecond: 1},
			runs: map[time.Duration]int{time.Minute: 1},
		},
		{
			name: "a job that never ran has no latencies",
			run: func(r *statsRig) {
				id := r.submit(r.a, SubmitReq{Background: true})
				r.clk.pass(time.Second)
				r.s.Cancel(id)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newStatsRig(t, Config{Latency: true})
			tc.run(r)
			var st Stats
			r.s.Stats(&st)
			for _, h := range []struct {
				name string
				got  Histogram
				want map[time.Duration]int
			}{{"QueueWait", st.QueueWait, tc.wait}, {"RunTime", st.RunTime, tc.runs}} {
				var want [NumBuckets]uint64
				for bound, n := range h.want {
					i := len(LatencyBounds)
					if bound != 0 {
						i = bucketOf(bound)
					}
					want[i] = uint64(n)
				}
				if h.got.Buckets != want {
					t.Errorf("%s buckets = %v, want %v", h.name, h.got.Buckets, want)
				}
			}
		})
	}
}

func TestBucketOf(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{100 * time.Microsecond, 0},
		{100*time.Microsecond + 1, 1},
		{time.Millisecond, 3},
		{time.Second, 12},
		{time.Hour, len(LatencyBounds) - 1},
		{time.Hour + 1, len(LatencyBounds)},
		{-time.Second, 0}, // a clock that stepped back counts as no wait
	} {
		if got := bucketOf(tc.d); got != tc.want {
			t.Errorf("bucketOf(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	var h Histogram
	h.Observe(time.Second)
	h.Observe(3 * time.Second)
	if h.Count() != 2 || h.Sum != 4 {
		t.Errorf("Count %d, Sum %v: want 2 and 4s", h.Count(), h.Sum)
	}
}

func TestSetSourceRange(t *testing.T) {
	c := newTest(t, Config{}).NewClient(&recorder{})
	c.SetSource(MaxSources - 1)
	defer func() {
		if recover() == nil {
			t.Error("SetSource(MaxSources) did not panic")
		}
	}()
	c.SetSource(MaxSources)
}

// Counts from many goroutines at once add up exactly (and -race sees
// every count made under its shard's lock).
func TestStatsConcurrent(t *testing.T) {
	s := newTest(t, Config{Latency: true})
	const procs, rounds = 8, 500
	var wg sync.WaitGroup
	for p := range procs {
		wg.Go(func() {
			f := []byte(fmt.Sprint("f", p%4))
			c := s.NewClient(&recorder{})
			c.SetSource(Source(1 + p%2))
			w := s.NewWorker(&waker{})
			w.CanDo(f, 0)
			for range rounds {
				if _, err := c.Submit(&SubmitReq{Func: f}); err != nil {
					t.Error(err)
					return
				}
				// Another goroutine's worker may take this one's job: each
				// completes whatever it grabs, and every job is done at the end.
				if j := w.Grab(); j != nil {
					w.Update(j.ID(), &Update{Kind: Complete})
				}
			}
			for j := w.Grab(); j != nil; j = w.Grab() {
				w.Update(j.ID(), &Update{Kind: Complete})
			}
			w.Close()
		})
	}
	var st Stats
	done := make(chan struct{})
	go func() { // scrapes while the counts move
		defer close(done)
		for s.Len() > 0 || st.Events[1][EventSubmitted] == 0 {
			s.Stats(&st)
		}
	}()
	wg.Wait()
	// Jobs a closed worker held went back: finish them.
	w := s.NewWorker(&waker{})
	for i := range 4 {
		w.CanDo([]byte(fmt.Sprint("f", i)), 0)
	}
	for j := w.Grab(); j != nil; j = w.Grab() {
		w.Update(j.ID(), &Update{Kind: Complete})
	}
	<-done
	s.Stats(&st)
	for _, src := range []Source{1, 2} {
		if n := st.Events[src][EventSubmitted]; n != procs/2*rounds {
			t.Errorf("source %d: %d submitted, want %d", src, n, procs/2*rounds)
		}
		if n := st.Events[src][EventCompleted]; n != procs/2*rounds {
			t.Errorf("source %d: %d completed, want %d", src, n, procs/2*rounds)
		}
	}
	if n := st.RunTime.Count(); n != procs*rounds {
		t.Errorf("%d run times, want %d", n, procs*rounds)
	}
	if n := st.QueueWait.Count(); n != procs*rounds {
		t.Errorf("%d queue waits, want %d", n, procs*rounds)
	}
}
