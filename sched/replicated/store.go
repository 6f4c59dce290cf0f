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
	"cmp"
	"context"
	"encoding/binary"
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

// ErrClosed is what writes queued after Close get, and those Close gave
// up waiting for.
var ErrClosed = errors.New("replicated: store closed")

// ErrNotCommitted is what the writes of an entry get that was not
// committed within the commit timeout (it may still be, later: a write
// refused so may run, at least once), and those of every batch after it
// until it is.
var ErrNotCommitted = errors.New("replicated: not committed")

const (
	// maxEntry bounds the bytes of one entry, as durable bounds a batch:
	// a flood of submits is split, so that no entry holds up the log (and
	// every follower's disk) for long. A single larger record still goes
	// in one entry of its own.
	maxEntry = 1 << 20
	// DefaultCommitTimeout bounds the wait for an entry's commit, from
	// its hand-over to Raft. A leader that cannot reach a majority steps
	// down within its lease and its entries fail then; this bounds the
	// wait of one that keeps its lease while the followers' disks stall.
	DefaultCommitTimeout = 5 * time.Second
)

// Options configure a Store.
type Options struct {
	// Term is the Raft term of the leadership the store belongs to; every
	// entry it proposes carries it, and the FSM refuses one appended in
	// another term (ErrStaleTerm). 0 proposes entries without a term
	// (tests of the writer alone).
	Term uint64
	// CommitTimeout: 0 is DefaultCommitTimeout.
	CommitTimeout time.Duration
	// Stalled, if set, is called by the writer when an entry is not
	// committed within the commit timeout, and with nil when entries are
	// committed again.
	Stalled func(error)
}

