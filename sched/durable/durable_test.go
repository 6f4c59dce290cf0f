package durable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"switchyard/sched"
)

func open(t *testing.T, dir string, mode Sync) *Store {
	t.Helper()
	s, err := Open(dir, mode)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// syncFS counts the syncs of the write-ahead log: those begun and those
// ended. The log syncs one at a time, with SyncData; the Sync of a new
// log that walFS has just filled with zeros covers no record and is not
// counted.
type syncFS struct {
	vfs.FS
	begun, ended atomic.Int64
	hook         func() // if set, called as each sync begins
}

func (fs *syncFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f), err
}

func (fs *syncFS) ReuseForWrite(old, name string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(old, name)
	return fs.wrap(name, f), err
}

func (fs *syncFS) wrap(name string, f vfs.File) vfs.File {
	if f == nil || !strings.HasSuffix(name, ".log") {
		return f
	}
	return &syncFile{File: f, fs: fs}
}

type syncFile struct {
	vfs.File
	fs *syncFS
}

func (f *syncFile) SyncData() error { return f.fs.count(f.File.SyncData) }

func (fs *syncFS) count(sync func() error) error {
	if fs.hook != nil {
		fs.hook()
	}
	fs.begun.Add(1)
	err := sync()
	fs.ended.Add(1)
	return err
}

// openSyncs opens a store whose log syncs are counted.
func openSyncs(t testing.TB, dir string, mode Sync) (*Store, *syncFS) {
	t.Helper()
	fs := &syncFS{FS: vfs.Default}
	s, err := openFS(dir, Options{Sync: mode}, fs)
	if err != nil {
		t.Fatal(err)
	}
	return s, fs
}

func ids(t *testing.T, s *Store) []uint64 {
	t.Helper()
	var out []uint64
	if err := s.Load(func(r *sched.Record) error { out = append(out, r.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// What was saved and not deleted is there after a reopen, in id order, in
// every sync mode.
func TestSaveDeleteReopen(t *testing.T) {
	for _, mode := range []Sync{SyncBatch, SyncAlways, SyncNever} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, mode)
			for _, id := range []uint64{300, 5, 70000, 6} {
				if err := s.Save(&sched.Record{ID: id, Func: "f", Payload: []byte(fmt.Sprint(id))}); err != nil {
					t.Fatal(err)
				}
			}
			s.Delete(5)
			s.Put(5, s.Encode(&sched.Record{Func: "again"}), nil) // after its delete: it stays
			s.Delete(300)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, dir, mode)
			defer s.Close()
			if got := fmt.Sprint(ids(t, s)); got != "[5 6 70000]" {
				t.Fatalf("ids %s", got)
			}
		})
	}
}

// Saves queued while the log syncs share the next sync: far fewer fsyncs
// than records, and every done called once, after its write.
func TestGroupCommit(t *testing.T) {
	s, fs := openSyncs(t, t.TempDir(), SyncBatch)
	defer s.Close()
	const n = 2000
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/8; i++ {
				id := uint64(g*n + i + 1)
				if err := s.Save(&sched.Record{ID: id, Func: "f"}); err != nil {
					t.Error(err)
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if done != n || len(ids(t, s)) != n {
		t.Fatalf("%d saves answered, %d stored", done, len(ids(t, s)))
	}
	syncs := fs.ended.Load()
	if syncs >= n {
		t.Fatalf("%d records in %d syncs: no group commit", n, syncs)
	}
	t.Logf("%d records in %d batches, %d syncs", n, s.batches.Load(), syncs)
}

// No record is answered before a sync of the log that began after it was
// queued has ended, in the modes that promise it.
func TestAnsweredAfterSync(t *testing.T) {
	for _, mode := range []Sync{SyncBatch, SyncAlways} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			s, fs := openSyncs(t, t.TempDir(), mode)
			defer s.Close()
			const writers = 8
			each := 200
			if mode == SyncAlways {
				each = 40 // an fsync each
			}
			var wg sync.WaitGroup
			for g := range writers {
				wg.Go(func() {
					var answered sync.WaitGroup
					for i := range each {
						id := uint64(g*each + i + 1)
						begun := fs.begun.Load()
						answered.Add(1)
						s.Put(id, s.Encode(&sched.Record{ID: id, Func: "f"}), func(err error) {
							defer answered.Done()
							if err != nil {
								t.Error(err)
							}
							if ended := fs.ended.Load(); ended <= begun {
								t.Errorf("job %d answered after %d syncs, queued after %d had begun", id, ended, begun)
							}
						})
						if i%2 == 1 {
							s.Delete(id - 1)
						}
					}
					answered.Wait()
				})
			}
			wg.Wait()
			// The last deletes are answered by nothing: wait for them.
			flushed := make(chan error, 1)
			s.Flush(func(err error) { flushed <- err })
			if err := <-flushed; err != nil {
				t.Fatal(err)
			}
			if got := len(ids(t, s)); got != writers*each/2 {
				t.Fatalf("%d records stored, want %d", got, writers*each/2)
			}
		})
	}
}

