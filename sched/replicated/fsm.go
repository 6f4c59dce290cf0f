package replicated

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"switchyard/sched"
	"switchyard/sched/durable"
)

// FSM is the replicated job store's state on every node: each stored job's
// record by id, and the cluster's metadata (which node leads, where its
// frontends listen). Raft applies committed entries to it on every node;
// only the leader's scheduler reads it, once, as it starts (Load). A
// follower applies entries and runs nothing.
type FSM struct {
	mu   sync.RWMutex
	jobs *records
	meta map[string][]byte

	applied atomic.Uint64 // the index of the last entry applied
	// changed is signalled (never blocking) when meta changes.
	changed chan struct{}
}

// ErrStaleTerm is what the FSM answers an entry proposed by a store of
// an earlier term than the one it was appended in: none of its writes is
// applied, on any node.
var ErrStaleTerm = errors.New("stale term")

// NewFSM returns an empty state.
func NewFSM() *FSM {
	return &FSM{jobs: newRecords(), meta: make(map[string][]byte), changed: make(chan struct{}, 1)}
}

// Apply applies one committed entry (raft.FSM). Its result, nil or an
// error, is the leader's ApplyFuture's Response.
func (f *FSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.apply(l)
}

// ApplyBatch applies committed entries under one lock (raft.BatchingFSM).
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, l := range logs {
		out[i] = f.apply(l)
	}
	return out
}

func (f *FSM) apply(l *raft.Log) any {
	f.applied.Store(l.Index)
	if l.Type != raft.LogCommand {
		return nil // configuration changes and no-ops: Raft's own
	}
	term, ops, err := entryTerm(l.Data)
	if err == nil && term != 0 && term != l.Term {
		// Proposed by a store of an earlier term: see entryVersion.
		return fmt.Errorf("replicated: entry %d: %w: proposed in term %d, appended in term %d", l.Index, ErrStaleTerm, term, l.Term)
	}
	metaChanged := false
	if err == nil {
		err = decodeOps(ops, f.jobs.put, f.jobs.delete, func(key string, val []byte) {
			if len(val) == 0 {
				delete(f.meta, key)
			} else {
				f.meta[key] = slices.Clone(val)
			}
			metaChanged = true
		})
	}
	if metaChanged {
		select {
		case f.changed <- struct{}{}:
		default:
		}
	}
	if err != nil {
		// Every node refuses the same bytes the same way: the state stays
		// the same everywhere, and the leader's writer hears of it.
		return fmt.Errorf("replicated: entry %d: %w", l.Index, err)
	}
	return nil
}

// Load calls fn for every stored job in id order, as a restart of a
// single node replays its store (see sched.Store).
func (f *FSM) Load(fn func(*sched.Record) error) error {
	f.mu.RLock()
	v := f.jobs.view()
	f.mu.RUnlock()
	var r sched.Record
	return v.sorted(func(id uint64, rec []byte) error {
		if err := durable.DecodeRecord(rec, &r); err != nil {
			return fmt.Errorf("replicated: job %d: %w", id, err)
		}
		r.ID = id
		return fn(&r)
	})
}

// Len is the number of stored jobs; Bytes what their records take.
func (f *FSM) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.jobs.Len()
}

// Bytes is the size of the stored records.
func (f *FSM) Bytes() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.jobs.bytes
}

// Applied is the index of the last entry applied.
func (f *FSM) Applied() uint64 { return f.applied.Load() }

// Meta is the value of a metadata key, nil if none.
func (f *FSM) Meta(key string) []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.meta[key]
}

// MetaChanged is signalled when a metadata key changes (by an entry or a
// snapshot): read Meta again.
func (f *FSM) MetaChanged() <-chan struct{} { return f.changed }

// Snapshot captures the state for Raft (raft.FSM): a view of the
// records, which are never written again, and a copy of the metadata, so
// Persist can write them while Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &snapshot{applied: f.applied.Load(), jobs: f.jobs.view(), meta: maps.Clone(f.meta)}, nil
}

