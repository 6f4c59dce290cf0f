package sched

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// testStore keeps in memory what sched asks it to persist, and answers
// from another goroutine, as a real store does.
type testStore struct {
	mu      sync.Mutex
	encoded map[string]Record // what Encode made, by the handle it returned
	n       int
	live    map[uint64]Record
	ops     []string
	fail    error // what Put answers
}

func newTestStore() *testStore {
	return &testStore{encoded: map[string]Record{}, live: map[uint64]Record{}}
}

func (st *testStore) Encode(r *Record) []byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := *r
	c.Payload = append([]byte(nil), r.Payload...)
	st.n++
	h := strconv.Itoa(st.n)
	st.encoded[h] = c
	return []byte(h)
}

func (st *testStore) Put(id uint64, rec []byte, done func(error)) {
	st.mu.Lock()
	r := st.encoded[string(rec)]
	r.ID = id
	st.ops = append(st.ops, "save "+r.Unique)
	if st.fail == nil {
		st.live[id] = r
	}
	err := st.fail
	st.mu.Unlock()
	if done != nil {
		go done(err)
	}
}

func (st *testStore) Delete(id uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ops = append(st.ops, "delete "+st.live[id].Unique)
	delete(st.live, id)
}

func (st *testStore) Flush(done func(error)) {
	st.mu.Lock()
	err := st.fail
	st.mu.Unlock()
	go done(err)
}

