package replicated

import (
	"testing"
	"time"

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
