package durable

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"switchyard/sched"
)

// crashCopy copies the files of s, open in dir, but its lock, to a new
// directory, as a kill -9 leaves them: what the kernel holds. It waits for
// Pebble's flushes and compactions to end first, so that the copy is of
// one moment.
func crashCopy(t *testing.T, s *Store, dir string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := s.cur.Load().db.Metrics()
		if m.Flush.NumInProgress == 0 && m.Compact.NumInProgress == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Pebble still flushing or compacting after 30s")
		}
		time.Sleep(10 * time.Millisecond) // polled: Pebble has no event for it
	}
	to := t.TempDir()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // obsolete, deleted since the listing: a crash may come after that too
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(to, e.Name()), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// putAll writes jobs from..to-1 with a 100-byte payload, each
// acknowledged, and deletes every tenth: the store's jobs then are want.
func putAll(t *testing.T, s *Store, from, to uint64, want map[uint64]bool) {
	t.Helper()
	payload := bytes.Repeat([]byte("x"), 100)
	answers := make(chan error, to-from)
	for id := from; id < to; id++ {
		s.Put(id, s.Encode(&sched.Record{Func: "f", Payload: payload}), func(err error) { answers <- err })
		want[id] = true
		if id%10 == 0 {
			s.Delete(id)
			delete(want, id)
		}
	}
	for range to - from {
		if err := <-answers; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save(&sched.Record{ID: to, Func: "f"}); err != nil { // every delete before it written, synced
		t.Fatal(err)
	}
	want[to] = true
}

// newest is the path of the newest file in dir whose name ends with suffix.
func newest(t *testing.T, dir, suffix string) string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if len(names) == 0 {
		t.Fatalf("no *%s in %s", suffix, dir)
	}
	slices.Sort(names)
	return names[len(names)-1]
}

func liveManifest(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "CURRENT"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, strings.TrimSpace(string(b)))
}

