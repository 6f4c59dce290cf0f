// Package durable is the scheduler's embedded store: every job that must
// outlive its client, kept in a Pebble database (an LSM tree with a
// write-ahead log, pure Go) under a directory of its own.
//
// One goroutine writes. Records queued while it writes are committed
// together as one batch (group commit), and each record's done callback
// runs once its batch is on disk: that is when a frontend may acknowledge
// the job. With --fsync batch the writer does not wait for the disk: it
// hands each batch to Pebble's write-ahead log and goes on, while a second
// goroutine waits for the batches' syncs, in order, and answers. The log
// syncs everything written while its previous sync ran with one fsync, so
// durability costs a sync per group of jobs, not per job. The writer
// writes one batch per sync (pace): what arrived while the log synced,
// handed over as that sync ends, so that each sync costs one trip through
// Pebble's commit pipeline. Writes apply in the order they were queued,
// so a job's delete never overtakes its save; a job that ended while its
// record still waited in the queue is not written at all (cancelEnded).
// --fsync never goes the same way, its log's syncs reaching only the
// kernel (logSyncs).
//
// A write that fails (a full disk) fails the store, not the process.
// Pebble does not recover from a failed write: it panics, or calls its
// logger's Fatalf, and its commit pipeline is unusable afterwards. So
// every call into Pebble that writes runs on a goroutine of its own
// (guard), whose panic or end becomes an error; the first such error
// stops the store: every write queued after it is answered with an error,
// in order, nothing more is written, and Close leaves the database as a
// crash would, for the next Open to recover. Nothing is acknowledged that
// Pebble did not report durable.
package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"switchyard/sched"
	"switchyard/sched/internal/writeq"
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
	// SyncNever writes each batch to the kernel before its records are
	// acknowledged, and leaves the disk to the kernel: a crash of the
	// process loses nothing, a crash of the machine may lose the last
	// seconds of acknowledged jobs. (Pebble's NoSync would not do: it
	// keeps what it writes in its log's current 32 KiB block, in the
	// process, until a sync or a full block; so the writer asks for
	// syncs as SyncBatch does, and the log's file makes them no-ops.)
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

	queue   *writeq.Queue[op] // waiting for the writer
	stopped chan struct{}

	// syncing carries the batches written with SyncBatch, in order, to
	// the goroutine that waits for their sync and answers them (answer).
	syncing chan written
	// spare holds batches answered and reset, for the writer to reuse:
	// a batch's buffer grows to the size of a group, and a new one would
	// grow again, in steps, every time.
	spare chan *pebble.Batch
	// log tells the writer when the write-ahead log ends a sync, see pace;
	// answered counts the batches answer is done with.
	log      *logSyncs
	answered atomic.Uint64

	failed     atomic.Pointer[error] // the first failed write, if any
	failedOnce sync.Once
	failedCh   chan struct{} // closed once failed is set

	unsynced  bool          // the last write went to the log without a sync (write's alone)
	batches   atomic.Uint64 // commits made, for tests and metrics
	cancelled atomic.Uint64 // puts not written, their jobs ended (cancelEnded)
}

// written is a batch in the log, its sync not yet waited for.
type written struct {
	b     *pebble.Batch // nil if it was not written: err says why
	ops   []op
	err   error
	whole []op // in the last batch of a Take: the slice to recycle
}

// maxBatch bounds the bytes of one Pebble batch. Pebble makes a batch of
// half a memtable or more a memtable of its own, flushed at once to an
// sstable of its own, and drops a buffer over 1 MiB rather than reuse it:
// a flood of submits is written as batches under both.
const maxBatch = 1<<20 - 4<<10

// batchLen is how many of ops go in the next batch: at least one, and no
// more than maxBatch bytes of them.
func batchLen(ops []op) int {
	size := 0
	for i := range ops {
		size += keySize + len(ops[i].val) + 2*binary.MaxVarintLen32 + 1 // a batch entry: kind, key and value, each with its length
		if size > maxBatch && i > 0 {
			return i
		}
	}
	return len(ops)
}

