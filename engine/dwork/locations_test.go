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
// table is kept least recently seen first.
func TestLocationsExpire(t *testing.T) {
	ls, s := locTable(t, 10, "job")
	t0 := time.Now()
	ls.get("a", t0, true)
	ls.get("b", t0.Add(10*time.Second), true)
	busy := ls.get("c", t0.Add(20*time.Second), true)
	if busy.w.Grab() == nil {
		t.Fatal("no job to hold")
	}
	ls.get("a", t0.Add(30*time.Second), false) // seen again: last
	for _, tc := range []struct {
		at   time.Duration
		want []string
	}{
		{30 * time.Second, []string{"b", "c", "a"}},
		{70 * time.Second, []string{"c", "a"}}, // b idle for a minute
		{80 * time.Second, []string{"a", "c"}}, // c holds a task: kept, as if seen
		{100 * time.Second, []string{"c"}},     // a idle for 70s
		{200 * time.Second, []string{"c"}},     // still holding
	} {
		ls.expire(t0.Add(tc.at))
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

// The connections of locations: a location is taken as exited when the
// last connection it stole on closes; one connection may serve several
// locations; a location forgotten otherwise (Exit, the TTL) leaves no
// trace in the table of connections.
func TestLocationsClosed(t *testing.T) {
	ls, s := locTable(t, 10, "j1", "j2", "j3")
	now := time.Now()
	a, b := ls.get("a", now, true), ls.get("b", now, true)
	a.w.Grab()
	b.w.Grab()
	ls.bind(a, []byte("conn1"))
	ls.bind(a, []byte("conn2"))
	ls.bind(a, []byte("conn1")) // again: nothing new
	ls.bind(b, []byte("conn2"))
	if len(a.conns) != 2 || len(ls.byConn["conn2"]) != 2 {
		t.Fatalf("a on %q, conn2 serves %d", a.conns, len(ls.byConn["conn2"]))
	}
	ls.closed([]byte("conn1"))
	if got := ls.names(); !slices.Equal(got, []string{"a", "b"}) || a.w.Running() != 1 {
		t.Fatalf("after conn1 closed: %v, a holding %d; want a still on conn2", got, a.w.Running())
	}
	ls.closed([]byte("unknown"))
	ls.closed([]byte("conn2"))
	if got := ls.names(); len(got) != 0 || workers(s) != 0 || s.Len() != 3 || len(ls.byConn) != 0 {
		t.Fatalf("after conn2 closed: %v, %d workers, %d jobs, %d connections; want none, none, 3, none",
			got, workers(s), s.Len(), len(ls.byConn))
	}
	c := ls.get("c", now, true)
	var grabbed []string
	for j := c.w.Grab(); j != nil; j = c.w.Grab() {
		grabbed = append(grabbed, j.Unique())
	}
	if want := []string{"j1", "j2", "j3"}; !slices.Equal(grabbed, want) {
		t.Fatalf("grabbed %v after the closes, want %v (given back first in line)", grabbed, want)
	}

	d := ls.get("d", now, true)
	ls.bind(d, []byte("conn3"))
	ls.bind(c, []byte("conn3"))
	ls.forget(d) // an Exit
	if got := ls.byConn["conn3"]; len(got) != 1 || got[0] != c {
		t.Fatalf("conn3 serves %d locations after d was forgotten, want c alone", len(got))
	}
	ls.forget(c)
	if len(ls.byConn) != 0 {
		t.Fatalf("%d connections known with no location", len(ls.byConn))
	}
}

// keepOnClose binds nothing: a closed connection takes no location away.
func TestLocationsKeepOnClose(t *testing.T) {
	ls, _ := locTable(t, 10, "j1")
	ls.keepOnClose = true
	a := ls.get("a", time.Now(), true)
	a.w.Grab()
	ls.bind(a, []byte("conn1"))
	ls.closed([]byte("conn1"))
	if got := ls.names(); !slices.Equal(got, []string{"a"}) || a.w.Running() != 1 {
		t.Fatalf("%v, a holding %d; want a holding its task", got, a.w.Running())
	}
}
