package controller

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

const (
	// LenSize is the length of a frame's length prefix: a uint64,
	// little-endian (moevm/grpc_server's conn.Unix and Worker::WriteMessage).
	LenSize = 8
	// DefaultMaxFrame bounds a frame's message plus extra bytes when
	// ParseFrame is given no limit. The real code has no bound at all.
	DefaultMaxFrame = 64 << 20
)

// Kind names the message a frame carries. The bytes do not say which it is:
// the socket and the direction do (see the package doc), and the kind says
// whether raw extra bytes follow the message.
type Kind uint8

const (
	KindWorkerPulse    Kind = iota + 1 // worker -> controller, main socket
	KindPulseResponse                  // controller -> worker, main socket
	KindControlMsg                     // controller -> worker, worker socket; extra bytes follow
	KindWorkerResponse                 // worker -> controller, worker socket; extra bytes follow
)

var kindNames = [...]string{
	KindWorkerPulse:    "WorkerPulse",
	KindPulseResponse:  "PulseResponse",
	KindControlMsg:     "ControlMsg",
	KindWorkerResponse: "WorkerResponse",
}

func (k Kind) String() string {
	if k == 0 || int(k) >= len(kindNames) {
		return "Kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// extraField is the number of the extra_size field of k's message, or 0 if
// no extra bytes follow it; -1 for a kind that does not exist.
func (k Kind) extraField() protowire.Number {
	switch k {
	case KindWorkerPulse, KindPulseResponse:
		return 0
	case KindControlMsg:
		return 2 // ControlMsg.extra_size
	case KindWorkerResponse:
		return 3 // WorkerResponse.extra_size
	}
	return -1
}

// Errors returned by ParseFrame. Each leaves the stream unparseable (where
// the frame ends is unknown): the connection is to be closed.
var (
	// ErrTooLarge: the length prefix, or the length plus extra_size,
	// exceeds the limit.
	ErrTooLarge = errors.New("controller: frame too large")
	// ErrMalformed: the message of a kind that carries extra bytes is not
	// valid protobuf wire format, so extra_size cannot be read.
	ErrMalformed = errors.New("controller: malformed message, extra_size unreadable")
	// ErrKind: ParseFrame was given a Kind that does not exist.
	ErrKind = errors.New("controller: unknown frame kind")
)

// Frame is one parsed frame: views into the buffer given to ParseFrame,
// valid until the caller discards or overwrites those bytes, each capped at
// its own length so that appending to one cannot clobber what follows.
type Frame struct {
	// Msg is the serialized message, without its length prefix.
	Msg []byte
	// Extra is the raw bytes after the message: exactly extra_size of them
	// for KindControlMsg and KindWorkerResponse, empty for the others.
	Extra []byte
}

// ParseFrame reads one frame of the given kind from the front of buf. It
// returns the frame and the number of bytes it took.
//
// consumed == 0 with a nil error means buf holds no whole frame yet; need
// then says how long buf must be before calling again is worth it: LenSize
// until the prefix has arrived, then the end of the message, then (when
// extra bytes follow and extra_size is known) the end of the frame. Calling
// again with more bytes resumes: the parser keeps no state, and re-reading
// a message for its extra_size is cheap (messages are tens of bytes). On
// success need == consumed; with an error both are 0.
//
// max bounds the frame's message plus extra bytes (max <= 0 means
// DefaultMaxFrame): a length above it is ErrTooLarge from the 8-byte prefix
// alone, an extra_size that takes the total above it is ErrTooLarge as soon
// as the message has arrived. extra_size is read as proto.Unmarshal would
// read it: the last occurrence of the field as a varint wins, a field of
// that number with another wire type is an unknown field, absent is 0. A
// message that is not valid wire format is ErrMalformed for the kinds that
// carry extra bytes; for the others, ParseFrame does not look inside it.
func ParseFrame(buf []byte, kind Kind, max int) (f Frame, consumed, need int, err error) {
	field := kind.extraField()
	if field < 0 {
		return Frame{}, 0, 0, ErrKind
	}
	if len(buf) < LenSize {
		return Frame{}, 0, LenSize, nil
	}
	if max <= 0 {
		max = DefaultMaxFrame
	}
	// Keep LenSize+max within an int so that no sum below can overflow,
	// even where int is 32 bits.
	max = min(max, math.MaxInt-LenSize)

	// Compare in uint64: the prefix may be anything up to 2^64-1.
	size := binary.LittleEndian.Uint64(buf)
	if size > uint64(max) {
		return Frame{}, 0, 0, ErrTooLarge
	}
	msgEnd := LenSize + int(size)
	if len(buf) < msgEnd {
		return Frame{}, 0, msgEnd, nil
	}
	f.Msg = buf[LenSize:msgEnd:msgEnd]
	if field == 0 {
		f.Extra = buf[msgEnd:msgEnd:msgEnd]
		return f, msgEnd, msgEnd, nil
	}

	extra, ok := scanUint64(f.Msg, field)
	if !ok {
		return Frame{}, 0, 0, ErrMalformed
	}
	if extra > uint64(max)-size {
		return Frame{}, 0, 0, ErrTooLarge
	}
	end := msgEnd + int(extra)
	if len(buf) < end {
		return Frame{}, 0, end, nil
	}
	f.Extra = buf[msgEnd:end:end]
	return f, end, end, nil
}

// scanUint64 finds the value of the singular uint64 field num in the
// serialized message b without decoding the rest: the last varint
// occurrence wins (proto's rule for a repeated singular scalar), occurrences
// of num with another wire type are unknown fields as proto.Unmarshal
// treats them, and absent is 0. ok is false if b is not valid wire format
// by proto.Unmarshal's rules (FuzzParseFrame checks that the two agree).
func scanUint64(b []byte, num protowire.Number) (v uint64, ok bool) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		// ConsumeTag refuses field number 0 but not one above
		// MaxValidNumber, which proto.Unmarshal refuses at the top level
		// (and takes inside an unknown group: ConsumeFieldValue below
		// skips groups as Unmarshal does).
		if l < 0 || n > protowire.MaxValidNumber {
			return 0, false
		}
		b = b[l:]
		if n == num && typ == protowire.VarintType {
			x, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return 0, false
			}
			v = x
			b = b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return 0, false
		}
		b = b[l:]
	}
	return v, true
}
