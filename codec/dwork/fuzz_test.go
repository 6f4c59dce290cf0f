package dwork

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// FuzzDecode decodes any bytes into a reused QueryMsg and validates the
// result as a request: nothing panics; Decode fails exactly when
// proto.Unmarshal does, with one of its sentinels; ValidateRequest agrees
// with wantValid, the rules written out again another way; and whatever decodes re-encodes to bytes
// that decode to the same message, with the same verdict, and re-encode to
// the same bytes.
func FuzzDecode(f *testing.F) {
	for _, w := range wireMsgs() {
		f.Add([]byte(w.bytes))
	}
	// Create with a pred with a location, a succ and a log entry.
	f.Add([]byte("\x08\x00\x12\x1a\x0a\x01c\x12\x01h\x22\x06\x0a\x01b\x12\x01u\x2a\x03\x0a\x01d\x32\x04\x08\x00\x10\x05"))
	// Unknown fields, at the top and in a task; a group; a wrong wire type.
	f.Add([]byte("\x08\x02\x2a\x01z\x12\x08\x0a\x01a\x12\x01h\x18\x07\x32\x02w1\x28\x09"))
	f.Add([]byte("\x08\x01\x3b\x08\x01\x3c\x32\x01w"))
	f.Add([]byte("\x0a\x01a\x08\x06\x32\x01w"))
	f.Add([]byte("\x08\x80"))
	f.Add([]byte("\x08\xff\xff\xff\xff\x0f"))

	var m QueryMsg
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Decode(data, &m)
		uerr := proto.UnmarshalOptions{AllowPartial: true}.Unmarshal(data, new(QueryMsg))
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Decode(%q): %v", data, err)
			}
			if uerr == nil && len(data) <= MaxMessage {
				t.Fatalf("Decode(%q): %v, proto.Unmarshal takes it", data, err)
			}
			return
		}
		if uerr != nil {
			t.Fatalf("Decode(%q) took what proto.Unmarshal refuses: %v", data, uerr)
		}
		if len(m.ProtoReflect().GetUnknown()) != 0 {
			t.Fatalf("Decode(%q) kept unknown fields", data)
		}

		verdict := ValidateRequest(&m)
		if n := StealCount(&m); n < 0 || n > MaxSteal {
			t.Fatalf("StealCount = %d", n)
		}
		if want := wantValid(&m); (verdict == nil) != want {
			t.Fatalf("%v: ValidateRequest = %v, the table says valid = %v", &m, verdict, want)
		}

		b := Append([]byte("x"), &m)
		if b[0] != 'x' {
			t.Fatalf("Append overwrote dst")
		}
		b = b[1:]
		var got QueryMsg
		if err := Decode(b, &got); err != nil || !proto.Equal(&got, &m) {
			t.Fatalf("%v re-encoded as %q, decoded as %v, %v", &m, b, &got, err)
		}
		if v := ValidateRequest(&got); (v == nil) != (verdict == nil) || v != nil && v.Error() != verdict.Error() {
			t.Fatalf("%v: verdict %v after a round trip, %v before", &m, v, verdict)
		}
		if b2 := Append(nil, &got); !bytes.Equal(b2, b) {
			t.Fatalf("%v: re-encoded as %q, then as %q", &m, b, b2)
		}
	})
}

// rules is ValidateRequest's table again, as data over QueryMsg's field
// numbers: +1 the field must be present, -1 it must be absent, 0 either.
// Types not listed are not requests.
var rules = map[QueryMsg_Type]map[protoreflect.FieldNumber]int{
	//                 task      name      n         location
	QueryMsg_Create:   {2: +1, 3: -1, 4: -1, 6: -1},
	QueryMsg_Steal:    {2: -1, 3: -1, 4: 0, 6: +1},
	QueryMsg_Transfer: {2: +1, 3: -1, 4: -1, 6: +1},
	QueryMsg_Lookup:   {2: -1, 3: +1, 4: -1, 6: -1},
	QueryMsg_Exit:     {2: -1, 3: -1, 4: -1, 6: +1},
}

// wantValid says whether m is a valid request, by rules, by
// proto.CheckInitialized for the .proto's required fields, by the enum
// name tables for states, and by the limits, without ValidateRequest's code.
func wantValid(m *QueryMsg) bool {
	r := m.ProtoReflect()
	rule, ok := rules[m.GetType()]
	if !ok || m.Type == nil {
		return false
	}
	for num, want := range rule {
		has := r.Has(r.Descriptor().Fields().ByNumber(num))
		if want == +1 && !has || want == -1 && has {
			return false
		}
	}
	if proto.CheckInitialized(m) != nil {
		return false
	}
	if len(m.Task) > MaxTasks || len(m.GetName()) > MaxName || len(m.GetLocation()) > MaxLocation {
		return false
	}
	for _, task := range m.Task {
		if len(task.GetName()) > MaxName || len(task.GetOrigin()) > MaxLocation ||
			len(task.Pred)+len(task.Succ) > MaxDeps || len(task.Log) > MaxLog {
			return false
		}
		for _, d := range slices.Concat(task.Pred, task.Succ) {
			if len(d.GetName()) > MaxName || len(d.GetLocation()) > MaxLocation {
				return false
			}
		}
		for _, l := range task.Log {
			if _, ok := TaskMsg_State_name[int32(l.GetState())]; !ok {
				return false
			}
		}
	}
	return true
}
