package dwork

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
)

// MaxMessage bounds the size of one message, a whole ZeroMQ frame: Decode
// refuses a larger one with ErrTooLarge. The real hub has no bound. It is
// the budget for the other limits (see validate.go): a Create of MaxTasks
// tasks with names of a few hundred bytes and a few predecessors each fits
// in well under a megabyte. The engine should also set it as its socket's
// largest message, where the ZeroMQ library allows, so that a larger one is
// never buffered whole.
const MaxMessage = 4 << 20

// Errors returned by Decode. Either way the server answers QueryMsg{type:
// Error}, as the real hub answers a message it cannot parse.
var (
	// ErrTooLarge: the message is over MaxMessage bytes.
	ErrTooLarge = errors.New("dwork: message too large")
	// ErrMalformed: the bytes are not protobuf wire format (a truncated
	// varint or length, a length past the end, field number 0, a group
	// that does not close). A known field number with another wire type
	// is not an error: protobuf takes it for an unknown field, which
	// Decode drops, so the field is absent.
	ErrMalformed = errors.New("dwork: malformed message")
)

// unmarshal allows missing required fields (AllowPartial) so that Decode
// fails only on bytes that are not a protobuf message, and ValidateRequest
// says which required field is missing, with a sentinel error of its own.
// (The real hub does the same in effect: its recvProto ignores what
// ParseFromArray returns, so a message missing a required field is kept as
// parsed.) Unknown fields are dropped: nothing here forwards a message whole,
// and a reply that echoes a request's tasks (NotFound to a completion)
// should not carry a stranger's fields back.
var unmarshal = proto.UnmarshalOptions{AllowPartial: true, DiscardUnknown: true}

// marshal writes a message whose size proto.Size has just computed (and
// cached in it and in every nested message), so MarshalAppend does not
// measure it again. AllowPartial: see Append.
var marshal = proto.MarshalOptions{AllowPartial: true, UseCachedSize: true}

// Decode decodes one message, b, into m, which it resets first: a caller
// may reuse one QueryMsg for every message it reads (though the strings and
// tasks decoded into it are allocated afresh each time). b is not retained:
// every string is copied out of it.
//
// Decode checks the wire format only. A message that decodes may still
// lack a required field, hold an enum number the .proto does not define
// (Go's protobuf keeps any number in a proto2 enum field; the C++ hub would
// see the field as absent), or break the protocol's rules: ValidateRequest
// checks all of that. On error, m holds whatever was decoded before the
// error and should not be used.
func Decode(b []byte, m *QueryMsg) error {
	if len(b) > MaxMessage {
		m.Reset()
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), MaxMessage)
	}
	if err := unmarshal.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// Append appends m, serialized, to dst and returns the extended buffer,
// growing dst at most once. There is no length prefix or other framing:
// ZeroMQ delivers whole messages, and one message is one QueryMsg.
//
// Fields are written in field-number order, as protobuf-go always writes
// them. Append writes m as it is, required fields missing or not
// (AllowPartial): it is meant for the server's own replies, which its
// tests check, and it cannot fail. (proto2 strings are not checked for
// UTF-8, so nothing else can make marshalling fail.)
func Append(dst []byte, m *QueryMsg) []byte {
	size := proto.Size(m)
	dst = slices.Grow(dst, size)
	start := len(dst)
	dst, err := marshal.MarshalAppend(dst, m)
	// The size cannot change between Size and MarshalAppend unless the
	// caller mutates m concurrently, which is a data race.
	if err != nil || len(dst)-start != size {
		panic(fmt.Sprintf("dwork: marshal of QueryMsg failed: %d of %d bytes, %v", len(dst)-start, size, err))
	}
	return dst
}