// Restore replaces the state with a snapshot's (raft.FSM).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	applied, jobs, meta, err := readSnapshot(bufio.NewReaderSize(rc, 1<<20))
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.jobs, f.meta = jobs, meta
	f.applied.Store(applied)
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
	return nil
}

// A snapshot's file:
//
//	magic "SYRSNAP1"
//	uvarint index of the last entry applied
//	uvarint count of jobs, then each: id (8 bytes, big-endian), uvarint
//	length, record
//	uvarint count of metadata keys, then each: uvarint length, key,
//	uvarint length, value
//
// Raft's file snapshot store checksums the whole.
const snapshotMagic = "SYRSNAP1"

type snapshot struct {
	applied uint64
	jobs    view
	meta    map[string][]byte
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 1<<20)
	err := s.write(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) write(w *bufio.Writer) error {
	var buf [binary.MaxVarintLen64 + 8]byte
	w.WriteString(snapshotMagic)
	w.Write(binary.AppendUvarint(buf[:0], s.applied))
	w.Write(binary.AppendUvarint(buf[:0], uint64(len(s.jobs.ids))))
	if err := s.jobs.sorted(func(id uint64, rec []byte) error {
		b := binary.BigEndian.AppendUint64(buf[:0], id)
		w.Write(binary.AppendUvarint(b, uint64(len(rec))))
		_, err := w.Write(rec)
		return err
	}); err != nil {
		return err
	}
	w.Write(binary.AppendUvarint(buf[:0], uint64(len(s.meta))))
	for _, k := range slices.Sorted(maps.Keys(s.meta)) {
		w.Write(binary.AppendUvarint(buf[:0], uint64(len(k))))
		w.WriteString(k)
		w.Write(binary.AppendUvarint(buf[:0], uint64(len(s.meta[k]))))
		if _, err := w.Write(s.meta[k]); err != nil {
			return err
		}
	}
	return nil
}

func (s *snapshot) Release() {}

var errSnapshot = errors.New("replicated: snapshot does not decode")

func readSnapshot(r *bufio.Reader) (applied uint64, jobs *records, meta map[string][]byte, err error) {
	fail := func(e error) (uint64, *records, map[string][]byte, error) { return 0, nil, nil, e }
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != snapshotMagic {
		return fail(errSnapshot)
	}
	if applied, err = binary.ReadUvarint(r); err != nil {
		return fail(errSnapshot)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return fail(errSnapshot)
	}
	jobs = newRecords()
	var idb [8]byte
	var rec []byte // reused: put copies it
	for range n {
		if _, err := io.ReadFull(r, idb[:]); err != nil {
			return fail(errSnapshot)
		}
		if rec, err = readChunkInto(r, rec); err != nil {
			return fail(err)
		}
		jobs.put(binary.BigEndian.Uint64(idb[:]), rec)
	}
	if n, err = binary.ReadUvarint(r); err != nil {
		return fail(errSnapshot)
	}
	meta = make(map[string][]byte, min(n, 1024))
	for range n {
		k, err := readChunk(r)
		if err != nil {
			return fail(err)
		}
		v, err := readChunk(r)
		if err != nil {
			return fail(err)
		}
		meta[string(k)] = v
	}
	return applied, jobs, meta, nil
}

// maxChunk bounds one length-prefixed field of a snapshot: a record is at
// most a job's payload (--max-packet, at most 4 GiB) and its fields.
const maxChunk = 5 << 30

func readChunk(r *bufio.Reader) ([]byte, error) {
	return readChunkInto(r, nil)
}

// readChunkInto reads a field into buf's array if it has room. A field
// larger than readStep is read a step at a time, so that a damaged length
// costs memory only for the bytes that are there.
func readChunkInto(r *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n > maxChunk {
		return nil, errSnapshot
	}
	b := buf[:0]
	for uint64(len(b)) < n {
		step := int(min(n-uint64(len(b)), readStep))
		b = slices.Grow(b, step)
		if _, err := io.ReadFull(r, b[len(b):len(b)+step]); err != nil {
			return nil, errSnapshot
		}
		b = b[:len(b)+step]
	}
	return b, nil
}

const readStep = 1 << 20