// Store is a sched.Store over Raft. Make one per term of leadership, on
// the leader; Close it when leadership ends.
type Store struct {
	raft  Applier
	fsm   *FSM
	term  uint64
	queue *writeq.Queue[op]
	// pending carries each entry's outcome, in order, to answer.
	pending chan pending
	stopped chan struct{}
	// maxLinger bounds the writer's wait for the submitters a commit
	// answered (maxLinger; tests may set more).
	maxLinger time.Duration

	// ctx ends the store's waits: a commit's, Load's. Its parent is the
	// caller's (the term's: losing the lead ends it); Close cancels it
	// once closeTimeout has passed.
	ctx    context.Context
	cancel context.CancelFunc

	// The writer hands each entry's future to the waiter goroutine
	// (futures), which waits for it and sends back its outcome (results),
	// so that the writer can stop waiting. owed counts the outcomes of
	// entries the writer gave up on, still to come (writer only).
	futures       chan raft.ApplyFuture
	results       chan error
	owed          int
	commitTimeout time.Duration
	timer         *time.Timer
	stalled       func(error)
	stalling      bool

	entries   atomic.Uint64 // entries committed
	cancelled atomic.Uint64 // puts not written, their jobs ended in the queue
	timeouts  atomic.Uint64 // entries not committed within commitTimeout
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
// ctx bounds its waits: once it ends, writes not yet committed fail and
// Load stops.
func New(ctx context.Context, r Applier, fsm *FSM, o Options) *Store {
	s := &Store{raft: r, fsm: fsm, term: o.Term, queue: writeq.NewUrgent(waits), pending: make(chan pending, 1),
		stopped: make(chan struct{}), maxLinger: maxLinger, futures: make(chan raft.ApplyFuture, 1),
		results: make(chan error, 1), commitTimeout: cmp.Or(o.CommitTimeout, DefaultCommitTimeout),
		timer: time.NewTimer(time.Hour), stalled: o.Stalled}
	s.timer.Stop()
	s.ctx, s.cancel = context.WithCancel(ctx)
	go s.answer()
	go s.write()
	go s.wait()
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
// waited for the FSM to apply everything committed (Raft's Barrier). It
// stops, with the context's error, once the store's context ends.
func (s *Store) Load(fn func(*sched.Record) error) error {
	n := 0
	return s.fsm.Load(func(r *sched.Record) error {
		if n++; n%loadCheck == 0 {
			if err := s.ctx.Err(); err != nil {
				return fmt.Errorf("replicated: load stopped after %d jobs: %w", n, err)
			}
		}
		return fn(r)
	})
}

// loadCheck is how many jobs Load replays between two looks at its
// context.
const loadCheck = 256

// Entries is how many entries this store has had committed.
func (s *Store) Entries() uint64 { return s.entries.Load() }

// Timeouts is how many entries were not committed within the commit
// timeout.
func (s *Store) Timeouts() uint64 { return s.timeouts.Load() }

// Term is the term the store proposes in.
func (s *Store) Term() uint64 { return s.term }

func (s *Store) enqueue(o op) {
	if !s.queue.Push(o) && o.done != nil {
		go o.done(ErrClosed) // never from within the call that queued it
	}
}

// Close stops taking writes, and returns once every write queued has been
// answered: committed, or failed (a store whose node is no longer the
// leader fails them all). It waits for commits for at most the commit
// timeout, then fails what is left with ErrClosed, and says so.
func (s *Store) Close() error {
	s.queue.Close()
	t := time.NewTimer(s.commitTimeout)
	defer t.Stop()
	var err error
	select {
	case <-s.stopped:
	case <-t.C:
		err = fmt.Errorf("%w: writes still waiting for their commit after %v were failed", ErrClosed, s.commitTimeout)
		s.cancel()
		<-s.stopped
	}
	s.cancel()
	return err
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
	defer close(s.futures)
	for {
		ops, ok := s.take(answered, took)
		if !ok {
			return
		}
		s.cancelled.Add(uint64(cancelEnded(ops, index)))
		answered = 0
		start := time.Now()
		for rest := ops; len(rest) > 0; {
			n, entry := build(s.term, rest)
			p := pending{ops: rest[:n:n]}
			if entry != nil {
				p.wrote, p.err = true, s.commit(entry)
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

// build encodes the first ops of a batch into one entry of term, at
// least one op and at most maxEntry bytes, and says how many it took;
// entry is nil when they write nothing.
func build(term uint64, ops []op) (n int, entry []byte) {
	size := 1 + binary.MaxVarintLen64
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
	b := appendHeader(make([]byte, 0, min(size, maxEntry+64)), term)
	head := len(b)
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
	if len(b) == head {
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

// commit hands an entry to Raft and waits for its commit, for at most
// the commit timeout and while the store's context lasts: nil, or why it
// was not committed (or was refused by the FSM, on every node alike).
// While an entry given up on is still not committed, no other is handed
// over: it would wait behind it.
func (s *Store) commit(entry []byte) error {
	for s.owed > 0 {
		select {
		case <-s.results:
			s.owed--
			continue
		default:
		}
		if err := s.ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrClosed, err)
		}
		return fmt.Errorf("%w: an earlier entry is still waiting for its commit", ErrNotCommitted)
	}
	if err := s.ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	f := s.raft.Apply(entry, s.commitTimeout)
	s.futures <- f // the waiter is idle: nothing is owed
	s.timer.Reset(s.commitTimeout)
	defer s.timer.Stop()
	select {
	case err := <-s.results:
		s.stall(nil)
		return committed(f, err)
	case <-s.timer.C:
		s.owed++
		s.timeouts.Add(1)
		err := fmt.Errorf("%w in %v", ErrNotCommitted, s.commitTimeout)
		s.stall(err)
		return err
	case <-s.ctx.Done():
		s.owed++
		return fmt.Errorf("%w: %w", ErrClosed, s.ctx.Err())
	}
}

// stall reports a change of the writer's state to Options.Stalled.
func (s *Store) stall(err error) {
	if s.stalled == nil || (err != nil) == s.stalling {
		return
	}
	s.stalling = err != nil
	s.stalled(err)
}

// wait is the waiter goroutine: it waits for each future the writer hands
// over, in order, and sends back its outcome. It outlives the store while
// a future it waits for is not resolved; Raft resolves every one when the
// node steps down or shuts down.
func (s *Store) wait() {
	for f := range s.futures {
		s.results <- f.Error()
	}
}

// committed is an entry's outcome once Raft has resolved its future with
// err.
func committed(f raft.ApplyFuture, err error) error {
	if err == nil {
		if r, ok := f.Response().(error); ok {
			err = r
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotCommitted, err)
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
