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
// logger's Fatalf, and its commit pipeline is unusable afterwards (its own
// comments say so: "The commit pipeline will be horked", and a failed
// MANIFEST write is fatal by design). So every call into Pebble that
// writes runs on a goroutine of its own (guard), whose panic or end
// becomes an error, and the first such error takes the store down: every
// write queued after it is answered with an error, in order, and nothing
// more is written. Nothing is acknowledged that Pebble did not report
// durable.
//
// A store that is down heals (heal.go): a goroutine probes the directory
// with backoff until a file can be written and synced there again, then
// the writer gives the failed database up (its files fenced: nothing it
// still does reaches the disk), opens a new one on the same directory, as
// a restart would, checks it as Open does, and makes its records match the
// scheduler's live background jobs (what was refused is removed, what
// ended meanwhile deleted, what changed rewritten) before it takes writes
// again.
//
// Open refuses a store that lost acknowledged writes, naming the damaged
// file (mark.go, verify.go), unless told to recover what it can.
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

// Options are OpenWith's.
type Options struct {
	Sync Sync
	// Recover opens a store that lost acknowledged writes with what can be
	// read, where Open refuses it (--recover); Damage says what was lost.
	Recover bool
}

// Store keeps jobs in a Pebble database.
type Store struct {
	dir  string
	sync Sync
	fs   vfs.FS   // the directory's file system, for the mark and the probe
	lock *dirLock // held from Open to Close
	base walFS    // what each database's fenceFS writes through

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

	cur     atomic.Pointer[incarnation] // the database writes go to
	mark    *markFile
	markRef atomic.Pointer[markFile] // mark, for Pebble's goroutines (markManifest)

	// The writer's own.
	sent     uint64 // batches handed to answer
	unsynced bool   // the last write went to the log without a sync (write's alone)
	keys     *idSet // the jobs with a record in the database, as written
	seq      uint64 // batches written: the mark's order

	attached atomic.Pointer[sched.Sched] // Attach: what a recovery makes the records match
	damage   *DamageError                // what Open with Recover found

	health      // down, up, and the healer
	closing     chan struct{}
	closeOnce   sync.Once
	lastStats   atomic.Pointer[Stats] // what Stats reports while the store is down
	batches     atomic.Uint64         // commits made, for tests and metrics
	cancelled   atomic.Uint64         // puts not written, their jobs ended (cancelEnded)
	recoverWait atomic.Bool           // an opRecover is queued
}

// incarnation is one Pebble database the store opened on its directory:
// the first at Open, another after each recovery. A failed one is given
// up, fenced, never closed.
type incarnation struct {
	s       *Store
	db      *pebble.DB
	fs      *fenceFS
	failed  chan struct{} // closed once failure is set
	failure atomic.Pointer[error]
	once    sync.Once
}

