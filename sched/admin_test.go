package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestJobsChunked: every live job once, in chunks no larger than chunk,
// and the callback runs with no shard lock held (it submits to the very
// shard being listed, which would deadlock otherwise).
func TestJobsChunked(t *testing.T) {
	s := newTest(t, Config{Shards: 1})
	c := s.NewClient(&recorder{})
	const n = 2*chunk + 100
	want := map[uint64]bool{}
	for i := 0; i < n; i++ {
		want[submit(t, c, "f", "", "x", Normal, true)] = true
	}
	seen := map[uint64]bool{}
	calls := 0
	s.JobsChunked(func(jobs []JobInfo) {
		calls++
		if len(jobs) == 0 || len(jobs) > chunk {
			t.Fatalf("chunk of %d jobs", len(jobs))
		}
		for _, j := range jobs {
			if seen[j.ID] {
				t.Fatalf("job %d seen twice", j.ID)
			}
			seen[j.ID] = true
		}
		submit(t, c, "f", "", "more", Normal, true)
	})
	for id := range want {
		if !seen[id] {
			t.Fatalf("job %d not listed", id)
		}
	}
	if calls < 3 {
		t.Fatalf("%d jobs in %d chunks", len(seen), calls)
	}
	if got := len(s.Jobs()); got != n+calls {
		t.Fatalf("Jobs() = %d jobs, want %d", got, n+calls)
	}
}

// TestFuncsChunked: a shard with more functions than a chunk lets go of
// its lock between chunks; functions changing meanwhile are fine.
func TestFuncsChunked(t *testing.T) {
	s := newTest(t, Config{Shards: 1})
	const n = 2*chunk + 100
	for i := 0; i < n; i++ {
		s.CreateFunc(fmt.Appendf(nil, "f%d", i))
	}
	seen := map[string]bool{}
	dropped := map[string]bool{}
	calls := 0
	s.FuncsChunked(func(fs []FuncStat) {
		calls++
		if len(fs) == 0 || len(fs) > chunk {
			t.Fatalf("chunk of %d functions", len(fs))
		}
		for _, f := range fs {
			if seen[f.Name] {
				t.Fatalf("%s seen twice", f.Name)
			}
			seen[f.Name] = true
		}
		// Drop one not yet seen, if any, and make a new one.
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("f%d", i)
			if !seen[name] && !dropped[name] {
				if err := s.DropFunc([]byte(name)); err != nil {
					t.Fatal(err)
				}
				dropped[name] = true
				break
			}
		}
		s.CreateFunc(fmt.Appendf(nil, "new%d", calls))
	})
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%d", i)
		if seen[name] == dropped[name] {
			t.Fatalf("%s: seen %v, dropped %v", name, seen[name], dropped[name])
		}
	}
	if calls < 3 || s.NumFuncs() != n-len(dropped)+calls || len(s.Funcs()) != s.NumFuncs() {
		t.Fatalf("%d calls, %d dropped, NumFuncs %d, Funcs %d", calls, len(dropped), s.NumFuncs(), len(s.Funcs()))
	}
}

// StatusUnique finds a unique job among many functions that have none,
// and forgets it once it ends.
func TestStatusUniqueAmongManyFunctions(t *testing.T) {
	s := newTest(t, Config{})
	w := s.NewWorker(&waker{})
	for i := 0; i < 1000; i++ {
		w.CanDo([]byte(fmt.Sprintf("idle-%d", i)), 0)
	}
	c := s.NewClient(&recorder{})
	submit(t, c, "busy", "", "no unique", Normal, true)
	id := submit(t, c, "busy", "the-one", "x", Normal, true)
	if st := s.StatusUnique([]byte("the-one")); !st.Known || st.Running {
		t.Fatalf("status %+v", st)
	}
	w.CanDo([]byte("busy"), 0)
	for j := w.Grab(); j != nil; j = w.Grab() {
		w.Update(j.ID(), &Update{Kind: Complete})
	}
	if st := s.StatusUnique([]byte("the-one")); st.Known {
		t.Fatalf("job %d ended but status %+v", id, st)
	}
	for i := range s.shards {
		if n := len(s.shards[i].keyed); n != 0 {
			t.Fatalf("shard %d lists %d functions with unique jobs", i, n)
		}
	}
}

