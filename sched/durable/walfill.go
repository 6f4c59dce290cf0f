package durable

import (
	"strings"
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
// before Pebble writes to it; and it counts the logs' syncs (logSyncs).
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
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	if zeroFill(f) == nil {
		return fs.syncs.watch(f), nil
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
	return fs.syncs.watch(f), nil
}

// ReuseForWrite is how Pebble recycles the log of a flushed memtable as a
// new one: it was filled when it was made.
func (fs walFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	if err != nil || !strings.HasSuffix(newname, ".log") {
		return f, err
	}
	return fs.syncs.watch(f), nil
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
type logSyncs struct {
	begun, ended atomic.Uint64
	wake         chan struct{} // a token per sync ended, dropped if one is waiting
	noSync       bool
}

func newLogSyncs(noSync bool) *logSyncs {
	return &logSyncs{wake: make(chan struct{}, 1), noSync: noSync}
}

// watch wraps a log so that its syncs are counted.
func (l *logSyncs) watch(f vfs.File) vfs.File {
	if l == nil {
		return f
	}
	return &watchedLog{File: f, syncs: l}
}

type watchedLog struct {
	vfs.File
	syncs *logSyncs
}

// SyncData is how Pebble syncs a log (Sync would be the same to count).
func (f *watchedLog) SyncData() error {
	f.syncs.begun.Add(1)
	var err error
	if !f.syncs.noSync {
		err = f.File.SyncData()
	}
	f.syncs.ended.Add(1)
	select {
	case f.syncs.wake <- struct{}{}:
	default:
	}
	return err
}
