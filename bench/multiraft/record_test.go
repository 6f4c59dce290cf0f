package main

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestEntryRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		jobs    int
		payload []byte
	}{
		{"one", 1, []byte("x")},
		{"empty payload", 3, nil},
		{"batch", 100, bytes.Repeat([]byte{'p'}, 64)},
		{"large payload", 2, bytes.Repeat([]byte{'q'}, 70000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startEntry(nil, 7, 42)
			for i := range tt.jobs {
				b = appendJob(b, uint64(1000+i), "bench-03", tt.payload)
			}
			who, seq, ok := entryOwner(b)
			if !ok || who != 7 || seq != 42 {
				t.Fatalf("owner %d %d %v", who, seq, ok)
			}
			var ids []uint64
			err := eachJob(b, func(id uint64, rec []byte) {
				ids = append(ids, id)
				// sched/durable's layout: version, priority, flags, then
				// the function's uvarint length and name.
				if rec[0] != 1 || rec[1] != 1 || rec[2] != 0 || rec[3] != 8 || string(rec[4:12]) != "bench-03" {
					t.Errorf("record %d: %q", id, rec[:12])
				}
				if !bytes.HasSuffix(rec, tt.payload) || len(rec) != 12+2+3+len(tt.payload) {
					t.Errorf("record %d: %d bytes", id, len(rec))
				}
			})
			if err != nil || len(ids) != tt.jobs || ids[0] != 1000 || ids[len(ids)-1] != uint64(1000+tt.jobs-1) {
				t.Fatalf("ids %v, %v", ids, err)
			}
		})
	}
}

func TestEntryDamaged(t *testing.T) {
	good := appendJob(startEntry(nil, 1, 1), 5, "f", []byte("payload"))
	for _, b := range [][]byte{
		nil,
		good[:entryHeader-1],
		append(append([]byte{}, good[:entryHeader-1]...), 9), // version
		good[:len(good)-1],                   // record cut short
		append(append([]byte{}, good...), 2), // unknown op
	} {
		if err := eachJob(b, func(uint64, []byte) {}); err == nil {
			t.Errorf("%q decoded", b)
		}
	}
}

// FuzzEachJob: no bytes make the entry decoder panic or hand over a
// record past the entry's end; what it accepts it accepts again the same
// way when encoded anew.
func FuzzEachJob(f *testing.F) {
	f.Add(appendJob(startEntry(nil, 1, 1), 7, "bench-00", bytes.Repeat([]byte{'x'}, 64)))
	e := startEntry(nil, 3, 99)
	for i := range 5 {
		e = appendJob(e, uint64(i), "f", []byte("payload"))
	}
	f.Add(e)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var ids []uint64
		var recs [][]byte
		if err := eachJob(b, func(id uint64, rec []byte) {
			ids = append(ids, id)
			recs = append(recs, rec)
		}); err != nil {
			return
		}
		again := b[:entryHeader:entryHeader]
		for i, id := range ids {
			again = append(again, opPut)
			again = binary.BigEndian.AppendUint64(again, id)
			again = binary.AppendUvarint(again, uint64(len(recs[i])))
			again = append(again, recs[i]...)
		}
		var n int
		if err := eachJob(again, func(id uint64, rec []byte) {
			if id != ids[n] || !bytes.Equal(rec, recs[n]) {
				t.Fatalf("job %d: %d %q, first %d %q", n, id, rec, ids[n], recs[n])
			}
			n++
		}); err != nil || n != len(ids) {
			t.Fatalf("re-encoded: %d jobs of %d, %v", n, len(ids), err)
		}
	})
}
