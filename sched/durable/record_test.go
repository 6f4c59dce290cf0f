package durable

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"switchyard/sched"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []sched.Record{
		{},
		{Func: "f", Payload: []byte("p")},
		{Func: "reverse", Unique: "u-1", Reducer: "sum", Priority: sched.Low, When: 1795435200, Payload: make([]byte, 1<<16)},
		{Func: "periodic", Unique: "name", RetryForever: true, Timeout: 30 * time.Second, Counter: -7, When: -1},
		{Func: "dash", Unique: "-", CoalesceOnPayload: true, Payload: []byte("key")},
		{Func: "edge", Unique: "\x00\xff", Counter: 1<<63 - 1, Timeout: 1 << 62, Payload: []byte{0}},
		{Func: "dag", Unique: "d", After: []sched.Key{{Func: "dag", Unique: "b"}, {Func: "other", Unique: ""}}, Payload: []byte("x")},
		{Func: "dag", Unique: "r", Remember: true, Payload: []byte("r")},
	} {
		got := sched.Record{ID: 99}
		if err := decode(encode(&r), &got); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if len(r.Payload) == 0 {
			r.Payload = nil // an empty payload decodes as none
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("decoded %+v, want %+v", got, r)
		}
	}
}

// Truncated or foreign values are refused, never misread.
func TestRecordRejects(t *testing.T) {
	good := encode(&sched.Record{Func: "f", Unique: "u", Payload: []byte("p")})
	deps := encode(&sched.Record{Func: "f", After: []sched.Key{{Func: "g", Unique: "u"}}})
	for _, b := range [][]byte{nil, {3, 0, 0}, good[:3], good[:5], deps[:len(deps)-1], {2, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x7f}, {1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}} {
		var r sched.Record
		if err := decode(b, &r); err == nil {
			t.Errorf("decoded %x as %+v", b, r)
		}
	}
}

// TestRecordBuffers: a record that fits recBufSize is encoded into a lent
// buffer, one that does not into one of its own that recycle leaves
// alone; encoding and giving back a small record allocates nothing.
func TestRecordBuffers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload int
		lent    bool
	}{
		{"empty", 0, true},
		{"64 bytes", 64, true},
		{"just fits", recBufSize - 3 - 6*binary.MaxVarintLen64 - 1, true},
		{"one byte over", recBufSize - 3 - 6*binary.MaxVarintLen64, false},
		{"64 KiB", 1 << 16, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &sched.Record{Func: "f", Payload: bytes.Repeat([]byte{'p'}, tc.payload)}
			rec := lend(r)
			if lent := cap(rec) == recBufSize; lent != tc.lent {
				t.Errorf("lent a buffer: %v (cap %d), want %v", lent, cap(rec), tc.lent)
			}
			var got sched.Record
			if err := decode(rec, &got); err != nil || !bytes.Equal(got.Payload, r.Payload) || got.Func != "f" {
				t.Errorf("decoded %+v, %v", got, err)
			}
			recycle(rec)
		})
	}
	if raceEnabled {
		return // the race detector's sync.Pool drops some of what it is given
	}
	r := &sched.Record{Func: "bench-bg", Payload: make([]byte, 64)}
	if n := testing.AllocsPerRun(1000, func() { recycle(lend(r)) }); n != 0 {
		t.Errorf("encode and recycle of a 64-byte job's record: %v allocations, want 0", n)
	}
}
