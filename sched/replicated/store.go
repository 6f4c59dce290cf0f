// Package replicated is the scheduler's job store in a cluster: the writes
// the single-node store would make (sched.Store) go through a Raft log, and
// a job is acknowledged once a majority of the nodes holds its write on
// disk and the leader has applied it.
//
// One goroutine writes, as in sched/durable: everything queued while it
// was busy becomes one Raft entry (group commit), so a burst of submits
// costs one round of replication, not one per job. The writer hands Raft
// one entry at a time and waits for its commit before it takes the next
// batch; a second goroutine answers each entry's writes meanwhile. Every
// node applies the committed entries to its FSM; the leader's scheduler
// reads the FSM once, when it takes over (Load), exactly as a restarted
// server reads its disk.
//
// After a commit the writer lingers for the submitters it answered (see
// write).
//
// One entry at a time, not a pipeline: each entry Raft dispatches costs
// every node a synced write of its log, and with entries handed over as
// they came (up to 64 unanswered) the nodes synced 400-450 times a second
// each, on one disk, 1.2-1.5 ms a sync. Waiting makes each entry the
// whole batch a commit's time gathers: cluster-bg 36.3k and 38.2k jobs/s
// at 36-41 µs of CPU a job, against 32.4k and 32.4k at 46 µs pipelined,
// in the same minutes.
package replicated

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"switchyard/sched"
	"switchyard/sched/durable"
	"switchyard/sched/internal/writeq"
)

// Applier is what the store needs of Raft: *raft.Raft.
type Applier interface {
	Apply(cmd []byte, timeout time.Duration) raft.ApplyFuture
}

// ErrClosed is what writes queued after Close get.
var ErrClosed = errors.New("replicated: store closed")

const (
	// maxEntry bounds the bytes of one entry, as durable bounds a batch:
	// a flood of submits is split, so that no entry holds up the log (and
	// every follower's disk) for long. A single larger record still goes
	// in one entry of its own.
	maxEntry = 1 << 20
	// applyTimeout bounds the wait for Raft to take an entry (not for its
	// commit: a leader that cannot reach a majority steps down within its
	// lease, and its entries fail then).
	applyTimeout = 10 * time.Second
)

// Store is a sched.Store over Raft. Make one per term of leadership, on
// the leader; Close it when leadership ends.
type Store struct {
	raft  Applier
	fsm   *FSM
	queue *writeq.Queue[op]
	// pending carries each entry's outcome, in order, to answer.
	pending chan pending
	stopped chan struct{}
	// maxLinger bounds the writer's wait for the submitters a commit
	// answered (maxLinger; tests may set more).
	maxLinger time.Duration

	entries   atomic.Uint64 // entries committed
	cancelled atomic.Uint64 // puts not written, their jobs ended in the queue
}

type op struct {
	kind opKind
	id   uint64
	val  []byte
	done func(error)
}

type pending struct {
	wrote bool  // an entry was written: false for flushes, cancelled puts
	err   error // its outcome
	ops   []op
}

// New returns a store writing through r into fsm, which r applies to.
func New(r Applier, fsm *FSM) *Store {
	s := &Store{raft: r, fsm: fsm, queue: writeq.NewUrgent(waits), pending: make(chan pending, 1),
		stopped: make(chan struct{}), maxLinger: maxLinger}
	go s.answer()
	go s.write()
	return s
}

// Encode is a job's record (sched.Store): the single-node store's bytes.
func (s *Store) Encode(r *sched.Record) []byte { return durable.EncodeRecord(r) }

// Put queues the write of job id's record; done is called once the
// cluster has committed it, or with why not (sched.Store).
func (s *Store) Put(id uint64, rec []byte, done func(error)) {
	s.enqueue(op{kind: opPut, id: id, val: rec, done: done})
}

// Delete queues the removal of job id (sched.Store).
func (s *Store) Delete(id uint64) { s.enqueue(op{kind: opDelete, id: id}) }

// Flush calls done once every write queued before it is committed
// (sched.Store).
func (s *Store) Flush(done func(error)) { s.enqueue(op{kind: opFlush, done: done}) }

// Load replays the committed jobs (sched.Store). The caller must have
// waited for the FSM to apply everything committed (Raft's Barrier).
func (s *Store) Load(fn func(*sched.Record) error) error { return s.fsm.Load(fn) }

// Entries is how many entries this store has had committed.
func (s *Store) Entries() uint64 { return s.entries.Load() }

func (s *Store) enqueue(o op) {
	if !s.queue.Push(o) && o.done != nil {
		go o.done(ErrClosed) // never from within the call that queued it
	}
}

// Close stops taking writes, and returns once every write queued has been
// answered: committed, or failed (a store whose node is no longer the
// leader fails them all).
func (s *Store) Close() {
	s.queue.Close()
	<-s.stopped
}

// waits says whether someone waits for an op: a put's submit, a flush.
// Deletes wait for no one.
func waits(o op) bool { return o.done != nil }

// maxLinger bounds how long the writer waits for answered submitters to
// come back (see write).
const maxLinger = 2 * time.Millisecond

