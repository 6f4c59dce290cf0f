package replicated

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/hashicorp/raft"
)

// testSegSize makes segments of a few entries each.
const testSegSize = 4 << 10

func openSegs(t testing.TB, dir string) *segments {
	t.Helper()
	s, err := openSegments(dir, testSegSize, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// body is entry i's body, of a length that varies with i and gen.
func body(i uint64, gen int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("%d.%d;", gen, i)), 20+int(i%7)*30)
}

// appendRange appends entries lo..hi of generation gen, n at a time.
func appendRange(t testing.TB, s *segments, lo, hi uint64, gen, n int) {
	t.Helper()
	for i := lo; i <= hi; {
		var bodies [][]byte
		for k := 0; k < n && i+uint64(k) <= hi; k++ {
			bodies = append(bodies, body(i+uint64(k), gen))
		}
		if err := s.append(i, bodies); err != nil {
			t.Fatal(err)
		}
		i += uint64(len(bodies))
	}
}

// check says whether the log is lo..hi, each entry of generation gen
// (gens[i] if set).
func check(t testing.TB, s *segments, lo, hi uint64, gen int, gens map[uint64]int) {
	t.Helper()
	if f, l := s.bounds(); f != lo || l != hi {
		t.Fatalf("log %d..%d, want %d..%d", f, l, lo, hi)
	}
	var b []byte
	for i := lo; i <= hi && lo != 0; i++ {
		want := body(i, gen)
		if g, ok := gens[i]; ok {
			want = body(i, g)
		}
		ok, err := s.read(i, &b)
		if err != nil || !ok || !bytes.Equal(b, want) {
			t.Fatalf("entry %d: %q, %v, %v; want %q", i, b, ok, err, want)
		}
	}
	for _, i := range []uint64{lo - 1, hi + 1} {
		if ok, err := s.read(i, &b); ok || err != nil {
			t.Errorf("entry %d outside %d..%d: %v, %v", i, lo, hi, ok, err)
		}
	}
}

func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestSegmentsAppendReopen(t *testing.T) {
	for _, n := range []int{1, 3, 40} {
		t.Run(fmt.Sprint(n, " a batch"), func(t *testing.T) {
			dir := t.TempDir()
			s := openSegs(t, dir)
			appendRange(t, s, 1, 60, 0, n)
			check(t, s, 1, 60, 0, nil)
			if got := len(segFiles(t, dir)); got < 5 {
				t.Errorf("%d segments of %d bytes for 60 entries of up to 2.6 KB", got, testSegSize)
			}
			if err := s.append(62, [][]byte{body(62, 0)}); err == nil {
				t.Error("an entry after a gap was taken")
			}
			s.close()
			s = openSegs(t, dir)
			defer s.close()
			check(t, s, 1, 60, 0, nil)
			appendRange(t, s, 61, 70, 0, n)
			check(t, s, 1, 70, 0, nil)
		})
	}
}

// An entry larger than a segment gets one of its own, and the log goes
// on after it.
func TestSegmentsLargeEntry(t *testing.T) {
	dir := t.TempDir()
	s := openSegs(t, dir)
	big := bytes.Repeat([]byte("L"), 3*testSegSize)
	if err := s.append(5, [][]byte{body(5, 0), big, body(7, 0)}); err != nil {
		t.Fatal(err)
	}
	s.close()
	s = openSegs(t, dir)
	defer s.close()
	var b []byte
	if ok, err := s.read(6, &b); !ok || err != nil || !bytes.Equal(b, big) {
		t.Fatalf("the large entry: %d bytes, %v, %v", len(b), ok, err)
	}
	for _, i := range []uint64{5, 7} {
		if ok, err := s.read(i, &b); !ok || err != nil || !bytes.Equal(b, body(i, 0)) {
			t.Fatalf("entry %d: %q, %v, %v", i, b, ok, err)
		}
	}
	if f, l := s.bounds(); f != 5 || l != 7 {
		t.Fatalf("log %d..%d, want 5..7", f, l)
	}
}

