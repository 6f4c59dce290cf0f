package memodb

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// h turns hex with spaces (and "|" between header and payload, for the
// reader) into bytes.
func h(s string) []byte {
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "").Replace(s))
	if err != nil {
		panic(err)
	}
	return b
}

// The version field, 66 6d656d6f3031: a text string of 6 bytes, "memo01".
const memo01 = "66 6d656d6f3031"

var wid = []byte{1, 2, 3, 4}

// Golden messages, written out by hand from RFC 8949's encoding rules.
var golden = []struct {
	name string
	dir  Direction // the direction it goes in (Any: both)
	wire []byte
	msg  Message
}{
	{"READY", Request, h("84" + memo01 + "01 40 82 6161 626263"),
		Message{Type: Ready, ID: []byte{}, Services: []string{"a", "bc"}}},
	{"READY with no service", Request, h("84" + memo01 + "01 40 80"),
		Message{Type: Ready, ID: []byte{}, Services: []string{}}},
	{"client's JOB", Request, h("85" + memo01 + "02 40 63737663 191388 | 68656c6c6f"),
		Message{Type: Job, ID: []byte{}, Service: "svc", Timeout: 5000, Payload: []byte("hello")}},
	{"client's JOB, timeout 0, no payload", Request, h("85" + memo01 + "02 40 6173 00"),
		Message{Type: Job, ID: []byte{}, Service: "s", Timeout: 0}},
	{"client's JOB, timeout 23 and 24", Request, h("85" + memo01 + "02 40 6173 17"),
		Message{Type: Job, ID: []byte{}, Service: "s", Timeout: 23}},
	{"client's JOB, timeout 24", Request, h("85" + memo01 + "02 40 6173 1818"),
		Message{Type: Job, ID: []byte{}, Service: "s", Timeout: 24}},
	{"client's JOB, timeout 2^32", Request, h("85" + memo01 + "02 40 6173 1b0000000100000000"),
		Message{Type: Job, ID: []byte{}, Service: "s", Timeout: 1 << 32}},
	{"worker's JOB", Reply, h("85" + memo01 + "02 44 01020304 63737663 191388 | 00ff"),
		Message{Type: Job, ID: wid, Service: "svc", Timeout: 5000, Payload: []byte{0, 0xff}}},
	{"worker's RESULT", Request, h("83" + memo01 + "03 44 01020304 | 6f6b"),
		Message{Type: Result, ID: wid, Payload: []byte("ok")}},
	{"worker's last RESULT", Request, h("84" + memo01 + "03 44 01020304 f5 | 6f6b"),
		Message{Type: Result, ID: wid, Disconnecting: true, HasDisconnecting: true, Payload: []byte("ok")}},
	{"worker's RESULT, disconnecting false", Request, h("84" + memo01 + "03 44 01020304 f4"),
		Message{Type: Result, ID: wid, HasDisconnecting: true}},
	{"client's RESULT", Reply, h("83" + memo01 + "03 40 | 6f6b"),
		Message{Type: Result, ID: []byte{}, Payload: []byte("ok")}},
	{"HEARTBEAT", Any, h("83" + memo01 + "04 44 01020304"),
		Message{Type: Heartbeat, ID: wid}},
	{"DISCONNECT", Reply, h("83" + memo01 + "05 44 01020304"),
		Message{Type: Disconnect, ID: wid}},
	{"a payload that looks like a header", Request, h("83" + memo01 + "03 44 01020304 | 83" + memo01 + "04 44 01020304"),
		Message{Type: Result, ID: wid, Payload: h("83" + memo01 + "04 44 01020304")}},
}

func norm(m Message) Message {
	if m.Payload == nil {
		m.Payload = []byte{}
	}
	return m
}

func TestDecodeGolden(t *testing.T) {
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			dirs := []Direction{Any, g.dir}
			if g.dir == Any {
				dirs = []Direction{Any, Request, Reply}
			}
			for _, dir := range dirs {
				var m Message
				if err := Decode(g.wire, dir, &m); err != nil {
					t.Fatalf("direction %d: %v", dir, err)
				}
				if !reflect.DeepEqual(norm(m), norm(g.msg)) {
					t.Fatalf("direction %d: decoded %+v, want %+v", dir, m, g.msg)
				}
				// The payload is the buffer's own tail, not a copy.
				if n := len(m.Payload); n > 0 && &m.Payload[0] != &g.wire[len(g.wire)-n] {
					t.Fatal("the payload was copied")
				}
			}
			if got := Append(nil, &g.msg); !bytes.Equal(got, g.wire) {
				t.Fatalf("Append: % x\nwant       % x", got, g.wire)
			}
			// Appended to what a caller already has.
			if got := Append([]byte("x"), &g.msg); !bytes.Equal(got, append([]byte("x"), g.wire...)) {
				t.Fatalf("Append after a prefix: % x", got)
			}
		})
	}
}