// Remove ends a job by (function, key) in every state; a running job's
// worker then reports into the void.
func TestRemove(t *testing.T) {
	for _, state := range []string{"queued", "delayed", "running"} {
		t.Run(state, func(t *testing.T) {
			clk := newFakeClock()
			s := newTest(t, Config{Clock: clk})
			r := &recorder{}
			c := s.NewClient(r)
			req := &SubmitReq{Func: []byte("f"), Unique: []byte("n"), Payload: []byte("p")}
			if state == "delayed" {
				req.When = clk.Wall().Unix() + 60
			}
			id, _ := c.Submit(req) // foreground: the client hears the Fail
			w := s.NewWorker(&waker{})
			w.CanDo([]byte("f"), 0)
			if state == "running" && w.Grab() == nil {
				t.Fatal("no job")
			}
			if got, err := s.Remove([]byte("f"), []byte("n")); err != nil || got != id {
				t.Fatalf("remove: %d %v", got, err)
			}
			if s.Len() != 0 || w.Running() != 0 {
				t.Fatalf("%d live, worker holds %d", s.Len(), w.Running())
			}
			if st := s.Funcs()[0]; st.Total() != 0 {
				t.Fatalf("function counts %+v", st)
			}
			if got := r.events(); len(got) != 1 {
				t.Fatalf("client heard %v", got)
			}
			if state == "running" {
				if err := w.Update(id, &Update{Kind: Complete}); err != nil {
					t.Fatalf("worker's result after remove: %v", err)
				}
			}
			s.Advance(clk.pass(time.Hour))
			if w.Grab() != nil {
				t.Fatal("removed job handed out")
			}
			if _, err := s.Remove([]byte("f"), []byte("n")); err != ErrNotFound {
				t.Fatalf("second remove: %v", err)
			}
			if _, err := s.Remove([]byte("nofunc"), []byte("n")); err != ErrNotFound {
				t.Fatalf("remove in unknown function: %v", err)
			}
		})
	}
}

// Purge refuses a function with workers, and otherwise ends every job of
// it in every state, in chunks, and forgets it.
func TestPurge(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, Shards: 1})
	c := s.NewClient(&recorder{})
	const n = 2*chunk + 10
	for i := 0; i < n; i++ {
		req := &SubmitReq{Func: []byte("f"), Unique: []byte(fmt.Sprint(i)), Background: true}
		if i%2 == 0 {
			req.When = clk.Wall().Unix() + 60
		}
		c.Submit(req)
	}
	submit(t, c, "other", "", "x", Normal, true)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	held := w.Grab()
	if _, err := s.Purge([]byte("f")); err != ErrFunctionBusy {
		t.Fatalf("purge with a worker: %v", err)
	}
	w.CantDo([]byte("f")) // still holds its job
	got, err := s.Purge([]byte("f"))
	if err != nil || got != n {
		t.Fatalf("purge: %d %v, want %d", got, err, n)
	}
	if s.Len() != 1 || w.Running() != 0 {
		t.Fatalf("%d live, worker holds %d", s.Len(), w.Running())
	}
	if err := w.Update(held.ID(), &Update{Kind: Complete}); err != nil {
		t.Fatalf("held job's result after purge: %v", err)
	}
	for _, f := range s.Funcs() {
		if f.Name == "f" {
			t.Fatalf("purged function still known: %+v", f)
		}
	}
	if _, err := s.Purge([]byte("f")); err != ErrNoFunction {
		t.Fatalf("purge of unknown: %v", err)
	}
	s.Advance(clk.pass(time.Hour)) // the delayed ones' timers are gone too
	if s.Len() != 1 {
		t.Fatalf("%d live after the hour", s.Len())
	}
}