// syncDepth bounds the batches written and not yet answered: beyond it
// the writer waits. The writer paces itself to one batch per sync (pace),
// so only a flood split into batches of maxBatch comes near it.
const syncDepth = 16

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
	opFlush     // writes nothing: answered with the batch it ends up in
	opCancelled // a put whose job ended in the queue: writes nothing, see cancelEnded
)

// Open opens (or creates) the store in dir. A database that cannot be read
// is an error naming it: never an empty queue in its place.
func Open(dir string, mode Sync) (*Store, error) {
	return openFS(dir, mode, nil)
}

// openFS is Open on fs (nil: the real file system).
func openFS(dir string, mode Sync, fs vfs.FS) (*Store, error) {
	s := &Store{dir: dir, sync: mode, queue: writeq.New[op](), stopped: make(chan struct{}), failedCh: make(chan struct{}),
		log: newLogSyncs(mode == SyncNever)}
	if fs == nil {
		fs = vfs.Default
	}
	opts := &pebble.Options{Logger: logger{s}, FS: walFS{FS: fs, syncs: s.log}, MemTableSize: memTableSize,
		EventListener: &pebble.EventListener{BackgroundError: s.backgroundError}}
	// Pebble takes a directory without CURRENT (which names the live
	// MANIFEST) for a new database, and writes a new CURRENT and MANIFEST
	// over what is there: a store that lost its CURRENT would fail one
	// start and come back empty at the next. A directory that holds a
	// store's files opens as that store or not at all.
	found := storeFiles(fs, dir)
	opts.ErrorIfNotExists = len(found) > 0
	err := s.guard(func() (err error) { s.db, err = pebble.Open(dir, opts); return err })
	if errors.Is(err, pebble.ErrDBDoesNotExist) {
		return nil, fmt.Errorf("durable: open %s: no CURRENT file, yet the directory holds a store's files (%s): restore CURRENT, or move them away to start with an empty queue",
			dir, strings.Join(found, " "))
	}
	if err != nil {
		return nil, fmt.Errorf("durable: open %s: %w", dir, err)
	}
	if mode != SyncAlways {
		s.syncing = make(chan written, syncDepth)
		s.spare = make(chan *pebble.Batch, syncDepth+2)
		go s.answer()
	}
	go s.write()
	return s, nil
}

// storeFiles lists the files of a Pebble database in dir.
func storeFiles(fs vfs.FS, dir string) []string {
	names, _ := fs.List(dir) // none if dir does not exist yet
	var out []string
	for _, n := range names {
		if n == "CURRENT" || strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "OPTIONS-") ||
			strings.HasPrefix(n, "marker.") || strings.HasSuffix(n, ".log") || strings.HasSuffix(n, ".sst") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Encode is the value Put writes for r (sched.Store): a copy, so r may
// change once it returns.
func (s *Store) Encode(r *sched.Record) []byte { return lend(r) }

// Put queues rec, from Encode, as job id's record, and calls done (if not
// nil) from the writer's goroutine once it is durable as the Sync mode
// says, or with the error that stopped it (sched.Store). rec is the
// store's from then on: once written, its memory may hold another record
// (recycle), so a record is put once.
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
	s.Put(r.ID, lend(r), func(err error) { ch <- err })
	return <-ch
}

func (s *Store) enqueue(o op) {
	if !s.queue.Push(o) && o.done != nil {
		go o.done(ErrClosed) // never from within the call that queued it
	}
}

