package dwork

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestEnumNumbers pins the real .proto's numbers (frobnitzem/dwork 2ca92dc),
// not the spec's text, which swaps Exit and OK and has no Error.
func TestEnumNumbers(t *testing.T) {
	for got, want := range map[QueryMsg_Type]int32{
		QueryMsg_Create: 0, QueryMsg_Steal: 1, QueryMsg_Transfer: 2, QueryMsg_Lookup: 3,
		QueryMsg_NotFound: 4, QueryMsg_OK: 5, QueryMsg_Exit: 6, QueryMsg_Error: 7,
	} {
		if int32(got) != want {
			t.Errorf("%v = %d, want %d", got, int32(got), want)
		}
	}
	for got, want := range map[TaskMsg_State]int32{
		TaskMsg_Pending: 0, TaskMsg_Stolen: 1, TaskMsg_Waiting: 2, TaskMsg_Copying: 3,
		TaskMsg_Ready: 4, TaskMsg_Started: 5, TaskMsg_Done: 6, TaskMsg_Recorded: 7,
	} {
		if int32(got) != want {
			t.Errorf("%v = %d, want %d", got, int32(got), want)
		}
	}
	if n := len(QueryMsg_Type_name); n != 8 {
		t.Errorf("QueryMsg.Type has %d values", n)
	}
	if n := len(TaskMsg_State_name); n != 8 {
		t.Errorf("TaskMsg.State has %d values", n)
	}
}

// TestFieldNumbers pins every field's number, label and kind against the
// real .proto, through the descriptors protoc generated.
func TestFieldNumbers(t *testing.T) {
	type field struct {
		num   int
		label string
		kind  string
	}
	want := map[string]map[string]field{
		"dwork.QueryMsg": {
			"type": {1, "required", "enum"}, "task": {2, "repeated", "message"},
			"name": {3, "optional", "string"}, "n": {4, "optional", "int32"},
			"location": {6, "optional", "string"},
		},
		"dwork.TaskMsg": {
			"name": {1, "required", "string"}, "origin": {2, "required", "string"},
			"pred": {4, "repeated", "message"}, "succ": {5, "repeated", "message"},
			"log": {6, "repeated", "message"},
		},
		"dwork.TaskMsg.Dep": {
			"name": {1, "required", "string"}, "location": {2, "optional", "string"},
		},
		"dwork.TaskMsg.LogMsg": {
			"state": {1, "required", "enum"}, "time": {2, "required", "int64"},
		},
	}
	for _, m := range []proto.Message{&QueryMsg{}, &TaskMsg{}, &TaskMsg_Dep{}, &TaskMsg_LogMsg{}} {
		d := m.ProtoReflect().Descriptor()
		w := want[string(d.FullName())]
		if w == nil || d.Fields().Len() != len(w) {
			t.Errorf("%s: %d fields, want %d", d.FullName(), d.Fields().Len(), len(w))
			continue
		}
		for i := range d.Fields().Len() {
			f := d.Fields().Get(i)
			got := field{int(f.Number()), f.Cardinality().String(), f.Kind().String()}
			if got != w[string(f.Name())] {
				t.Errorf("%s.%s = %v, want %v", d.FullName(), f.Name(), got, w[string(f.Name())])
			}
		}
	}
}

// TestAppendGolden: Append writes exactly the bytes written by hand, after
// whatever dst already held.
func TestAppendGolden(t *testing.T) {
	for _, w := range wireMsgs() {
		got := Append([]byte("prefix"), w.msg)
		if want := "prefix" + w.bytes; string(got) != want {
			t.Errorf("%s: appended %q, want %q", w.name, got, want)
		}
		// The same as proto.Marshal (allowing what is partial).
		m, err := proto.MarshalOptions{AllowPartial: true}.Marshal(w.msg)
		if err != nil || string(m) != w.bytes {
			t.Errorf("%s: proto.Marshal = %q, %v", w.name, m, err)
		}
	}
}

// TestDecodeGolden: every hand-written message decodes to its message, into
// one QueryMsg reused for all of them, and validates as the table says.
func TestDecodeGolden(t *testing.T) {
	var m QueryMsg
	for _, w := range wireMsgs() {
		if err := Decode([]byte(w.bytes), &m); err != nil {
			t.Errorf("%s: Decode: %v", w.name, err)
			continue
		}
		if !proto.Equal(&m, w.msg) {
			t.Errorf("%s: decoded %v, want %v", w.name, &m, w.msg)
		}
		if err := ValidateRequest(&m); !errors.Is(err, w.err) || (err == nil) != (w.err == nil) {
			t.Errorf("%s: ValidateRequest = %v, want %v", w.name, err, w.err)
		}
	}
}