func change(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b = f(b); b == nil {
		err = os.Remove(path)
	} else {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// putWaves writes jobs from..to-1 in waves of wave jobs, each wave
// acknowledged before the next: many batches, many records in the log.
func putWaves(t *testing.T, s *Store, from, to, wave uint64, want map[uint64]bool) {
	t.Helper()
	for id := from; id < to; id += wave {
		putAll(t, s, id, min(id+wave, to), want)
	}
}

// flushedStore writes jobs to a new store in eight flushes, with Pebble's
// compactions off, then 1,500 more in the log, and returns a copy of it
// as a kill -9 leaves it, the jobs it holds, and the MANIFEST's length
// after the first flush. Each flush adds an sstable and an edit to the
// MANIFEST; a MANIFEST that lost its last edits lists fewer sstables, all
// there, and Pebble opens it without a word: the shape of the damage that
// lost jobs silently.
func flushedStore(t *testing.T) (dir string, want map[uint64]bool, firstFlush int64) {
	t.Helper()
	tuneForTest = func(o *pebble.Options) { o.DisableAutomaticCompactions = true }
	defer func() { tuneForTest = nil }()
	src := t.TempDir()
	s := open(t, src, SyncBatch)
	defer s.Close()
	want = map[uint64]bool{}
	for i := uint64(0); i < 8; i++ {
		putAll(t, s, 1+i*1000, (i+1)*1000, want)
		if err := s.cur.Load().db.Flush(); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			fi, err := os.Stat(liveManifest(t, src))
			if err != nil {
				t.Fatal(err)
			}
			firstFlush = fi.Size()
		}
	}
	putWaves(t, s, 8001, 9500, 50, want)
	return crashCopy(t, s, src), want, firstFlush
}

// The shapes of damage that lose acknowledged jobs are refused at Open,
// with an error naming the damaged file; Open with Recover starts with
// what can be read, and says how many jobs it could not read.
func TestDamageRefused(t *testing.T) {
	flushed, flushedJobs, firstFlush := flushedStore(t)
	// 30,000 jobs written as a flood, through flushes and compactions,
	// then 3,000 more in waves, in the log.
	src := t.TempDir()
	s := open(t, src, SyncBatch)
	compactedJobs := map[uint64]bool{}
	putAll(t, s, 1, 30000, compactedJobs)
	putWaves(t, s, 30001, 33000, 100, compactedJobs)
	compacted := crashCopy(t, s, src)
	s.Close()
	mk, _, err := readMark(vfs.Default, compacted)
	if err != nil {
		t.Fatal(err)
	}
	if mk.walSynced == 0 || mk.manSynced == 0 {
		t.Fatalf("the mark records no synced log or MANIFEST: %+v", mk)
	}
	wal := fmt.Sprintf("%06d.log", mk.walNum)
	onWAL := func(f func(b []byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { change(t, filepath.Join(dir, wal), f) }
	}
	onManifest := func(f func(b []byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { change(t, liveManifest(t, dir), f) }
	}
	for _, tc := range []struct {
		name   string
		store  string
		jobs   map[uint64]bool
		damage func(t *testing.T, dir string)
		file   string // the file the error must name; "" for the live MANIFEST
		// Pebble cannot open it at all (a MANIFEST that lost the edit
		// of a compaction names sstables long gone): Recover cannot help.
		unreadable bool
		// maybe: where Pebble's own flushes and compactions fell decides
		// whether it can (the flood's MANIFEST held two edits in one run
		// under -race, and the log still had every job): either shape
		// must be refused, and Recover must then do what that shape
		// allows.
		maybe bool
	}{
		{"manifest cut short", flushed, flushedJobs, onManifest(func(b []byte) []byte { return b[:firstFlush] }), "", false, false},
		{"manifest byte flipped", flushed, flushedJobs, onManifest(func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }), "", false, false},
		{"compacted manifest cut short", compacted, compactedJobs, onManifest(func(b []byte) []byte { return b[:len(b)/2] }), "", true, true},
		{"compacted manifest byte flipped", compacted, compactedJobs, onManifest(func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }), "", true, true},
		{"log byte flipped", compacted, compactedJobs, onWAL(func(b []byte) []byte { b[mk.walSynced/2] ^= 0x40; return b }), wal, false, false},
		{"log zeroed", compacted, compactedJobs, onWAL(func(b []byte) []byte { return make([]byte, len(b)) }), wal, false, false},
		{"log overwritten", compacted, compactedJobs, onWAL(func(b []byte) []byte { return bytes.Repeat([]byte("garbage!"), len(b)/8) }), wal, false, false},
		{"log cut short", compacted, compactedJobs, onWAL(func(b []byte) []byte { return b[:mk.walSynced/2] }), wal, false, false},
		{"log missing", compacted, compactedJobs, onWAL(func([]byte) []byte { return nil }), wal, false, false},
		{"mark missing", compacted, compactedJobs, func(t *testing.T, dir string) {
			change(t, filepath.Join(dir, markName), func([]byte) []byte { return nil })
		}, markName, false, false},
		{"mark damaged", compacted, compactedJobs, func(t *testing.T, dir string) {
			change(t, filepath.Join(dir, markName), func(b []byte) []byte { b[10] ^= 1; b[markSlot+10] ^= 1; return b })
		}, markName, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(tc.store)); err != nil {
				t.Fatal(err)
			}
			file := tc.file
			if file == "" {
				file = filepath.Base(liveManifest(t, dir))
			}
			tc.damage(t, dir)
			before := storeFiles(vfs.Default, dir)
			unreadable := tc.unreadable
			for try := 1; try <= 2; try++ { // a refused open changes nothing
				s, err := Open(dir, SyncBatch)
				var d *DamageError
				if !errors.As(err, &d) {
					if err == nil {
						t.Fatalf("try %d: opened with %d jobs, want a *DamageError naming %s", try, len(ids(t, s)), file)
					}
					t.Fatalf("try %d: %v, want a *DamageError naming %s", try, err, file)
				}
				if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), file) || !slices.Contains(d.Files, file) {
					t.Fatalf("try %d: %v (files %v): want the directory and %s named", try, err, d.Files, file)
				}
				if d.Unreadable != tc.unreadable && !tc.maybe {
					t.Fatalf("try %d: %v: unreadable %v", try, err, d.Unreadable)
				}
				unreadable = d.Unreadable
				if try == 1 {
					t.Log(err)
				}
			}
			if after := storeFiles(vfs.Default, dir); !slices.Equal(after, before) {
				t.Fatalf("the refused opens changed the files: %v, then %v", before, after)
			}
			s, err := OpenWith(dir, Options{Sync: SyncBatch, Recover: true})
			if unreadable {
				if err == nil {
					s.Close()
					t.Fatal("recover opened a store Pebble cannot open")
				}
				return
			}
			if err != nil {
				t.Fatalf("recover: %v", err)
			}
			d := s.Damage()
			got := ids(t, s)
			if d == nil || d.Readable != len(got) {
				t.Fatalf("recover: damage %v, %d jobs read", d, len(got))
			}
			// A deleted job may come back: its delete was in the writes lost.
			missing, back := 0, 0
			gotSet := map[uint64]bool{}
			top := maxID(tc.jobs)
			for _, id := range got {
				gotSet[id] = true
				if !tc.jobs[id] {
					back++
				}
				if id < 1 || id > top {
					t.Fatalf("job %d, never written, read", id)
				}
			}
			for id := range tc.jobs {
				if !gotSet[id] {
					missing++
				}
			}
			t.Logf("recovered %d of %d jobs: %d missing, %d deleted ones back; %d could not be read, it says", len(got), len(tc.jobs), missing, back, d.Lost())
			// The mark's loss loses no job; and a MANIFEST whose lost edits
			// the log still covers (maybe) may lose none: then it must say so.
			lossless := tc.file == markName || tc.maybe && d.Lost() == 0 && missing == 0
			if !lossless && (missing == 0 || d.Lost() != max(0, len(tc.jobs)-len(got))) {
				t.Errorf("recover says %d jobs could not be read; %d of %d are missing, %d deleted ones back", d.Lost(), missing, len(tc.jobs), back)
			}
			if err := s.Save(&sched.Record{ID: 1 << 40, Func: "after"}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			// Recovered once, the store opens as it now is.
			s, err = Open(dir, SyncBatch)
			if err != nil {
				t.Fatalf("the open after recovering: %v", err)
			}
			if n := len(ids(t, s)); n != len(got)+1 {
				t.Errorf("the open after recovering: %d jobs, want %d", n, len(got)+1)
			}
			s.Close()
		})
	}
}

