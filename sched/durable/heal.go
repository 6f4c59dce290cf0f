package durable

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
)

// Health is the store's state, for /healthz, the metrics and the log.
type Health struct {
	// Failure is why the store takes no writes; nil while it does.
	Failure error
	// Since is when the store last went down, or came back.
	Since time.Time
	// WriteErrors counts the writes that failed: each that took the store
	// down, and each attempt at opening it again that failed.
	WriteErrors uint64
	// Recoveries counts the times it took writes again after failing.
	Recoveries uint64
}

// health is the Store's: guarded by mu.
type health struct {
	mu      sync.Mutex
	h       Health
	changed chan struct{} // closed when the store goes down or comes back, then replaced
	healing bool          // a healer runs
	closed  bool          // Close has begun: no healer starts
	healer  sync.WaitGroup
}

func (h *health) init() { h.changed = make(chan struct{}) }

// Health is the store's state now.
func (s *Store) Health() Health {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.h
}

// Watch is closed once the store goes down or comes back after the call:
// read Health then, and Watch again.
func (s *Store) Watch() <-chan struct{} {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	return s.changed
}

func (h *health) notify() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// The healer's backoff between attempts: from healFirst, doubling, up to
// healMax.
var healFirst, healMax = 500 * time.Millisecond, 30 * time.Second

// probeName is the file the healer writes to learn that the directory
// takes writes again; probeMin the least it writes.
const (
	probeName = "switchyard.probe"
	probeMin  = 1 << 20
)

// down takes the store down with err, the failure of the database writes
// go to, and starts the healer.
func (s *Store) down(err error) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	s.h.WriteErrors++
	if s.h.Failure == nil {
		s.h.Failure, s.h.Since = err, time.Now()
		s.health.notify()
	}
	if !s.healing && !s.health.closed {
		s.healing = true
		s.healer.Add(1)
		go s.heal()
	}
}

// up brings the store back.
func (s *Store) up() {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	s.h.Failure, s.h.Since = nil, time.Now()
	s.h.Recoveries++
	s.health.notify()
}

// recoveryFailed counts an attempt at opening the store again that
// failed, and makes its error the store's reason.
func (s *Store) recoveryFailed(err error) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	s.h.WriteErrors++
	s.h.Failure = err
}

// heal runs while the store is down: after each wait (with backoff), it
// proves the directory takes writes again (probe), then has the writer
// open the store again (opRecover, see reopen). It ends once the store is
// up, or closed.
func (s *Store) heal() {
	defer s.healer.Done()
	delay := healFirst
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.closing:
			return
		}
		if s.probe() == nil {
			result := make(chan error, 1)
			s.recoverWait.Store(true)
			if !s.queue.Push(op{kind: opRecover, done: func(err error) { result <- err }}) {
				return // closed
			}
			select {
			case <-result:
			case <-s.closing:
				return
			}
		}
		s.health.mu.Lock()
		if s.h.Failure == nil {
			s.healing = false
			s.health.mu.Unlock()
			return
		}
		s.health.mu.Unlock()
		delay = min(2*delay, healMax)
		t.Reset(delay)
	}
}

