package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
)

// The mark reads back as written last, from either slot: a slot spoilt
// (a write cut short) leaves the one before; both spoilt, or none there,
// is an error; a missing file is no mark. Older marks never overwrite a
// newer one, whichever goroutine writes them.
func TestMark(t *testing.T) {
	for _, fsys := range []struct {
		name string
		fs   vfs.FS
	}{{"mapped", vfs.Default}, {"written", vfs.NewMem()}} {
		t.Run(fsys.name, func(t *testing.T) {
			fs := fsys.fs
			dir := t.TempDir()
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if _, found, err := readMark(fs, dir); found || err != nil {
				t.Fatalf("no mark: found %v, %v", found, err)
			}
			mf, err := createMark(fs, dir, mark{seq: 1, jobs: 10})
			if err != nil {
				t.Fatal(err)
			}
			if (mf.mem != nil) != (fsys.name == "mapped") {
				t.Fatalf("mapped: %v", mf.mem != nil)
			}
			for _, m := range []mark{{seq: 2, jobs: 11, walNum: 4, walSynced: 100}, {seq: 3, jobs: 12, walNum: 4, walSynced: 200}} {
				if err := mf.advance(m); err != nil {
					t.Fatal(err)
				}
			}
			if err := mf.advance(mark{seq: 2, jobs: 99}); err != nil { // older: ignored
				t.Fatal(err)
			}
			if err := mf.refresh(syncedTo{num: 7, synced: 300}); err != nil {
				t.Fatal(err)
			}
			want := mark{seq: 3, jobs: 12, walNum: 4, walSynced: 200, manNum: 7, manSynced: 300}
			if got, found, err := readMark(fs, dir); !found || err != nil || got != want {
				t.Fatalf("read %+v, %v, %v; want %+v", got, found, err, want)
			}
			if err := mf.close(); err != nil {
				t.Fatal(err)
			}
			// Opened again, the mark goes on from the write read back.
			if mf, err = openMark(fs, dir, want); err != nil {
				t.Fatal(err)
			}
			want.seq = 4
			if err := mf.advance(want); err != nil {
				t.Fatal(err)
			}
			if got, _, err := readMark(fs, dir); err != nil || got != want {
				t.Fatalf("after a reopen: %+v, %v; want %+v", got, err, want)
			}
			last := mf.slot
			if err := mf.close(); err != nil {
				t.Fatal(err)
			}
			spoil := func(slot int) {
				f, err := fs.OpenReadWrite(fs.PathJoin(dir, markName))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.WriteAt([]byte("torn"), int64(slot*markSlot+20)); err != nil {
					t.Fatal(err)
				}
			}
			spoil(last)
			before := mark{seq: 3, jobs: 12, walNum: 4, walSynced: 200, manNum: 7, manSynced: 300} // before the reopen
			if got, _, err := readMark(fs, dir); err != nil || got != before {
				t.Fatalf("the last slot spoilt: %+v, %v; want the mark before, %+v", got, err, before)
			}
			spoil(1 - last)
			if _, found, err := readMark(fs, dir); !found || !errors.Is(err, errMarkDamaged) {
				t.Fatalf("both slots spoilt: found %v, %v", found, err)
			}
		})
	}
}

// A mark file cut to one slot is not mapped (a page past its end would
// fault): it is written with WriteAt, which makes it whole again.
func TestMarkShortFile(t *testing.T) {
	dir := t.TempDir()
	mf, err := createMark(vfs.Default, dir, mark{seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	mf.close()
	if err := os.Truncate(filepath.Join(dir, markName), markSlot); err != nil {
		t.Fatal(err)
	}
	m, _, err := readMark(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	mf, err = openMark(vfs.Default, dir, m)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.close()
	if mf.mem != nil {
		t.Fatal("a short mark file mapped")
	}
	if err := mf.advance(mark{seq: 2}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := readMark(vfs.Default, dir); err != nil || got.seq != 2 {
		t.Fatalf("read %+v, %v", got, err)
	}
}

// FuzzMark: whatever a mark file holds, reading it neither panics nor
// takes a spoilt slot; a mark written reads back.
func FuzzMark(f *testing.F) {
	var slot [markSlot]byte
	mark{seq: 3, jobs: 9, walNum: 4, walSynced: 100, manNum: 2, manSynced: 50}.encode(&slot, 7)
	f.Add(append(slot[:], slot[:]...), uint64(1), uint64(2))
	f.Add(slot[:], uint64(0), uint64(0))
	f.Add([]byte("SYMK\x01"), uint64(5), uint64(5))
	f.Fuzz(func(t *testing.T, b []byte, seq, gen uint64) {
		m, g, ok := readSlots(b)
		if ok {
			// What was read is what a slot said, whole.
			var again [markSlot]byte
			m.encode(&again, g)
			found := false
			for s := 0; s < 2 && (s+1)*markSlot <= len(b); s++ {
				found = found || string(b[s*markSlot:s*markSlot+markBody+4]) == string(again[:markBody+4])
			}
			if !found {
				t.Fatalf("read %+v (write %d), which no slot holds", m, g)
			}
		}
		want := mark{seq: seq, jobs: gen}
		var w [markSlot]byte
		want.encode(&w, gen)
		if got, g, ok := decodeMark(w[:]); !ok || got != want || g != gen {
			t.Fatalf("round trip: %+v %d %v, want %+v %d", got, g, ok, want, gen)
		}
	})
}
