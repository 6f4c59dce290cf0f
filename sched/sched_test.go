package sched

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a Listener that keeps what it hears.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) Notify(id uint64, u *Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprintf("%d:%d:%s", id, u.Kind, u.Data)
	if u.Kind == Status {
		s += "/" + string(u.Den)
	}
	r.got = append(r.got, s)
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

type waker struct{ n atomic.Int32 }

func (w *waker) Wake(any) { w.n.Add(1) }

func newTest(t *testing.T, cfg Config) *Sched {
	t.Helper()
	cfg.Tick = -1 // tests drive time with Advance
	s := New(cfg)
	t.Cleanup(s.Close)
	return s
}

func submit(t *testing.T, c *Client, fn, unique, payload string, p Priority, bg bool) uint64 {
	t.Helper()
	id, err := c.Submit(&SubmitReq{Func: []byte(fn), Unique: []byte(unique), Payload: []byte(payload), Priority: p, Background: bg})
	if err != nil {
		t.Fatalf("submit %s/%s: %v", fn, unique, err)
	}
	return id
}

func grabPayload(w *Worker) string {
	j := w.Grab()
	if j == nil {
		return "<none>"
	}
	return string(j.Payload())
}

func TestPriorityOrderAndFIFO(t *testing.T) {
	s := newTest(t, Config{})
	c := s.NewClient(&recorder{})
	for i, p := range []Priority{Low, Normal, High, Low, Normal, High} {
		submit(t, c, "f", "", fmt.Sprintf("%d%d", p, i), p, true)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	want := []string{"02", "05", "11", "14", "20", "23", "<none>"}
	for _, wnt := range want {
		if got := grabPayload(w); got != wnt {
			t.Fatalf("grab = %q, want %q", got, wnt)
		}
	}
}

func TestJobIDRoutesToShard(t *testing.T) {
	s := newTest(t, Config{Shards: 8})
	c := s.NewClient(&recorder{})
	for i := 0; i < 100; i++ {
		fn := fmt.Sprint("fn", i)
		id := submit(t, c, fn, "", "x", Normal, true)
		if s.shardOf(id) != s.shardFor([]byte(fn)) {
			t.Fatalf("job %d of %s not routed to its function's shard", id, fn)
		}
		if !s.Status(id).Known {
			t.Fatalf("job %d unknown", id)
		}
	}
}

func TestCoalescing(t *testing.T) {
	tests := []struct {
		name     string
		u1, u2   string
		p1, p2   string
		dash     bool
		same     bool
		fn1, fn2 string
		bg1, bg2 bool
	}{
		{name: "same unique", u1: "u", u2: "u", p1: "a", p2: "b", fn1: "f", fn2: "f", same: true},
		{name: "different unique", u1: "u", u2: "v", fn1: "f", fn2: "f"},
		{name: "empty unique never coalesces", fn1: "f", fn2: "f", p1: "a", p2: "a"},
		{name: "unique is per function", u1: "u", u2: "u", fn1: "f", fn2: "g"},
		{name: "dash coalesces on payload", dash: true, p1: "same", p2: "same", fn1: "f", fn2: "f", same: true},
		{name: "dash with other payload", dash: true, p1: "one", p2: "two", fn1: "f", fn2: "f"},
		{name: "background joins foreground", u1: "u", u2: "u", fn1: "f", fn2: "f", bg2: true, same: true},
		{name: "foreground joins background", u1: "u", u2: "u", fn1: "f", fn2: "f", bg1: true, same: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTest(t, Config{})
			r1, r2 := &recorder{}, &recorder{}
			c1, c2 := s.NewClient(r1), s.NewClient(r2)
			sub := func(c *Client, fn, u, p string, bg bool) uint64 {
				id, err := c.Submit(&SubmitReq{Func: []byte(fn), Unique: []byte(u), Payload: []byte(p), Background: bg, CoalesceOnPayload: tt.dash})
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			id1 := sub(c1, tt.fn1, tt.u1, tt.p1, tt.bg1)
			id2 := sub(c2, tt.fn2, tt.u2, tt.p2, tt.bg2)
			if (id1 == id2) != tt.same {
				t.Fatalf("ids %d, %d: same = %v, want %v", id1, id2, id1 == id2, tt.same)
			}
			if !tt.same {
				return
			}
			// The first submitter's payload wins and every foreground client hears the result.
			w := s.NewWorker(&waker{})
			w.CanDo([]byte(tt.fn1), 0)
			j := w.Grab()
			if string(j.Payload()) != tt.p1 {
				t.Fatalf("payload %q, want first submitter's %q", j.Payload(), tt.p1)
			}
			if w.Grab() != nil {
				t.Fatal("coalesced job handed out twice")
			}
			if err := w.Update(j.ID(), &Update{Kind: Complete, Data: []byte("done")}); err != nil {
				t.Fatal(err)
			}
			for i, r := range []*recorder{r1, r2} {
				bg := []bool{tt.bg1, tt.bg2}[i]
				want := 1
				if bg {
					want = 0
				}
				if got := len(r.events()); got != want {
					t.Fatalf("client %d heard %d events, want %d", i+1, got, want)
				}
			}
		})
	}
}

func TestCoalescesWithRunningJob(t *testing.T) {
	s := newTest(t, Config{})
	r1, r2 := &recorder{}, &recorder{}
	c1, c2 := s.NewClient(r1), s.NewClient(r2)
	id := submit(t, c1, "f", "u", "a", Normal, false)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	w.Grab()
	if id2 := submit(t, c2, "f", "u", "b", Normal, false); id2 != id {
		t.Fatalf("running job not joined: %d vs %d", id2, id)
	}
	w.Update(id, &Update{Kind: Data, Data: []byte("part")})
	w.Update(id, &Update{Kind: Complete, Data: []byte("all")})
	for _, r := range []*recorder{r1, r2} {
		want := []string{fmt.Sprintf("%d:1:part", id), fmt.Sprintf("%d:4:all", id)}
		if got := r.events(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	// Once done, the unique is free again.
	if id3 := submit(t, c1, "f", "u", "c", Normal, true); id3 == id {
		t.Fatal("finished job's unique still coalesces")
	}
}

func TestMaxQueue(t *testing.T) {
	s := newTest(t, Config{})
	c := s.NewClient(&recorder{})
	s.SetMaxQueue([]byte("f"), [3]int{1, 1, 1}) // unknown: ignored
	s.CreateFunc([]byte("f"))
	s.SetMaxQueue([]byte("f"), [3]int{3, 2, 1})
	submit(t, c, "f", "", "1", Low, true)
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Priority: Low, Background: true}); err != ErrQueueFull {
		t.Fatalf("low over its limit: %v", err)
	}
	submit(t, c, "f", "", "2", Normal, true)
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Priority: Normal, Background: true}); err != ErrQueueFull {
		t.Fatalf("normal over its limit: %v", err)
	}
	submit(t, c, "f", "u", "3", High, true)
	// A coalesced submit adds nothing, so a full queue still accepts it.
	submit(t, c, "f", "u", "4", High, true)
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Priority: High, Background: true}); err != ErrQueueFull {
		t.Fatalf("high over its limit: %v", err)
	}
}