// A log torn after its last acknowledged write, as a crash of the
// machine leaves it (a write that had not been synced, cut short), is no
// damage: Open takes the store with every acknowledged job, and some of
// the others. A log torn before it is.
func TestTornTail(t *testing.T) {
	src := t.TempDir()
	s := open(t, src, SyncBatch)
	acked := map[uint64]bool{}
	putWaves(t, s, 1, 2000, 100, acked)
	before := crashCopy(t, s, src) // the mark as of the last acknowledged write
	mk, _, err := readMark(vfs.Default, before)
	if err != nil {
		t.Fatal(err)
	}
	unacked := map[uint64]bool{}
	putWaves(t, s, 2001, 3000, 100, unacked) // not acknowledged, in the crash
	after := crashCopy(t, s, src)
	s.Close()
	later, _, err := readMark(vfs.Default, after)
	if err != nil {
		t.Fatal(err)
	}
	if later.walNum != mk.walNum || later.walSynced <= mk.walSynced {
		t.Fatalf("the log rotated, or did not grow: %+v, then %+v", mk, later)
	}
	for _, tc := range []struct {
		name   string
		cut    uint64 // where the log's writes end
		damage bool
	}{
		{"after the acknowledged writes", mk.walSynced + (later.walSynced-mk.walSynced)/2, false},
		{"just after them", mk.walSynced + 1, false},
		{"before them", mk.walSynced / 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(after)); err != nil {
				t.Fatal(err)
			}
			change(t, filepath.Join(dir, markName), func([]byte) []byte {
				b, err := os.ReadFile(filepath.Join(before, markName))
				if err != nil {
					t.Fatal(err)
				}
				return b
			})
			change(t, filepath.Join(dir, fmt.Sprintf("%06d.log", mk.walNum)), func(b []byte) []byte {
				clear(b[tc.cut:]) // the rest of a zero-filled log
				return b
			})
			s, err := Open(dir, SyncBatch)
			if tc.damage {
				var d *DamageError
				if !errors.As(err, &d) {
					t.Fatalf("open: %v, want a *DamageError", err)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got := map[uint64]bool{}
			top := maxID(unacked)
			for _, id := range ids(t, s) {
				got[id] = true
				if id < 1 || id > top { // a deleted one may come back: the tail held its delete
					t.Fatalf("job %d, never written, read", id)
				}
			}
			for id := range acked {
				if !got[id] {
					t.Fatalf("acknowledged job %d lost", id)
				}
			}
			t.Logf("%d acknowledged jobs, %d read", len(acked), len(got))
		})
	}
}

