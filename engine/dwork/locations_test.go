package dwork

import (
	"slices"
	"testing"
	"time"

	"switchyard/sched"
)

// locTable is a table of locations over a real scheduler with one job
// per name in jobs.
func locTable(t *testing.T, max int, jobs ...string) (*locations, *sched.Sched) {
	t.Helper()
	s := sched.New(sched.Config{})
	t.Cleanup(s.Close)
	cl := s.NewClient(nil)
	for _, j := range jobs {
		if _, err := cl.Submit(&sched.SubmitReq{Func: []byte("f"), Unique: []byte(j), Background: true}); err != nil {
			t.Fatal(err)
		}
	}
	return newLocations(s, "f", max, time.Minute), s
}

// names lists the table's locations, least recently seen first.
func (ls *locations) names() []string {
	var out []string
	for l := ls.head; l != nil; l = l.next {
		out = append(out, l.name)
	}
	return out
}

func workers(s *sched.Sched) int {
	n := 0
	for _, f := range s.Funcs() {
		n += f.Workers
	}
	return n
}

// Locations not heard from for the TTL go, unless they hold a task; the
// table is kept least recently heard from first, and a silent holder keeps
// its place there.
func TestLocationsSweepTTL(t *testing.T) {
	ls, s := locTable(t, 10, "job")
	t0 := time.Now()
	ls.get("a", t0, true)
	ls.get("b", t0.Add(10*time.Second), true)
	busy := ls.get("c", t0.Add(20*time.Second), true)
	if busy.w.Grab() == nil {
		t.Fatal("no job to hold")
	}
	ls.get("a", t0.Add(30*time.Second), false) // heard again: last
	for _, tc := range []struct {
		at   time.Duration
		want []string
	}{
		{30 * time.Second, []string{"b", "c", "a"}},
		{70 * time.Second, []string{"c", "a"}}, // b idle for a minute
		{80 * time.Second, []string{"c", "a"}}, // c holds a task: kept, in its place
		{100 * time.Second, []string{"c"}},     // a idle for 70s
		{1000 * time.Hour, []string{"c"}},      // still holding: no host timeout
	} {
		if n := ls.sweep(t0.Add(tc.at)); n != 0 {
			t.Fatalf("at %v: %d hosts taken as exited with no host timeout", tc.at, n)
		}
		if got := ls.names(); !slices.Equal(got, tc.want) {
			t.Fatalf("at %v: %v, want %v", tc.at, got, tc.want)
		}
		if w := workers(s); w != len(tc.want) {
			t.Fatalf("at %v: %d workers in sched, want %d", tc.at, w, len(tc.want))
		}
	}
	if got := ls.get("b", t0.Add(200*time.Second), false); got != nil {
		t.Fatal("a forgotten location is still known")
	}
	if busy.w.Running() != 1 {
		t.Fatal("the silent holder lost its task")
	}
}

// With a host timeout, a host not heard from for that long is taken as
// exited, holding tasks or not: its tasks back first in line, in the order
// it stole them, and it is forgotten. A host heard from in time keeps its
// tasks, however long it holds them; the clock is the caller's.
func TestLocationsSweepHostTimeout(t *testing.T) {
	ls, s := locTable(t, 10, "j1", "j2", "j3", "j4")
	ls.hostTimeout = 30 * time.Second
	t0 := time.Unix(1000, 0)
	a := ls.get("a", t0, true)
	a.w.Grab() // j1
	a.w.Grab() // j2
	b := ls.get("b", t0.Add(10*time.Second), true)
	b.w.Grab() // j3
	ls.get("idle", t0.Add(15*time.Second), true)
	for _, tc := range []struct {
		at      time.Duration
		touch   string // heard from just before the sweep
		exited  int
		want    []string
		running int
	}{
		{29 * time.Second, "", 0, []string{"a", "b", "idle"}, 3},
		{30 * time.Second, "", 1, []string{"b", "idle"}, 1},  // a silent 30s: j1, j2 back
		{39 * time.Second, "b", 0, []string{"idle", "b"}, 1}, // b heard at 39s
		{45 * time.Second, "", 1, []string{"b"}, 1},          // idle silent 30s
		{68 * time.Second, "", 0, []string{"b"}, 1},          // b silent 29s
		{69 * time.Second, "", 1, nil, 0},                    // b silent 30s: j3 back
	} {
		now := t0.Add(tc.at)
		if tc.touch != "" {
			ls.get(tc.touch, now, false)
		}
		if n := ls.sweep(now); n != tc.exited {
			t.Fatalf("at %v: %d taken as exited, want %d", tc.at, n, tc.exited)
		}
		if got := ls.names(); !slices.Equal(got, tc.want) {
			t.Fatalf("at %v: %v, want %v", tc.at, got, tc.want)
		}
		if n := s.Funcs()[0].Running; n != tc.running {
			t.Fatalf("at %v: %d running, want %d", tc.at, n, tc.running)
		}
	}
	c := ls.get("c", t0.Add(70*time.Second), true)
	var got []string
	for j := c.w.Grab(); j != nil; j = c.w.Grab() {
		got = append(got, j.Unique())
	}
	// j3 went back last, so it leads; then a's, in the order a stole them.
	if want := []string{"j3", "j1", "j2", "j4"}; !slices.Equal(got, want) {
		t.Fatalf("grabbed %v after the timeouts, want %v", got, want)
	}
}

// A full table makes room by forgetting the least recently seen location
// that holds nothing; with every one holding a task, a newcomer gets no
// location.
func TestLocationsFull(t *testing.T) {
	ls, s := locTable(t, 2, "j1", "j2")
	t0 := time.Now()
	for i, tc := range []struct {
		name string
		grab bool
		want []string // nil: get fails
	}{
		{"a", true, []string{"a"}},
		{"b", false, []string{"a", "b"}},
		{"c", true, []string{"a", "c"}},  // b evicted, a holds
		{"d", false, nil},                // a and c hold
		{"a", false, []string{"c", "a"}}, // known: no room needed
	} {
		l := ls.get(tc.name, t0.Add(time.Duration(i)*time.Second), true)
		if (l == nil) != (tc.want == nil) {
			t.Fatalf("get %s: %v", tc.name, l)
		}
		if l != nil && tc.grab && l.w.Grab() == nil {
			t.Fatalf("%s: no job to grab", tc.name)
		}
		if tc.want != nil && !slices.Equal(ls.names(), tc.want) {
			t.Fatalf("after %s: %v, want %v", tc.name, ls.names(), tc.want)
		}
	}
	if w := workers(s); w != 2 {
		t.Fatalf("%d workers in sched, want 2", w)
	}
	ls.closeAll()
	if w, n := workers(s), s.Len(); w != 0 || n != 2 {
		t.Fatalf("after closeAll: %d workers, %d jobs; want none and both jobs back", w, n)
	}
}

// requeueHeld puts a worker's tasks back first in line, in the order it
// took them.
func TestRequeueHeld(t *testing.T) {
	ls, _ := locTable(t, 10, "j1", "j2", "j3", "j4")
	l := ls.get("a", time.Now(), true)
	for range 3 {
		l.w.Grab()
	}
	if held := requeueHeld(l.w, nil); len(held) != 3 || l.w.Running() != 0 {
		t.Fatalf("requeued %v, still holding %d", held, l.w.Running())
	}
	var got []string
	for j := l.w.Grab(); j != nil; j = l.w.Grab() {
		got = append(got, j.Unique())
	}
	if want := []string{"j1", "j2", "j3", "j4"}; !slices.Equal(got, want) {
		t.Fatalf("grabbed %v after the requeue, want %v", got, want)
	}
}