func TestSleepAndWake(t *testing.T) {
	tests := []struct {
		name    string
		wakeup  int
		workers int
		want    int32 // workers woken by one job
	}{
		{"all", 0, 5, 5},
		{"limited", 2, 5, 2},
		{"more than sixteen", 0, 40, 40},
		{"limit above sleepers", 10, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTest(t, Config{WorkerWakeup: tt.wakeup})
			var wk []*waker
			for i := 0; i < tt.workers; i++ {
				k := &waker{}
				w := s.NewWorker(k)
				w.CanDo([]byte("f"), 0)
				if w.Sleep() {
					t.Fatal("sleep with no work reported work")
				}
				wk = append(wk, k)
			}
			c := s.NewClient(&recorder{})
			submit(t, c, "f", "", "x", Normal, true)
			var woken int32
			for _, k := range wk {
				woken += k.n.Load()
			}
			if woken != tt.want {
				t.Fatalf("woke %d, want %d", woken, tt.want)
			}
			// A second job wakes nobody already woken.
			submit(t, c, "f", "", "y", Normal, true)
			var again int32
			for _, k := range wk {
				again += k.n.Load()
			}
			if tt.wakeup == 0 && again != woken {
				t.Fatalf("woken workers woken again: %d -> %d", woken, again)
			}
		})
	}
}

func TestSleepWithWorkWaiting(t *testing.T) {
	s := newTest(t, Config{})
	c := s.NewClient(&recorder{})
	k := &waker{}
	w := s.NewWorker(k)
	w.CanDo([]byte("a"), 0)
	w.CanDo([]byte("b"), 0)
	submit(t, c, "b", "", "x", Normal, true)
	if !w.Sleep() {
		t.Fatal("PRE_SLEEP with work waiting must answer at once")
	}
	if k.n.Load() != 0 {
		t.Fatal("waker called as well as the immediate answer")
	}
	if grabPayload(w) != "x" {
		t.Fatal("work not grabbed")
	}
	// Sleeping on other functions: a job for any of them wakes it once.
	if w.Sleep() {
		t.Fatal("no work, yet Sleep says there is")
	}
	submit(t, c, "a", "", "y", Normal, true)
	submit(t, c, "b", "", "z", Normal, true)
	if k.n.Load() != 1 {
		t.Fatalf("woken %d times, want 1", k.n.Load())
	}
}

func TestCantDoStopsWakes(t *testing.T) {
	s := newTest(t, Config{})
	k := &waker{}
	w := s.NewWorker(k)
	w.CanDo([]byte("f"), 0)
	w.Sleep()
	w.CantDo([]byte("f"))
	submit(t, s.NewClient(&recorder{}), "f", "", "x", Normal, true)
	if k.n.Load() != 0 || w.Grab() != nil {
		t.Fatal("worker that gave up f still serves it")
	}
	st := s.Funcs()
	if len(st) != 1 || st[0].Workers != 0 {
		t.Fatalf("funcs %+v", st)
	}
}