func TestClosedStore(t *testing.T) {
	s := open(t, t.TempDir(), SyncBatch)
	s.Close()
	if err := s.Save(&sched.Record{ID: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("save after close: %v", err)
	}
}

// A damaged store fails to open, or to load, with an error naming the
// directory and what is wrong, at every try: a failed start never turns it
// into an empty store that the next start would take. Not among these,
// because Pebble cannot tell them from the torn end a crash leaves and
// drops what follows without an error: damage in the last write-ahead log,
// and a live MANIFEST cut short (see docs/durability.md).
func TestCorruptStore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flushed bool // the jobs are in an sstable, not only in the log
		damage  func(t *testing.T, dir string)
		want    string // in the error, beside the directory
	}{
		{"manifest garbage", false, rewrite("MANIFEST-*", func(b []byte) []byte { return []byte("this is not a manifest") }), "MANIFEST-"},
		{"current lost", true, remove("CURRENT"), "no CURRENT file"},
		{"current names no manifest", false, rewrite("CURRENT", func([]byte) []byte { return []byte("MANIFEST-999999\n") }), "MANIFEST-999999"},
		{"sstable truncated", true, rewrite("*.sst", func(b []byte) []byte { return b[:len(b)/2] }), ".sst"},
		{"sstable damaged", true, rewrite("*.sst", func(b []byte) []byte { b[len(b)/3] ^= 0xff; return b }), "checksum mismatch"},
		{"sstable lost", true, remove("*.sst"), "file does not exist"},
		{"record does not decode", false, func(t *testing.T, dir string) {
			db, err := pebble.Open(dir, &pebble.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var k [keySize]byte
			putKey(&k, 7)
			if err := db.Set(k[:], []byte{99, 0, 0}, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			db.Close()
		}, "job 7: record does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, SyncBatch)
			for i := uint64(1); i <= 100; i++ {
				s.Put(i, s.Encode(&sched.Record{Func: "f", Payload: []byte("payload")}), nil)
			}
			s.Close()
			if tc.flushed { // a reopen replays the log into an sstable
				open(t, dir, SyncBatch).Close()
			}
			tc.damage(t, dir)
			files := storeFiles(vfs.Default, dir)
			opened := false // an open that fails leaves the files as they are
			for try := 1; try <= 2; try++ {
				var n int
				s, err := Open(dir, SyncBatch)
				if err == nil {
					opened = true
					err = s.Load(func(*sched.Record) error { n++; return nil })
					s.Close()
				}
				if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("try %d: %d jobs, %v; want an error naming %s and %q", try, n, err, dir, tc.want)
				}
				if try == 1 {
					t.Log(err)
				}
			}
			if got := storeFiles(vfs.Default, dir); !opened && !slices.Equal(got, files) {
				t.Errorf("the store's files were %v, are %v after the failed opens", files, got)
			}
		})
	}
}

