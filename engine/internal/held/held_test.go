package held

import (
	"errors"
	"testing"
)

// A connection's life in events: replies appended to out, acknowledgements
// marked, out written after HoldBack, answers released. What the peer
// reads must be every reply in order, each acknowledgement only after its
// answer, and a failed one replaced.
func TestQueue(t *testing.T) {
	type step struct {
		appendOut []string // replies of an event; "ACK:x" marks an acknowledgement
		answers   []error  // store answers arriving before the event
		wantSent  string   // what the peer has read after the event
	}
	fail := func(dst []byte, err error) []byte { return append(dst, "ERR:"+err.Error()+";"...) }
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing held", []step{{appendOut: []string{"a;", "b;"}, wantSent: "a;b;"}}},
		{"ack waits, later replies wait behind it", []step{
			{appendOut: []string{"a;", "ACK:1;", "b;"}, wantSent: "a;"},
			{appendOut: []string{"c;"}, wantSent: "a;"},
			{answers: []error{nil}, appendOut: []string{"d;"}, wantSent: "a;ACK:1;b;c;d;"},
		}},
		{"two acks, answered one at a time", []step{
			{appendOut: []string{"ACK:1;", "x;", "ACK:2;", "y;"}, wantSent: ""},
			{answers: []error{nil}, wantSent: "ACK:1;x;"},
			{appendOut: []string{"z;"}, wantSent: "ACK:1;x;"},
			{answers: []error{nil}, wantSent: "ACK:1;x;ACK:2;y;z;"},
		}},
		{"failed ack replaced", []step{
			{appendOut: []string{"ACK:1;", "x;", "ACK:2;"}, wantSent: ""},
			{answers: []error{errors.New("full"), nil}, wantSent: "ERR:full;x;ACK:2;"},
		}},
		{"answers in bulk, one failed", []step{
			{appendOut: []string{"x;", "ACK:1;", "a;", "ACK:2;", "b;", "ACK:3;", "c;"}, wantSent: "x;"},
			{answers: []error{nil, errors.New("disk")}, appendOut: []string{"d;"}, wantSent: "x;ACK:1;a;ERR:disk;b;"},
			{appendOut: []string{"ACK:4;"}, wantSent: "x;ACK:1;a;ERR:disk;b;"},
			{answers: []error{nil, nil}, appendOut: []string{"e;"}, wantSent: "x;ACK:1;a;ERR:disk;b;ACK:3;c;d;ACK:4;e;"},
		}},
		{"ack in a later event", []step{
			{appendOut: []string{"a;"}, wantSent: "a;"},
			{appendOut: []string{"b;", "ACK:1;"}, wantSent: "a;b;"},
			{answers: []error{nil}, wantSent: "a;b;ACK:1;"},
			{appendOut: []string{"c;"}, wantSent: "a;b;ACK:1;c;"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q Queue
			var out []byte
			sent := ""
			for i, s := range tt.steps {
				out = q.Release(out, s.answers, fail)
				for _, r := range s.appendOut {
					start := len(out)
					out = append(out, r...)
					if len(r) > 4 && r[:4] == "ACK:" {
						q.Mark(out, start, len(out))
					}
				}
				out = q.HoldBack(out)
				sent += string(out)
				out = out[:0]
				if sent != s.wantSent {
					t.Fatalf("step %d: sent %q, want %q", i, sent, s.wantSent)
				}
			}
		})
	}
}

// BenchmarkRelease is a connection with 64 background submits in flight,
// as bg-durable keeps them: in each event the store's answers let 32
// JOB_CREATEDs go and 32 new ones are marked.
func BenchmarkRelease(b *testing.B) {
	var q Queue
	var out []byte
	ack := make([]byte, 28) // a JOB_CREATED's size
	answers := make([]error, 32)
	event := func(answers []error) {
		out = q.Release(out, answers, nil)
		for range 32 {
			start := len(out)
			out = append(out, ack...)
			q.Mark(out, start, len(out))
		}
		out = q.HoldBack(out)[:0] // written
	}
	event(nil)
	event(nil)
	b.ReportAllocs()
	for b.Loop() {
		event(answers)
	}
}