func TestGrabOrder(t *testing.T) {
	for _, rr := range []bool{false, true} {
		t.Run(fmt.Sprint("rr=", rr), func(t *testing.T) {
			s := newTest(t, Config{RoundRobin: rr})
			c := s.NewClient(&recorder{})
			for i := 0; i < 3; i++ {
				submit(t, c, "f1", "", fmt.Sprint("f1-", i), Normal, true)
				submit(t, c, "f2", "", fmt.Sprint("f2-", i), Normal, true)
			}
			w := s.NewWorker(&waker{})
			w.CanDo([]byte("f1"), 0)
			w.CanDo([]byte("f2"), 0)
			var got []string
			for j := w.Grab(); j != nil; j = w.Grab() {
				got = append(got, string(j.Payload()))
			}
			want := "[f2-0 f2-1 f2-2 f1-0 f1-1 f1-2]" // most recently registered first
			if rr {
				want = "[f2-0 f1-0 f2-1 f1-1 f2-2 f1-2]"
			}
			if fmt.Sprint(got) != want {
				t.Fatalf("order %v, want %s", got, want)
			}
		})
	}
}

func TestWorkerCloseRequeuesAtTail(t *testing.T) {
	s := newTest(t, Config{})
	r := &recorder{}
	c := s.NewClient(r)
	id := submit(t, c, "f", "", "first", Normal, false)
	submit(t, c, "f", "", "second", Normal, true)
	w1 := s.NewWorker(&waker{})
	w1.CanDo([]byte("f"), 0)
	if grabPayload(w1) != "first" {
		t.Fatal("wrong job")
	}
	k := &waker{}
	w2 := s.NewWorker(k)
	w2.CanDo([]byte("f"), 0)
	if grabPayload(w2) != "second" {
		t.Fatal("wrong job")
	}
	w2.Sleep()
	w1.Close()
	if k.n.Load() != 1 {
		t.Fatal("sleeping worker not woken by the requeue")
	}
	j := w2.Grab()
	if j == nil || j.ID() != id {
		t.Fatal("requeued job not handed out")
	}
	if got := s.Jobs(); got[0].Retries != 1 {
		t.Fatalf("retries %d, want 1", got[0].Retries)
	}
	if len(r.events()) != 0 {
		t.Fatalf("client told about the retry: %v", r.events())
	}
	if err := w1.Update(id, &Update{Kind: Complete}); err != ErrNotFound {
		t.Fatalf("closed worker completing: %v", err)
	}
	w2.Update(id, &Update{Kind: Complete, Data: []byte("ok")})
	if got := r.events(); len(got) != 1 || got[0] != fmt.Sprintf("%d:4:ok", id) {
		t.Fatalf("events %v", got)
	}
}

func TestJobRetriesLimit(t *testing.T) {
	s := newTest(t, Config{JobRetries: 2})
	r := &recorder{}
	c := s.NewClient(r)
	id := submit(t, c, "f", "", "x", Normal, false)
	for attempt := 1; attempt <= 2; attempt++ {
		w := s.NewWorker(&waker{})
		w.CanDo([]byte("f"), 0)
		if w.Grab() == nil {
			t.Fatalf("attempt %d: job gone early", attempt)
		}
		w.Close()
	}
	if got := r.events(); len(got) != 1 || got[0] != fmt.Sprintf("%d:%d:", id, Fail) {
		t.Fatalf("after 2 lost attempts events %v, want one WORK_FAIL", got)
	}
	if s.Status(id).Known || len(s.Jobs()) != 0 {
		t.Fatal("failed job not deleted")
	}
}

func TestRunTimeout(t *testing.T) {
	s := newTest(t, Config{})
	r := &recorder{}
	c := s.NewClient(r)
	id := submit(t, c, "f", "", "x", Normal, false)
	w1 := s.NewWorker(&waker{})
	w1.CanDo([]byte("f"), 2*time.Second)
	start := time.Now()
	if w1.Grab() == nil {
		t.Fatal("no job")
	}
	k := &waker{}
	w2 := s.NewWorker(k)
	w2.CanDo([]byte("f"), 0)
	w2.Sleep()
	s.Advance(start.Add(time.Second))
	if k.n.Load() != 0 || !s.Status(id).Running {
		t.Fatal("timed out early")
	}
	s.Advance(start.Add(3 * time.Second))
	if k.n.Load() != 1 {
		t.Fatal("timeout did not requeue and wake")
	}
	if w1.Running() != 0 {
		t.Fatal("late worker still holds the job")
	}
	if j := w2.Grab(); j == nil || j.ID() != id {
		t.Fatal("timed-out job not handed out again")
	}
	// The first attempt finishes first: its result is the job's, and the
	// second attempt's is not wanted.
	if err := w1.Update(id, &Update{Kind: Complete, Data: []byte("late")}); err != nil {
		t.Fatalf("late worker's result: %v", err)
	}
	if err := w2.Update(id, &Update{Kind: Complete, Data: []byte("second")}); err != nil {
		t.Fatalf("second attempt's result: %v, want it dropped quietly", err)
	}
	if got := r.events(); len(got) != 1 || got[0] != fmt.Sprintf("%d:%d:late", id, Complete) {
		t.Fatalf("client heard %v", got)
	}
	if w2.Running() != 0 || s.Len() != 0 {
		t.Fatalf("job still held (%d) or live (%d)", w2.Running(), s.Len())
	}
}

