// Package durable is the scheduler's embedded store: every job that must
// outlive its client, kept in a Pebble database (an LSM tree with a
// write-ahead log, pure Go) under a directory of its own.
//
// One goroutine writes. Records queued while it writes are committed
// together as one batch with one fsync (group commit), so durability costs
// a sync per batch, not per job, and each record's done callback runs once
// its batch is on disk: that is when a frontend may acknowledge the job.
// Writes apply in the order they were queued, so a job's delete never
// overtakes its save.
package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"switchyard/sched"
)

// Sync says when a batch is forced to disk.
type Sync int

const (
	// SyncBatch fsyncs each batch before its records are acknowledged:
	// nothing acknowledged is lost, and one fsync covers every record that
	// arrived while the previous one ran.
	SyncBatch Sync = iota
	// SyncAlways fsyncs each record on its own: the same guarantee, one
	// fsync per job.
	SyncAlways
	// SyncNever leaves the write-ahead log to the kernel: a crash of the
	// process loses nothing, a crash of the machine may lose the last
	// seconds of acknowledged jobs.
	SyncNever
)

// ParseSync reads --fsync's value.
func ParseSync(s string) (Sync, error) {
	switch s {
	case "batch":
		return SyncBatch, nil
	case "always":
		return SyncAlways, nil
	case "never":
		return SyncNever, nil
	}
	return 0, fmt.Errorf("fsync mode %q: want always, batch or never", s)
}

// ErrClosed is what writes queued after Close get.
var ErrClosed = errors.New("durable: store closed")

// Store keeps jobs in a Pebble database.
type Store struct {
	db   *pebble.DB
	dir  string
	sync Sync

	mu      sync.Mutex
	queue   []op // waiting for the writer
	wake    *sync.Cond
	closed  bool
	stopped chan struct{}

	batches atomic.Uint64 // commits made, for tests and metrics
}

type op struct {
	kind opKind
	key  [keySize]byte
	val  []byte
	done func(error)
}

type opKind uint8

const (
	opPut opKind = iota
	opDelete
	opFlush // writes nothing: answered with the batch it ends up in
)

// Open opens (or creates) the store in dir. A database that cannot be read
// is an error naming it: never an empty queue in its place.
func Open(dir string, mode Sync) (*Store, error) { return openFS(dir, mode, nil) }

// openFS is Open on the file system fs (nil: the real one), which tests
// replace to watch the syncs.
func openFS(dir string, mode Sync, fs vfs.FS) (*Store, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}, FS: fs})
	if err != nil {
		return nil, fmt.Errorf("durable: open %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, sync: mode, stopped: make(chan struct{})}
	s.wake = sync.NewCond(&s.mu)
	go s.write()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Encode is the value Put writes for r (sched.Store): a copy, so r may
// change once it returns.
func (s *Store) Encode(r *sched.Record) []byte { return encode(r) }

// Put queues rec, from Encode, as job id's record, and calls done (if not
// nil) from the writer's goroutine once it is durable as the Sync mode
// says, or with the error that stopped it (sched.Store).
func (s *Store) Put(id uint64, rec []byte, done func(error)) {
	o := op{kind: opPut, val: rec, done: done}
	putKey(&o.key, id)
	s.enqueue(o)
}

// Delete queues the removal of job id, after every write queued before it
// (sched.Store). A delete lost in a crash runs a finished job again; it
// loses none.
func (s *Store) Delete(id uint64) {
	o := op{kind: opDelete}
	putKey(&o.key, id)
	s.enqueue(o)
}

// Flush calls done once every write queued before it is durable
// (sched.Store).
func (s *Store) Flush(done func(error)) { s.enqueue(op{kind: opFlush, done: done}) }

// Save writes r and waits until it is durable: for tools and tests.
func (s *Store) Save(r *sched.Record) error {
	ch := make(chan error, 1)
	s.Put(r.ID, encode(r), func(err error) { ch <- err })
	return <-ch
}

func (s *Store) enqueue(o op) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if o.done != nil {
			go o.done(ErrClosed) // never from within the call that queued it
		}
		return
	}
	s.queue = append(s.queue, o)
	if len(s.queue) == 1 {
		s.wake.Signal()
	}
	s.mu.Unlock()
}

// write is the writer goroutine: it takes everything queued, commits it
// as one batch (one fsync), answers, and goes again.
func (s *Store) write() {
	defer close(s.stopped)
	var spare []op
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.wake.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		ops := s.queue
		s.queue = spare[:0]
		s.mu.Unlock()

		if s.sync == SyncAlways {
			for i := range ops {
				s.commit(ops[i : i+1])
			}
		} else {
			s.commit(ops)
		}
		clear(ops)
		spare = ops
	}
}

// commit writes ops as one batch and calls their dones.
func (s *Store) commit(ops []op) {
	b := s.db.NewBatch()
	var err error
	for i := range ops {
		switch ops[i].kind {
		case opPut:
			err = b.Set(ops[i].key[:], ops[i].val, nil)
		case opDelete:
			err = b.Delete(ops[i].key[:], nil)
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		opts := pebble.Sync
		if s.sync == SyncNever {
			opts = pebble.NoSync
		}
		err = b.Commit(opts)
	}
	b.Close()
	s.batches.Add(1)
	if err != nil {
		err = fmt.Errorf("durable: write to %s: %w", s.dir, err)
	}
	for i := range ops {
		if ops[i].done != nil {
			ops[i].done(err)
		}
	}
}

// Load calls fn for every stored job in id order (sched.Store). A record
// that does not decode stops it with an error naming the store.
func (s *Store) Load(fn func(*sched.Record) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyJob}, UpperBound: []byte{keyJob + 1}})
	if err != nil {
		return fmt.Errorf("durable: read %s: %w", s.dir, err)
	}
	defer it.Close()
	var r sched.Record
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != keySize {
			return fmt.Errorf("durable: %s: key %x is not a job's", s.dir, k)
		}
		if err := decode(it.Value(), &r); err != nil {
			return fmt.Errorf("durable: %s: job %d: %w", s.dir, binary.BigEndian.Uint64(k[1:]), err)
		}
		r.ID = binary.BigEndian.Uint64(k[1:])
		if err := fn(&r); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("durable: read %s: %w", s.dir, err)
	}
	return nil
}

// Close writes what is queued, then closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.wake.Signal()
	s.mu.Unlock()
	<-s.stopped
	return s.db.Close()
}

// quiet drops Pebble's informational logging; errors reach the caller.
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