// rewrite replaces the content of the store's files matching glob.
func rewrite(glob string, f func([]byte) []byte) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		names, _ := filepath.Glob(filepath.Join(dir, glob))
		if len(names) == 0 {
			t.Fatalf("no %s in %s", glob, dir)
		}
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err == nil {
				err = os.WriteFile(n, f(b), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// remove removes the store's files matching glob.
func remove(glob string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		t.Helper()
		names, _ := filepath.Glob(filepath.Join(dir, glob))
		if len(names) == 0 {
			t.Fatalf("no %s in %s", glob, dir)
		}
		for _, n := range names {
			if err := os.Remove(n); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The scheduler replays what the store kept: a restart loses no stored
// job and keeps their ids.
func TestSchedulerReplay(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, SyncBatch)
	s := sched.New(sched.Config{Tick: -1, Store: st})
	c := s.NewClient(nil)
	var want []uint64
	for i := 0; i < 50; i++ {
		id, err := c.Submit(&sched.SubmitReq{Func: []byte(fmt.Sprint("f", i%3)), Unique: []byte(fmt.Sprint("u", i)),
			Payload: []byte("p"), Background: true})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	s.Close()
	st.Close()

	st = open(t, dir, SyncBatch)
	defer st.Close()
	s = sched.New(sched.Config{Tick: -1, Store: st})
	defer s.Close()
	if n, err := s.Replay(); err != nil || n != len(want) {
		t.Fatalf("replay: %d %v", n, err)
	}
	for _, id := range want {
		if !s.Status(id).Known {
			t.Fatalf("job %d lost", id)
		}
	}
}

// A store another server has open is refused, naming the directory: two
// servers never share one queue.
func TestStoreInUse(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, SyncBatch)
	defer s.Close()
	if _, err := Open(dir, SyncBatch); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second open: %v", err)
	}
}

// BenchmarkReplay1M is a restart with a million jobs queued (issue 9: in
// under 10 s): Open the store, as a kill -9 left it, and Replay every job
// into a scheduler. The store is written once, through a scheduler as
// frontends do, and copied afresh before each restart, so that each one
// replays the same log. Run it with
//
//	go test ./sched/durable -run '^$' -bench Replay1M -benchtime 1x
//
// plain is queue-1m-durable's queue: one function, no unique, 64-byte
// payloads; unique spreads the jobs over 16 functions, each with a unique
// key to index again.
func BenchmarkReplay1M(b *testing.B) {
	const jobs = 1_000_000
	for _, tc := range []struct {
		name  string
		funcs int
		uniq  bool
	}{{"plain", 1, false}, {"unique", 16, true}} {
		b.Run(tc.name, func(b *testing.B) {
			golden := filepath.Join(b.TempDir(), "golden")
			fill(b, golden, jobs, tc.funcs, tc.uniq)
			b.ResetTimer()
			var cpu time.Duration // the process's, Pebble's goroutines included
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "data")
				if err := copySynced(dir, golden); err != nil {
					b.Fatal(err)
				}
				cpu0 := cpuTime()
				b.StartTimer()
				st, err := Open(dir, SyncBatch)
				if err != nil {
					b.Fatal(err)
				}
				s := sched.New(sched.Config{Tick: -1, Store: st})
				n, err := s.Replay()
				b.StopTimer()
				cpu += cpuTime() - cpu0
				if err != nil || n != jobs {
					b.Fatalf("replayed %d jobs, %v; want %d", n, err, jobs)
				}
				s.Close()
				st.Close()
			}
			b.ReportMetric(float64(jobs)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// fill queues n background jobs over funcs functions in a new store in
// dir, acknowledged as a frontend's are, and closes it without flushing
// Pebble's memtable: as a kill -9 would leave it.
func fill(b *testing.B, dir string, n, funcs int, uniq bool) {
	b.Helper()
	st, err := Open(dir, SyncBatch)
	if err != nil {
		b.Fatal(err)
	}
	s := sched.New(sched.Config{Tick: -1, Store: st})
	c := s.NewClient(nil)
	payload := bytes.Repeat([]byte("x"), 64)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	stored := func(_ uint64, err error) {
		if err != nil {
			failed.Store(&err)
		}
		wg.Done()
	}
	for i := range n {
		r := &sched.SubmitReq{Func: []byte(fmt.Sprint("f", i%funcs)), Payload: payload, Background: true, Stored: stored}
		if uniq {
			r.Unique = []byte(fmt.Sprint("u", i))
		}
		wg.Add(1)
		if _, err := c.Submit(r); err != nil {
			b.Fatal(err)
		}
		if !r.Waiting {
			b.Fatal("a background submit not waiting for the store")
		}
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		b.Fatal(*p)
	}
	s.Close()
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// copySynced copies the directory from to a new directory to, and syncs
// what it wrote: the restart timed next must not pay for its writeback.
func copySynced(to, from string) error {
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		return err
	}
	names, err := os.ReadDir(to)
	if err != nil {
		return err
	}
	for _, n := range append(names, nil) {
		p := to
		if n != nil {
			p = filepath.Join(to, n.Name())
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// A new log is written full of zeros before any record, and a crash
// loses nothing acknowledged from it: the records up to the zeros are
// replayed, across logs that rotated, and nothing after them. The crash
// is a strict in-memory file system dropping every write not synced.
func TestZeroFilledLog(t *testing.T) {
	mem := vfs.NewStrictMem()
	if err := mem.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	if root, err := mem.OpenDir(""); err != nil || root.Sync() != nil {
		t.Fatalf("sync the root: %v", err)
	}
	s, err := openFS("db", Options{Sync: SyncBatch}, mem)
	if err != nil {
		t.Fatal(err)
	}
	logs := func() (n int) {
		names, _ := mem.List("db")
		for _, name := range names {
			if strings.HasSuffix(name, ".log") {
				n++
				fi, err := mem.Stat(mem.PathJoin("db", name))
				if err != nil || fi.Size() < walSize {
					t.Errorf("log %s: %v, size %d, want at least %d", name, err, fi.Size(), walSize)
				}
			}
		}
		return n
	}
	if logs() == 0 {
		t.Fatal("no log")
	}
	// Enough to fill the first memtables (256 KiB, doubling): the log
	// rotates onto new, filled files.
	const n = 2000
	payload := bytes.Repeat([]byte("p"), 500)
	var want []uint64
	for id := uint64(1); id <= n; id++ {
		s.Put(id, s.Encode(&sched.Record{Func: "f", Payload: payload}), nil)
		if id%3 == 0 {
			s.Delete(id)
		} else {
			want = append(want, id)
		}
	}
	if err := s.Save(&sched.Record{ID: n + 1, Func: "f"}); err != nil { // synced, and all before it
		t.Fatal(err)
	}
	want = append(want, n+1)
	if logs() < 2 {
		t.Fatal("the log never rotated")
	}
	mem.SetIgnoreSyncs(true)
	s.Put(n+2, s.Encode(&sched.Record{Func: "never synced"}), nil)
	s.Close()
	mem.ResetToSyncedState()
	mem.SetIgnoreSyncs(false)

	s, err = openFS("db", Options{Sync: SyncBatch}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := ids(t, s); !slices.Equal(got, want) {
		t.Fatalf("after the crash: %d ids, want %d (%v...)", len(got), len(want), got[:min(len(got), 10)])
	}
}

// heldFS lets a test hold the write-ahead log's next sync until it says
// so: the writer meanwhile holds back what is queued (pace), which comes
// out as the next batch once the sync is let go.
type heldFS struct {
	syncFS
	armed   atomic.Bool
	entered chan struct{} // a sync was held
	release chan struct{}
}

func newHeldFS() *heldFS {
	fs := &heldFS{syncFS: syncFS{FS: vfs.Default}, entered: make(chan struct{}), release: make(chan struct{})}
	fs.hook = func() {
		if fs.armed.CompareAndSwap(true, false) {
			fs.entered <- struct{}{}
			<-fs.release
		}
	}
	return fs
}

// hold puts a record as job id and returns once the log's sync of it
// has begun and is held, and the channel its answer comes on, after
// answered (if not nil) is called.
func (fs *heldFS) hold(t *testing.T, s *Store, id uint64, answered func()) chan error {
	t.Helper()
	fs.armed.Store(true)
	ch := make(chan error, 1)
	s.Put(id, s.Encode(&sched.Record{Func: "f"}), func(err error) {
		if answered != nil {
			answered()
		}
		ch <- err
	})
	select {
	case <-fs.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the log did not sync the record")
	}
	return ch
}

func wait(t *testing.T, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
}

// A job that ends while its record waits in the queue is never written:
// its put is left out, its answer still comes, in its turn, and a batch
// left with no put costs no sync. A job that ends after its record was
// written is deleted from the disk.
func TestEndedNeverWritten(t *testing.T) {
	dir := t.TempDir()
	fs := newHeldFS()
	s, err := openFS(dir, Options{Sync: SyncBatch}, fs)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []uint64
	answer := func(id uint64) {
		mu.Lock()
		order = append(order, id)
		mu.Unlock()
	}
	put := func(id uint64, answered chan error) {
		s.Put(id, s.Encode(&sched.Record{Func: "f"}), func(err error) {
			answer(id)
			answered <- err
		})
	}
	for _, tc := range []struct {
		name   string
		queued func(answered chan error) // while job 1's sync is held
		syncs  int64                     // in all, job 1's included
		stored string
	}{
		{"a put left out, another written", func(answered chan error) {
			put(2, answered)
			put(3, answered)
			s.Delete(2) // ended before its record was written
			s.Delete(1) // ended after
		}, 2, "[3]"},
		// Answered without a sync; the log is synced once the writer
		// has nothing queued, so a crash re-runs no finished job.
		{"no put left: synced once idle", func(answered chan error) {
			put(2, answered)
			put(3, answered)
			s.Delete(3)
			s.Delete(2)
			s.Delete(1)
		}, 2, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order = nil
			begun := fs.ended.Load()
			first := fs.hold(t, s, 1, func() { answer(1) })
			answered := make(chan error, 2)
			tc.queued(answered)
			fs.release <- struct{}{}
			wait(t, first)
			wait(t, answered)
			wait(t, answered)
			mu.Lock()
			got := fmt.Sprint(order)
			mu.Unlock()
			if got != "[1 2 3]" {
				t.Errorf("answered in order %s", got)
			}
			// The idle sync may come after the answers.
			for deadline := time.Now().Add(10 * time.Second); fs.ended.Load()-begun < tc.syncs && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond) // polling the file system's count
			}
			if n := fs.ended.Load() - begun; n != tc.syncs {
				t.Errorf("%d syncs, want %d", n, tc.syncs)
			}
			if got := fmt.Sprint(ids(t, s)); got != tc.stored {
				t.Errorf("stored %s, want %s", got, tc.stored)
			}
		})
	}
	if got := s.cancelled.Load(); got != 3 {
		t.Errorf("%d puts left out, want 3", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, SyncBatch)
	defer s.Close()
	if got := fmt.Sprint(ids(t, s)); got != "[]" {
		t.Fatalf("stored after a reopen: %s", got)
	}
}

// Records queued while the log syncs are written as one batch once the
// sync ends, and a flood larger than maxBatch as several.
func TestOneBatchPerSync(t *testing.T) {
	fs := newHeldFS()
	s, err := openFS(t.TempDir(), Options{Sync: SyncBatch}, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		payload int
		want    uint64
	}{
		{100, 1},                                // 200 records, 20 KB in all
		{64 << 10, 200/(maxBatch/(64<<10)) + 1}, // 12.8 MB: as many batches as it takes
	} {
		first := fs.hold(t, s, 1, nil)
		before := s.batches.Load()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 50 {
					id := uint64(1000*g + i + 10)
					s.Put(id, s.Encode(&sched.Record{Func: "f", Payload: make([]byte, tc.payload)}), nil)
				}
			})
		}
		wg.Wait()
		done := make(chan error, 1)
		s.Flush(func(err error) { done <- err })
		fs.release <- struct{}{}
		wait(t, first)
		wait(t, done)
		if got := s.batches.Load() - before; got != tc.want {
			t.Errorf("payload %d: 200 records in %d batches, want %d", tc.payload, got, tc.want)
		}
	}
}

// perBatch is how many records of a payload of n bytes fit in maxBatch.
func perBatch(n int) uint64 {
	return uint64(maxBatch / (keySize + n + len(encode(&sched.Record{Func: "f"})) + 2*binary.MaxVarintLen32 + 1))
}

// cancelEnded leaves out a put that a delete of the same job follows in
// the batch, and nothing else; needsSync is false for a batch with no put
// or flush left.
func TestCancelEnded(t *testing.T) {
	P, D, F := opPut, opDelete, opFlush
	type o struct {
		kind opKind
		id   uint64
	}
	for _, tc := range []struct {
		name string
		ops  []o
		want string // the kinds after, p d f or x (left out)
		sync bool
	}{
		{"put then delete", []o{{P, 1}, {D, 1}}, "xd", false},
		{"delete then put", []o{{D, 1}, {P, 1}}, "dp", true},
		{"puts of others stay", []o{{P, 1}, {P, 2}, {D, 1}}, "xpd", true},
		{"the latest put of a job", []o{{P, 1}, {P, 1}, {D, 1}}, "pxd", true},
		{"put, delete, put again", []o{{P, 1}, {D, 1}, {P, 1}}, "xdp", true},
		{"a flush keeps the sync", []o{{P, 1}, {F, 0}, {D, 1}}, "xfd", true},
		{"deletes alone", []o{{D, 1}, {D, 2}}, "dd", false},
		{"puts alone", []o{{P, 1}, {P, 2}}, "pp", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := make([]op, len(tc.ops))
			for i, x := range tc.ops {
				ops[i] = op{kind: x.kind, val: []byte("v")}
				putKey(&ops[i].key, x.id)
			}
			index := map[[keySize]byte]int{}
			n := cancelEnded(ops, index)
			var got []byte
			for _, x := range ops {
				got = append(got, map[opKind]byte{opPut: 'p', opDelete: 'd', opFlush: 'f', opCancelled: 'x'}[x.kind])
				if x.kind == opCancelled && x.val != nil {
					t.Error("a left-out put keeps its record")
				}
			}
			if string(got) != tc.want || n != strings.Count(tc.want, "x") {
				t.Errorf("kinds %s (%d left out), want %s", got, n, tc.want)
			}
			if len(index) != 0 {
				t.Error("index not emptied")
			}
			if needsSync(ops) != tc.sync {
				t.Errorf("needsSync %v", !tc.sync)
			}
		})
	}
}

// A crash of the process (kill -9) loses no acknowledged record in any
// sync mode: what the kernel holds is what the next start reads. The
// crash is a copy of the store's files, made while the store is open and
// idle, opened as a store of its own. The records fit in one block of
// Pebble's log, which its NoSync keeps in the process.
func TestAcknowledgedSurviveProcessCrash(t *testing.T) {
	for _, mode := range []Sync{SyncBatch, SyncAlways, SyncNever} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, mode)
			defer s.Close()
			const n = 100
			answered := make(chan error, n)
			var want []uint64
			for id := uint64(1); id <= n; id++ {
				s.Put(id, s.Encode(&sched.Record{Func: "f", Payload: []byte("acknowledged")}), func(err error) { answered <- err })
				want = append(want, id)
			}
			for range n {
				if err := <-answered; err != nil {
					t.Fatal(err)
				}
			}
			crashed := t.TempDir()
			names, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range names {
				if e.Name() == "LOCK" {
					continue
				}
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(crashed, e.Name()), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			after := open(t, crashed, mode)
			defer after.Close()
			if got := ids(t, after); !slices.Equal(got, want) {
				t.Fatalf("after the crash: %d records, want %d", len(got), len(want))
			}
		})
	}
}

