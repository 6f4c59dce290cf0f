package dwork

import (
	"google.golang.org/protobuf/proto"
)

// wireMsg is one message written out by hand in protobuf wire format from
// the real .proto's numbers, what it decodes to, and what ValidateRequest
// says of it (nil for a valid request).
type wireMsg struct {
	name  string
	msg   *QueryMsg
	bytes string
	err   error
}

// wireMsgs returns every message the tables know. The bytes are written
// from the numbers alone: a tag byte (field<<3 | wire type: 0 varint, 2
// length-delimited), then the varint or the length and the bytes; fields in
// number order, as protobuf-go writes them; a set proto2 field sent even
// when it is 0 or empty (type Create is "\x08\x00").
//
//	QueryMsg: type=1 (0x08), task=2 (0x12), name=3 (0x1a), n=4 (0x20),
//	          location=6 (0x32)
//	TaskMsg:  name=1 (0x0a), origin=2 (0x12), pred=4 (0x22), succ=5 (0x2a),
//	          log=6 (0x32)
//	Dep:      name=1 (0x0a), location=2 (0x12)
//	LogMsg:   state=1 (0x08), time=2 (0x10)
//
// 1700000000000000 is the varint 80 80 f9 c0 c1 c4 82 03.
func wireMsgs() []wireMsg {
	const stolenA = "\x0a\x01a\x12\x03hub\x32\x0b\x08\x01\x10\x80\x80\xf9\xc0\xc1\xc4\x82\x03" // 21 bytes
	return []wireMsg{
		// Requests.
		{"create one task", &QueryMsg{Type: typ(QueryMsg_Create),
			Task: []*TaskMsg{{Name: proto.String("a"), Origin: proto.String("h")}}},
			"\x08\x00\x12\x06\x0a\x01a\x12\x01h", nil},
		{"create two tasks, the second after the first", &QueryMsg{Type: typ(QueryMsg_Create),
			Task: []*TaskMsg{
				{Name: proto.String("b"), Origin: proto.String("h")},
				{Name: proto.String("c"), Origin: proto.String("h"),
					Pred: []*TaskMsg_Dep{{Name: proto.String("b"), Location: proto.String("tcp://h")}}},
			}},
			"\x08\x00\x12\x06\x0a\x01b\x12\x01h" +
				"\x12\x14\x0a\x01c\x12\x01h\x22\x0c\x0a\x01b\x12\x07tcp://h", nil},
		{"create with a succ, which is ignored", &QueryMsg{Type: typ(QueryMsg_Create),
			Task: []*TaskMsg{{Name: proto.String("d"), Origin: proto.String("h"),
				Succ: []*TaskMsg_Dep{{Name: proto.String("e")}}}}},
			"\x08\x00\x12\x0b\x0a\x01d\x12\x01h\x2a\x03\x0a\x01e", nil},
		{"steal", &QueryMsg{Type: typ(QueryMsg_Steal), Location: proto.String("w1")},
			"\x08\x01\x32\x02w1", nil},
		{"steal 4", &QueryMsg{Type: typ(QueryMsg_Steal), N: proto.Int32(4), Location: proto.String("w1")},
			"\x08\x01\x20\x04\x32\x02w1", nil},
		{"steal 300", &QueryMsg{Type: typ(QueryMsg_Steal), N: proto.Int32(300), Location: proto.String("w1")},
			"\x08\x01\x20\xac\x02\x32\x02w1", nil},
		{"steal -1 (int32 as a 10-byte varint)", &QueryMsg{Type: typ(QueryMsg_Steal), N: proto.Int32(-1), Location: proto.String("w1")},
			"\x08\x01\x20\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x32\x02w1", nil},
		{"steal by the empty host name", &QueryMsg{Type: typ(QueryMsg_Steal), Location: proto.String("")},
			"\x08\x01\x32\x00", nil},
		{"complete a stolen task", &QueryMsg{Type: typ(QueryMsg_Transfer),
			Task: []*TaskMsg{stolen("a")}, Location: proto.String("w1")},
			"\x08\x02\x12\x15" + stolenA + "\x32\x02w1", nil},
		{"lookup", &QueryMsg{Type: typ(QueryMsg_Lookup), Name: proto.String("a")},
			"\x08\x03\x1a\x01a", nil},
		{"exit", &QueryMsg{Type: typ(QueryMsg_Exit), Location: proto.String("w1")},
			"\x08\x06\x32\x02w1", nil},

		// Replies, which are not requests.
		{"reply ok", &QueryMsg{Type: typ(QueryMsg_OK)}, "\x08\x05", ErrNotRequest},
		{"reply not found", &QueryMsg{Type: typ(QueryMsg_NotFound)}, "\x08\x04", ErrNotRequest},
		{"reply error", &QueryMsg{Type: typ(QueryMsg_Error)}, "\x08\x07", ErrNotRequest},
		{"reply to steal: a stolen task", &QueryMsg{Type: typ(QueryMsg_Transfer), Task: []*TaskMsg{stolen("a")}},
			"\x08\x02\x12\x15" + stolenA, ErrMissingField},
		{"reply to lookup", &QueryMsg{Type: typ(QueryMsg_OK), Name: proto.String("a"), Location: proto.String("w1")},
			"\x08\x05\x1a\x01a\x32\x02w1", ErrNotRequest},
		{"reply to a completion: tasks not found", &QueryMsg{Type: typ(QueryMsg_NotFound), Task: []*TaskMsg{stolen("a")}},
			"\x08\x04\x12\x15" + stolenA, ErrNotRequest},

		// Ill-formed requests that decode.
		{"empty message: no type", &QueryMsg{}, "", ErrMissingField},
		{"type 8", &QueryMsg{Type: typ(8)}, "\x08\x08", ErrUnknownType},
		{"create without a task", &QueryMsg{Type: typ(QueryMsg_Create)}, "\x08\x00", ErrMissingField},
		{"steal without a location", &QueryMsg{Type: typ(QueryMsg_Steal), N: proto.Int32(1)}, "\x08\x01\x20\x01", ErrMissingField},
		{"create, task without origin", &QueryMsg{Type: typ(QueryMsg_Create), Task: []*TaskMsg{{Name: proto.String("a")}}},
			"\x08\x00\x12\x03\x0a\x01a", ErrMissingField},
		{"complete, log state 9", &QueryMsg{Type: typ(QueryMsg_Transfer), Location: proto.String("w"),
			Task: []*TaskMsg{{Name: proto.String("a"), Origin: proto.String("h"),
				Log: []*TaskMsg_LogMsg{{State: TaskMsg_State(9).Enum(), Time: proto.Int64(1)}}}}},
			"\x08\x02\x12\x0c\x0a\x01a\x12\x01h\x32\x04\x08\x09\x10\x01\x32\x01w", ErrUnknownState},
	}
}