// A late result for a timed-out job that nobody took again ends it in the
// queue. Every worker the job overran may report until it ends; after
// that their results are dropped without an error, and a worker that never
// held the job gets ErrNotFound.
func TestLateResultOfQueuedJob(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk})
	r := &recorder{}
	c := s.NewClient(r)
	w1, w2, other := s.NewWorker(&waker{}), s.NewWorker(&waker{}), s.NewWorker(&waker{})
	for _, w := range []*Worker{w1, w2} {
		w.CanDo([]byte("f"), time.Second)
	}
	id := submit(t, c, "f", "", "x", Normal, false)
	w1.Grab()
	s.Advance(clk.pass(2 * time.Second)) // w1 overran: queued again
	w2.Grab()
	s.Advance(clk.pass(2 * time.Second)) // w2 overran too
	if err := other.Update(id, &Update{Kind: Complete}); err != ErrNotFound {
		t.Fatalf("result from a worker that never held the job: %v", err)
	}
	if !s.Status(id).Known || s.Status(id).Running {
		t.Fatalf("status %+v, want queued", s.Status(id))
	}
	if err := w2.Update(id, &Update{Kind: Data, Data: []byte("d")}); err != nil {
		t.Fatal(err)
	}
	if err := w2.Update(id, &Update{Kind: Complete, Data: []byte("done")}); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 || w1.Grab() != nil {
		t.Fatal("a finished job is still queued")
	}
	// w1's attempt ended with the job: its words are dropped, once.
	for _, u := range []UpdateKind{Status, Complete} {
		if err := w1.Update(id, &Update{Kind: u}); err != nil {
			t.Fatalf("superseded attempt's %d: %v", u, err)
		}
	}
	for _, w := range []*Worker{w1, w2} {
		if err := w.Update(id, &Update{Kind: Complete}); err != ErrNotFound {
			t.Fatalf("a second final word: %v, want ErrNotFound", err)
		}
	}
	want := []string{fmt.Sprintf("%d:%d:d", id, Data), fmt.Sprintf("%d:%d:done", id, Complete)}
	if got := r.events(); !slices.Equal(got, want) {
		t.Fatalf("client heard %v, want %v", got, want)
	}
}

func TestDelayedJob(t *testing.T) {
	s := newTest(t, Config{})
	c := s.NewClient(&recorder{})
	k := &waker{}
	w := s.NewWorker(k)
	w.CanDo([]byte("f"), 0)
	w.Sleep()
	now := time.Now()
	id, err := c.Submit(&SubmitReq{Func: []byte("f"), Payload: []byte("later"), Background: true, When: now.Unix() + 5})
	if err != nil {
		t.Fatal(err)
	}
	if k.n.Load() != 0 || w.Grab() != nil {
		t.Fatal("delayed job ran early")
	}
	w.Sleep()
	if st := s.Funcs(); st[0].Total() != 1 {
		t.Fatalf("delayed job not counted: %+v", st)
	}
	s.Advance(now.Add(7 * time.Second))
	if k.n.Load() != 1 {
		t.Fatal("sleeper not woken when the job came due")
	}
	if j := w.Grab(); j == nil || j.ID() != id {
		t.Fatal("due job not handed out")
	}
	// A time in the past runs at once.
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Payload: []byte("past"), Background: true, When: 1}); err != nil {
		t.Fatal(err)
	}
	if grabPayload(w) != "past" {
		t.Fatal("past epoch job not queued at once")
	}
}