// JobViewsChunked shows every job with its payload, due time, counter and
// state, and bounds the payload bytes of a chunk.
func TestJobViewsChunked(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, Shards: 2})
	c := s.NewClient(&recorder{})
	big := make([]byte, viewBytes/2+1)
	want := map[string]JobView{}
	for i := 0; i < 10; i++ {
		payload := []byte(fmt.Sprint("p", i))
		if i < 4 {
			payload = append(big[:0:0], big...)
			payload[0] = byte(i)
		}
		req := &SubmitReq{Func: []byte(fmt.Sprint("f", i%3)), Unique: []byte(fmt.Sprint("n", i)), Payload: payload,
			Background: true, Counter: int64(i), Timeout: time.Duration(i) * time.Second}
		if i%2 == 1 {
			req.When = clk.Wall().Unix() + int64(i)
		}
		id, _ := c.Submit(req)
		want[string(req.Unique)] = JobView{ID: id, Payload: payload, Counter: req.Counter, When: req.When, Timeout: req.Timeout}
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f0"), 0)
	var a Attempt
	running := w.GrabAttempt(&a) // a frontend that shows run times asks for them
	seen := 0
	s.JobViewsChunked(func(vs []JobView) {
		bytes := 0
		for _, v := range vs {
			bytes += len(v.Payload)
			wv := want[v.Unique]
			if v.ID != wv.ID || string(v.Payload) != string(wv.Payload) || v.Counter != wv.Counter ||
				v.When != wv.When || v.Timeout != wv.Timeout || !v.Background {
				t.Fatalf("view %+v, want %+v", v, wv)
			}
			if v.Running != (v.ID == running.ID()) || v.Running == v.Started.IsZero() {
				t.Fatalf("view %s running %v started %v", v.Unique, v.Running, v.Started)
			}
			seen++
		}
		if len(vs) > 1 && bytes > viewBytes {
			t.Fatalf("chunk of %d jobs holds %d payload bytes", len(vs), bytes)
		}
	})
	if seen != 10 {
		t.Fatalf("saw %d jobs", seen)
	}
}

// UpdateNamed reports for the worker that runs the named job, if the
// caller owns that worker; a job not running, or run by another's worker,
// is not found.
func TestUpdateNamed(t *testing.T) {
	s := newTest(t, Config{})
	rec := &recorder{}
	c := s.NewClient(rec)
	mineW, otherW := s.NewWorker(&waker{}), s.NewWorker(&waker{})
	mineW.SetName("here")
	mineW.CanDo([]byte("f"), 0)
	otherW.CanDo([]byte("g"), 0)
	mine := func(w *Worker) bool { return w.Name() == "here" }

	queued := submit(t, c, "f", "queued", "q", Normal, false)
	if err := s.UpdateNamed([]byte("f"), []byte("queued"), &Update{Kind: Complete}, mine); err != ErrNotFound {
		t.Errorf("a queued job: %v, want ErrNotFound", err)
	}
	if j := mineW.Grab(); j == nil || j.ID() != queued {
		t.Fatalf("grab: %v", j)
	}
	running := submit(t, c, "g", "theirs", "t", Normal, false)
	if j := otherW.Grab(); j == nil || j.ID() != running {
		t.Fatalf("grab: %v", j)
	}
	for _, tc := range []struct {
		fn, key string
		want    error
	}{
		{"g", "theirs", ErrNotFound}, // another's worker runs it
		{"f", "absent", ErrNotFound},
		{"nofn", "queued", ErrNotFound},
		{"f", "queued", nil},
		{"f", "queued", ErrNotFound}, // ended now
	} {
		if err := s.UpdateNamed([]byte(tc.fn), []byte(tc.key), &Update{Kind: Complete, Data: []byte("r")}, mine); err != tc.want {
			t.Errorf("UpdateNamed(%s, %s) = %v, want %v", tc.fn, tc.key, err, tc.want)
		}
	}
	rec.mu.Lock()
	got := slices.Clone(rec.got)
	rec.mu.Unlock()
	if want := []string{fmt.Sprintf("%d:%d:r", queued, Complete)}; !slices.Equal(got, want) {
		t.Errorf("the client heard %q, want %q", got, want)
	}
	if err := s.UpdateNamed([]byte("g"), []byte("theirs"), &Update{Kind: Complete}, nil); err != nil {
		t.Errorf("with no owner test: %v", err)
	}
}