// The encoders of each message, against the golden bytes.
func TestAppendHelpers(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"AppendReady", AppendReady(nil, []string{"a", "bc"}), "84" + memo01 + "01 40 82 6161 626263"},
		{"AppendReady none", AppendReady(nil, nil), "84" + memo01 + "01 40 80"},
		{"AppendJob client", AppendJob(nil, nil, "svc", 5000), "85" + memo01 + "02 40 63737663 191388"},
		{"AppendJob worker", AppendJob(nil, wid, "svc", 5000), "85" + memo01 + "02 44 01020304 63737663 191388"},
		{"AppendResult client", AppendResult(nil, nil), "83" + memo01 + "03 40"},
		{"AppendResult worker", AppendResult(nil, wid), "83" + memo01 + "03 44 01020304"},
		{"AppendResultDisconnecting", AppendResultDisconnecting(nil, wid), "84" + memo01 + "03 44 01020304 f5"},
		{"AppendHeartbeat", AppendHeartbeat(nil, wid), "83" + memo01 + "04 44 01020304"},
		{"AppendDisconnect", AppendDisconnect(nil, wid), "83" + memo01 + "05 44 01020304"},
		{"into a buffer", AppendHeartbeat([]byte{0xaa}, wid), "aa 83" + memo01 + "04 44 01020304"},
	} {
		if want := h(tc.want); !bytes.Equal(tc.got, want) {
			t.Errorf("%s: % x\nwant % x", tc.name, tc.got, want)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	many := h("84" + memo01 + "01 40 9a00001001") // an array of 4097 names...
	for range MaxServices + 1 {
		many = append(many, 0x61, 'x')
	}
	tooMany := h("84" + memo01 + "01 40 991000") // exactly MaxServices: accepted, see below
	for range MaxServices {
		tooMany = append(tooMany, 0x61, 'x')
	}
	var m Message
	if err := Decode(tooMany, Request, &m); err != nil || len(m.Services) != MaxServices {
		t.Fatalf("READY of %d services: %v", MaxServices, err)
	}

	for _, tc := range []struct {
		name string
		dir  Direction
		wire []byte
		want error
	}{
		// Not CBOR, or not one array of plain items.
		{"nothing", Any, nil, ErrMalformed},
		{"a break byte", Any, h("ff"), ErrMalformed},
		{"cut short", Any, h("83" + memo01 + "04 44 0102"), ErrMalformed},
		{"cut in the version", Any, h("83 66 6d656d"), ErrMalformed},
		{"not an array", Any, h(memo01), ErrMalformed},
		{"a map", Any, h("a1 6161 01"), ErrMalformed},
		{"indefinite array", Any, h("9f" + memo01 + "04 44 01020304 ff"), ErrMalformed},
		{"indefinite byte string", Any, h("83" + memo01 + "04 5f 4401020304 ff"), ErrMalformed},
		{"a tag", Any, h("83" + memo01 + "04 c2 44 01020304"), ErrMalformed},
		{"version not UTF-8", Any, h("83 66 ffffffffffff 04 44 01020304"), ErrMalformed},
		{"too many services", Request, many, ErrMalformed},
		{"nested too deep", Request, h("84" + memo01 + "01 40 81 81 81 81 6161"), ErrMalformed},
		{"a reserved additional info", Any, h("83" + memo01 + "1c 44 01020304"), ErrMalformed},

		// Well-formed, not deterministic.
		{"type in 2 bytes", Any, h("83" + memo01 + "1804 44 01020304"), ErrNotDeterministic},
		{"id length in 2 bytes", Any, h("83" + memo01 + "04 5804 01020304"), ErrNotDeterministic},
		{"array length in 2 bytes", Any, h("9803" + memo01 + "04 44 01020304"), ErrNotDeterministic},
		{"version length in 2 bytes", Any, h("83 7806 6d656d6f3031 04 44 01020304"), ErrNotDeterministic},
		{"timeout 5000 in 4 bytes", Request, h("85" + memo01 + "02 40 6173 1a00001388"), ErrNotDeterministic},
		{"timeout 10 in 1 byte", Request, h("85" + memo01 + "02 40 6173 180a"), ErrNotDeterministic},
		{"service length in 2 bytes", Request, h("85" + memo01 + "02 40 7801 73 00"), ErrNotDeterministic},

		// The version.
		{"memo02", Any, h("83 66 6d656d6f3032 04 44 01020304"), ErrVersion},
		{"MEMO01", Any, h("83 66 4d454d4f3031 04 44 01020304"), ErrVersion},
		{"version as bytes", Any, h("83 46 6d656d6f3031 04 44 01020304"), ErrVersion},
		{"version as a number", Any, h("83 01 04 44 01020304"), ErrVersion},

		// Fields.
		{"two fields", Any, h("82" + memo01 + "04"), ErrInvalid},
		{"type 0", Any, h("83" + memo01 + "00 44 01020304"), ErrInvalid},
		{"type 6", Any, h("83" + memo01 + "06 44 01020304"), ErrInvalid},
		{"type -1", Any, h("83" + memo01 + "20 44 01020304"), ErrInvalid},
		{"type as text", Any, h("83" + memo01 + "6104 44 01020304"), ErrInvalid},
		{"id as text", Any, h("83" + memo01 + "04 64 01020304"), ErrInvalid},
		{"id as null", Any, h("83" + memo01 + "04 f6"), ErrInvalid},
		{"READY with an id", Request, h("84" + memo01 + "01 44 01020304 80"), ErrInvalid},
		{"READY with a payload", Request, h("84" + memo01 + "01 40 80 | 00"), ErrInvalid},
		{"READY without services", Request, h("83" + memo01 + "01 40"), ErrInvalid},
		{"READY with a field more", Request, h("85" + memo01 + "01 40 80 00"), ErrInvalid},
		{"READY services as text", Request, h("84" + memo01 + "01 40 6161"), ErrInvalid},
		{"READY service as bytes", Request, h("84" + memo01 + "01 40 81 4161"), ErrInvalid},
		{"READY service empty", Request, h("84" + memo01 + "01 40 81 60"), ErrInvalid},
		{"READY service a number", Request, h("84" + memo01 + "01 40 81 01"), ErrInvalid},
		{"JOB without timeout", Request, h("84" + memo01 + "02 40 6173"), ErrInvalid},
		{"JOB with a field more", Request, h("86" + memo01 + "02 40 6173 01 01"), ErrInvalid},
		{"JOB timeout negative", Request, h("85" + memo01 + "02 40 6173 20"), ErrInvalid},
		{"JOB timeout a float", Request, h("85" + memo01 + "02 40 6173 f93c00"), ErrInvalid},
		{"JOB timeout text", Request, h("85" + memo01 + "02 40 6173 6131"), ErrInvalid},
		{"JOB service as bytes", Request, h("85" + memo01 + "02 40 4173 01"), ErrInvalid},
		{"JOB service empty", Request, h("85" + memo01 + "02 40 60 01"), ErrInvalid},
		{"JOB with a 3-byte id", Any, h("85" + memo01 + "02 43 010203 6173 01"), ErrInvalid},
		{"RESULT flag a number", Request, h("84" + memo01 + "03 44 01020304 01"), ErrInvalid},
		{"RESULT flag null", Request, h("84" + memo01 + "03 44 01020304 f6"), ErrInvalid},
		{"RESULT with 5 fields", Request, h("85" + memo01 + "03 44 01020304 f5 f5"), ErrInvalid},
		{"RESULT with a 5-byte id", Any, h("83" + memo01 + "03 45 0102030405"), ErrInvalid},
		{"HEARTBEAT with a payload", Request, h("83" + memo01 + "04 44 01020304 | 00"), ErrInvalid},
		{"HEARTBEAT without an id", Request, h("83" + memo01 + "04 40"), ErrInvalid},
		{"HEARTBEAT with a 3-byte id", Request, h("83" + memo01 + "04 43 010203"), ErrInvalid},
		{"HEARTBEAT with a field more", Request, h("84" + memo01 + "04 44 01020304 f5"), ErrInvalid},
		{"DISCONNECT with a payload", Reply, h("83" + memo01 + "05 44 01020304 | 00"), ErrInvalid},

		// Directions.
		{"DISCONNECT to the broker", Request, h("83" + memo01 + "05 44 01020304"), ErrInvalid},
		{"a worker's JOB to the broker", Request, h("85" + memo01 + "02 44 01020304 6173 01"), ErrInvalid},
		{"a client's RESULT to the broker", Request, h("83" + memo01 + "03 40"), ErrInvalid},
		{"READY from the broker", Reply, h("84" + memo01 + "01 40 80"), ErrInvalid},
		{"a client's JOB from the broker", Reply, h("85" + memo01 + "02 40 6173 01"), ErrInvalid},
		{"a worker's RESULT from the broker", Reply, h("83" + memo01 + "03 44 01020304"), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			err := Decode(tc.wire, tc.dir, &m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode(% x) = %v, want %v", tc.wire, err, tc.want)
			}
		})
	}
}