// TestDecodeReuse: decoding into a message that held another leaves nothing
// of the old one behind.
func TestDecodeReuse(t *testing.T) {
	var m QueryMsg
	msgs := wireMsgs()
	for i := range msgs {
		for j := range msgs {
			if err := Decode([]byte(msgs[i].bytes), &m); err != nil {
				t.Fatal(err)
			}
			if err := Decode([]byte(msgs[j].bytes), &m); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&m, msgs[j].msg) {
				t.Fatalf("%s after %s: %v", msgs[j].name, msgs[i].name, &m)
			}
		}
	}
}

// TestDecodeKeepsNothing: Decode copies every string out of its input.
func TestDecodeKeepsNothing(t *testing.T) {
	b := []byte("\x08\x02\x12\x06\x0a\x01a\x12\x01h\x32\x02w1")
	var m QueryMsg
	if err := Decode(b, &m); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'X'
	}
	if m.GetLocation() != "w1" || m.Task[0].GetName() != "a" || m.Task[0].GetOrigin() != "h" {
		t.Errorf("decoded message changed with its input: %v", &m)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    string
		err  error
	}{
		{"truncated varint", "\x08\x80", ErrMalformed},
		{"truncated string", "\x08\x01\x32\x05w1", ErrMalformed},
		{"truncated task", "\x08\x00\x12\x06\x0a\x01a", ErrMalformed},
		{"truncated inside a task", "\x08\x00\x12\x02\x0a\x05", ErrMalformed},
		{"field number 0", "\x00\x01", ErrMalformed},
		{"end group with no start", "\x0c", ErrMalformed},
		{"too large", string(make([]byte, MaxMessage+1)), ErrTooLarge},
	} {
		var m QueryMsg
		err := Decode([]byte(tc.b), &m)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: Decode = %v, want %v", tc.name, err, tc.err)
		}
	}
	// MaxMessage itself is allowed: a Steal padded with an unknown field 7
	// (tag 0x3a) to exactly MaxMessage bytes.
	const steal = "\x08\x01\x32\x02w1\x3a"
	for l := 1; l <= 5; l++ {
		n := MaxMessage - len(steal) - l
		if varintLen(uint64(n)) != l {
			continue
		}
		msg := steal + string(appendVarint(nil, uint64(n))) + strings.Repeat("x", n)
		if len(msg) != MaxMessage {
			t.Fatalf("built %d bytes", len(msg))
		}
		var m QueryMsg
		if err := Decode([]byte(msg), &m); err != nil {
			t.Errorf("a message of MaxMessage bytes: %v", err)
		}
		if m.GetLocation() != "w1" || len(m.ProtoReflect().GetUnknown()) != 0 {
			t.Errorf("a message of MaxMessage bytes decoded as %v, unknown fields kept", &m)
		}
		return
	}
	t.Fatal("no length fits")
}

// TestDecodeWrongWireType: a known field number with another wire type is
// an unknown field, as protobuf has it (and C++ too): dropped, so the field
// is absent and ValidateRequest says so.
func TestDecodeWrongWireType(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    string
		err  error
	}{
		{"type as a string", "\x0a\x01a", ErrMissingField},
		{"task as a varint", "\x08\x00\x10\x01", ErrMissingField},
		{"location as a varint", "\x08\x06\x30\x01", ErrMissingField},
		{"n as a string, in a valid steal", "\x08\x01\x22\x01a\x32\x01w", nil},
	} {
		var m QueryMsg
		if err := Decode([]byte(tc.b), &m); err != nil {
			t.Errorf("%s: Decode = %v", tc.name, err)
			continue
		}
		if err := ValidateRequest(&m); !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("%s: ValidateRequest = %v, want %v", tc.name, err, tc.err)
		}
	}
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func varintLen(v uint64) int { return len(appendVarint(nil, v)) }

// TestDecodeDropsUnknown: unknown fields, at the top and inside a task, are
// not kept, so a reply echoing a request's tasks does not echo them.
func TestDecodeDropsUnknown(t *testing.T) {
	var m QueryMsg
	// Field 5 of QueryMsg (unused, 0x2a and 0x28) and field 3 of TaskMsg
	// (unused, 0x18).
	b := "\x08\x02\x2a\x01z\x12\x08\x0a\x01a\x12\x01h\x18\x07\x32\x02w1\x28\x09"
	if err := Decode([]byte(b), &m); err != nil {
		t.Fatal(err)
	}
	want := &QueryMsg{Type: typ(QueryMsg_Transfer), Location: proto.String("w1"),
		Task: []*TaskMsg{{Name: proto.String("a"), Origin: proto.String("h")}}}
	if !proto.Equal(&m, want) {
		t.Errorf("decoded %v, want %v", &m, want)
	}
	if got := Append(nil, &m); string(got) != "\x08\x02\x12\x06\x0a\x01a\x12\x01h\x32\x02w1" {
		t.Errorf("re-encoded as %q", got)
	}
}

