package sched

import (
	"strings"
	"sync"
	"testing"
)

// recordingStore keeps what sched asks it to persist.
type recordingStore struct {
	mu   sync.Mutex
	live map[uint64]Record
	ops  []string
}

func (r *recordingStore) Save(rec *Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[rec.ID] = *rec
	r.ops = append(r.ops, "save "+rec.Unique)
	return nil
}

func (r *recordingStore) Delete(id uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, "delete "+r.live[id].Unique)
	delete(r.live, id)
	return nil
}

func (r *recordingStore) Load(func(*Record) error) error { return nil }

func TestStoreSeesBackgroundJobs(t *testing.T) {
	st := &recordingStore{live: map[uint64]Record{}}
	s := newTest(t, Config{Store: st})
	c := s.NewClient(&recorder{})
	bg := submit(t, c, "f", "bg", "x", Normal, true)
	submit(t, c, "f", "fg", "x", Normal, false)
	submit(t, c, "f", "bg", "y", Normal, true) // coalesced: saved, then dropped again
	s.SetMaxQueue([]byte("f"), [3]int{2, 2, 2})
	if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("full"), Background: true}); err != ErrQueueFull {
		t.Fatal(err)
	}
	if _, ok := st.live[bg]; !ok || len(st.live) != 1 {
		t.Fatalf("store holds %v, want only the background job", st.live)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	j := w.Grab()
	w.Update(j.ID(), &Update{Kind: Complete})
	if len(st.live) != 0 {
		t.Fatalf("finished job still stored: %v", st.live)
	}
	want := "[save bg save bg delete bg save full delete full delete bg]"
	if got := "[" + strings.Join(st.ops, " ") + "]"; got != want {
		t.Fatalf("ops %s, want %s", got, want)
	}
}

// A foreground job that a background submit joins must then survive a
// restart like any background job: its record is saved before the join is
// acknowledged and deleted when it ends.
func TestStoreSavesJoinedForegroundJob(t *testing.T) {
	st := &recordingStore{live: map[uint64]Record{}}
	s := newTest(t, Config{Store: st})
	c := s.NewClient(&recorder{})
	fg := submit(t, c, "f", "u", "x", Normal, false)
	if len(st.live) != 0 {
		t.Fatalf("foreground job stored: %v", st.live)
	}
	if id := submit(t, c, "f", "u", "y", Normal, true); id != fg {
		t.Fatalf("joined %d, want %d", id, fg)
	}
	if r, ok := st.live[fg]; !ok || len(st.live) != 1 || string(r.Payload) != "x" {
		t.Fatalf("store holds %v, want the joined job %d", st.live, fg)
	}
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	w.Update(w.Grab().ID(), &Update{Kind: Complete})
	if len(st.live) != 0 {
		t.Fatalf("finished job still stored: %v", st.live)
	}
}