// What follows the last entry after a crash (a torn write, whose later
// entries may check) is never read as part of the log, even once new
// entries of the same lengths fill the space before it.
func TestSegmentsTornTail(t *testing.T) {
	dir := t.TempDir()
	s := openSegs(t, dir)
	appendRange(t, s, 1, 3, 0, 3)
	last := s.files[len(s.files)-1]
	end := last.end
	s.close()
	// The crash: entries 4 and 5 of generation 1 written, 4 torn.
	torn := appendEntry(appendEntry(nil, 4, body(4, 1)), 5, body(5, 1))
	torn[segHeader+3] ^= 0xff
	f, err := os.OpenFile(last.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn, end); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s = openSegs(t, dir)
	check(t, s, 1, 3, 0, nil)
	// Generation 2's entry 4 has the length of generation 1's.
	if err := s.append(4, [][]byte{body(4, 1)}); err != nil {
		t.Fatal(err)
	}
	s.close()
	s = openSegs(t, dir)
	defer s.close()
	check(t, s, 1, 4, 0, map[uint64]int{4: 1})
}

// A damaged segment before the last is an error, not a shorter log.
func TestSegmentsDamaged(t *testing.T) {
	dir := t.TempDir()
	s := openSegs(t, dir)
	appendRange(t, s, 1, 30, 0, 1)
	first := s.files[0].path
	s.close()
	f, err := os.OpenFile(first, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, segHeader+1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if s, err := openSegments(dir, testSegSize, nil, nil); err == nil {
		s.close()
		t.Fatal("a damaged first segment opened")
	} else if !strings.Contains(err.Error(), filepath.Base(first)) {
		t.Errorf("the error does not name the segment: %v", err)
	}
}

func TestSegmentsDeleteRange(t *testing.T) {
	dir := t.TempDir()
	s := openSegs(t, dir)
	appendRange(t, s, 1, 60, 0, 4)
	files := len(segFiles(t, dir))

	// A suffix a new leader overrules, across segments, then written
	// again: what was cut is gone for good.
	if err := s.deleteRange(25, 60); err != nil {
		t.Fatal(err)
	}
	check(t, s, 1, 24, 0, nil)
	if got := len(segFiles(t, dir)); got >= files {
		t.Errorf("%d segments after cutting 36 of 60 entries, %d before", got, files)
	}
	appendRange(t, s, 25, 40, 2, 2)
	gens := map[uint64]int{}
	for i := uint64(25); i <= 40; i++ {
		gens[i] = 2
	}
	s.close()
	s = openSegs(t, dir)
	check(t, s, 1, 40, 0, gens)

	// A prefix: the segments it covers whole go.
	before := segFiles(t, dir)
	if err := s.deleteRange(1, 20); err != nil {
		t.Fatal(err)
	}
	check(t, s, 21, 40, 0, gens)
	after := segFiles(t, dir)
	if len(after) >= len(before) || after[0] == before[0] {
		t.Errorf("segments %v after dropping 1..20, %v before", after, before)
	}
	s.close()
	s = openSegs(t, dir)
	if f, l := s.bounds(); f > 21 || l != 40 {
		t.Fatalf("reopened: %d..%d, want 21 at most ..40", f, l)
	}

	// Everything: the log is empty, and takes any first index after.
	if err := s.deleteRange(1, 40); err != nil {
		t.Fatal(err)
	}
	check(t, s, 0, 0, 0, nil)
	if got := segFiles(t, dir); len(got) != 0 {
		t.Errorf("segments left: %v", got)
	}
	appendRange(t, s, 1000, 1010, 3, 5)
	s.close()
	s = openSegs(t, dir)
	defer s.close()
	check(t, s, 1000, 1010, 3, nil)
}

// A log kept in Pebble by an earlier version moves to the segments.
func TestLogStoreMovesEntries(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	const last = 7 + 150 // over two of moveEntries' chunks
	for i := uint64(7); i <= last; i++ {
		v := encodeLog(nil, &raft.Log{Term: 2, Type: raft.LogCommand, Data: []byte{byte(i)}})
		if err := db.Set(logKey(i), v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Set([]byte("sCurrentTerm"), []byte{0, 0, 0, 0, 0, 0, 0, 2}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for range 2 { // moved, then already moved
		s := openLogs(t, dir)
		if f, l := edges(t, s); f != 7 || l != last {
			t.Fatalf("log %d..%d, want 7..%d", f, l, last)
		}
		for _, i := range []uint64{7, 9, 70, 71, 135, last} {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil || l.Term != 2 || l.Data[0] != byte(i) {
				t.Fatalf("entry %d: %+v, %v", i, l, err)
			}
		}
		if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 2 {
			t.Fatalf("term %d, %v", v, err)
		}
		it, _ := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{keyLog}, UpperBound: []byte{keyLog + 1}})
		if it.First() {
			t.Errorf("entries left in Pebble")
		}
		it.Close()
		s.Close()
	}
}

func logKey(index uint64) []byte {
	return append([]byte{keyLog}, byte(index>>56), byte(index>>48), byte(index>>40), byte(index>>32),
		byte(index>>24), byte(index>>16), byte(index>>8), byte(index))
}

// FuzzSegment opens a last segment of any bytes: no panic, a log whose
// every entry reads, and one that takes the next entry and keeps it.
func FuzzSegment(f *testing.F) {
	seed := appendEntry(appendEntry(nil, 1, body(1, 0)), 2, body(2, 0))
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add(append(appendEntry(nil, 1, []byte("x")), appendEntry(nil, 3, []byte("y"))...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segName(1)), b, 0o640); err != nil {
			t.Fatal(err)
		}
		s, err := openSegments(dir, testSegSize, nil, nil)
		if err != nil {
			t.Fatal(err) // the last segment is never an error
		}
		first, last := s.bounds()
		var got []byte
		for i := first; i <= last && first != 0; i++ {
			if ok, err := s.read(i, &got); !ok || err != nil {
				t.Fatalf("entry %d of %d..%d: %v, %v", i, first, last, ok, err)
			}
		}
		next := last + 1
		if last == 0 {
			next = 1
		}
		if err := s.append(next, [][]byte{[]byte("next")}); err != nil {
			t.Fatal(err)
		}
		s.close()
		s = openSegs(t, dir)
		defer s.close()
		if _, l := s.bounds(); l != next {
			t.Fatalf("last %d after appending %d", l, next)
		}
		if ok, err := s.read(next, &got); !ok || err != nil || string(got) != "next" {
			t.Fatalf("entry %d: %q, %v, %v", next, got, ok, err)
		}
	})
}

