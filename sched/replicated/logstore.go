package replicated

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/hashicorp/raft"
)

// LogStore keeps Raft's log and its stable values (term, vote):
// raft.LogStore and raft.StableStore. The entries are in segment files of
// their own (segments), the stable values in a Pebble database. Every
// write is synced before it returns, as Raft requires.
//
// Pebble's keys: 's' and the key for a stable value. Before the segment
// files, entries were there too, under 'l' and the index (8 bytes,
// big-endian); a log written so is moved to segments when opened.
//
// It does not track the commit index (raft.CommitTrackingLogStore): with
// RestoreCommittedLogs, hashicorp/raft v1.8.0 replays the committed entries
// at start but skips the configuration changes among them, and a node
// restarted that way knows no member, itself included, so it can never
// stand for election.
type LogStore struct {
	db   *pebble.DB
	segs *segments

	mu sync.Mutex // guards recent
	// recent holds the entries last stored, each at its index modulo
	// recentEntries. A leader reads each entry it has just written once
	// per follower as it sends it, and the one before it for its term
	// (hashicorp/raft's replication); read from disk, each was decoded
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

// segmentsDir is where, in the store's directory, the entries are.
const segmentsDir = "segments"

// errNotFound is what raft expects of a stable key that is not there (it
// compares the text).
var errNotFound = errors.New("not found")

// LogOptions configure a LogStore.
type LogOptions struct {
	// OpenFile opens the segments' files; nil is OpenFile (the file
	// system's).
	OpenFile func(name string, flag int, perm os.FileMode) (File, error)
	// OnFail, if set, is called once, the first time a sync of the log
	// fails (see Failed), from the goroutine that wrote.
	OnFail func(error)
}

// OpenLogStore opens (or creates) the log in dir.
func OpenLogStore(dir string) (*LogStore, error) { return OpenLogStoreWith(dir, LogOptions{}) }

// OpenLogStoreWith opens (or creates) the log in dir, as o says.
func OpenLogStoreWith(dir string, o LogOptions) (*LogStore, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("raft log %s: %w", dir, err)
	}
	s := &LogStore{db: db}
	if s.segs, err = openSegments(filepath.Join(dir, segmentsDir), segSize, o.OpenFile, o.OnFail); err == nil {
		err = s.moveEntries()
	}
	if err != nil {
		if s.segs != nil {
			s.segs.close()
		}
		db.Close()
		return nil, fmt.Errorf("raft log %s: %w", dir, err)
	}
	return s, nil
}

// moveEntries moves the entries an earlier version kept in Pebble to the
// segments, a few at a time: all of them, written again if a move was cut
// short, then removed from Pebble.
func (s *LogStore) moveEntries() error {
	lo, hi := []byte{keyLog}, []byte{keyLog + 1}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	if !it.First() {
		return it.Error()
	}
	if f, _ := s.segs.bounds(); f != 0 {
		if err := s.segs.deleteRange(f, math.MaxUint64); err != nil {
			return err
		}
	}
	const chunk = 64
	var bodies [][]byte
	next := binary.BigEndian.Uint64(it.Key()[1:])
	for ok := true; ok; ok = it.Next() {
		index := binary.BigEndian.Uint64(it.Key()[1:])
		if index != next+uint64(len(bodies)) {
			return fmt.Errorf("entries to move: %d follows %d", index, next+uint64(len(bodies))-1)
		}
		bodies = append(bodies, slices.Clone(it.Value()))
		if len(bodies) == chunk {
			if err := s.segs.append(next, bodies); err != nil {
				return err
			}
			next, bodies = next+chunk, bodies[:0]
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if len(bodies) > 0 {
		if err := s.segs.append(next, bodies); err != nil {
			return err
		}
	}
	return s.db.DeleteRange(lo, hi, pebble.Sync)
}

// Failed is the failed sync that stopped the log's writes (wrapping
// ErrLogFailed), nil while it takes them. After one, every StoreLogs and
// DeleteRange fails: Raft on this node acknowledges nothing more, as a
// leader steps down and as a follower refuses entries.
func (s *LogStore) Failed() error { return s.segs.fault() }

// Close closes the log and the database.
func (s *LogStore) Close() error {
	s.segs.close()
	return s.db.Close()
}

// FirstIndex is the first index written, 0 for none (raft.LogStore).
func (s *LogStore) FirstIndex() (uint64, error) {
	first, _ := s.segs.bounds()
	return first, nil
}

// LastIndex is the last index written, 0 for none (raft.LogStore).
func (s *LogStore) LastIndex() (uint64, error) {
	_, last := s.segs.bounds()
	return last, nil
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
	var body []byte
	ok, err := s.segs.read(index, &body)
	if err != nil {
		return err
	}
	if !ok {
		return raft.ErrLogNotFound
	}
	if err := decodeLog(body, l); err != nil {
		return fmt.Errorf("raft log entry %d: %w", index, err)
	}
	l.Index = index
	return nil
}

// StoreLog writes one entry (raft.LogStore).
func (s *LogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs writes entries, which follow each other, synced
// (raft.LogStore).
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	bodies := make([][]byte, len(logs))
	for i, l := range logs {
		if l.Index != logs[0].Index+uint64(i) {
			return fmt.Errorf("raft log: entries %d and %d stored together", logs[0].Index, l.Index)
		}
		bodies[i] = encodeLog(nil, l)
	}
	if err := s.segs.append(logs[0].Index, bodies); err != nil {
		return err
	}
	s.mu.Lock()
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
	return s.segs.deleteRange(lo, hi)
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
