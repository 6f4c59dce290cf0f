package replicated

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/hashicorp/raft"
)

// LogStore keeps Raft's log and its stable values (term, vote) in a Pebble
// database of its own: raft.LogStore and raft.StableStore. Every write is
// synced before it returns, as Raft requires; Pebble's commit pipeline
// syncs concurrent writes (the leader's appends, a follower's) together.
//
// Keys: 'l' and the index (8 bytes, big-endian) for an entry, so entries
// sort by index; 's' and the key for a stable value.
//
// It does not track the commit index (raft.CommitTrackingLogStore): with
// RestoreCommittedLogs, hashicorp/raft v1.8.0 replays the committed entries
// at start but skips the configuration changes among them, and a node
// restarted that way knows no member, itself included, so it can never
// stand for election.
type LogStore struct {
	db *pebble.DB

	mu          sync.Mutex // guards first, last and recent
	first, last uint64
	// recent holds the entries last stored, each at its index modulo
	// recentEntries. A leader reads each entry it has just written once
	// per follower as it sends it, and the one before it for its term
	// (hashicorp/raft's replication); read from Pebble, each was decoded
	// and copied: 11% of the leader's CPU in cluster-bg.
	recent [recentEntries]*raft.Log
}

// recentEntries is how many entries LogStore keeps in memory. It keeps
// none larger than maxEntry (those are read from disk), so 8 MiB at most.
const recentEntries = 8

const (
	keyLog    = 'l'
	keyStable = 's'
)

// errNotFound is what raft expects of a stable key that is not there (it
// compares the text).
var errNotFound = errors.New("not found")

// OpenLogStore opens (or creates) the log in dir.
func OpenLogStore(dir string) (*LogStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}, MemTableSize: 32 << 20})
	if err != nil {
		return nil, fmt.Errorf("raft log %s: %w", dir, err)
	}
	s := &LogStore{db: db}
	if s.first, err = s.edge(true); err == nil {
		s.last, err = s.edge(false)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("raft log %s: %w", dir, err)
	}
	return s, nil
}

// edge reads the first (or last) index in the log, 0 if it is empty.
func (s *LogStore) edge(first bool) (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyLog}, UpperBound: []byte{keyLog + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	ok := it.Last()
	if first {
		ok = it.First()
	}
	if !ok {
		return 0, it.Error()
	}
	return binary.BigEndian.Uint64(it.Key()[1:]), nil
}

func logKey(index uint64) []byte {
	k := make([]byte, 9)
	k[0] = keyLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

// Close closes the database.
func (s *LogStore) Close() error { return s.db.Close() }

// FirstIndex is the first index written, 0 for none (raft.LogStore).
func (s *LogStore) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, nil
}

// LastIndex is the last index written, 0 for none (raft.LogStore).
func (s *LogStore) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

// GetLog reads entry index into l (raft.LogStore).
func (s *LogStore) GetLog(index uint64, l *raft.Log) error {
	s.mu.Lock()
	if r := s.recent[index%recentEntries]; r != nil && r.Index == index {
		*l = *r // raft changes neither (its own LogCache shares them too)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	v, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	if err := decodeLog(v, l); err != nil {
		return fmt.Errorf("raft log entry %d: %w", index, err)
	}
	l.Index = index
	return nil
}

// StoreLog writes one entry (raft.LogStore).
func (s *LogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes entries, synced (raft.LogStore).
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, l := range logs {
		buf = encodeLog(buf[:0], l)
		if err := b.Set(logKey(l.Index), buf, nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	s.mu.Lock()
	if s.first == 0 || logs[0].Index < s.first {
		s.first = logs[0].Index
	}
	s.last = max(s.last, logs[len(logs)-1].Index)
	for _, l := range logs {
		if len(l.Data) <= maxEntry {
			s.recent[l.Index%recentEntries] = l
		}
	}
	s.mu.Unlock()
	return nil
}

// DeleteRange removes entries min to max, inclusive (raft.LogStore): a
// prefix the snapshot covers, or a suffix a new leader overrules.
func (s *LogStore) DeleteRange(lo, hi uint64) error {
	s.mu.Lock()
	for i, r := range s.recent {
		if r != nil && r.Index >= lo && r.Index <= hi {
			s.recent[i] = nil
		}
	}
	s.mu.Unlock()
	if err := s.db.DeleteRange(logKey(lo), logKey(hi+1), pebble.Sync); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if lo <= s.first {
		s.first = hi + 1
	}
	if hi >= s.last {
		s.last = lo - 1
	}
	if s.first > s.last {
		s.first, s.last = 0, 0
	}
	return nil
}

// Set writes a stable value, synced (raft.StableStore).
func (s *LogStore) Set(key, val []byte) error {
	return s.db.Set(append([]byte{keyStable}, key...), val, pebble.Sync)
}

// Get reads a stable value; a missing one is empty (raft.StableStore).
func (s *LogStore) Get(key []byte) ([]byte, error) {
	v, closer, err := s.db.Get(append([]byte{keyStable}, key...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// SetUint64 writes a stable number (raft.StableStore).
func (s *LogStore) SetUint64(key []byte, val uint64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], val)
	return s.Set(key, v[:])
}

// GetUint64 reads a stable number; a missing one is 0 with raft's "not
// found" (raft.StableStore).
func (s *LogStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft stable value %q does not decode", key)
	}
	return binary.BigEndian.Uint64(v), nil
}

// An entry's value: uvarint term, type, varint appended-at (unix ns),
// uvarint length and data, uvarint length and extensions.
func encodeLog(b []byte, l *raft.Log) []byte {
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	return append(b, l.Extensions...)
}

var errLogEntry = errors.New("does not decode")

func decodeLog(b []byte, l *raft.Log) error {
	term, k := binary.Uvarint(b)
	if k <= 0 || len(b) < k+1 {
		return errLogEntry
	}
	l.Term, l.Type = term, raft.LogType(b[k])
	b = b[k+1:]
	at, k := binary.Varint(b)
	if k <= 0 {
		return errLogEntry
	}
	l.AppendedAt = time.Time{}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	data, rest, ok := readBytes(b[k:])
	if !ok {
		return errLogEntry
	}
	ext, rest, ok := readBytes(rest)
	if !ok || len(rest) != 0 {
		return errLogEntry
	}
	l.Data = append([]byte(nil), data...)
	l.Extensions = nil
	if len(ext) > 0 {
		l.Extensions = append([]byte(nil), ext...)
	}
	return nil
}

// quietLogger drops Pebble's informational logging; errors reach callers.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