// TestRecycledRecordsIntact: records are encoded into buffers the writer
// reuses once Pebble has copied them, so many submitters putting records
// of every size at once, some deleted again before they are written
// (cancelEnded), must find each record they kept whole after a reopen:
// no buffer given back while a batch still needed it, none lent twice.
func TestRecycledRecordsIntact(t *testing.T) {
	for _, mode := range []Sync{SyncBatch, SyncAlways, SyncNever} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, mode)
			const submitters, each = 4, 300
			payload := func(id uint64) []byte {
				// Sizes on both sides of what a lent buffer holds.
				n := int(id*37) % (2 * recBufSize)
				return bytes.Repeat(binary.BigEndian.AppendUint64(nil, id), n/8+1)[:n]
			}
			var wg sync.WaitGroup
			for g := range submitters {
				wg.Go(func() {
					answers := make(chan error, each)
					for i := range each {
						id := uint64(g*each + i + 1)
						s.Put(id, s.Encode(&sched.Record{Func: "f", Unique: fmt.Sprint(id), Payload: payload(id)}),
							func(err error) { answers <- err })
						if id%5 == 0 {
							s.Delete(id) // often before it is written
						}
					}
					for range each {
						if err := <-answers; err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, dir, mode)
			defer s.Close()
			n := 0
			if err := s.Load(func(r *sched.Record) error {
				n++
				if r.ID%5 == 0 {
					return fmt.Errorf("job %d was deleted", r.ID)
				}
				if r.Func != "f" || r.Unique != fmt.Sprint(r.ID) || !bytes.Equal(r.Payload, payload(r.ID)) {
					return fmt.Errorf("job %d: func %q unique %q payload of %d bytes, want %d", r.ID, r.Func, r.Unique, len(r.Payload), len(payload(r.ID)))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if want := submitters * each * 4 / 5; n != want {
				t.Fatalf("%d records, want %d", n, want)
			}
		})
	}
}