// faultFS opens the log's files on the file system, counts those open,
// and fails the nth write or sync from when a test arms it (1: the next)
// of the files open then, as a disk that returns EIO does. Files opened
// after (the spare segment the log makes in the background) are left
// alone, so that which call fails does not depend on that goroutine.
type faultFS struct {
	open                atomic.Int64
	gen                 atomic.Int64 // of the last arming
	failWrite, failSync atomic.Int64
}

func (fs *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	fs.open.Add(1)
	return &faultFile{File: f, fs: fs, gen: fs.gen.Load()}, nil
}

// arm fails the nth call counted by n of the files open now.
func (fs *faultFS) arm(n *atomic.Int64, nth int64) {
	fs.gen.Add(1)
	n.Store(nth)
}

type faultFile struct {
	File
	fs     *faultFS
	gen    int64
	closed atomic.Bool
}

// due counts an armed countdown down, and says whether this call fails.
func (f *faultFile) due(n *atomic.Int64) bool {
	if f.gen >= f.fs.gen.Load() {
		return false
	}
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return v == 1
		}
	}
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	if f.due(&f.fs.failWrite) {
		return 0, syscall.EIO
	}
	return f.File.WriteAt(b, off)
}

func (f *faultFile) Datasync() error {
	if f.due(&f.fs.failSync) {
		return syscall.EIO
	}
	return f.File.Datasync()
}