// TestDecodeLastWins: a singular field sent twice takes its last value, as
// protobuf has it; repeated fields accumulate in order.
func TestDecodeLastWins(t *testing.T) {
	var m QueryMsg
	b := "\x08\x06\x32\x01x\x08\x01\x20\x02\x32\x02w1\x20\x03"
	if err := Decode([]byte(b), &m); err != nil {
		t.Fatal(err)
	}
	want := &QueryMsg{Type: typ(QueryMsg_Steal), N: proto.Int32(3), Location: proto.String("w1")}
	if !proto.Equal(&m, want) {
		t.Errorf("decoded %v, want %v", &m, want)
	}
}

// TestAppendGrowsOnce: Append grows dst at most once and never touches what
// dst held.
func TestAppendGrowsOnce(t *testing.T) {
	for _, w := range wireMsgs() {
		dst := make([]byte, 3, 3+len(w.bytes))
		copy(dst, "abc")
		got := Append(dst, w.msg)
		if &got[0] != &dst[0] {
			t.Errorf("%s: Append reallocated a buffer with room", w.name)
		}
		if allocs := testing.AllocsPerRun(10, func() { _ = Append(dst[:3], w.msg) }); allocs != 0 {
			t.Errorf("%s: %v allocations into a buffer with room", w.name, allocs)
		}
		if !bytes.Equal(got, []byte("abc"+w.bytes)) {
			t.Errorf("%s: %q", w.name, got)
		}
	}
}

// TestRoundTripRandom: random messages of every shape, valid or not,
// re-decode to themselves and keep their verdict, and ValidateRequest
// agrees with wantValid (fuzz_test.go) on each; some of every request type
// are valid.
func TestRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m QueryMsg
	valid := map[QueryMsg_Type]int{}
	for i := range 5000 {
		want := randomMsg(r)
		b := Append(nil, want)
		if err := Decode(b, &m); err != nil {
			t.Fatalf("%d: %v: Decode: %v", i, want, err)
		}
		if !proto.Equal(&m, want) {
			t.Fatalf("%d: %v re-decoded as %v", i, want, &m)
		}
		if e1, e2 := ValidateRequest(want), ValidateRequest(&m); (e1 == nil) != (e2 == nil) || e1 != nil && e1.Error() != e2.Error() {
			t.Fatalf("%d: %v: verdict %v, after a round trip %v", i, want, e1, e2)
		}
		if e1, ok := ValidateRequest(want), wantValid(want); (e1 == nil) != ok {
			t.Fatalf("%d: %v: ValidateRequest = %v, wantValid = %v", i, want, e1, ok)
		}
		if ValidateRequest(want) == nil {
			valid[want.GetType()]++
		}
	}
	for _, rt := range []QueryMsg_Type{QueryMsg_Create, QueryMsg_Steal, QueryMsg_Transfer, QueryMsg_Lookup, QueryMsg_Exit} {
		if valid[rt] == 0 {
			t.Errorf("no valid %v among the random messages", rt)
		}
	}
	t.Logf("valid requests: %v", valid)
}

// randomMsg builds a message with each field present or not at random, so
// that some are valid requests of every type and most are not.
func randomMsg(r *rand.Rand) *QueryMsg {
	str := func() *string {
		if r.IntN(4) == 0 {
			return nil
		}
		return proto.String(strings.Repeat("h", r.IntN(5)))
	}
	m := &QueryMsg{Name: str(), Location: str()}
	if r.IntN(8) != 0 {
		m.Type = typ(QueryMsg_Type(r.IntN(9)))
	}
	if r.IntN(3) == 0 {
		m.N = proto.Int32(r.Int32N(5) - 1)
	}
	for range r.IntN(3) {
		task := &TaskMsg{Name: str(), Origin: str()}
		for range r.IntN(3) {
			task.Pred = append(task.Pred, &TaskMsg_Dep{Name: str(), Location: str()})
		}
		for range r.IntN(2) {
			task.Succ = append(task.Succ, &TaskMsg_Dep{Name: str()})
		}
		for range r.IntN(3) {
			l := &TaskMsg_LogMsg{}
			if r.IntN(6) != 0 {
				l.State = TaskMsg_State(r.IntN(9)).Enum()
			}
			if r.IntN(6) != 0 {
				l.Time = proto.Int64(r.Int64() >> r.IntN(64))
			}
			task.Log = append(task.Log, l)
		}
		m.Task = append(m.Task, task)
	}
	return m
}
