package durable

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
)

// memTableSize is Pebble's default memtable size, named because the
// write-ahead log's files are sized after it.
const memTableSize = 4 << 20

// walSize is how long a write-ahead log grows: Pebble preallocates 110%
// of the memtable size for each.
const walSize = memTableSize + memTableSize/10

// walFS writes every new write-ahead log full of zeros, and syncs it,
// before Pebble writes to it; and it counts the logs' syncs and follows
// how far the log and the MANIFEST are synced, for the mark (logSyncs).
//
// Every record is acknowledged after an fdatasync of the log. On a file
// that grows, or that fallocate reserved, each of those must also commit
// the file's new size and extents to the file system's journal, which
// every process writing to the disk shares; on a file whose blocks are
// written already, it writes only the data. Pebble gets such files by
// recycling the logs of flushed memtables, but only once a few have
// been flushed: a fresh start writes its first memtables' worth of jobs
// to new files. Zero-filling those (as PostgreSQL does its WAL segments)
// makes every log sync the cheap kind from the first job on. Pebble reads
// zeros after a log's last record as the end of the log, as it does the
// stale tail of a recycled one.
type walFS struct {
	vfs.FS
	syncs *logSyncs
}

// zeros is what walFS writes.
var zeros [64 << 10]byte

func (fs walFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil {
		return f, err
	}
	if num, ok := fileNum(fs.PathBase(name), "MANIFEST-", ""); ok {
		return fs.syncs.watchManifest(f, num), nil
	}
	num, ok := fileNum(fs.PathBase(name), "", ".log")
	if !ok {
		return f, nil
	}
	if zeroFill(f) == nil {
		return fs.syncs.watch(f, num), nil
	}
	// A log that could not be filled (a full disk) is a plain one: the
	// write that cannot be made will say so, as it would have anyway.
	f.Close()
	if err := fs.FS.Remove(name); err != nil {
		return nil, err
	}
	f, err = fs.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return fs.syncs.watch(f, num), nil
}

// ReuseForWrite is how Pebble recycles the log of a flushed memtable as a
// new one: it was filled when it was made.
func (fs walFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	if err != nil {
		return f, err
	}
	num, ok := fileNum(fs.PathBase(newname), "", ".log")
	if !ok {
		return f, nil
	}
	return fs.syncs.watch(f, num), nil
}

// fileNum is the number in a file's name between prefix and suffix.
func fileNum(base, prefix, suffix string) (uint64, bool) {
	if !strings.HasPrefix(base, prefix) || !strings.HasSuffix(base, suffix) || len(base) == len(prefix)+len(suffix) {
		return 0, false
	}
	n, err := strconv.ParseUint(base[len(prefix):len(base)-len(suffix)], 10, 64)
	return n, err == nil
}

// zeroFill writes walSize bytes of zeros to f, without moving its offset,
// and syncs them.
func zeroFill(f vfs.File) error {
	for off := 0; off < walSize; off += len(zeros) {
		n := min(len(zeros), walSize-off)
		if _, err := f.WriteAt(zeros[:n], int64(off)); err != nil {
			return err
		}
	}
	return f.Sync()
}

// logSyncs counts the syncs of the write-ahead log, begun and ended, and
// tells the writer (Store.pace) of each one ended. With noSync (SyncNever)
// the syncs are only counted, not made: Pebble writes a log's partial
// block to the file before it syncs it, so a sync that is not made still
// puts every record before it in the kernel.
//
// It also keeps, for the mark, the number of the log last synced and how
// far it was synced, and the same of the MANIFEST; and the log last made,
// whose bytes a new database opened after a failure must flush.
type logSyncs struct {
	begun, ended atomic.Uint64
	wake         chan struct{} // a token per sync ended, dropped if one is waiting
	noSync       bool

	mu       sync.Mutex
	wal, man syncedTo
	newest   atomic.Pointer[watchedLog]
	// manifestSynced, if set, is called after each sync of a MANIFEST:
	// the mark records its new length (Store.markManifest).
	manifestSynced atomic.Pointer[func()]
}

// syncedTo is a file's number and the bytes of it synced.
type syncedTo struct{ num, synced uint64 }

// where is the log's and the MANIFEST's number and synced length.
func (l *logSyncs) where() (wal, man syncedTo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wal, l.man
}

// synced records that file num is synced up to n bytes, unless a newer
// file is recorded: Pebble closes a log (and syncs it, its EOF trailer
// written) after the next one has taken over.
func (l *logSyncs) synced(to *syncedTo, num uint64, n int64) {
	l.mu.Lock()
	if num >= to.num {
		*to = syncedTo{num, uint64(n)}
	}
	l.mu.Unlock()
}

// unflushed is how many bytes the newest log holds.
func (l *logSyncs) unflushed() int64 {
	if f := l.newest.Load(); f != nil {
		return f.written.Load()
	}
	return 0
}

func newLogSyncs(noSync bool) *logSyncs {
	return &logSyncs{wake: make(chan struct{}, 1), noSync: noSync}
}

// watch wraps log num so that its syncs are counted and its length
// followed.
func (l *logSyncs) watch(f vfs.File, num uint64) vfs.File {
	w := &watchedLog{File: f, syncs: l, num: num}
	l.newest.Store(w)
	return w
}

type watchedLog struct {
	vfs.File
	syncs   *logSyncs
	num     uint64
	written atomic.Int64 // Pebble writes a log at its end, one Write at a time
}

func (f *watchedLog) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.written.Add(int64(n))
	return n, err
}

// SyncData is how Pebble syncs a log (Sync would be the same to count).
func (f *watchedLog) SyncData() error {
	f.syncs.begun.Add(1)
	n := f.written.Load() // Pebble writes nothing while it syncs
	var err error
	if !f.syncs.noSync {
		err = f.File.SyncData()
	}
	if err == nil {
		f.syncs.synced(&f.syncs.wal, f.num, n)
	}
	f.syncs.ended.Add(1)
	select {
	case f.syncs.wake <- struct{}{}:
	default:
	}
	return err
}

// watchManifest wraps MANIFEST num so that its synced length is followed.
func (l *logSyncs) watchManifest(f vfs.File, num uint64) vfs.File {
	return &watchedManifest{File: f, syncs: l, num: num}
}

type watchedManifest struct {
	vfs.File
	syncs   *logSyncs
	num     uint64
	written int64 // one goroutine at a time writes a MANIFEST (Pebble's manifest lock)
}

func (f *watchedManifest) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.written += int64(n)
	return n, err
}

func (f *watchedManifest) Sync() error {
	n := f.written
	err := f.File.Sync()
	if err == nil {
		f.syncs.synced(&f.syncs.man, f.num, n)
		if h := f.syncs.manifestSynced.Load(); h != nil {
			(*h)()
		}
	}
	return err
}