func TestClientCloseDropsQueuedForegroundJob(t *testing.T) {
	s := newTest(t, Config{})
	r := &recorder{}
	c := s.NewClient(r)
	queued := submit(t, c, "f", "", "queued", Normal, false)
	running := submit(t, c, "f", "", "running", Normal, false)
	bg := submit(t, c, "f", "", "bg", Low, true)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	j := w.Grab()
	if j.ID() != queued {
		t.Fatal("order")
	}
	j2 := w.Grab()
	if j2.ID() != running {
		t.Fatal("order")
	}
	w.Close() // both go back to the queue
	if n := len(s.Jobs()); n != 3 {
		t.Fatalf("%d jobs", n)
	}
	w = s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	j = w.Grab() // one of the two runs again, the other waits
	waiting := queued
	if j.ID() == queued {
		waiting = running
	}
	c.Close()
	if c.Attached() != 0 {
		t.Fatal("client still attached")
	}
	// The waiting one is dropped, the running one kept, bg kept.
	if s.Status(waiting).Known || !s.Status(j.ID()).Known || !s.Status(bg).Known {
		t.Fatalf("after close: jobs %+v", s.Jobs())
	}
	if err := w.Update(j.ID(), &Update{Kind: Complete, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if len(r.events()) != 0 {
		t.Fatal("closed client heard a result")
	}
	if grabPayload(w) != "bg" {
		t.Fatal("background job lost")
	}
}

func TestStatusUpdates(t *testing.T) {
	s := newTest(t, Config{})
	r := &recorder{}
	c := s.NewClient(r)
	id := submit(t, c, "f", "uniq", "x", Normal, false)
	if st := s.Status(id); !st.Known || st.Running || st.Clients != 1 {
		t.Fatalf("queued status %+v", st)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	w.Grab()
	w.Update(id, &Update{Kind: Status, Data: []byte("3"), Den: []byte("10")})
	if st := s.Status(id); !st.Running || st.Num != 3 || st.Den != 10 {
		t.Fatalf("running status %+v", st)
	}
	if st := s.StatusUnique([]byte("uniq")); !st.Known || st.Num != 3 || st.Unique != "uniq" {
		t.Fatalf("status by unique %+v", st)
	}
	if st := s.Status(id + 1<<20); st.Known {
		t.Fatal("unknown job known")
	}
	if got := r.events(); len(got) != 1 || got[0] != fmt.Sprintf("%d:3:3/10", id) {
		t.Fatalf("events %v", got)
	}
}

func TestWrongWorkerCannotUpdate(t *testing.T) {
	s := newTest(t, Config{})
	id := submit(t, s.NewClient(&recorder{}), "f", "", "x", Normal, false)
	w1, w2 := s.NewWorker(&waker{}), s.NewWorker(&waker{})
	w1.CanDo([]byte("f"), 0)
	if err := w2.Update(id, &Update{Kind: Complete}); err != ErrNotFound {
		t.Fatalf("queued job completed by nobody: %v", err)
	}
	w1.Grab()
	if err := w2.Update(id, &Update{Kind: Complete}); err != ErrNotFound {
		t.Fatalf("other worker's job: %v", err)
	}
	if err := w1.Update(12345, &Update{Kind: Data}); err != ErrNotFound {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestCancelFailsClients(t *testing.T) {
	s := newTest(t, Config{})
	r := &recorder{}
	c := s.NewClient(r)
	queued := submit(t, c, "f", "", "q", Normal, false)
	running := submit(t, c, "f", "", "r", Normal, false)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	if err := s.Cancel(queued); err != nil {
		t.Fatal(err)
	}
	j := w.Grab()
	if j.ID() != running || w.Grab() != nil {
		t.Fatal("cancelled job handed out")
	}
	s.Cancel(running)
	if err := w.Update(running, &Update{Kind: Complete}); err != nil {
		t.Fatalf("worker of a cancelled running job: %v", err)
	}
	want := fmt.Sprint([]string{fmt.Sprintf("%d:%d:", queued, Fail), fmt.Sprintf("%d:%d:", running, Fail)})
	if got := fmt.Sprint(r.events()); got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
}

func TestAdmin(t *testing.T) {
	s := newTest(t, Config{})
	c := s.NewClient(&recorder{})
	s.CreateFunc([]byte("empty"))
	id := submit(t, c, "f", "", "x", High, true)
	submit(t, c, "f", "", "y", Low, true)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	w.Grab()
	st := s.Funcs()
	if len(st) != 2 || st[0].Name != "empty" || st[0].Seq >= st[1].Seq || st[1].Total() != 2 || st[1].Running != 1 || st[1].Workers != 1 || st[1].Queued != [3]int{0, 0, 1} {
		t.Fatalf("funcs %+v", st)
	}
	if err := s.Cancel(id); err != nil || !s.Status(id).Running {
		t.Fatal("cancel must leave a running job to finish")
	}
	if err := s.DropFunc([]byte("f")); err != ErrFunctionBusy {
		t.Fatalf("drop busy: %v", err)
	}
	if err := s.DropFunc([]byte("nope")); err != ErrNoFunction {
		t.Fatalf("drop unknown: %v", err)
	}
	if err := s.DropFunc([]byte("empty")); err != nil {
		t.Fatal(err)
	}
	jobs := s.Jobs()
	if len(jobs) != 2 || s.Len() != 2 {
		t.Fatalf("jobs %+v", jobs)
	}
	if err := s.Cancel(jobs[1].ID); err != nil || s.Status(jobs[1].ID).Known || w.Grab() != nil {
		t.Fatalf("cancel queued job: %v", err)
	}
	if err := s.Cancel(jobs[1].ID); err != ErrNotFound {
		t.Fatalf("cancel twice: %v", err)
	}
}

// TestConcurrent drives many clients and workers at once under -race: every
// job is completed exactly once and every client hears its result.
func TestConcurrent(t *testing.T) {
	s := New(Config{Shards: 4, Tick: time.Millisecond})
	defer s.Close()
	const clients, perClient, workers = 8, 500, 4
	funcs := []string{"a", "b", "c"}
	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wake := make(chan struct{}, 1)
			w := s.NewWorker(chanWaker(wake))
			for _, f := range funcs {
				w.CanDo([]byte(f), time.Minute)
			}
			defer w.Close()
			for {
				if j := w.Grab(); j != nil {
					if err := w.Update(j.ID(), &Update{Kind: Complete, Data: j.Payload()}); err != nil {
						t.Error(err)
					}
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
	var cwg sync.WaitGroup
	for i := 0; i < clients; i++ {
		cwg.Add(1)
		go func(i int) {
			defer cwg.Done()
			got := make(chan uint64, perClient)
			c := s.NewClient(chanListener(got))
			for n := 0; n < perClient; n++ {
				bg := n%5 == 0
				if _, err := c.Submit(&SubmitReq{Func: []byte(funcs[n%3]), Payload: []byte("p"), Priority: Priority(n % 3), Background: bg}); err != nil {
					t.Error(err)
				}
			}
			for n := 0; n < perClient*4/5; n++ {
				<-got
				done.Add(1)
			}
			c.Close()
		}(i)
	}
	cwg.Wait()
	close(stop)
	wg.Wait()
	if done.Load() != clients*perClient*4/5 {
		t.Fatalf("results %d", done.Load())
	}
}

type chanWaker chan struct{}

func (c chanWaker) Wake(any) {
	select {
	case c <- struct{}{}:
	default:
	}
}

type chanListener chan uint64

func (c chanListener) Notify(id uint64, u *Update) {
	if u.Kind.Terminal() {
		c <- id
	}
}

// TestOwnPayloadRelease: a payload submitted with OwnPayload is kept as is,
// not copied, and handed to its source's release (SetRelease) exactly
// once, when its job ends however it ends; a copied payload never is.
func TestOwnPayloadRelease(t *testing.T) {
	tests := []struct {
		name string
		end  func(t *testing.T, s *Sched, c *Client, w *Worker, id uint64)
	}{
		{"complete", func(t *testing.T, s *Sched, c *Client, w *Worker, id uint64) {
			w.Grab()
			if err := w.Update(id, &Update{Kind: Complete}); err != nil {
				t.Fatal(err)
			}
		}},
		{"fail", func(t *testing.T, s *Sched, c *Client, w *Worker, id uint64) {
			w.Grab()
			if err := w.Update(id, &Update{Kind: Fail}); err != nil {
				t.Fatal(err)
			}
		}},
		{"cancel while queued", func(t *testing.T, s *Sched, c *Client, w *Worker, id uint64) {
			if err := s.Cancel(id); err != nil {
				t.Fatal(err)
			}
		}},
		{"client leaves", func(t *testing.T, s *Sched, c *Client, w *Worker, id uint64) {
			c.Close()
		}},
		{"out of retries", func(t *testing.T, s *Sched, c *Client, w *Worker, id uint64) {
			w.Grab()
			w.Close() // the job's one attempt is used up
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var released [][]byte
			s := newTest(t, Config{JobRetries: 1})
			s.SetRelease(3, func(p []byte) { released = append(released, p) })
			c := s.NewClient(&recorder{})
			c.SetSource(3)
			w := s.NewWorker(&waker{})
			w.CanDo([]byte("f"), 0)
			owned := []byte("owned payload")
			id, err := c.Submit(&SubmitReq{Func: []byte("f"), Payload: owned, OwnPayload: true})
			if err != nil {
				t.Fatal(err)
			}
			copied := submit(t, c, "g", "", "copied", Normal, true)
			sh := s.shardOf(id)
			sh.mu.Lock()
			kept := sh.job(id).Payload()
			sh.mu.Unlock()
			if &kept[0] != &owned[0] {
				t.Fatal("owned payload was copied")
			}
			if len(released) != 0 {
				t.Fatal("released before the job ended")
			}
			tt.end(t, s, c, w, id)
			if s.Status(id).Known {
				t.Fatal("job still known")
			}
			if len(released) != 1 || &released[0][0] != &owned[0] {
				t.Fatalf("released %q, want the owned payload once", released)
			}
			if !s.Status(copied).Known {
				t.Fatal("background job lost")
			}
		})
	}
}

// TestOwnPayloadKept: Submit says whether a job kept a lent payload
// (Kept), so that a frontend whose buffer no job took can reuse or free it
// at once; a kept one comes back through the release, exactly once.
func TestOwnPayloadKept(t *testing.T) {
	tests := []struct {
		name     string
		first    *SubmitReq // submitted before, copied
		req      SubmitReq
		err      error
		kept     bool
		released int // payloads released by the submit (a replaced job's own)
	}{
		{"a new job", nil, SubmitReq{Unique: []byte("u")}, nil, true, 0},
		{"joins a job", &SubmitReq{Unique: []byte("u"), Background: true}, SubmitReq{Unique: []byte("u"), Background: true}, nil, false, 0},
		{"replaces a waiting job", &SubmitReq{Unique: []byte("u"), Background: true}, SubmitReq{Unique: []byte("u"), Background: true, Replace: true}, nil, true, 0},
		{"queue full", &SubmitReq{Unique: []byte("v")}, SubmitReq{Unique: []byte("u")}, ErrQueueFull, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var released [][]byte
			s := newTest(t, Config{})
			s.SetRelease(3, func(p []byte) { released = append(released, p) })
			c := s.NewClient(&recorder{})
			c.SetSource(3)
			if tt.first != nil {
				first := *tt.first
				first.Func, first.Payload = []byte("f"), []byte("first")
				if _, err := c.Submit(&first); err != nil {
					t.Fatal(err)
				}
			}
			if tt.err == ErrQueueFull {
				s.SetMaxQueue([]byte("f"), [3]int{1, 1, 1})
			}
			r := tt.req
			r.Func, r.Payload, r.OwnPayload = []byte("f"), []byte("lent"), true
			r.Kept = !tt.kept // Submit sets it either way
			id, err := c.Submit(&r)
			if err != tt.err {
				t.Fatalf("Submit: %v, want %v", err, tt.err)
			}
			if r.Kept != tt.kept {
				t.Fatalf("Kept %v, want %v", r.Kept, tt.kept)
			}
			if len(released) != tt.released {
				t.Fatalf("released %q at the submit", released)
			}
			if !tt.kept {
				return
			}
			if err := s.Cancel(id); err != nil {
				t.Fatal(err)
			}
			if len(released) != 1 || &released[0][0] != &r.Payload[0] {
				t.Fatalf("released %q once the job ended, want the lent payload once", released)
			}
		})
	}
}

// TestDelayedJobNeverEarly: ticks count from the scheduler's start, not
// from whole seconds, so a due time falls inside a tick; the job must wait
// for the tick after it rather than fire with the one before.
func TestDelayedJobNeverEarly(t *testing.T) {
	for _, offset := range []time.Duration{0, 300 * time.Microsecond, 700 * time.Microsecond, 999 * time.Microsecond} {
		s := newTest(t, Config{})
		s.epoch = time.Unix(1000, 0).Add(offset) // ticks start here
		s.Advance(s.epoch)
		c := s.NewClient(&recorder{})
		k := &waker{}
		w := s.NewWorker(k)
		w.CanDo([]byte("f"), 0)
		w.Sleep()
		when := time.Now().Unix() + 3600
		if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Background: true, When: when}); err != nil {
			t.Fatal(err)
		}
		due := time.Unix(when, 0)
		s.Advance(due.Add(-time.Nanosecond))
		if k.n.Load() != 0 {
			t.Fatalf("offset %v: due job woke a worker before its time", offset)
		}
		s.Advance(due.Add(s.tickLen()))
		if k.n.Load() != 1 {
			t.Fatalf("offset %v: due job not run a tick after its time", offset)
		}
	}
}

// A background submit that joins a foreground job is acknowledged, so the
// job must run even when every foreground client leaves, queued or running.
func TestBackgroundJoinKeepsJob(t *testing.T) {
	for _, running := range []bool{false, true} {
		t.Run(fmt.Sprintf("running=%v", running), func(t *testing.T) {
			s := newTest(t, Config{})
			fg := s.NewClient(&recorder{})
			bg := s.NewClient(&recorder{})
			id := submit(t, fg, "f", "u", "work", Normal, false)
			w := s.NewWorker(&waker{})
			w.CanDo([]byte("f"), 0)
			if running {
				if j := w.Grab(); j == nil || j.ID() != id {
					t.Fatal("grab")
				}
			}
			if got := submit(t, bg, "f", "u", "other", Normal, true); got != id {
				t.Fatalf("background submit made job %d, want it to join %d", got, id)
			}
			fg.Close()
			if running {
				w.Close() // the worker dies: the job must go back, not away
				w = s.NewWorker(&waker{})
				w.CanDo([]byte("f"), 0)
			}
			j := w.Grab()
			if j == nil || j.ID() != id || string(j.Payload()) != "work" {
				t.Fatalf("the joined job was lost: grab %v, jobs %+v", j, s.Jobs())
			}
			if !s.Jobs()[0].Background {
				t.Fatal("joined job not listed as background")
			}
		})
	}
}

// A worker with many functions finds them through a map: registering,
// re-registering, unregistering and resetting keep gearmand's order
// (newest first) either way.
func TestManyAbilities(t *testing.T) {
	s := newTest(t, Config{})
	w := s.NewWorker(&waker{})
	var want []string
	for i := 0; i < 2*manyAbilities; i++ {
		name := fmt.Sprintf("f%02d", i)
		w.CanDo([]byte(name), 0)
		want = append([]string{name}, want...)
	}
	w.CanDo([]byte("f03"), time.Second) // known: only the timeout changes
	w.CantDo([]byte("f20"))
	w.CantDo([]byte("nope"))
	want = slices.DeleteFunc(want, func(n string) bool { return n == "f20" })
	if got := w.Abilities(nil); !slices.Equal(got, want) {
		t.Fatalf("abilities %v, want %v", got, want)
	}
	c := s.NewClient(&recorder{})
	submit(t, c, "f20", "", "gone", Normal, true)
	submit(t, c, "f03", "", "old", Normal, true)
	submit(t, c, "f30", "", "new", Normal, true)
	if a, b, n := grabPayload(w), grabPayload(w), grabPayload(w); a != "new" || b != "old" || n != "<none>" {
		t.Fatalf("grabbed %s %s %s", a, b, n)
	}
	w.Reset()
	w.CanDo([]byte("f20"), 0)
	if got := w.Abilities(nil); !slices.Equal(got, []string{"f20"}) || grabPayload(w) != "gone" {
		t.Fatalf("after reset: %v", got)
	}
}

// ClearTimeouts lets the jobs a worker holds run past their timeout; a job
// grabbed afterwards is timed again.
func TestClearTimeouts(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk})
	r := &recorder{}
	c := s.NewClient(r)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), time.Second)
	first := submit(t, c, "f", "", "1", Normal, false)
	second := submit(t, c, "f", "", "2", Normal, false)
	if j := w.Grab(); j == nil || j.ID() != first {
		t.Fatal("grab")
	}
	w.ClearTimeouts()
	w.ClearTimeouts() // twice is harmless
	if j := w.Grab(); j == nil || j.ID() != second {
		t.Fatal("grab")
	}
	s.Advance(clk.pass(2 * time.Second))
	if !s.Status(first).Running || s.Status(second).Running {
		t.Fatalf("after the timeout: first %+v, second %+v", s.Status(first), s.Status(second))
	}
	if err := w.Update(first, &Update{Kind: Complete, Data: []byte("late")}); err != nil {
		t.Fatalf("result past the cleared timeout: %v", err)
	}
	if got := r.events(); len(got) != 1 || got[0] != fmt.Sprintf("%d:%d:late", first, Complete) {
		t.Fatalf("client heard %v", got)
	}
}