// maxID is the largest id in jobs.
func maxID(jobs map[uint64]bool) uint64 {
	var m uint64
	for id := range jobs {
		m = max(m, id)
	}
	return m
}

// No damage where there is none: a store whose log rotated many times
// (each closed log ends with Pebble's EOF trailer, synced after the next
// log took over) opens after a kill -9 and after a clean close, at every
// restart, with every acknowledged job.
func TestNoFalseDamage(t *testing.T) {
	for _, mode := range []Sync{SyncBatch, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			want := map[uint64]bool{}
			var next uint64 = 1
			rounds := 3
			if raceEnabled {
				rounds = 1 // the race detector's share: one round of rotations is enough to race
			}
			for round := range rounds {
				s := open(t, dir, mode)
				payload := bytes.Repeat([]byte("y"), 400)
				answers := make(chan error, 64)
				for wave := 0; wave < 200; wave++ { // 200 waves of 64: 12,800 jobs, 5 MB
					for range 64 {
						id := next
						next++
						s.Put(id, s.Encode(&sched.Record{Func: "f", Payload: payload}), func(err error) { answers <- err })
						want[id] = true
						if id%7 == 0 {
							s.Delete(id)
							delete(want, id)
						}
					}
					for range 64 {
						if err := <-answers; err != nil {
							t.Fatal(err)
						}
					}
				}
				crashed := crashCopy(t, s, dir)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				for _, d := range []string{crashed, dir} {
					s, err := Open(d, mode)
					if err != nil {
						t.Fatalf("round %d, %s: %v", round, filepath.Base(d), err)
					}
					got := ids(t, s)
					s.Close()
					kept := 0
					for _, id := range got {
						if want[id] {
							kept++
						}
					}
					if kept != len(want) {
						t.Fatalf("round %d: %d of %d acknowledged jobs", round, kept, len(want))
					}
				}
			}
		})
	}
}

// A log Pebble closed ends with its EOF trailer, which its sync counts:
// the log reads as far as it was synced, trailer included. And a log's
// closing sync, which may come after the next log's first, does not move
// the mark back to it.
func TestLogEOFTrailer(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, SyncBatch)
	for id := uint64(1); id <= 10; id++ {
		if err := s.Save(&sched.Record{ID: id, Func: "f"}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.log.where()
	if err := s.Close(); err != nil { // Pebble closes the log: the trailer, and a sync
		t.Fatal(err)
	}
	wal, _ := s.log.where()
	if wal.num != before.num || wal.synced != before.synced+11 {
		t.Fatalf("the log synced to %+v before its close, %+v after; want its 11-byte trailer", before, wal)
	}
	if end, why := readRecords(s, filepath.Join(dir, fmt.Sprintf("%06d.log", wal.num)), wal.num); uint64(end) != wal.synced {
		t.Fatalf("the closed log reads to %d (%s), was synced to %d", end, why, wal.synced)
	}
	l := newLogSyncs(false)
	l.synced(&l.wal, 8, 100)
	l.synced(&l.wal, 7, 500) // the previous log's closing sync
	if wal, _ := l.where(); wal != (syncedTo{8, 100}) {
		t.Fatalf("an older log's sync moved the log back: %+v", wal)
	}
}
