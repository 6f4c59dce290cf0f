package replicated

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"switchyard/sched"
	"switchyard/sched/internal/writeq"
)

// After a commit, the writer's next batch waits for the submits it wants
// (deletes do not count) for up to its linger; with no linger left it
// takes what is there.
func TestTakeLingers(t *testing.T) {
	s := &Store{queue: writeq.NewUrgent(waits), maxLinger: maxLinger}
	put := func(id uint64) { s.queue.Push(op{kind: opPut, id: id, done: func(error) {}}) }
	put(1) // came while the last entry was committing

	got := make(chan []op, 1)
	go func() {
		ops, _ := s.takeFor(3, time.Hour) // it and the two answered
		got <- ops
	}()
	s.queue.Push(op{kind: opDelete, id: 9})
	put(2)
	put(3)
	// Without the linger the first put alone would have been taken.
	if ops := <-got; len(ops) != 4 {
		t.Fatalf("took %d ops, want the 3 puts and the delete", len(ops))
	}

	// After one commit: what was queued and as many as it answered.
	put(4)
	put(5)
	if got := s.queue.Urgent(); got != 2 {
		t.Fatalf("%d puts queued, want 2", got)
	}
	// No linger left: what is queued, at once.
	ops, _ := s.take(5, 0)
	if len(ops) != 2 || ops[0].id != 4 {
		t.Fatalf("without a linger: %+v", ops)
	}
	// Nothing answered: the first op that comes.
	put(6)
	if ops, _ := s.take(0, time.Hour); len(ops) != 1 || ops[0].id != 6 {
		t.Fatalf("after a commit that answered none: %+v", ops)
	}
}

// heldApplier is an Applier whose entries are committed when the test
// says: each Apply's future waits for a value on commit.
type heldApplier struct {
	applied chan []byte
	commit  chan error
}

func newHeldApplier() *heldApplier {
	return &heldApplier{applied: make(chan []byte, 16), commit: make(chan error)}
}

func (h *heldApplier) Apply(cmd []byte, _ time.Duration) raft.ApplyFuture {
	h.applied <- cmd
	return &heldFuture{h: h}
}

type heldFuture struct {
	h    *heldApplier
	once sync.Once
	err  error
}

func (f *heldFuture) Error() error {
	f.once.Do(func() { f.err = <-f.h.commit })
	return f.err
}
func (f *heldFuture) Index() uint64 { return 0 }
func (f *heldFuture) Response() any { return nil }

func putWait(s *Store, id uint64) chan error {
	done := make(chan error, 1)
	s.Put(id, []byte("r"), func(err error) { done <- err })
	return done
}

// answer waits for a write's answer, for at most waitLimit: a store that
// does not answer fails the test rather than hang it.
func answer(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitLimit):
		t.Fatalf("no answer in %v", waitLimit)
		return nil
	}
}

const waitLimit = 10 * time.Second

// An entry whose commit does not come within the commit timeout fails its
// writes (the leader keeps its lease while the followers' disks stall);
// later batches fail at once, without another entry, until it comes; then
// writes are committed again. Stalled says so both times.
func TestCommitTimeout(t *testing.T) {
	h := newHeldApplier()
	var stalls []error
	var mu sync.Mutex
	s := New(context.Background(), h, NewFSM(), Options{Term: 1, CommitTimeout: 20 * time.Millisecond,
		Stalled: func(err error) { mu.Lock(); stalls = append(stalls, err); mu.Unlock() }})
	defer s.Close()
	if err := answer(t, putWait(s, 1)); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("a put whose commit never came: %v", err)
	}
	<-h.applied
	if err := answer(t, putWait(s, 2)); !errors.Is(err, ErrNotCommitted) {
		t.Fatalf("a put behind an entry not committed: %v", err)
	}
	select {
	case e := <-h.applied:
		t.Fatalf("an entry handed to Raft behind one not committed: %q", e)
	default:
	}
	h.commit <- nil // the first entry's commit, late
	// Once the waiter has handed it back (a moment after), a put is
	// handed to Raft again; the ones before fail at once, as above.
	deadline := time.Now().Add(waitLimit)
	for id := uint64(3); ; id++ {
		done := putWait(s, id)
		select {
		case <-h.applied:
			h.commit <- nil
			if err := answer(t, done); err != nil {
				t.Fatal(err)
			}
		case err := <-done:
			if !errors.Is(err, ErrNotCommitted) || time.Now().After(deadline) {
				t.Fatalf("put %d, after the late commit: %v", id, err)
			}
			continue
		}
		break
	}
	if s.Timeouts() != 1 {
		t.Errorf("%d timeouts, want 1", s.Timeouts())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stalls) != 2 || !errors.Is(stalls[0], ErrNotCommitted) || stalls[1] != nil {
		t.Errorf("Stalled was told %v", stalls)
	}
}

// Close returns although a commit never comes, once the commit timeout
// has passed, and the write is answered; the end of the store's context
// ends the wait at once.
func TestCloseBounded(t *testing.T) {
	for _, cancelFirst := range []bool{false, true} {
		h := newHeldApplier()
		ctx, cancel := context.WithCancel(context.Background())
		timeout := 50 * time.Millisecond
		if cancelFirst {
			timeout = time.Hour
		}
		s := New(ctx, h, NewFSM(), Options{Term: 1, CommitTimeout: timeout})
		done := putWait(s, 1)
		<-h.applied
		if cancelFirst {
			cancel()
		}
		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(waitLimit):
			t.Fatalf("cancelled %v: Close did not return", cancelFirst)
		}
		if err := answer(t, done); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotCommitted) {
			t.Errorf("cancelled %v: the put: %v", cancelFirst, err)
		}
		cancel()
	}
}

// Load stops once the store's context ends: a new leader that loses the
// lead while it replays stops replaying.
func TestLoadStops(t *testing.T) {
	f := NewFSM()
	for i := range 3 * loadCheck {
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: entry(op{kind: opPut, id: uint64(i + 1), val: rec("f", "", "x")})})
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := New(ctx, newHeldApplier(), f, Options{})
	defer s.Close()
	n := 0
	err := s.Load(func(*sched.Record) error {
		if n++; n == loadCheck/2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n >= 2*loadCheck {
		t.Fatalf("Load after %d jobs: %v", n, err)
	}
}
