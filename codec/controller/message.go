package controller

import (
	"encoding/binary"
	"slices"

	"google.golang.org/protobuf/proto"
)

// marshal writes a message whose size proto.Size has just computed (and
// cached in the message), so MarshalAppend does not measure it again.
var marshal = proto.MarshalOptions{UseCachedSize: true}

// unmarshal drops unknown fields: nothing here forwards a message, and
// keeping them would cost an allocation per hostile frame.
var unmarshal = proto.UnmarshalOptions{DiscardUnknown: true}

// appendFrame appends m's length prefix, m and extra, growing dst once.
func appendFrame(dst []byte, m proto.Message, extra []byte) []byte {
	size := proto.Size(m)
	dst = slices.Grow(dst, LenSize+size+len(extra))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(size))
	start := len(dst)
	dst, err := marshal.MarshalAppend(dst, m)
	// These messages hold only varints: no strings to check for UTF-8, no
	// required fields, no nested messages. Marshalling them cannot fail,
	// and the size cannot change between Size and MarshalAppend unless the
	// caller mutates m concurrently, which is a data race.
	if err != nil || len(dst)-start != size {
		panic("controller: marshal of " + string(m.ProtoReflect().Descriptor().Name()) + " failed")
	}
	return append(dst, extra...)
}

// AppendWorkerPulse appends the frame of m: its length, then m.
func AppendWorkerPulse(dst []byte, m *WorkerPulse) []byte {
	return appendFrame(dst, m, nil)
}

// AppendPulseResponse appends the frame of m: its length, then m.
func AppendPulseResponse(dst []byte, m *PulseResponse) []byte {
	return appendFrame(dst, m, nil)
}

// AppendControlMsg sets m.ExtraSize to len(extra) and appends the frame: the
// length of m, m, then extra.
func AppendControlMsg(dst []byte, m *ControlMsg, extra []byte) []byte {
	m.ExtraSize = uint64(len(extra))
	return appendFrame(dst, m, extra)
}

// AppendWorkerResponse sets m.ExtraSize to len(extra) and appends the frame:
// the length of m, m, then extra.
func AppendWorkerResponse(dst []byte, m *WorkerResponse, extra []byte) []byte {
	m.ExtraSize = uint64(len(extra))
	return appendFrame(dst, m, extra)
}

// Unmarshal decodes a frame's message (Frame.Msg) into m, which it resets
// first: a caller reuses one message per connection instead of allocating
// one per frame. Unknown fields are dropped. An unknown enum number is kept
// as its number (proto3 enums are open); the Validate functions refuse it.
//
// The messages the controller decodes, WorkerPulse and WorkerResponse,
// decode without allocating. A present `optional` field (PulseResponse's
// worker_id, ControlMsg's task_id) is a *uint64 in the generated types, and
// decoding one allocates it.
func Unmarshal(msg []byte, m proto.Message) error {
	return unmarshal.Unmarshal(msg, m)
}