// probe writes and syncs a file in the store's directory, and removes it:
// as much as a new database would flush from the log (what the newest log
// holds), and probeMin more.
func (s *Store) probe() error {
	name := s.fs.PathJoin(s.dir, probeName)
	f, err := s.fs.Create(name)
	if err != nil {
		return err
	}
	need := probeMin + s.log.unflushed()
	for off := int64(0); off < need && err == nil; off += int64(len(zeros)) {
		_, err = f.Write(zeros[:min(int64(len(zeros)), need-off)])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := s.fs.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// reopenFor is the writer's answer to o, an opRecover.
func (s *Store) reopenFor(o op) {
	select {
	case <-s.closing:
		o.done(ErrClosed)
		return
	default:
	}
	err := s.reopen()
	if err != nil {
		s.recoveryFailed(err)
	}
	o.done(err)
}

// reopen brings a store that is down up again, on the writer's goroutine:
// every write queued before it has been answered (with an error), and
// none after it is written until it returns. The database that failed is
// given up, its files fenced; a new one opens on the directory as a
// restart would, replaying the logs, and is checked as Open checks; its
// records are made to match the scheduler's live background jobs
// (resync); then writes go to it.
func (s *Store) reopen() error {
	old := s.cur.Load()
	if old.Failure() == nil {
		return nil
	}
	s.waitAnswered() // every refused submit withdrawn before resync reads the scheduler
	s.dropSpare()
	old.fs.fence()
	in, err := s.openDB(false, true)
	if err != nil {
		return fmt.Errorf("durable: open %s again: %w", s.dir, err)
	}
	giveUp := func(err error) error {
		if in.Failure() == nil {
			s.guard(in, in.db.Close)
		} else {
			in.fs.fence()
		}
		return err
	}
	st, err := scan(in.db)
	if err != nil {
		return giveUp(fmt.Errorf("durable: read %s: %w", s.dir, err))
	}
	mk := s.mark.get()
	if d := s.check(in.db, st, mk, true, nil); d != nil {
		return giveUp(d)
	}
	s.keys = st.keys
	if err := s.resync(in); err != nil {
		return giveUp(fmt.Errorf("durable: write to %s: %w", s.dir, err))
	}
	s.unsynced = false
	s.cur.Store(in)
	s.up()
	return nil
}

// resync makes in's job records those of the attached scheduler's live
// background jobs: records of jobs that ended while the store was down
// (their deletes dropped), or that were refused yet reached the log, are
// deleted; jobs whose rewrite was dropped, or whose record is missing,
// are written. Without a scheduler it only syncs.
func (s *Store) resync(in *incarnation) error {
	b := in.db.NewBatch()
	var err error
	failedCommit := false
	// flush commits what b holds, without a sync but the last; the last
	// closes it. On an error, b stays with guard's goroutine (see write1).
	flush := func(sync bool) error {
		s.seq++
		opts := pebble.NoSync
		if sync {
			opts = pebble.Sync
		}
		c := b
		if err := s.guard(in, func() error {
			err := c.Commit(opts)
			if err != nil || sync {
				c.Close()
			}
			return err
		}); err != nil {
			failedCommit = true
			return err
		}
		s.batches.Add(1)
		if !sync {
			b.Reset()
		}
		return nil
	}
	var k [keySize]byte
	if sc := s.attached.Load(); sc != nil {
		live := newIDSet(s.keys.Len())
		sc.StoredRecords(func(id uint64, rec []byte) {
			if err != nil {
				return
			}
			live.add(id)
			putKey(&k, id)
			if s.keys.has(id) {
				v, closer, gerr := in.db.Get(k[:])
				if gerr != nil && !errors.Is(gerr, pebble.ErrNotFound) {
					err = gerr
					return
				}
				if gerr == nil {
					same := bytes.Equal(v, rec)
					closer.Close()
					if same {
						return
					}
				}
			}
			b.Set(k[:], rec, nil)
			s.keys.add(id)
			if b.Len() >= maxBatch {
				err = flush(false)
			}
		})
		s.keys.each(func(id uint64) {
			if err != nil || live.has(id) {
				return
			}
			putKey(&k, id)
			b.Delete(k[:], nil)
			s.keys.remove(id)
			if b.Len() >= maxBatch {
				err = flush(false)
			}
		})
	}
	if err != nil {
		if !failedCommit {
			b.Close() // a read failed: b is still ours
		}
		return err
	}
	if err = flush(true); err != nil {
		return err
	}
	s.markSynced(in, s.seq, s.keys.Len())
	return in.Failure()
}

// writeMarked records in the database, synced, that the store keeps a
// mark, and advances the mark past the batch: the baseline of a store
// opened new, written before marks, or opened with what could be read.
func (s *Store) writeMarked(in *incarnation) error {
	b := in.db.NewBatch()
	s.seq++
	b.Set(markedKey, []byte{markV1}, nil)
	if err := s.guard(in, func() error { defer b.Close(); return b.Commit(pebble.Sync) }); err != nil {
		return err
	}
	s.markSynced(in, s.seq, s.keys.Len())
	return in.Failure()
}