// Failure is the error that failed this database, or nil.
func (in *incarnation) Failure() error {
	if p := in.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// written is a batch in the log, its sync not yet waited for.
type written struct {
	in     *incarnation
	b      *pebble.Batch // nil if it was not written: err says why
	ops    []op
	err    error
	whole  []op   // in the last batch of a Take: the slice to recycle
	synced bool   // it needs a sync: the mark may advance to it once answered
	seq    uint64 // its number, see Store.seq
	jobs   int    // the jobs stored once it applies
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
	opRecover   // the healer's: open the store again if it is down, see reopen
)

// Open opens (or creates) the store in dir. A database that cannot be read
// is an error naming it, and so is one that lost acknowledged jobs (a
// *DamageError): never a smaller queue in its place.
func Open(dir string, mode Sync) (*Store, error) {
	return openFS(dir, Options{Sync: mode}, nil)
}

// OpenWith is Open with options.
func OpenWith(dir string, o Options) (*Store, error) { return openFS(dir, o, nil) }

// openFS is OpenWith on fsys (nil: the real file system).
func openFS(dir string, o Options, fsys vfs.FS) (*Store, error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	s := &Store{dir: dir, sync: o.Sync, fs: fsys, queue: writeq.New[op](), stopped: make(chan struct{}),
		closing: make(chan struct{}), log: newLogSyncs(o.Sync == SyncNever)}
	s.health.init()
	s.lock = &dirLock{FS: fsys}
	s.base = walFS{FS: s.lock, syncs: s.log}
	markManifest := s.markManifest
	s.log.manifestSynced.Store(&markManifest)
	if err := s.start(o.Recover); err != nil {
		s.lock.release()
		return nil, err
	}
	if o.Sync != SyncAlways {
		s.syncing = make(chan written, syncDepth)
		s.spare = make(chan *pebble.Batch, syncDepth+2)
		go s.answer()
	}
	go s.write()
	return s, nil
}

// openDB opens a Pebble database on the store's directory, behind a fence
// of its own.
func (s *Store) openDB(readOnly, mustExist bool) (*incarnation, error) {
	in := &incarnation{s: s, failed: make(chan struct{}), fs: &fenceFS{FS: s.base}}
	opts := &pebble.Options{Logger: logger{in}, FS: in.fs, MemTableSize: memTableSize, ReadOnly: readOnly,
		ErrorIfNotExists: mustExist, EventListener: &pebble.EventListener{BackgroundError: in.backgroundError}}
	if tuneForTest != nil {
		tuneForTest(opts)
	}
	err := s.guard(in, func() (err error) { in.db, err = pebble.Open(s.dir, opts); return err })
	if err != nil {
		in.fs.fence() // whatever Pebble left running writes nothing more
		return nil, err
	}
	return in, nil
}

// tuneForTest, if set, changes the options of every database opened: a
// test's way to make a store of a given shape (no compactions).
var tuneForTest func(*pebble.Options)

// storeFiles lists the files of a Pebble database in dir, and the mark.
func storeFiles(fs vfs.FS, dir string) []string {
	names, _ := fs.List(dir) // none if dir does not exist yet
	var out []string
	for _, n := range names {
		if n == "CURRENT" || n == markName || strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "OPTIONS-") ||
			strings.HasPrefix(n, "marker.") || strings.HasSuffix(n, ".log") || strings.HasSuffix(n, ".sst") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Damage is what Open with Recover found lost, or nil.
func (s *Store) Damage() *DamageError { return s.damage }

// Attach hands the store the scheduler whose live background jobs a
// recovery makes its records match (sched.Resyncer).
func (s *Store) Attach(sc *sched.Sched) { s.attached.Store(sc) }

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
	var mark uint64
	index := make(map[[keySize]byte]int) // cancelEnded's scratch
	for {
		in := s.cur.Load()
		if s.sent > 0 {
			s.pace(in, mark, s.sent)
		}
		// Deletes go to the log without a sync (needsSync); one that a
		// crash loses runs a finished job again. So that a crash re-runs
		// only what finished while the writer was busy, not everything
		// since the last put, the log is synced once the queue runs dry.
		if s.unsynced && s.queue.Idle() {
			s.unsynced = false
			s.syncIdle(in)
		}
		ops, ok := s.queue.Take()
		if !ok {
			return
		}
		if s.sync != SyncAlways {
			s.cancelled.Add(uint64(cancelEnded(ops, index)))
		}
		if s.recoverWait.Load() && slices.ContainsFunc(ops, func(o op) bool { return o.kind == opRecover }) {
			mark = s.writeRecovering(ops, mark)
			continue
		}
		switch s.sync {
		case SyncBatch, SyncNever:
			mark = s.log.begun.Load()
			s.send(ops, ops)
			continue
		case SyncAlways:
			for i := range ops {
				s.commit(ops[i : i+1])
			}
		}
		s.queue.Recycle(ops)
	}
}

// send writes ops as batches (SyncBatch) and hands them to answer; whole,
// if not nil, is the slice to recycle once the last is answered.
func (s *Store) send(ops, whole []op) {
	for rest := ops; len(rest) > 0; s.sent++ {
		n := batchLen(rest)
		w := s.write1(rest[:n])
		if rest = rest[n:]; len(rest) == 0 {
			w.whole = whole
		}
		s.syncing <- w
	}
}

// writeRecovering writes ops, which hold an opRecover: what comes before
// it as usual (refused, the store being down), then the recovery, then the
// rest, with the store up again or not. It returns pace's mark.
func (s *Store) writeRecovering(ops []op, mark uint64) uint64 {
	for rest := ops; len(rest) > 0; {
		i := slices.IndexFunc(rest, func(o op) bool { return o.kind == opRecover })
		if i < 0 {
			i = len(rest)
		}
		if s.sync == SyncAlways {
			for j := range rest[:i] {
				s.commit(rest[j : j+1])
			}
		} else if i > 0 {
			mark = s.log.begun.Load()
			s.send(rest[:i], nil)
		}
		if i == len(rest) {
			break
		}
		s.recoverWait.Store(false)
		s.reopenFor(rest[i])
		rest = rest[i+1:]
	}
	s.waitAnswered()
	s.queue.Recycle(ops)
	return mark
}

// syncIdle syncs the log, the queue having run dry after a write that
// went without a sync, and advances the mark to it.
func (s *Store) syncIdle(in *incarnation) {
	if in.Failure() != nil {
		return
	}
	if err := s.guard(in, func() error { return in.db.LogData(nil, pebble.Sync) }); err != nil {
		s.fail(in, fmt.Errorf("durable: sync %s: %w", s.dir, err))
		return
	}
	s.markSynced(in, s.seq, s.keys.Len())
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
func (s *Store) pace(in *incarnation, mark, sent uint64) {
	if s.syncing == nil {
		return
	}
	for s.log.ended.Load() <= mark && s.answered.Load() < sent {
		select {
		case <-s.log.wake:
		case <-in.failed:
			return
		}
	}
}

// waitAnswered waits until answer is done with every batch sent: their
// dones have run.
func (s *Store) waitAnswered() {
	if s.syncing == nil {
		return
	}
	for s.answered.Load() < s.sent {
		<-s.log.wake // answer sends a token after each batch
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
// else with the error that failed the store (SyncAlways).
func (s *Store) commit(ops []op) {
	in := s.cur.Load()
	err := in.Failure()
	if err == nil {
		if err = s.apply(in, ops); err != nil {
			s.fail(in, fmt.Errorf("durable: write to %s: %w", s.dir, err))
			err = in.Failure() // the first failure: this one, or the one that stopped apply
		}
	} else {
		err = &stoppedError{dir: s.dir, cause: err}
	}
	done(ops, err)
	if err == nil {
		s.markSynced(in, s.seq, s.keys.Len())
	}
}

// apply commits ops as one Pebble batch and waits for its sync. The
// batch is built here, and closed by guard's goroutine: if the database
// fails, guard returns while Pebble may still hold it. The batch holds
// copies of the records, so they go back to their pool at once.
func (s *Store) apply(in *incarnation, ops []op) error {
	b := s.build(in, ops)
	recycleAll(ops)
	s.batches.Add(1)
	return s.guard(in, func() error {
		defer b.Close()
		return b.Commit(pebble.Sync)
	})
}

// write1 writes ops as one batch to the log without waiting for its sync
// (SyncBatch), for answer to wait for: or, if the store is down, says why
// they were not written. A batch that needs no sync (needsSync) is applied
// without one, and answer only keeps it in order.
func (s *Store) write1(ops []op) written {
	in := s.cur.Load()
	if err := in.Failure(); err != nil {
		return written{in: in, ops: ops, err: &stoppedError{dir: s.dir, cause: err}}
	}
	sync := needsSync(ops)
	// Built here, not on guard's goroutine, which may outlive guard (the
	// database failed) and must then touch nothing of the writer's: ops
	// are answered and recycled, the key set rebuilt. The batch stays
	// with that goroutine: closed by it on an error, never reused.
	b := s.build(in, ops)
	recycleAll(ops)
	s.batches.Add(1)
	err := s.guard(in, func() error {
		var err error
		if sync {
			err = in.db.ApplyNoSyncWait(b, pebble.Sync)
		} else {
			err = in.db.Apply(b, pebble.NoSync)
		}
		if err != nil {
			b.Close()
		}
		return err
	})
	if err != nil {
		s.fail(in, fmt.Errorf("durable: write to %s: %w", s.dir, err))
		return written{in: in, ops: ops, err: in.Failure()}
	}
	w := written{in: in, ops: ops, synced: sync, seq: s.seq, jobs: s.keys.Len()}
	if !sync {
		s.reuse(b)
		b = nil
	}
	w.b = b
	s.unsynced = !sync // a sync covers every write before it
	return w
}

// answer waits for each batch's sync, in the order written, and calls its
// records' dones: one sync of the log covers every batch written before
// it, so the answers come in the order of the writes. Once it has no
// batch left to wait for, the mark advances to the last one synced.
func (s *Store) answer() {
	defer close(s.stopped)
	var last written // the last batch synced, the mark not yet advanced to it
	for w := range s.syncing {
		err := w.err
		if w.b != nil {
			b := w.b
			// On an error, b is closed on guard's goroutine, if ever: guard
			// may return (the store failed) while SyncWait still runs.
			if err = s.guard(w.in, func() error {
				err := b.SyncWait()
				if err != nil {
					b.Close()
				}
				return err
			}); err != nil {
				s.fail(w.in, fmt.Errorf("durable: write to %s: %w", s.dir, err))
				err = w.in.Failure()
			} else {
				s.reuse(b)
				last = w
			}
		}
		done(w.ops, err)
		if w.whole != nil {
			s.queue.Recycle(w.whole)
		}
		if last.in != nil && len(s.syncing) == 0 {
			s.markSynced(last.in, last.seq, last.jobs)
			last = written{}
		}
		s.answered.Add(1)
		select {
		case s.log.wake <- struct{}{}: // for pace and waitAnswered
		default:
		}
	}
}

// markSynced advances the mark to batch seq, synced, after which jobs
// were stored. A mark that cannot be written fails the store: what was
// acknowledged is durable, and the next write is refused.
func (s *Store) markSynced(in *incarnation, seq uint64, jobs int) {
	wal, man := s.log.where()
	err := s.mark.advance(mark{seq: seq, jobs: uint64(jobs), walNum: wal.num, walSynced: wal.synced,
		manNum: man.num, manSynced: man.synced})
	if err != nil {
		s.fail(in, fmt.Errorf("durable: %s: %w", s.dir, err))
	}
}

// markManifest records in the mark how far the MANIFEST is synced, after
// Pebble synced it (a flush or a compaction recorded), on Pebble's
// goroutine.
func (s *Store) markManifest() {
	mf := s.markRef.Load()
	if mf == nil {
		return // opening: the mark is made next
	}
	_, man := s.log.where()
	if err := mf.refresh(man); err != nil {
		s.fail(s.cur.Load(), fmt.Errorf("durable: %s: %w", s.dir, err))
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

// dropSpare closes the spare batches: they belong to the database given
// up.
func (s *Store) dropSpare() {
	for s.spare != nil && len(s.spare) > 0 {
		(<-s.spare).Close()
	}
}

// build puts ops in a batch (a spare one, else a new one), notes which
// jobs the database will hold once it applies, and counts the batch.
func (s *Store) build(in *incarnation, ops []op) *pebble.Batch {
	var b *pebble.Batch
	select {
	case b = <-s.spare:
	default:
		b = in.db.NewBatch()
	}
	// Set and Delete fail only on an indexed batch, which these are not.
	for i := range ops {
		switch ops[i].kind {
		case opPut:
			b.Set(ops[i].key[:], ops[i].val, nil)
			s.keys.add(keyID(&ops[i].key))
		case opDelete:
			b.Delete(ops[i].key[:], nil)
			s.keys.remove(keyID(&ops[i].key))
		}
	}
	s.seq++
	return b
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

// guard runs f, a call into in's database, on a goroutine of its own and
// returns its error; a panic, or the goroutine's end (the logger's
// Fatalf), is an error too. If the database fails meanwhile (Pebble gave
// up on another goroutine), guard stops waiting for f, which may never
// return: Pebble may wait for a flush that will not come.
func (s *Store) guard(in *incarnation, f func() error) error {
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
			ch <- errGaveUp // runtime.Goexit, from Fatalf: in.Failure says why
		}()
		err := f()
		returned = true
		ch <- err
	}()
	select {
	case err := <-ch:
		if err == errGaveUp {
			if ferr := in.Failure(); ferr != nil {
				return ferr
			}
		}
		return err
	case <-in.failed:
		return in.Failure()
	}
}

var errGaveUp = errors.New("pebble gave up")

// fail records err as in's failure, unless one is recorded; if in is the
// database writes go to, the store is down (health.go).
func (s *Store) fail(in *incarnation, err error) {
	in.once.Do(func() {
		in.failure.Store(&err)
		if s.cur.Load() == in {
			s.down(err) // before any write is refused for it: Health says why first
		}
		close(in.failed)
	})
}

// Failure is why the store takes no writes, or nil while it does.
func (s *Store) Failure() error { return s.cur.Load().Failure() }

// stoppedError answers a write queued while the store is down.
type stoppedError struct {
	dir   string
	cause error
}

func (e *stoppedError) Error() string {
	return fmt.Sprintf("durable: %s takes no writes since one failed (%v); it takes them again once it can write there", e.dir, e.cause)
}

func (e *stoppedError) Unwrap() error { return e.cause }

// Load calls fn for every stored job in id order (sched.Store). A record
// that does not decode stops it with an error naming the store.
func (s *Store) Load(fn func(*sched.Record) error) error {
	it, err := s.cur.Load().db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyJob}, UpperBound: []byte{keyJob + 1}})
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

// Close writes what is queued, then closes the database. A store that is
// down is left as it is, as a crash would leave it, and Close returns
// why: Pebble cannot close a database whose write failed, and the next
// Open recovers what is on disk.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.queue.Close()
	<-s.stopped
	s.health.mu.Lock()
	s.health.closed = true // no healer starts now: Wait may begin
	s.health.mu.Unlock()
	s.healer.Wait()
	in := s.cur.Load()
	err := in.Failure()
	if err != nil {
		in.fs.fence()
	} else {
		s.dropSpare()
		err = s.guard(in, in.db.Close)
	}
	if cerr := s.mark.close(); err == nil {
		err = cerr
	}
	if lerr := s.lock.release(); err == nil {
		err = lerr
	}
	return err
}

// logger drops Pebble's informational logging; errors reach the caller.
// Fatalf is Pebble giving up on a write (a full disk): see giveUp.
type logger struct{ in *incarnation }

func (logger) Infof(string, ...any)  {}
func (logger) Errorf(string, ...any) {}
func (l logger) Fatalf(format string, args ...any) {
	err := &fatalError{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if e, ok := a.(error); ok && err.cause == nil {
			err.cause = e
		}
	}
	l.in.giveUp(err)
}

// fatalError is what Pebble's Fatalf said, and the error it was given.
type fatalError struct {
	msg   string
	cause error
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.cause }

// backgroundError is Pebble failing a flush or a compaction on its own
// goroutines. One the disk refused (full, or failing) fails the database:
// Pebble would retry the flush at once, for ever, while commits wait for
// it. Other background errors (a compaction cancelled) are Pebble's
// business.
func (in *incarnation) backgroundError(err error) {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EIO, syscall.EROFS:
			in.giveUp(err)
		}
	}
	if errors.Is(err, errFenced) {
		runtime.Goexit() // a given-up database: its goroutine stops here
	}
}

// giveUp fails the database with err and ends the calling goroutine,
// which runs Pebble's work: guard turns that into an error; one of
// Pebble's own goroutines stops, and with it what it would have retried.
func (in *incarnation) giveUp(err error) {
	in.s.fail(in, fmt.Errorf("durable: write to %s: %w", in.s.dir, err))
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