// write is the writer goroutine: it takes everything queued, commits it
// as one batch, and goes again. With SyncBatch (and SyncNever) it leaves
// the wait for the sync, and the answers, to answer; with SyncAlways it
// answers itself.
func (s *Store) write() {
	if s.syncing != nil {
		defer close(s.syncing) // answer closes s.stopped
	} else {
		defer close(s.stopped)
	}
	var mark, sent uint64
	index := make(map[[keySize]byte]int) // cancelEnded's scratch
	for {
		if sent > 0 {
			s.pace(mark, sent)
		}
		// Deletes go to the log without a sync (needsSync); one that a
		// crash loses runs a finished job again. So that a crash re-runs
		// only what finished while the writer was busy, not everything
		// since the last put, the log is synced once the queue runs dry.
		if s.unsynced && s.queue.Idle() {
			s.unsynced = false
			if err := s.guard(func() error { return s.db.LogData(nil, pebble.Sync) }); err != nil {
				s.fail(fmt.Errorf("durable: sync %s: %w", s.dir, err))
			}
		}
		ops, ok := s.queue.Take()
		if !ok {
			return
		}
		if s.sync != SyncAlways {
			s.cancelled.Add(uint64(cancelEnded(ops, index)))
		}
		switch s.sync {
		case SyncBatch, SyncNever:
			mark = s.log.begun.Load()
			for rest := ops; len(rest) > 0; sent++ {
				n := batchLen(rest)
				w := s.write1(rest[:n])
				if rest = rest[n:]; len(rest) == 0 {
					w.whole = ops // answer recycles it
				}
				s.syncing <- w
			}
			continue
		case SyncAlways:
			for i := range ops {
				s.commit(ops[i : i+1])
			}
		}
		s.queue.Recycle(ops)
	}
}

// pace holds the next batch back (SyncBatch) until the log has ended a
// sync that began after the last batch was written (mark: the syncs
// begun before it was), or until that batch (of sent in all) is
// answered. Written at once, a batch would join the sync in progress no
// more than it does after it: a sync covers what was written before it
// began. Held back, everything that arrives while the log syncs goes to
// the log as one batch as the sync ends, when the log can take it into
// its next sync at once; and a job that ends meanwhile never reaches it
// (cancelEnded).
func (s *Store) pace(mark, sent uint64) {
	if s.syncing == nil {
		return
	}
	for s.log.ended.Load() <= mark && s.answered.Load() < sent {
		select {
		case <-s.log.wake:
		case <-s.failedCh:
			return
		}
	}
}

// cancelEnded turns the put of a job that ended while its record waited
// in the queue into opCancelled, and returns how many it turned: a delete
// of the job follows the put in ops. A job that has run is lost by no
// crash, so its record need never reach the disk: it writes nothing, its
// done is still called in order with its batch, and a batch left with no
// put needs no sync (needsSync). The delete stays, as an earlier record
// of the job (what a rewrite replaced) may be on disk. Only a job that has
// ended is deleted; one retried or put back is rewritten (a put).
// index is scratch space, empty between calls.
func cancelEnded(ops []op, index map[[keySize]byte]int) int {
	puts, deletes := false, false
	for i := range ops {
		puts = puts || ops[i].kind == opPut
		deletes = deletes || ops[i].kind == opDelete
	}
	if !puts || !deletes {
		return 0
	}
	n := 0
	for i := range ops {
		switch ops[i].kind {
		case opPut:
			index[ops[i].key] = i
		case opDelete:
			if j, ok := index[ops[i].key]; ok {
				recycle(ops[j].val)
				ops[j].kind, ops[j].val = opCancelled, nil
				delete(index, ops[i].key)
				n++
			}
		}
	}
	clear(index)
	return n
}

// needsSync reports whether a batch holds a write that must be on disk
// before it is answered: a put, or a flush (which promises every earlier
// write on disk). Deletes alone need none: one lost in a crash runs a
// finished job again, and loses nothing.
func needsSync(ops []op) bool {
	for i := range ops {
		if ops[i].kind == opPut || ops[i].kind == opFlush {
			return true
		}
	}
	return false
}

// commit writes ops as one batch, waits for it to be durable as the Sync
// mode says, and calls their dones: with nil once the batch is durable,
// else with the error that failed the store.
func (s *Store) commit(ops []op) {
	err := s.Failure()
	if err == nil {
		if err = s.apply(ops); err != nil {
			s.fail(fmt.Errorf("durable: write to %s: %w", s.dir, err))
			err = s.Failure() // the first failure: this one, or the one that stopped apply
		}
	} else {
		err = &stoppedError{dir: s.dir, cause: err}
	}
	done(ops, err)
}

