package durable

import (
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
