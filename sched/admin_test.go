package sched

import (
	"fmt"
	"testing"
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