// apply commits ops as one Pebble batch.
func (s *Store) apply(ops []op) error {
	err := s.guard(func() error {
		b, err := s.build(ops)
		if err != nil {
			return err
		}
		defer b.Close()
		s.batches.Add(1)
		return b.Commit(pebble.Sync)
	})
	if err == nil {
		recycleAll(ops)
	}
	return err
}

// write1 writes ops as one batch to the log without waiting for its sync
// (SyncBatch), for answer to wait for: or, if the store has failed, says
// why they were not written. A batch that needs no sync (needsSync) is
// applied without one, and answer only keeps it in order.
func (s *Store) write1(ops []op) written {
	if err := s.Failure(); err != nil {
		return written{ops: ops, err: &stoppedError{dir: s.dir, cause: err}}
	}
	sync := needsSync(ops)
	var b *pebble.Batch
	err := s.guard(func() error {
		var err error
		if b, err = s.build(ops); err != nil {
			return err
		}
		s.batches.Add(1)
		if sync {
			err = s.db.ApplyNoSyncWait(b, pebble.Sync)
		} else {
			err = s.db.Apply(b, pebble.NoSync)
		}
		if err != nil {
			b.Close()
			b = nil
		}
		return err
	})
	if err != nil {
		s.fail(fmt.Errorf("durable: write to %s: %w", s.dir, err))
		return written{ops: ops, err: s.Failure()}
	}
	recycleAll(ops)
	if !sync {
		s.reuse(b)
		b = nil
	}
	s.unsynced = !sync // a sync covers every write before it
	return written{b: b, ops: ops}
}

// answer waits for each batch's sync, in the order written, and calls its
// records' dones: one sync of the log covers every batch written before
// it, so the answers come in the order of the writes.
func (s *Store) answer() {
	defer close(s.stopped)
	for w := range s.syncing {
		err := w.err
		if w.b != nil {
			b := w.b
			// On an error, b is closed on guard's goroutine, if ever: guard
			// may return (the store failed) while SyncWait still runs.
			if err = s.guard(func() error {
				err := b.SyncWait()
				if err != nil {
					b.Close()
				}
				return err
			}); err != nil {
				s.fail(fmt.Errorf("durable: write to %s: %w", s.dir, err))
				err = s.Failure()
			} else {
				s.reuse(b)
			}
		}
		done(w.ops, err)
		if w.whole != nil {
			s.queue.Recycle(w.whole)
		}
		s.answered.Add(1)
		select {
		case s.log.wake <- struct{}{}: // for pace
		default:
		}
	}
}

// reuse keeps a batch whose sync is done for the writer's next, or closes
// it.
func (s *Store) reuse(b *pebble.Batch) {
	b.Reset()
	select {
	case s.spare <- b:
	default:
		b.Close()
	}
}

