package replicated

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkRecords compares r with the map it should equal, and its accounting with
// what its chunks hold.
func checkRecords(t *testing.T, r *records, want map[uint64][]byte) {
	t.Helper()
	if r.Len() != len(want) {
		t.Fatalf("%d records, want %d", r.Len(), len(want))
	}
	size := 0
	for id, w := range want {
		got, ok := r.get(id)
		if !ok || !bytes.Equal(got, w) {
			t.Fatalf("record %d: %q, %v; want %q", id, got, ok, w)
		}
		size += len(w)
	}
	if r.bytes != size {
		t.Fatalf("bytes %d, want %d", r.bytes, size)
	}
	live := make([]int, len(r.chunks))
	r.ids.each(func(_ uint64, s span) {
		if s.n > 0 {
			live[s.chunk] += s.n
		}
	})
	held := 0
	for i, c := range r.chunks {
		if c == nil {
			if live[i] != 0 {
				t.Fatalf("chunk %d dropped with %d live bytes", i, live[i])
			}
			continue
		}
		held += cap(c)
		if live[i] != r.live[i] {
			t.Fatalf("chunk %d: live %d, counted %d", i, r.live[i], live[i])
		}
		if live[i] == 0 && i != r.cur {
			t.Fatalf("chunk %d held with nothing live", i)
		}
	}
	if held != r.held {
		t.Fatalf("held %d, chunks hold %d", r.held, held)
	}
}

func TestRecords(t *testing.T) {
	big := bytes.Repeat([]byte("b"), ownChunk)
	cases := []struct {
		name string
		ops  func(r *records, want map[uint64][]byte)
	}{
		{"put and replace", func(r *records, want map[uint64][]byte) {
			for id, v := range map[uint64]string{1: "one", 2: "two", 1 << 40: "far"} {
				r.put(id, []byte(v))
				want[id] = []byte(v)
			}
			r.put(1, []byte("one again"))
			want[1] = []byte("one again")
		}},
		{"delete, and delete of none", func(r *records, want map[uint64][]byte) {
			r.put(1, []byte("one"))
			r.put(2, []byte("two"))
			want[2] = []byte("two")
			r.delete(1)
			r.delete(99)
		}},
		{"an empty record", func(r *records, want map[uint64][]byte) {
			r.put(1, nil)
			want[1] = nil
		}},
		{"empty records hold no chunk", func(r *records, want map[uint64][]byte) {
			r.put(1, []byte("x"))
			r.put(2, nil)
			r.delete(1)
			for id := uint64(10); id < 1510; id++ { // into a second chunk: the first is dropped
				r.put(id, make([]byte, 1000))
				r.delete(id)
			}
			r.delete(2)
			r.put(3, make([]byte, 1000))
			r.put(4, make([]byte, ownChunk))
			want[3], want[4] = make([]byte, 1000), make([]byte, ownChunk)
			if len(r.chunks) != 2+len(r.free) { // the large record's and the current one
				t.Errorf("%d chunk slots, %d free: a slot is free twice", len(r.chunks), len(r.free))
			}
		}},
		{"a large record has its chunk, dropped with it", func(r *records, want map[uint64][]byte) {
			r.put(1, big)
			r.put(2, []byte("small"))
			want[2] = []byte("small")
			if len(r.chunks) != 2 {
				t.Errorf("%d chunks, want the large record's and one", len(r.chunks))
			}
			r.delete(1)
			if r.held != chunkSize {
				t.Errorf("held %d after the large record went", r.held)
			}
		}},
		{"chunks emptied are dropped and their slots reused", func(r *records, want map[uint64][]byte) {
			rec := make([]byte, 1000)
			for id := range uint64(5000) { // about five chunks
				r.put(id, rec)
			}
			for id := range uint64(4000) {
				r.delete(id)
			}
			for id := uint64(4000); id < 5000; id++ {
				want[id] = rec
			}
			if r.held > 2*chunkSize {
				t.Errorf("held %d for 1 MB of records", r.held)
			}
			r.put(9000, rec)
			want[9000] = rec
			if len(r.chunks) > 6 {
				t.Errorf("%d chunk slots: the free ones were not reused", len(r.chunks))
			}
		}},
		{"holes are compacted", func(r *records, want map[uint64][]byte) {
			// Keep one record in ten: every chunk stays held until
			// the chunks hold twice the live bytes and the slack.
			rec := make([]byte, 1000)
			for id := range uint64(100_000) {
				r.put(id, rec)
				if id%10 != 0 {
					r.delete(id)
				} else {
					want[id] = rec
				}
				if r.held > 2*r.bytes+compactSlack+chunkSize {
					t.Fatalf("held %d for %d live bytes", r.held, r.bytes)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRecords()
			want := map[uint64][]byte{}
			c.ops(r, want)
			checkRecords(t, r, want)
		})
	}
}

// TestRecordsView: a view reads what the records were when it was
// taken, whatever was put, deleted or compacted after.
func TestRecordsView(t *testing.T) {
	r := newRecords()
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint64][]byte{}
	for id := range uint64(3000) {
		v := fmt.Appendf(nil, "%d-%s", id, bytes.Repeat([]byte("x"), rng.IntN(3000)))
		r.put(id, v)
		want[id] = v
	}
	v := r.view()
	frozen := map[uint64][]byte{}
	for id, rec := range want {
		frozen[id] = rec
	}
	for i := range 200_000 {
		id := rng.Uint64N(6000)
		if rng.IntN(3) == 0 {
			r.delete(id)
			delete(want, id)
			continue
		}
		rec := fmt.Appendf(nil, "%d-%d-%s", id, i, bytes.Repeat([]byte("y"), rng.IntN(2000)))
		if rng.IntN(100) == 0 {
			rec = bytes.Repeat([]byte{byte(i)}, ownChunk+rng.IntN(1000))
		}
		r.put(id, rec)
		want[id] = rec
	}
	checkRecords(t, r, want)
	n := 0
	if err := v.sorted(func(id uint64, rec []byte) error {
		if !bytes.Equal(rec, frozen[id]) {
			return fmt.Errorf("view: record %d changed", id)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(frozen) {
		t.Errorf("view: %d records, want %d", n, len(frozen))
	}
}

// BenchmarkRecords: a queue's records, put then deleted a window later.
func BenchmarkRecords(b *testing.B) {
	r := newRecords()
	rec := make([]byte, 100)
	const window = 100_000
	b.ReportAllocs()
	for i := range uint64(b.N) {
		r.put(i, rec)
		if i >= window {
			r.delete(i - window)
		}
	}
}
