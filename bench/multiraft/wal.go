package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
)

// wal is an append-only log with group commit: whatever every caller of
// write handed over while the last sync ran goes to disk in one write and
// one fdatasync, and each caller returns once its bytes are synced. One
// wal per node, shared by all its groups, is the "one fsync per node" of
// CockroachDB and dragonboat; one per group is what a hashicorp/raft
// instance with a log store of its own does.
//
// Segments are filled with zeros before their first write (as
// sched/replicated's are), so a sync writes data, not a new size or
// extent to the file system's journal. Each write is framed: length,
// CRC-32C, bytes. Nothing here reads it back: the prototype measures the
// write path; recovery is the server's (sched/replicated/segments.go).
type wal struct {
	dir     string
	segSize int64

	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte
	gen     uint64 // the batch pending fills
	synced  uint64 // the last batch synced
	err     error
	closed  bool
	kick    chan struct{}

	// the flusher's own
	f     *os.File
	off   int64
	seq   int
	spare chan *os.File
	done  chan struct{}

	syncs atomic.Uint64 // counted by the flusher
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func openWAL(dir string, segSize int64) (*wal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	w := &wal{dir: dir, segSize: segSize, gen: 1, kick: make(chan struct{}, 1),
		spare: make(chan *os.File, 1), done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	w.fill()
	w.f = <-w.spare
	w.fill()
	go w.flush()
	return w, nil
}

// fill makes the next segment in the background.
func (w *wal) fill() {
	w.seq++
	path := filepath.Join(w.dir, fmt.Sprintf("%08d.seg", w.seq))
	size := w.segSize
	go func() {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err == nil {
			zero := make([]byte, 1<<20)
			for off := int64(0); off < size && err == nil; off += int64(len(zero)) {
				_, err = f.WriteAt(zero, off)
			}
			if err == nil {
				err = f.Sync()
			}
		}
		if err != nil {
			panic(fmt.Sprintf("wal: segment %s: %v", path, err))
		}
		w.spare <- f
	}()
}

// write appends b and returns once it is on disk.
func (w *wal) write(b []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return os.ErrClosed
	}
	var h [8]byte
	binary.LittleEndian.PutUint32(h[:4], uint32(len(b)))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(b, castagnoli))
	w.pending = append(append(w.pending, h[:]...), b...)
	mine := w.gen
	select {
	case w.kick <- struct{}{}:
	default:
	}
	for w.synced < mine && w.err == nil {
		w.cond.Wait()
	}
	return w.err
}

func (w *wal) flush() {
	defer close(w.done)
	var buf []byte
	for range w.kick {
		w.mu.Lock()
		if len(w.pending) == 0 {
			closed := w.closed
			w.mu.Unlock()
			if closed {
				return
			}
			continue
		}
		buf, w.pending = w.pending, buf[:0]
		gen := w.gen
		w.gen++
		w.mu.Unlock()
		err := w.append(buf)
		w.mu.Lock()
		w.synced = gen
		if err != nil && w.err == nil {
			w.err = err
		}
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

func (w *wal) append(b []byte) error {
	if w.off+int64(len(b)) > w.segSize && w.off > 0 {
		old := w.f
		w.f = <-w.spare
		w.off = 0
		name := old.Name()
		old.Close()
		os.Remove(name) // nothing reads it back (see wal)
		w.fill()
	}
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return err
	}
	w.off += int64(len(b))
	w.syncs.Add(1)
	return syscall.Fdatasync(int(w.f.Fd()))
}

// close stops the log once what is pending is synced.
func (w *wal) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	close(w.kick)
	<-w.done
	w.f.Close()
}

// syncCount is how many syncs the log has made.
func (w *wal) syncCount() uint64 { return w.syncs.Load() }