// build puts ops in a batch: a spare one, else a new one.
func (s *Store) build(ops []op) (*pebble.Batch, error) {
	var b *pebble.Batch
	select {
	case b = <-s.spare:
	default:
		b = s.db.NewBatch()
	}
	for i := range ops {
		var err error
		switch ops[i].kind {
		case opPut:
			err = b.Set(ops[i].key[:], ops[i].val, nil)
		case opDelete:
			err = b.Delete(ops[i].key[:], nil)
		}
		if err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// recycleAll gives back the records of ops, which the batch they went into
// holds copies of. Only the writer calls it, once the call into Pebble
// that built the batch has returned: guard may stop waiting for one that
// hangs, which may still read them.
func recycleAll(ops []op) {
	for i := range ops {
		if ops[i].kind == opPut {
			recycle(ops[i].val)
			ops[i].val = nil
		}
	}
}

// done calls the dones of a batch's records with its outcome.
func done(ops []op, err error) {
	for i := range ops {
		if ops[i].done != nil {
			ops[i].done(err)
		}
	}
}

// guard runs f, a call into Pebble, on a goroutine of its own and returns
// its error; a panic, or the goroutine's end (the logger's Fatalf), is an
// error too. If the store fails meanwhile (Pebble gave up on another
// goroutine), guard stops waiting for f, which may never return: Pebble
// may wait for a flush that will not come.
func (s *Store) guard(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if returned {
				return
			}
			if r := recover(); r != nil {
				if err, ok := r.(error); ok {
					ch <- fmt.Errorf("pebble gave up: %w", err)
				} else {
					ch <- fmt.Errorf("pebble gave up: %v", r)
				}
				return
			}
			ch <- errGaveUp // runtime.Goexit, from Fatalf: s.Failure says why
		}()
		err := f()
		returned = true
		ch <- err
	}()
	select {
	case err := <-ch:
		if err == errGaveUp {
			if ferr := s.Failure(); ferr != nil {
				return ferr
			}
		}
		return err
	case <-s.failedCh:
		return s.Failure()
	}
}

var errGaveUp = errors.New("pebble gave up")

// fail records err as the store's failure, unless one is recorded.
func (s *Store) fail(err error) {
	s.failedOnce.Do(func() {
		s.failed.Store(&err)
		close(s.failedCh)
	})
}

// Failed is closed once a write has failed and the store has stopped
// taking writes; Failure says why.
func (s *Store) Failed() <-chan struct{} { return s.failedCh }

// Failure is the error that stopped the store, or nil.
func (s *Store) Failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// stoppedError answers a write queued after the store failed.
type stoppedError struct {
	dir   string
	cause error
}

func (e *stoppedError) Error() string {
	return fmt.Sprintf("durable: %s takes no writes since one failed (%v); restart switchyard to recover it", e.dir, e.cause)
}

func (e *stoppedError) Unwrap() error { return e.cause }

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

// Close writes what is queued, then closes the database. A store that
// failed is left as it is, as a crash would leave it, and Close returns
// its failure: Pebble cannot close a database whose write failed, and the
// next Open recovers what is on disk.
func (s *Store) Close() error {
	s.queue.Close()
	<-s.stopped
	if err := s.Failure(); err != nil {
		return err
	}
	if s.spare != nil {
		for len(s.spare) > 0 {
			(<-s.spare).Close()
		}
	}
	return s.guard(s.db.Close)
}

// logger drops Pebble's informational logging; errors reach the caller.
// Fatalf is Pebble giving up on a write (a full disk): see giveUp.
type logger struct{ s *Store }

func (logger) Infof(string, ...any)  {}
func (logger) Errorf(string, ...any) {}
func (l logger) Fatalf(format string, args ...any) {
	err := &fatalError{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if e, ok := a.(error); ok && err.cause == nil {
			err.cause = e
		}
	}
	l.s.giveUp(err)
}

// fatalError is what Pebble's Fatalf said, and the error it was given.
type fatalError struct {
	msg   string
	cause error
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.cause }

// backgroundError is Pebble failing a flush or a compaction on its own
// goroutines. One the disk refused (full, or failing) fails the store:
// Pebble would retry the flush at once, for ever, while commits wait for
// it. Other background errors (a compaction cancelled) are Pebble's
// business.
func (s *Store) backgroundError(err error) {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EIO, syscall.EROFS:
			s.giveUp(err)
		}
	}
}

// giveUp fails the store with err and ends the calling goroutine, which
// runs Pebble's work: guard turns that into an error; one of Pebble's own
// goroutines stops, and with it what it would have retried.
func (s *Store) giveUp(err error) {
	s.fail(fmt.Errorf("durable: write to %s: %w", s.dir, err))
	runtime.Goexit()
}

// String is the mode's --fsync value.
func (m Sync) String() string {
	switch m {
	case SyncBatch:
		return "batch"
	case SyncAlways:
		return "always"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("Sync(%d)", int(m))
}
