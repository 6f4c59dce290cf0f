package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

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
// ended. The log syncs one at a time.
type syncFS struct {
	vfs.FS
	begun, ended atomic.Int64
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

func (f *syncFile) Sync() error     { return f.fs.count(f.File.Sync) }
func (f *syncFile) SyncData() error { return f.fs.count(f.File.SyncData) }

func (fs *syncFS) count(sync func() error) error {
	fs.begun.Add(1)
	err := sync()
	fs.ended.Add(1)
	return err
}

// openSyncs opens a store whose log syncs are counted.
func openSyncs(t testing.TB, dir string, mode Sync) (*Store, *syncFS) {
	t.Helper()
	fs := &syncFS{FS: vfs.Default}
	s, err := openFS(dir, mode, fs)
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

// A damaged store stops the start with an error naming it.
func TestCorruptStore(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, SyncBatch)
	for i := uint64(1); i <= 100; i++ {
		s.Save(&sched.Record{ID: i, Func: "f"})
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(files) == 0 {
		t.Fatal("no MANIFEST")
	}
	for _, f := range files {
		os.WriteFile(f, []byte("this is not a manifest"), 0o644)
	}
	if _, err := Open(dir, SyncBatch); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("open of a corrupt store: %v", err)
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