// Every message Append makes decodes back to itself, payloads of any size
// included.
func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte{0xa5}, 1<<20)
	for _, m := range []Message{
		{Type: Ready, ID: []byte{}, Services: []string{"zz", "a", "é", strings.Repeat("s", 300)}, Payload: []byte{}},
		{Type: Job, ID: []byte{}, Service: "f", Timeout: 1<<64 - 1, Payload: big},
		{Type: Job, ID: []byte{0, 0, 0, 0}, Service: "f", Timeout: 65536, Payload: []byte{}},
		{Type: Result, ID: []byte{}, Payload: big},
		{Type: Result, ID: []byte{0xff, 0xff, 0xff, 0xff}, Disconnecting: true, HasDisconnecting: true, Payload: []byte{}},
		{Type: Heartbeat, ID: wid, Payload: []byte{}},
	} {
		var got Message
		if err := Decode(Append(nil, &m), Any, &got); err != nil {
			t.Fatalf("%s: %v", m.Type, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: decoded %+v", m.Type, got)
		}
	}
}

func TestTypeString(t *testing.T) {
	for typ, want := range map[Type]string{Ready: "READY", Job: "JOB", Result: "RESULT", Heartbeat: "HEARTBEAT", Disconnect: "DISCONNECT", 9: "type 9"} {
		if got := typ.String(); got != want {
			t.Errorf("%d: %q, want %q", typ, got, want)
		}
	}
}