// Running counts held jobs in every function, and only those: queued and
// delayed jobs are not running, and a job leaves the count when it ends or
// goes back to its queue.
func TestRunning(t *testing.T) {
	s := newTest(t, Config{})
	c := s.NewClient(&recorder{})
	a := submit(t, c, "fa", "", "a", Normal, true)
	submit(t, c, "fb", "", "b", Normal, true)
	submit(t, c, "fb", "", "b2", Normal, true)
	if _, err := c.Submit(&SubmitReq{Func: []byte("fa"), Payload: []byte("later"), Background: true, When: time.Now().Add(time.Hour).Unix()}); err != nil {
		t.Fatal(err)
	}
	w1 := s.NewWorker(&waker{})
	w1.CanDo([]byte("fa"), 0)
	w2 := s.NewWorker(&waker{})
	w2.CanDo([]byte("fb"), 0)
	steps := []struct {
		what string
		do   func()
		want int
	}{
		{"nothing grabbed", func() {}, 0},
		{"one grab", func() { w1.Grab() }, 1},
		{"grabs in another function", func() { w2.Grab(); w2.Grab() }, 3},
		{"a job completes", func() { w1.Update(a, &Update{Kind: Complete}) }, 2},
		{"a worker leaves", w2.Close, 0},
	}
	for _, st := range steps {
		st.do()
		if got := s.Running(); got != st.want {
			t.Fatalf("after %s: Running() = %d, want %d", st.what, got, st.want)
		}
	}
	if s.Len() != 3 {
		t.Fatalf("Len() = %d, want the 2 requeued jobs and the delayed one", s.Len())
	}
}

