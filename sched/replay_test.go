package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A restarted scheduler on the same store has the same jobs under the same
// ids, in the same order within each priority, with their uniques, due
// times and attributes; new jobs get new ids.
func TestReplay(t *testing.T) {
	clk := newFakeClock()
	st := newTestStore()
	s1 := newTest(t, Config{Clock: clk, Store: st})
	c := s1.NewClient(&recorder{})
	var ids []uint64
	for i := 0; i < 300; i++ {
		req := &SubmitReq{Func: []byte(fmt.Sprint("f", i%7)), Payload: []byte(fmt.Sprint("p", i)),
			Priority: Priority(i % 3), Background: true}
		switch i % 5 {
		case 1:
			req.Unique = []byte(fmt.Sprint("u", i))
		case 2:
			req.When = clk.Wall().Unix() + 60
		case 3:
			req.RetryForever, req.Counter, req.Timeout = true, int64(i), time.Duration(i)*time.Second
			req.Unique, req.Replace = []byte(fmt.Sprint("n", i)), true
		}
		id, err := c.Submit(req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	submit(t, c, "f0", "", "foreground", Normal, false) // not stored
	// One job done, one failed: they are gone from the store.
	w := s1.NewWorker(&waker{})
	w.CanDo([]byte("f0"), 0)
	for _, k := range []UpdateKind{Complete, Fail} {
		j := w.Grab()
		w.Update(j.ID(), &Update{Kind: k})
	}
	before := map[uint64]JobView{}
	s1.JobViewsChunked(func(vs []JobView) {
		for _, v := range vs {
			if v.Background {
				v.Payload = append([]byte(nil), v.Payload...)
				before[v.ID] = v
			}
		}
	})

	s2 := newTest(t, Config{Clock: clk, Store: st})
	n, err := s2.Replay()
	if err != nil || n != len(before) {
		t.Fatalf("replay: %d jobs, %v; want %d", n, err, len(before))
	}
	after := map[uint64]JobView{}
	s2.JobViewsChunked(func(vs []JobView) {
		for _, v := range vs {
			v.Payload = append([]byte(nil), v.Payload...)
			after[v.ID] = v
		}
	})
	for id, b := range before {
		a := after[id]
		b.Running, b.Started = false, time.Time{}
		if a.Func != b.Func || a.Unique != b.Unique || string(a.Payload) != string(b.Payload) || a.Priority != b.Priority ||
			a.When != b.When || a.Timeout != b.Timeout || a.Counter != b.Counter {
			t.Fatalf("job %d: after %+v, before %+v", id, a, b)
		}
	}
	// Jobs due later wait in the wheel again.
	delayed := func(s *Sched) (n int) {
		for _, f := range s.Funcs() {
			n += f.Delayed
		}
		return n
	}
	if d1, d2 := delayed(s1), delayed(s2); d1 != d2 || d1 == 0 {
		t.Fatalf("%d delayed jobs after replay, %d before", d2, d1)
	}
	// Uniques coalesce again.
	id, _ := s2.NewClient(&recorder{}).Submit(&SubmitReq{Func: []byte("f1"), Unique: []byte("u1"), Background: true})
	if id != ids[1] {
		t.Fatalf("unique u1 after replay: job %d, want %d", id, ids[1])
	}
	// Order within each function and priority is submit order.
	w2 := s2.NewWorker(&waker{})
	w2.CanDo([]byte("f1"), 0)
	var last [3]uint64
	for j := w2.Grab(); j != nil; j = w2.Grab() {
		if j.ID() < last[j.Priority()] {
			t.Fatalf("job %d after %d at priority %d", j.ID(), last[j.Priority()], j.Priority())
		}
		last[j.Priority()] = j.ID()
		w2.Update(j.ID(), &Update{Kind: Complete})
	}
	// New jobs never take a stored id.
	fresh := submit(t, s2.NewClient(&recorder{}), "f0", "", "new", Normal, true)
	if slices.Contains(ids, fresh) {
		t.Fatalf("new job took the stored id %d", fresh)
	}
}

// Function names go to the same shard in every process: ids replay.
func TestShardForIsStable(t *testing.T) {
	a, b := New(Config{Tick: -1}), New(Config{Tick: -1})
	defer a.Close()
	defer b.Close()
	for i := 0; i < 1000; i++ {
		name := []byte(fmt.Sprint("fn", i))
		if a.shardFor(name).idx != b.shardFor(name).idx {
			t.Fatalf("%s: shard %d and %d", name, a.shardFor(name).idx, b.shardFor(name).idx)
		}
	}
	used := map[uint64]bool{}
	for i := 0; i < 10000; i++ {
		used[a.shardFor([]byte(fmt.Sprint("fn", i))).idx] = true
	}
	if len(used) < DefaultShards*9/10 {
		t.Fatalf("10000 names use %d of %d shards", len(used), DefaultShards)
	}
}

// A store written with another shard count is refused, not misread.
func TestReplayWrongShards(t *testing.T) {
	st := newTestStore()
	s1 := newTest(t, Config{Store: st, Shards: 16})
	c := s1.NewClient(&recorder{})
	for i := 0; i < 20; i++ {
		submit(t, c, fmt.Sprint("f", i), "", "x", Normal, true)
	}
	s2 := newTest(t, Config{Store: st, Shards: 64})
	if _, err := s2.Replay(); err == nil {
		t.Fatal("replayed a store of 16 shards into 64")
	}
}

// Jobs that coalesce on their payload (Gearman's unique "-") replay with
// that rule: two of them are two jobs, each found again by its payload.
func TestReplayCoalesceOnPayload(t *testing.T) {
	st := newTestStore()
	s1 := newTest(t, Config{Store: st})
	c := s1.NewClient(&recorder{})
	var ids []uint64
	for _, p := range []string{"one", "two"} {
		id, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("-"), Payload: []byte(p), Background: true, CoalesceOnPayload: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	s2 := newTest(t, Config{Store: st})
	if n, err := s2.Replay(); err != nil || n != 2 {
		t.Fatalf("replay: %d jobs, %v", n, err)
	}
	id, err := s2.NewClient(&recorder{}).Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("-"), Payload: []byte("two"),
		Background: true, CoalesceOnPayload: true})
	if err != nil || id != ids[1] {
		t.Fatalf("payload two after replay: job %d (%v), want %d", id, err, ids[1])
	}
}

// rowStore is a store that keeps no ids, like gearmand's SQLite table: its
// records replay in its order and get new ids.
type rowStore struct {
	memStore
	rows []Record
	got  []uint64
}

func (st *rowStore) Load(fn func(*Record) error) error {
	for _, r := range st.rows {
		if err := fn(&r); err != nil {
			return err
		}
		st.got = append(st.got, r.ID)
	}
	return nil
}

// Records without ids get fresh ones, each in its function's shard, told
// back through the record; they queue in the store's order, and new jobs
// never take their ids.
func TestReplayWithoutIDs(t *testing.T) {
	st := &rowStore{rows: []Record{
		{Func: "f", Unique: "a", Payload: []byte("1"), Priority: Low},
		{Func: "g", Unique: "b", Payload: []byte("2")},
		{Func: "f", Unique: "c", Payload: []byte("3"), Priority: Low},
		{Func: "f", Unique: "d", Payload: []byte("4"), Priority: High},
	}}
	s := newTest(t, Config{Store: st})
	if n, err := s.Replay(); err != nil || n != 4 {
		t.Fatalf("replay: %d jobs, %v", n, err)
	}
	seen := map[uint64]bool{}
	for i, id := range st.got {
		if id == 0 || seen[id] || s.shardOf(id) != s.shardFor([]byte(st.rows[i].Func)) {
			t.Fatalf("row %d got id %d (ids %v)", i, id, st.got)
		}
		seen[id] = true
	}
	id := submit(t, s.NewClient(&recorder{}), "f", "", "new", Normal, true)
	if seen[id] {
		t.Fatalf("a new job took replayed id %d", id)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	var order []string
	for j := w.Grab(); j != nil; j = w.Grab() {
		order = append(order, j.Unique())
		w.Update(j.ID(), &Update{Kind: Complete})
	}
	if got := fmt.Sprint(order); got != "[d  a c]" {
		t.Fatalf("order %s, want high, normal, then low in the store's order", got)
	}
}
