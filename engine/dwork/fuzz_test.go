package dwork

import (
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	codec "switchyard/codec/dwork"
	"switchyard/sched"
)

// FuzzHandle feeds the handler (decode, validation and every request's
// handling, on a real scheduler) two messages and the first again: it
// must never panic, and every reply must be one the protocol has, alone
// or with what that type carries.
func FuzzHandle(f *testing.F) {
	seed := func(m *codec.QueryMsg) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	create := seed(createReq(task("a"), task("b", "a"), task("c", "a", "b")))
	f.Add(create, seed(stealReq("h", 3)))
	f.Add(seed(stealReq("h")), seed(doneReq("h", "a", "x")))
	f.Add(create, seed(exitReq("h")))
	f.Add(seed(lookupReq("a")), create)
	f.Add([]byte{}, []byte{0xff})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		s := sched.New(sched.Config{Shards: 1, Tick: -1})
		defer s.Close()
		var draining atomic.Bool
		h := newHandler(s, "dwork", "hub", newLocations(s, "dwork", 4, defaultLocationTTL), &draining, zap.NewNop())
		sent := 0
		h.send = func(env [][]byte, reply []byte) { sent++ }
		for i, msg := range [][]byte{a, b, a} {
			out := h.handle(msg, nil)
			if out == nil {
				t.Fatalf("message %d: no reply, and no durable store to wait for", i)
			}
			var r codec.QueryMsg
			if err := proto.Unmarshal(out, &r); err != nil {
				t.Fatalf("message %d: reply %x does not decode: %v", i, out, err)
			}
			switch r.GetType() {
			case codec.QueryMsg_OK, codec.QueryMsg_NotFound, codec.QueryMsg_Error, codec.QueryMsg_Transfer:
			default:
				t.Fatalf("message %d: reply of type %v", i, r.GetType())
			}
			if r.GetType() == codec.QueryMsg_Error && (len(r.Task) != 0 || r.Name != nil || r.Location != nil || r.N != nil) {
				t.Fatalf("message %d: Error reply with more: %v", i, &r)
			}
			if r.GetType() == codec.QueryMsg_Transfer && len(r.Task) == 0 {
				t.Fatalf("message %d: Transfer reply without tasks", i)
			}
		}
		h.locs.closeAll()
		if sent != 0 {
			t.Fatalf("%d replies sent later without a durable store", sent)
		}
	})
}

// FuzzScanner: the guard's ZMTP scanner never panics, and bytes fed one
// at a time get the same verdict as fed at once.
func FuzzScanner(f *testing.F) {
	f.Add(concat(greeting(), ready(), shortFrame(zmtpMore, 0), shortFrame(0, 3), []byte("abc")))
	f.Add(concat(greeting(), longFrame(0, 1<<62)))
	f.Add([]byte("GET /"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var whole, bytewise scanner
		err1 := whole.feed(in, &testGuard)
		var err2 error
		for i := range in {
			if err2 = bytewise.feed(in[i:i+1], &testGuard); err2 != nil {
				break
			}
		}
		if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
			t.Fatalf("at once: %v; a byte at a time: %v", err1, err2)
		}
		if err1 == nil && whole != bytewise {
			t.Fatalf("at once: %+v; a byte at a time: %+v", whole, bytewise)
		}
	})
}
