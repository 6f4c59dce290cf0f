package main

import (
	"bytes"
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