// write is the writer goroutine: it takes what is queued and hands it to
// Raft as one entry (or several, past maxEntry), each once the last has
// been committed (or has failed).
//
// After a commit it lingers, as PostgreSQL's commit_delay does: it waits
// for as many more submits as that commit answered, for up to half the
// commit's time (at most maxLinger), before taking the next batch. Submits
// that wait for their answer come back in a burst when it is given; taken
// at once, the next entry held only those that came while the last was
// committing, and the ones answered waited a whole commit more: a submit
// waited about two commits, 4-6 ms. Lingering for up to a commit's time,
// cluster-bg ran at 47.9k, 50.0k, 54.1k and 53.4k jobs/s at 24-27 µs of
// CPU a job, against 38.5k, 39.6k, 42.9k and 45.4k at 31-37 µs,
// alternating in the same minutes; for up to half of it, 51.3k, 51.9k and
// 49.8k against 46.3k, 54.8k and 54.7k, so half it is: less added to a
// stream whose submitters do not come back. Under a steady stream the
// next batch holds that many already, and an idle store takes the first
// submit that comes.
func (s *Store) write() {
	defer close(s.pending)
	index := make(map[uint64]int)
	answered := 0          // submits answered by the last commit
	var took time.Duration // its time
	for {
		ops, ok := s.take(answered, took)
		if !ok {
			return
		}
		s.cancelled.Add(uint64(cancelEnded(ops, index)))
		answered = 0
		start := time.Now()
		for rest := ops; len(rest) > 0; {
			n, entry := build(rest)
			p := pending{ops: rest[:n:n]}
			if entry != nil {
				p.wrote, p.err = true, committed(s.raft.Apply(entry, applyTimeout))
			}
			for _, o := range p.ops {
				if waits(o) {
					answered++
				}
			}
			s.pending <- p // answered while the next batch gathers
			rest = rest[n:]
		}
		took = time.Since(start)
	}
}

// take is the next batch: once answered more submits than are queued now
// are, or half of took (at most maxLinger) has passed, whichever first.
func (s *Store) take(answered int, took time.Duration) ([]op, bool) {
	if answered == 0 {
		return s.queue.Take()
	}
	return s.takeFor(s.queue.Urgent()+answered, min(took/2, s.maxLinger))
}

// takeFor takes the queue once want submits (or flushes) are queued, or
// linger has passed and anything is.
func (s *Store) takeFor(want int, linger time.Duration) ([]op, bool) {
	deadline := time.Now().Add(linger)
	t := time.AfterFunc(linger, s.queue.Wake)
	defer t.Stop()
	return s.queue.TakeAtLeast(func() int {
		if time.Now().After(deadline) {
			return 0 // anything
		}
		return want
	})
}

// build encodes the first ops of a batch into one entry, at least one op
// and at most maxEntry bytes, and says how many it took; entry is nil when
// they write nothing.
func build(ops []op) (n int, entry []byte) {
	size := 1
	for _, o := range ops {
		if o.kind == opPut {
			size += 9 + 10 + len(o.val)
		} else {
			size += 9 + len(o.val)
		}
		if size > maxEntry && n > 0 {
			break
		}
		n++
	}
	b := make([]byte, 1, min(size, maxEntry+64))
	b[0] = entryVersion
	for _, o := range ops[:n] {
		switch o.kind {
		case opPut:
			b = appendPut(b, o.id, o.val)
		case opDelete:
			b = appendDelete(b, o.id)
		case opMeta:
			key, val := splitMeta(o.val)
			b = appendMeta(b, key, val)
		}
	}
	if len(b) == 1 {
		return n, nil
	}
	return n, b
}

func splitMeta(kv []byte) (string, []byte) {
	for i, c := range kv {
		if c == 0 {
			return string(kv[:i]), kv[i+1:]
		}
	}
	return string(kv), nil
}

// answer answers each entry's writes, in the order handed to Raft. A flush, or a batch that writes nothing, is answered with the
// outcome of the entry before it: what it promises is that entry's
// durability.
func (s *Store) answer() {
	defer close(s.stopped)
	var last error
	for p := range s.pending {
		err := last
		if p.wrote {
			err, last = p.err, p.err
			if err == nil {
				s.entries.Add(1)
			}
		}
		for _, o := range p.ops {
			if o.done != nil {
				o.done(err)
			}
		}
	}
}

// committed waits for an entry's commit: nil, or why it was not
// committed (or was refused by the FSM, on every node alike).
func committed(f raft.ApplyFuture) error {
	err := f.Error()
	if err == nil {
		if r, ok := f.Response().(error); ok {
			err = r
		}
	}
	if err != nil {
		return fmt.Errorf("replicated: not committed: %w", err)
	}
	return nil
}

// cancelEnded turns the put of a job that a later delete in the same batch
// ends into opCancelled, as sched/durable does: a job that has run needs
// no record. The delete stays, for an earlier record that may exist.
// index is scratch space, empty between calls.
func cancelEnded(ops []op, index map[uint64]int) int {
	n := 0
	for i := range ops {
		switch ops[i].kind {
		case opPut:
			index[ops[i].id] = i
		case opDelete:
			if j, ok := index[ops[i].id]; ok {
				ops[j].kind, ops[j].val = opCancelled, nil
				delete(index, ops[i].id)
				n++
			}
		}
	}
	clear(index)
	return n
}
