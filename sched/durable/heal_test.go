package durable

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/cockroachdb/pebble/vfs/errorfs"

	"switchyard/sched"
)

// diskFS is a disk that fills up: with full set, writes to the files
// whose names contain full's text fail with ENOSPC; with dead, every
// write does (the probe's too).
type diskFS struct {
	vfs.FS
	full atomic.Pointer[string]
	dead atomic.Bool
}

func newDiskFS() *diskFS {
	d := &diskFS{}
	d.FS = errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op, path string) error {
		if op.OpKind() != errorfs.OpKindWrite {
			return nil
		}
		if d.dead.Load() {
			return syscall.ENOSPC
		}
		if p := d.full.Load(); p != nil && strings.Contains(filepath.Base(path), *p) {
			return syscall.ENOSPC
		}
		return nil
	}))
	return d
}

func (d *diskFS) fill(name string) { d.full.Store(&name) }
func (d *diskFS) room()            { d.full.Store(nil); d.dead.Store(false) }

// fastHeal makes the healer try every few milliseconds for the test.
func fastHeal(t *testing.T) {
	first, most := healFirst, healMax
	healFirst, healMax = 5*time.Millisecond, 50*time.Millisecond
	t.Cleanup(func() { healFirst, healMax = first, most })
}

// untilFailed puts records of 4 KiB, 64 at a time, until one fails, and
// returns that error; the ids acknowledged are added to acked.
func untilFailed(t *testing.T, s *Store, next *uint64, acked map[uint64]bool) error {
	t.Helper()
	payload := make([]byte, 4096)
	for {
		if *next > 40000 {
			t.Fatal("160 MB written, no write failed")
		}
		answers := make(chan [2]any, 64)
		for range 64 {
			*next++
			id := *next
			s.Put(id, s.Encode(&sched.Record{Func: "f", Payload: payload}), func(err error) { answers <- [2]any{id, err} })
		}
		var failed error
		for range 64 {
			select {
			case a := <-answers:
				if err, _ := a[1].(error); err != nil {
					if failed == nil {
						failed = err
					}
				} else {
					acked[a[0].(uint64)] = true
				}
			case <-time.After(30 * time.Second):
				t.Fatal("a write unanswered after 30s")
			}
		}
		if failed != nil {
			return failed
		}
	}
}

// waitHealth waits until the store's health satisfies ok.
func waitHealth(t *testing.T, s *Store, what string, ok func(Health) bool) Health {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ch := s.Watch()
		h := s.Health()
		if ok(h) {
			return h
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Millisecond): // reasons change without a notice
		case <-deadline:
			t.Fatalf("%s: not after 30s; health %+v", what, h)
		}
	}
}

// A write the disk refuses, whichever of Pebble's files it was for, takes
// the store down, not the process: that write and every later one are
// answered with an error saying why, and Health says so. Once the disk
// has room, the store comes back by itself, after failed attempts while
// the disk is still full: nothing acknowledged is lost, nothing refused
// after the failure is there, and new writes are kept, across a kill -9
// and a clean restart.
func TestFailedWriteHeals(t *testing.T) {
	fastHeal(t)
	for _, tc := range []struct {
		name string
		file string // in the name of the file whose writes fail
	}{
		{"log", ".log"},           // the write-ahead log: a commit fails
		{"sstable", ".sst"},       // a flush fails on Pebble's goroutine; commits would wait for it
		{"manifest", "MANIFEST-"}, // a flush's MANIFEST edit fails: Pebble's Fatalf
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			disk := newDiskFS()
			s, err := openFS(dir, Options{Sync: SyncBatch}, disk)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			acked := map[uint64]bool{}
			for id := uint64(1); id <= 10; id++ {
				if err := s.Save(&sched.Record{ID: id, Func: "f"}); err != nil {
					t.Fatal(err)
				}
				acked[id] = true
			}
			// All writes fail while the store fails: the healer's probes
			// too, so it cannot come back before the test lets it.
			disk.dead.Store(true)
			disk.fill(tc.file)
			disk.dead.Store(false)
			next := uint64(10)
			failed := untilFailed(t, s, &next, acked)
			disk.dead.Store(true)
			if !errors.Is(failed, syscall.ENOSPC) || !strings.Contains(failed.Error(), dir) {
				t.Errorf("the failed write: %v; want ENOSPC and the directory", failed)
			}
			h := s.Health()
			if h.Failure == nil || !errors.Is(h.Failure, syscall.ENOSPC) || h.WriteErrors == 0 {
				t.Errorf("health after the failure: %+v", h)
			}
			const refused = 1 << 40
			err = s.Save(&sched.Record{ID: refused, Func: "f"})
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "takes no writes") {
				t.Errorf("a write after the failure: %v; want ENOSPC and that the store is down", err)
			}

			// The directory takes writes, the store's kind of file not yet:
			// the healer's probe passes, opening the store again fails.
			disk.dead.Store(false)
			errs := h.WriteErrors
			waitHealth(t, s, "a failed attempt to open the store again", func(h Health) bool { return h.WriteErrors > errs })
			if err := s.Save(&sched.Record{ID: refused + 1, Func: "f"}); err == nil {
				t.Error("a write taken while the disk was still full")
			}

			disk.room()
			h = waitHealth(t, s, "the store back up", func(h Health) bool { return h.Failure == nil })
			if h.Recoveries != 1 {
				t.Errorf("health once back: %+v", h)
			}
			const after = 1 << 41
			if err := s.Save(&sched.Record{ID: after, Func: "f"}); err != nil {
				t.Fatalf("a write once back: %v", err)
			}
			for _, crashed := range []bool{true, false} {
				d := dir
				if crashed {
					d = crashCopy(t, s, dir)
				} else if err := s.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				s2 := open(t, d, SyncBatch)
				got := map[uint64]bool{}
				for _, id := range ids(t, s2) {
					got[id] = true
				}
				s2.Close()
				for id := range acked {
					if !got[id] {
						t.Fatalf("crashed %v: acknowledged job %d lost (%d acknowledged, %d kept)", crashed, id, len(acked), len(got))
					}
				}
				if got[refused] || got[refused+1] {
					t.Errorf("crashed %v: a write refused while the store was down was kept", crashed)
				}
				if !got[after] {
					t.Errorf("crashed %v: the write made once back is lost", crashed)
				}
			}
			t.Logf("%d acknowledged; failed with %v; %+v", len(acked), failed, h)
		})
	}
}

