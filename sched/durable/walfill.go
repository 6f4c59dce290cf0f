package durable

import (
	"strings"

	"github.com/cockroachdb/pebble/vfs"
)

// memTableSize is Pebble's default memtable size, named because the
// write-ahead log's files are sized after it.
const memTableSize = 4 << 20

// walSize is how long a write-ahead log grows: Pebble preallocates 110%
// of the memtable size for each.
const walSize = memTableSize + memTableSize/10

// walFS writes every new write-ahead log full of zeros, and syncs it,
// before Pebble writes to it.
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
type walFS struct{ vfs.FS }

// zeros is what walFS writes.
var zeros [64 << 10]byte

func (fs walFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	if zeroFill(f) == nil {
		return f, nil
	}
	// A log that could not be filled (a full disk) is a plain one: the
	// write that cannot be made will say so, as it would have anyway.
	f.Close()
	if err := fs.FS.Remove(name); err != nil {
		return nil, err
	}
	return fs.FS.Create(name)
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