// The jobs a worker remembers as finished by another attempt are bounded.
func TestEndedBounded(t *testing.T) {
	s := newTest(t, Config{})
	w := s.NewWorker(&waker{})
	for id := uint64(1); id <= 3*maxEnded; id++ {
		w.addEnded(id)
	}
	if len(w.ended) != maxEnded || w.ended[0] != 2*maxEnded+1 {
		t.Fatalf("%d remembered, oldest %d", len(w.ended), w.ended[0])
	}
}

// Replace gives a waiting job new content in place (same id, new due
// time), and gives a running job's key to a new job, the old one being
// dropped if it comes back.
func TestReplace(t *testing.T) {
	tests := []struct {
		name    string
		first   int64 // due offset in seconds of the first submit (0 = now)
		second  int64
		running bool // the first is running when the second comes
		sameID  bool
	}{
		{name: "queued stays queued", sameID: true},
		{name: "queued becomes delayed", second: 60, sameID: true},
		{name: "delayed becomes due", first: 60, sameID: true},
		{name: "delayed moves", first: 60, second: 120, sameID: true},
		{name: "running", running: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			s := newTest(t, Config{Clock: clk})
			c := s.NewClient(&recorder{})
			at := func(off int64) int64 {
				if off == 0 {
					return 0
				}
				return clk.Wall().Unix() + off
			}
			sub := func(payload string, off int64, counter int64) uint64 {
				id, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("n"), Payload: []byte(payload),
					Background: true, RetryForever: true, Replace: true, When: at(off), Counter: counter})
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			id1 := sub("one", tt.first, 1)
			w := s.NewWorker(&waker{})
			w.CanDo([]byte("f"), 0)
			if tt.running && grabPayload(w) != "one" {
				t.Fatal("first not running")
			}
			id2 := sub("two", tt.second, 2)
			if (id1 == id2) != tt.sameID {
				t.Fatalf("ids %d and %d", id1, id2)
			}
			st := s.Funcs()[0]
			wantTotal := 1
			if tt.running {
				wantTotal = 2 // the old attempt still runs
			}
			if st.Total() != wantTotal {
				t.Fatalf("function holds %d jobs, want %d: %+v", st.Total(), wantTotal, st)
			}
			if (st.Delayed == 1) != (tt.second > 0) {
				t.Fatalf("delayed %d after replacing with due offset %d", st.Delayed, tt.second)
			}
			v, ok := s.Find([]byte("f"), []byte("n"))
			if !ok || v.ID != id2 || string(v.Payload) != "two" || v.When != at(tt.second) || v.Counter != 2 {
				t.Fatalf("find: %+v %v", v, ok)
			}
			if tt.running {
				// The old attempt fails: it must not come back beside its successor.
				if err := w.Update(id1, &Update{Kind: Fail}); err != nil {
					t.Fatal(err)
				}
				if s.Len() != 1 {
					t.Fatalf("%d live jobs after the replaced job failed", s.Len())
				}
			}
			if tt.second > 0 {
				s.Advance(clk.pass(time.Duration(tt.second) * time.Second))
			}
			if got := grabPayload(w); got != "two" {
				t.Fatalf("grab %q", got)
			}
			if got := grabPayload(w); got != "<none>" {
				t.Fatalf("second grab %q", got)
			}
		})
	}
}