type nopWaker struct{}

func (nopWaker) Wake(any) {}

// A store that comes back makes its records those of the scheduler's
// live background jobs: a job that ended while the store was down (its
// delete dropped) is deleted, one requeued meanwhile (its rewrite
// dropped) rewritten, and a refused submit whose record reached the log
// is removed; no acknowledged job is lost or duplicated. A submit that
// joins an acknowledged job and is refused leaves that job alone.
func TestHealResyncs(t *testing.T) {
	fastHeal(t)
	for _, file := range []string{".log", ".sst", "MANIFEST-"} {
		t.Run(file, func(t *testing.T) { testHealResyncs(t, file) })
	}
}

func testHealResyncs(t *testing.T, file string) {
	dir := t.TempDir()
	disk := newDiskFS()
	st, err := openFS(dir, Options{Sync: SyncBatch}, disk)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := sched.New(sched.Config{Tick: -1, Store: st})
	defer s.Close()
	c := s.NewClient(nil)
	submit := func(fn, unique string) (uint64, error) {
		return c.Submit(&sched.SubmitReq{Func: []byte(fn), Unique: []byte(unique), Payload: make([]byte, 4096), Background: true})
	}
	for i := range 20 {
		if _, err := submit("f", fmt.Sprint("u", i)); err != nil {
			t.Fatal(err)
		}
	}
	disk.fill(file)
	refused := 0
	for i := 0; ; i++ {
		if i == 40000 {
			t.Fatal("no submit refused")
		}
		if _, err := submit("g", fmt.Sprint("g", i)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			refused++
			break
		}
	}
	disk.dead.Store(true)
	for range 5 {
		if _, err := submit("g", fmt.Sprint("refused", refused)); err == nil {
			t.Fatal("a submit taken while the store is down")
		}
		refused++
	}
	// A submit joining a stored job is refused, and the job stays.
	if _, err := submit("f", "u19"); err == nil {
		t.Fatal("a joining submit taken while the store is down")
	}
	if _, ok := s.Find([]byte("f"), []byte("u19")); !ok {
		t.Fatal("a refused joining submit withdrew the job it joined")
	}
	// While the store is down, a worker runs five stored jobs to the end
	// and puts one back with a delay.
	w := s.NewWorker(nopWaker{})
	w.CanDo([]byte("f"), 0)
	for range 5 {
		j := w.Grab()
		if err := w.Update(j.ID(), &sched.Update{Kind: sched.Complete}); err != nil {
			t.Fatal(err)
		}
	}
	j := w.Grab()
	if err := w.Requeue(j.ID(), sched.RequeueReq{Delay: time.Hour, Step: 7}); err != nil {
		t.Fatal(err)
	}
	requeued := j.ID()
	var stats sched.Stats
	s.Stats(&stats)
	if stats.Refused[sched.RefusedStore] != uint64(refused+1) {
		t.Errorf("refused submits counted: %d, want %d", stats.Refused[sched.RefusedStore], refused+1)
	}

	disk.room()
	waitHealth(t, st, "the store back up", func(h Health) bool { return h.Failure == nil })
	live := func() []uint64 {
		var out []uint64
		for _, j := range s.Jobs() {
			if j.Background {
				out = append(out, j.ID)
			}
		}
		slices.Sort(out)
		return out
	}
	want := live()
	if len(want) == 0 || !slices.Contains(want, requeued) {
		t.Fatalf("live jobs: %v", want)
	}
	crashed := crashCopy(t, st, dir)
	after := open(t, crashed, SyncBatch)
	defer after.Close()
	if got := ids(t, after); !slices.Equal(got, want) {
		t.Fatalf("stored after the recovery: %v\nwant the live jobs: %v", got, want)
	}
	if err := after.Load(func(r *sched.Record) error {
		if r.ID == requeued && (r.Counter != 7 || r.When == 0) {
			t.Errorf("the requeued job's record: counter %d, when %d", r.Counter, r.When)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// New submits are stored again.
	if _, err := submit("f", "after"); err != nil {
		t.Fatal(err)
	}
}
