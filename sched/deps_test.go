package sched

import (
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"testing"
)

// dep submits a background job of fn named u that waits for after.
func dep(t testing.TB, c *Client, fn, u string, after ...Key) uint64 {
	t.Helper()
	id, err := c.Submit(&SubmitReq{Func: []byte(fn), Unique: []byte(u), Payload: []byte(u), Background: true, After: after})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// runnable grabs every job w can have now and returns their uniques,
// sorted, holding them.
func runnable(w *Worker) []string {
	var got []string
	for j := w.Grab(); j != nil; j = w.Grab() {
		got = append(got, j.Unique())
	}
	slices.Sort(got)
	return got
}

// twoShards returns two function names that live in different shards.
func twoShards(s *Sched) (string, string) {
	for i := 0; ; i++ {
		if g := fmt.Sprint("g", i); s.shardFor([]byte(g)) != s.shardFor([]byte("f")) {
			return "f", g
		}
	}
}

// A diamond runs in dependency order, within a shard and across shards:
// a; then b and c; then d once both have ended.
func TestDependencyDiamond(t *testing.T) {
	for _, cross := range []bool{false, true} {
		t.Run(fmt.Sprint("cross-shard=", cross), func(t *testing.T) {
			s := newTest(t, Config{})
			f, g := "f", "f"
			if cross {
				f, g = twoShards(s)
			}
			c := s.NewClient(&recorder{})
			a := dep(t, c, f, "a")
			b := dep(t, c, g, "b", Key{f, "a"})
			cc := dep(t, c, f, "c", Key{f, "a"})
			d := dep(t, c, g, "d", Key{g, "b"}, Key{f, "c"})
			w := s.NewWorker(&waker{})
			w.CanDo([]byte(f), 0)
			w.CanDo([]byte(g), 0)
			if got := runnable(w); fmt.Sprint(got) != "[a]" {
				t.Fatalf("runnable at first: %v", got)
			}
			if st := s.statFor(g); cross && (st.Blocked != 2 || st.Total() != 2) {
				t.Fatalf("%s: %+v", g, st)
			}
			w.Update(a, &Update{Kind: Complete})
			if got := runnable(w); fmt.Sprint(got) != "[b c]" {
				t.Fatalf("after a: %v", got)
			}
			w.Update(b, &Update{Kind: Complete})
			if got := runnable(w); len(got) != 0 {
				t.Fatalf("after b only: %v", got)
			}
			w.Update(cc, &Update{Kind: Complete})
			if got := runnable(w); fmt.Sprint(got) != "[d]" {
				t.Fatalf("after b and c: %v", got)
			}
			w.Update(d, &Update{Kind: Complete})
		})
	}
}

// statFor is fn's FuncStat.
func (s *Sched) statFor(fn string) FuncStat {
	for _, st := range s.Funcs() {
		if st.Name == fn {
			return st
		}
	}
	return FuncStat{}
}

// What counts as an ended predecessor: a name no live job has, a job that
// completed, failed, was cancelled or removed; a job never waits for itself.
func TestDependencyEnded(t *testing.T) {
	s := newTest(t, Config{JobRetries: 1})
	c := s.NewClient(&recorder{})
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	dep(t, c, "f", "x", Key{"f", "nobody"}, Key{"other", "nobody"})
	dep(t, c, "f", "self", Key{"f", "self"})
	if got := runnable(w); fmt.Sprint(got) != "[self x]" {
		t.Fatalf("%v", got)
	}
	for _, end := range []string{"fail", "cancel", "remove", "purge-blocked"} {
		p := dep(t, c, "f", "p-"+end)
		dep(t, c, "f", "s-"+end, Key{"f", "p-" + end})
		switch end {
		case "fail":
			runnable(w)
			w.Update(p, &Update{Kind: Fail})
		case "cancel":
			if err := s.Cancel(p); err != nil {
				t.Fatal(err)
			}
		case "remove":
			if _, err := s.Remove([]byte("f"), []byte("p-remove")); err != nil {
				t.Fatal(err)
			}
		case "purge-blocked":
			// A blocked job that ends releases its own successors.
			dep(t, c, "f", "t", Key{"f", "s-purge-blocked"})
			s.Cancel(p)
			runnable(w) // s-purge-blocked, held
			if _, err := s.Remove([]byte("f"), []byte("s-purge-blocked")); err != nil {
				t.Fatal(err)
			}
			if got := runnable(w); fmt.Sprint(got) != "[t]" {
				t.Fatalf("after its blocked predecessor was removed: %v", got)
			}
			continue
		}
		if got := runnable(w); fmt.Sprint(got) != "[s-"+end+"]" {
			t.Fatalf("after %s: %v", end, got)
		}
	}
}

// A submit naming a waiting job again with After makes it wait for those
// too; a running job is past waiting.
func TestDependencyAddedLater(t *testing.T) {
	s := newTest(t, Config{})
	c := s.NewClient(&recorder{})
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	y := dep(t, c, "f", "y", Key{"f", "z"}) // z does not exist: y is ready
	z := dep(t, c, "f", "z")
	if id := dep(t, c, "f", "y", Key{"f", "z"}); id != y {
		t.Fatalf("the second submit of y made job %d", id)
	}
	if got := runnable(w); fmt.Sprint(got) != "[z]" {
		t.Fatalf("y waits for z now: %v", got)
	}
	w.Update(z, &Update{Kind: Complete})
	if got := runnable(w); fmt.Sprint(got) != "[y]" {
		t.Fatalf("%v", got)
	}
	q := dep(t, c, "f", "q")
	dep(t, c, "f", "y", Key{"f", "q"}) // y runs: nothing to add
	if got := runnable(w); fmt.Sprint(got) != "[q]" {
		t.Fatalf("%v", got)
	}
	w.Update(q, &Update{Kind: Complete})
	w.Update(y, &Update{Kind: Complete})
}

// The graph survives a restart: the edges are in the records, and a
// predecessor that ended before the restart is not waited for.
func TestDependencyReplay(t *testing.T) {
	st := newTestStore()
	s1 := newTest(t, Config{Store: st})
	c := s1.NewClient(&recorder{})
	f, g := twoShards(s1)
	a := dep(t, c, f, "a")
	dep(t, c, g, "b", Key{f, "a"})
	dep(t, c, f, "c", Key{g, "b"}, Key{f, "a"})
	dep(t, c, g, "d", Key{f, "gone"})
	w := s1.NewWorker(&waker{})
	w.CanDo([]byte(f), 0)
	w.CanDo([]byte(g), 0)
	runnable(w)
	w.Update(a, &Update{Kind: Complete})

	s2 := newTest(t, Config{Store: st})
	if n, err := s2.Replay(); err != nil || n != 3 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	w = s2.NewWorker(&waker{})
	w.CanDo([]byte(f), 0)
	w.CanDo([]byte(g), 0)
	got := runnable(w)
	if fmt.Sprint(got) != "[b d]" {
		t.Fatalf("runnable after the restart: %v", got)
	}
	v, _ := s2.Find([]byte(f), []byte("c"))
	if !v.Blocked {
		t.Fatalf("c: %+v", v)
	}
	b, _ := s2.Find([]byte(g), []byte("b"))
	w.Update(b.ID, &Update{Kind: Complete})
	if got := runnable(w); fmt.Sprint(got) != "[c]" {
		t.Fatalf("after b: %v", got)
	}
}

// Edges made while predecessors end on other goroutines: every job runs
// once, never before its predecessors have ended.
func TestDependencyConcurrent(t *testing.T) {
	s := newTest(t, Config{})
	f, g := twoShards(s)
	fns := []string{f, g}
	const preds, succs = 200, 2000
	var mu sync.Mutex
	done := map[string]bool{}
	after := map[string][]Key{}
	c := s.NewClient(&recorder{})
	for i := 0; i < preds; i++ {
		dep(t, c, fns[i%2], fmt.Sprint("p", i))
	}
	var wg sync.WaitGroup
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() { // workers
			defer wg.Done()
			w := s.NewWorker(&waker{})
			w.CanDo([]byte(f), 0)
			w.CanDo([]byte(g), 0)
			for n := 0; n < (preds+succs)/2+200; n++ {
				j := w.Grab()
				if j == nil {
					continue
				}
				mu.Lock()
				for _, p := range after[j.Unique()] {
					if !done[p.Unique] {
						t.Errorf("%s ran before %s ended", j.Unique(), p.Unique)
					}
				}
				if done[j.Unique()] {
					t.Errorf("%s ran twice", j.Unique())
				}
				done[j.Unique()] = true
				mu.Unlock()
				w.Update(j.ID(), &Update{Kind: Complete})
			}
		}()
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < succs; i++ {
		u := fmt.Sprint("s", i)
		ks := []Key{{fns[rng.Intn(2)], fmt.Sprint("p", rng.Intn(preds))}, {fns[rng.Intn(2)], fmt.Sprint("p", rng.Intn(preds))}}
		// A name in the wrong function is a missing job: it has ended.
		mu.Lock()
		for _, k := range ks {
			if k.Func == fns[atoi(k.Unique[1:])%2] {
				after[u] = append(after[u], k)
			}
		}
		mu.Unlock()
		dep(t, c, fns[i%2], u, ks...)
	}
	wg.Wait()
	// Whatever the workers left is runnable now, never blocked.
	w := s.NewWorker(&waker{})
	w.CanDo([]byte(f), 0)
	w.CanDo([]byte(g), 0)
	for j := w.Grab(); j != nil; j = w.Grab() {
		mu.Lock()
		done[j.Unique()] = true
		mu.Unlock()
		w.Update(j.ID(), &Update{Kind: Complete})
	}
	if len(done) != preds+succs {
		t.Fatalf("%d of %d jobs ran", len(done), preds+succs)
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// A chain of a million and a fan-in of 100,000: each release is O(1).
func TestDependencyLarge(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a million jobs: not with -short or -race")
	}
	s := newTest(t, Config{})
	c := s.NewClient(&recorder{})
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	const chain = 1_000_000
	prev := Key{}
	for i := 0; i < chain; i++ {
		k := Key{"f", fmt.Sprint("c", i)}
		dep(t, c, "f", k.Unique, prev)
		prev = k
	}
	for i := 0; i < chain; i++ {
		j := w.Grab()
		if j == nil || j.Unique() != fmt.Sprint("c", i) {
			t.Fatalf("step %d: %v", i, j)
		}
		if w.Grab() != nil {
			t.Fatalf("step %d: two runnable", i)
		}
		w.Update(j.ID(), &Update{Kind: Complete})
	}
	const fan = 100_000
	var ks []Key
	var ids []uint64
	for i := 0; i < fan; i++ {
		ks = append(ks, Key{"f", fmt.Sprint("p", i)})
		ids = append(ids, dep(t, c, "f", ks[i].Unique))
	}
	dep(t, c, "f", "sink", ks...)
	runnable(w)
	for _, id := range ids {
		w.Update(id, &Update{Kind: Complete})
	}
	if got := runnable(w); fmt.Sprint(got) != "[sink]" {
		t.Fatalf("%v", got)
	}
}