func (st *testStore) Load(fn func(*Record) error) error {
	st.mu.Lock()
	recs := make([]Record, 0, len(st.live))
	for _, r := range st.live {
		recs = append(recs, r)
	}
	st.mu.Unlock()
	slices.SortFunc(recs, func(a, b Record) int { return cmp.Compare(a.ID, b.ID) })
	for i := range recs {
		if err := fn(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (st *testStore) snapshot() (map[uint64]Record, string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return maps.Clone(st.live), "[" + strings.Join(st.ops, " ") + "]"
}

func TestStoreSeesBackgroundJobs(t *testing.T) {
	st := newTestStore()
	s := newTest(t, Config{Store: st})
	c := s.NewClient(&recorder{})
	bg := submit(t, c, "f", "bg", "x", Normal, true)
	submit(t, c, "f", "fg", "x", Normal, false)
	submit(t, c, "f", "bg", "y", Normal, true) // coalesced: nothing new to save
	s.SetMaxQueue([]byte("f"), [3]int{2, 2, 2})
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("full"), Background: true}); err != ErrQueueFull {
		t.Fatal(err)
	}
	if live, _ := st.snapshot(); len(live) != 1 || live[bg].Unique != "bg" {
		t.Fatalf("store holds %v, want only the background job", live)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	j := w.Grab()
	w.Update(j.ID(), &Update{Kind: Complete})
	live, ops := st.snapshot()
	if len(live) != 0 {
		t.Fatalf("finished job still stored: %v", live)
	}
	if want := "[save bg delete bg]"; ops != want {
		t.Fatalf("ops %s, want %s", ops, want)
	}
}

// A foreground job that a background submit joins must then survive a
// restart like any background job: its record is saved before the join is
// acknowledged and deleted when it ends.
func TestStoreSavesJoinedForegroundJob(t *testing.T) {
	st := newTestStore()
	s := newTest(t, Config{Store: st})
	c := s.NewClient(&recorder{})
	fg := submit(t, c, "f", "u", "x", Normal, false)
	if live, _ := st.snapshot(); len(live) != 0 {
		t.Fatalf("foreground job stored: %v", live)
	}
	if id := submit(t, c, "f", "u", "y", Normal, true); id != fg {
		t.Fatalf("joined %d, want %d", id, fg)
	}
	if live, _ := st.snapshot(); len(live) != 1 || string(live[fg].Payload) != "x" {
		t.Fatalf("store holds %v, want the joined job %d", live, fg)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	w.Update(w.Grab().ID(), &Update{Kind: Complete})
	if live, _ := st.snapshot(); len(live) != 0 {
		t.Fatalf("finished job still stored: %v", live)
	}
}

// With Stored, Submit answers at once and the acknowledgement comes when
// the record is on disk; a record that does not make it withdraws the job,
// which never runs. Answers come in the order of the submits.
func TestStoredAcknowledgement(t *testing.T) {
	st := newTestStore()
	s := newTest(t, Config{Store: st})
	c := s.NewClient(&recorder{})
	acks := make(chan string, 10)
	stored := func(id uint64, err error) { acks <- fmt.Sprint(id, " ", err) }
	r := &SubmitReq{Func: []byte("f"), Unique: []byte("a"), Background: true, Stored: stored}
	id, err := c.Submit(r)
	if err != nil || !r.Waiting {
		t.Fatalf("submit: %v, waiting %v", err, r.Waiting)
	}
	if got := <-acks; got != fmt.Sprint(id, " <nil>") {
		t.Fatalf("ack %q", got)
	}
	// A join of a stored job waits for the store too (its record may be
	// queued still), and answers with the joined job's id.
	r2 := &SubmitReq{Func: []byte("f"), Unique: []byte("a"), Background: true, Stored: stored}
	if id2, _ := c.Submit(r2); id2 != id || !r2.Waiting {
		t.Fatalf("join: %d waiting %v", id2, r2.Waiting)
	}
	if got := <-acks; got != fmt.Sprint(id, " <nil>") {
		t.Fatalf("join ack %q", got)
	}
	// A foreground submit is not stored and waits for nothing.
	r3 := &SubmitReq{Func: []byte("f"), Unique: []byte("fg"), Stored: stored}
	if _, err := c.Submit(r3); err != nil || r3.Waiting {
		t.Fatalf("foreground: %v waiting %v", err, r3.Waiting)
	}
	// A full disk: the job is withdrawn and its submitter told.
	st.mu.Lock()
	st.fail = errors.New("no space left on device")
	st.mu.Unlock()
	r4 := &SubmitReq{Func: []byte("f"), Unique: []byte("b"), Background: true, Stored: stored}
	id4, _ := c.Submit(r4)
	if got := <-acks; got != fmt.Sprint(id4, " no space left on device") {
		t.Fatalf("failed ack %q", got)
	}
	if s.Status(id4).Known {
		t.Fatal("a job that was never stored is still queued")
	}
	// Without Stored, Submit waits and returns the error.
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("c"), Background: true}); err == nil {
		t.Fatal("submit on a full disk succeeded")
	}
	if n := s.Len(); n != 2 {
		t.Fatalf("%d live jobs, want a and fg", n)
	}
}

// resyncStore is a testStore that wants the scheduler (Resyncer).
type resyncStore struct {
	*testStore
	attached *Sched
}

func (st *resyncStore) Attach(s *Sched) { st.attached = s }

// StoredRecords hands out every live background job's record, as Encode
// makes it now, and nothing else; New attaches a Resyncer.
func TestStoredRecords(t *testing.T) {
	st := &resyncStore{testStore: newTestStore()}
	s := newTest(t, Config{Store: st})
	if st.attached != s {
		t.Fatal("New did not attach the store")
	}
	c := s.NewClient(&recorder{})
	want := map[uint64]string{}
	for i := range 3000 { // more than a chunk
		u := fmt.Sprint("bg", i)
		want[submit(t, c, fmt.Sprint("f", i%7), u, "x", Normal, true)] = u
	}
	submit(t, c, "f0", "fg", "x", Normal, false)
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f0"), 0)
	j := w.Grab()
	w.Update(j.ID(), &Update{Kind: Complete})
	delete(want, j.ID())
	got := map[uint64]string{}
	s.StoredRecords(func(id uint64, rec []byte) {
		st.mu.Lock()
		r := st.encoded[string(rec)]
		st.mu.Unlock()
		if _, dup := got[id]; dup {
			t.Errorf("job %d handed out twice", id)
		}
		got[id] = r.Unique
	})
	if !maps.Equal(got, want) {
		t.Fatalf("StoredRecords gave %d jobs, want the %d live background ones", len(got), len(want))
	}
}

// Refused submits are counted by reason, whatever the protocol. A submit
// refused because the store could not keep it withdraws the job only if
// the submit made it: a job it joined or replaced may have been
// acknowledged to another client, and stays.
func TestRefusals(t *testing.T) {
	st := newTestStore()
	s := newTest(t, Config{Store: st})
	c := s.NewClient(&recorder{})
	refused := func() [NumRefusals]uint64 {
		var stats Stats
		s.Stats(&stats)
		return stats.Refused
	}
	joined := submit(t, c, "f", "joined", "x", Normal, true)
	replaced := submit(t, c, "f", "replaced", "x", Normal, true)
	s.SetMaxQueue([]byte("f"), [3]int{2, 2, 2})
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("full"), Background: true}); err != ErrQueueFull {
		t.Fatal(err)
	}
	s.SetMaxQueue([]byte("f"), [3]int{})
	r := &SubmitReq{Func: []byte("r"), Unique: []byte("once"), Remember: true}
	id, err := c.Submit(r)
	if err != nil {
		t.Fatal(err)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("r"), 0)
	w.Update(w.Grab().ID(), &Update{Kind: Complete})
	if got, err := c.Submit(&SubmitReq{Func: []byte("r"), Unique: []byte("once"), Remember: true}); err != ErrEnded || got != id {
		t.Fatalf("a submit of an ended job: %d %v", got, err)
	}

	st.mu.Lock()
	st.fail = errors.New("no space left on device")
	st.mu.Unlock()
	stored := make(chan error, 1)
	fresh, _ := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("fresh"), Background: true,
		Stored: func(_ uint64, err error) { stored <- err }})
	if err := <-stored; err == nil {
		t.Fatal("a submit on a full disk acknowledged")
	}
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("joined"), Background: true}); err == nil {
		t.Fatal("a join on a full disk acknowledged")
	}
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("replaced"), Payload: []byte("new"), Background: true, Replace: true}); err == nil {
		t.Fatal("a replace on a full disk acknowledged")
	}
	if s.Status(fresh).Known {
		t.Error("the refused submit's own job is still queued")
	}
	for _, id := range []uint64{joined, replaced} {
		if !s.Status(id).Known {
			t.Errorf("job %d, which a refused submit joined or replaced, was withdrawn", id)
		}
	}
	want := [NumRefusals]uint64{RefusedStore: 3, RefusedQueueFull: 1, RefusedEnded: 1}
	if got := refused(); got != want {
		t.Fatalf("refused %v, want %v", got, want)
	}
	for r, name := range map[Refusal]string{RefusedStore: "store", RefusedQueueFull: "queue_full", RefusedEnded: "ended"} {
		if r.String() != name {
			t.Errorf("%d names itself %q, want %q", r, r, name)
		}
	}
}