func (f *faultFile) Close() error {
	if !f.closed.Swap(true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// openFaulty opens segments in dir whose files are fs's, and waits for
// the spare segment to be made, so that no sync happens behind the test.
func openFaulty(t *testing.T, dir string, fs *faultFS, onFail func(error)) *segments {
	t.Helper()
	s, err := openSegments(dir, testSegSize, fs.OpenFile, onFail)
	if err != nil {
		t.Fatal(err)
	}
	s.filling.Wait()
	return s
}

// A write that fails is not the end of the log, but the segment the
// append made for it goes: not left open (nor on disk) outside the log,
// where the next append would make it again.
func TestSegmentsFailedWrite(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	s := openFaulty(t, dir, fs, nil)
	defer s.close()
	appendRange(t, s, 1, 2, 0, 2)
	s.filling.Wait()
	before := fs.open.Load() // the segment and the spare
	// Entries that fill the segment and go on in a new one (the spare):
	// the second write, the new segment's, fails.
	batch := [][]byte{body(3, 0), bytes.Repeat([]byte("x"), testSegSize-200)}
	fs.arm(&fs.failWrite, 2)
	if err := s.append(3, batch); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failed write: %v", err)
	}
	s.filling.Wait() // the next spare
	if got := fs.open.Load(); got != before {
		t.Errorf("%d files open after the failed append, %d before", got, before)
	}
	if got := len(segFiles(t, dir)); got != 1 {
		t.Errorf("%d segment files after the failed append, want 1", got)
	}
	if err := s.fault(); err != nil {
		t.Errorf("a failed write failed the log: %v", err)
	}
	if err := s.append(3, batch); err != nil {
		t.Fatal(err)
	}
	var b []byte
	if ok, err := s.read(4, &b); !ok || err != nil || !bytes.Equal(b, batch[1]) {
		t.Fatalf("entry 4 after the retried append: %d bytes, %v, %v", len(b), ok, err)
	}
	if f, l := s.bounds(); f != 1 || l != 4 {
		t.Errorf("log %d..%d, want 1..4", f, l)
	}
}

// A sync that fails ends the log's writes for good, although the disk's
// next sync would succeed: every append and deletion after it fails, none
// writes, and onFail hears of it once. The segment the failed append made
// is closed and removed; what was synced before reads as it was.
func TestSegmentsFailedSync(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	var fails []error
	s := openFaulty(t, dir, fs, func(err error) { fails = append(fails, err) })
	appendRange(t, s, 1, 2, 0, 2)
	s.filling.Wait()
	before := fs.open.Load()
	batch := [][]byte{body(3, 0), bytes.Repeat([]byte("x"), testSegSize-200)}
	fs.arm(&fs.failSync, 1) // the first segment's, after both writes
	if err := s.append(3, batch); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failed sync: %v", err)
	}
	s.filling.Wait()
	if got := fs.open.Load(); got != before {
		t.Errorf("%d files open after the failed append, %d before", got, before)
	}
	if got := len(segFiles(t, dir)); got != 1 {
		t.Errorf("%d segment files after the failed append, want 1", got)
	}
	// The disk syncs again; the log still takes nothing.
	size := func() int64 {
		fi, err := os.Stat(segFiles(t, dir)[0])
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	was := size()
	if err := s.append(3, [][]byte{body(3, 0)}); !errors.Is(err, ErrLogFailed) {
		t.Errorf("append after a failed sync: %v", err)
	}
	if err := s.deleteRange(2, 2); !errors.Is(err, ErrLogFailed) {
		t.Errorf("deleteRange after a failed sync: %v", err)
	}
	if size() != was {
		t.Error("the log was written after its failed sync")
	}
	check(t, s, 1, 2, 0, nil)
	if len(fails) != 1 || !errors.Is(fails[0], ErrLogFailed) || !errors.Is(s.fault(), syscall.EIO) {
		t.Errorf("onFail told %v; fault %v", fails, s.fault())
	}
	s.close()
	// Reopened (the node restarted), the log takes writes.
	s = openSegs(t, dir)
	defer s.close()
	check(t, s, 1, 2, 0, nil)
	appendRange(t, s, 3, 4, 0, 2)
	check(t, s, 1, 4, 0, nil)
}
