// Package memodb is the MemoDB broker protocol's wire format (bcdb's
// memodb-broker; see docs/memodb.md): one NNG message is a CBOR header,
// an array ["memo01", type, id, ...], deterministically encoded (RFC 8949
// §4.2.1, fxamacker/cbor's core deterministic mode), immediately followed
// by the payload's bytes. No sockets here: bytes in, a Message out, and back.
//
// Decode checks every field as the spec (and memodb-broker, where it says
// more) has it: the version, a known type, the id (empty for clients and
// READY, IDLen bytes for a worker), READY's list of service names, JOB's
// service and timeout, RESULT's optional bool, nothing more, and no
// payload where the type has none. A header that is not well-formed CBOR,
// or not in its deterministic encoding, is refused as well: the check is
// that encoding the decoded fields again gives back the very bytes.
package memodb

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/fxamacker/cbor/v2"
)

// Version is the first field of every header.
const Version = "memo01"

// IDLen is the length of a worker id, as memodb-broker hands them out.
const IDLen = 4

// MaxServices bounds the service names of one READY.
const MaxServices = 4096

// Type is a message's type number.
type Type uint8

// The message types.
const (
	Ready      Type = 0x01
	Job        Type = 0x02
	Result     Type = 0x03
	Heartbeat  Type = 0x04
	Disconnect Type = 0x05
)

func (t Type) String() string {
	switch t {
	case Ready:
		return "READY"
	case Job:
		return "JOB"
	case Result:
		return "RESULT"
	case Heartbeat:
		return "HEARTBEAT"
	case Disconnect:
		return "DISCONNECT"
	}
	return "type " + strconv.Itoa(int(t))
}

// Message is one decoded message. Payload is a slice of the decoded
// buffer, not a copy; the other fields are the decoder's own.
type Message struct {
	Type Type
	// ID is empty (a client, a READY) or IDLen bytes (a worker).
	ID []byte
	// Services are READY's service names, in the order sent.
	Services []string
	// Service and Timeout (milliseconds) are JOB's.
	Service string
	Timeout uint64
	// Disconnecting is RESULT's optional bool; HasDisconnecting says
	// whether the header had it.
	Disconnecting    bool
	HasDisconnecting bool
	// Payload is what follows the header.
	Payload []byte
}

// Why a message is refused. Every error Decode returns wraps one of them.
var (
	// ErrMalformed: the header is not one well-formed CBOR array of plain
	// items (no tags, no indefinite lengths, text in valid UTF-8, arrays
	// of at most MaxServices items, nested at most 4 deep).
	ErrMalformed = errors.New("memodb: malformed CBOR header")
	// ErrNotDeterministic: a well-formed header in another encoding than
	// the deterministic one (a longer integer or length than needed).
	ErrNotDeterministic = errors.New("memodb: header not deterministically encoded")
	// ErrVersion: the first field is not "memo01".
	ErrVersion = errors.New("memodb: not protocol version memo01")
	// ErrInvalid: a field is missing, extra, of the wrong kind or value,
	// or the message has a payload its type does not allow, or it does
	// not go in this direction.
	ErrInvalid = errors.New("memodb: invalid message")
)

var (
	encMode cbor.UserBufferEncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().UserBufferEncMode(); err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		MaxNestedLevels:  4, // fxamacker's minimum; the header needs 2
		MaxArrayElements: MaxServices,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		UTF8:             cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// Direction is who may send a message, for the id and type rules.
type Direction uint8

const (
	// Any accepts every type, with either kind of id where the type has
	// both (JOB and RESULT: empty from or to a client, IDLen to or from a
	// worker).
	Any Direction = iota
	// Request is what a broker receives: READY, a client's JOB (empty
	// id), a worker's RESULT and HEARTBEAT (IDLen).
	Request
	// Reply is what a client or a worker receives: a worker's JOB
	// (IDLen), a client's RESULT (empty id), HEARTBEAT and DISCONNECT.
	Reply
)

// Decode decodes b into m, going in direction dir. m's fields are all set;
// m.Payload is b's tail.
func Decode(b []byte, dir Direction, m *Message) error {
	*m = Message{}
	var h []any
	rest, err := decMode.UnmarshalFirst(b, &h)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	header := b[:len(b)-len(rest)]
	m.Payload = rest
	if err := m.fields(h, dir); err != nil {
		return err
	}
	var scratch [64]byte
	if again := appendHeader(scratch[:0], m); !bytes.Equal(again, header) {
		return fmt.Errorf("%w: % x, want % x", ErrNotDeterministic, header, again)
	}
	return nil
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// fields checks the decoded header h and fills m from it.
func (m *Message) fields(h []any, dir Direction) error {
	if len(h) < 3 {
		return invalid("a header of %d fields, want at least 3", len(h))
	}
	if v, ok := h[0].(string); !ok || v != Version {
		return fmt.Errorf("%w: version %v", ErrVersion, h[0])
	}
	t, ok := h[1].(uint64)
	if !ok || t < uint64(Ready) || t > uint64(Disconnect) {
		return invalid("message type %v", h[1])
	}
	m.Type = Type(t)
	id, ok := h[2].([]byte)
	if !ok {
		return invalid("%s: the id is %T, want a byte string", m.Type, h[2])
	}
	m.ID = id
	want := func(n int) error {
		if len(h) != n {
			return invalid("%s: %d fields, want %d", m.Type, len(h), n)
		}
		return nil
	}
	noPayload := func() error {
		if len(m.Payload) > 0 {
			return invalid("%s: %d bytes of payload, want none", m.Type, len(m.Payload))
		}
		return nil
	}
	switch m.Type {
	case Ready:
		if dir == Reply {
			return invalid("READY is sent to the broker only")
		}
		if err := want(4); err != nil {
			return err
		}
		list, ok := h[3].([]any)
		if !ok {
			return invalid("READY: the services are %T, want an array", h[3])
		}
		if len(list) > MaxServices {
			return invalid("READY: %d services, at most %d", len(list), MaxServices)
		}
		m.Services = make([]string, len(list))
		for i, s := range list {
			name, ok := s.(string)
			if !ok || name == "" {
				return invalid("READY: service %d is %#v, want a name", i, s)
			}
			m.Services[i] = name
		}
		if err := m.id(false); err != nil {
			return err
		}
		return noPayload()
	case Job:
		if err := want(5); err != nil {
			return err
		}
		name, ok := h[3].(string)
		if !ok || name == "" {
			return invalid("JOB: the service is %#v, want a name", h[3])
		}
		m.Service = name
		if m.Timeout, ok = h[4].(uint64); !ok {
			return invalid("JOB: the timeout is %#v, want milliseconds (an unsigned integer)", h[4])
		}
		return m.idFor(dir, Reply)
	case Result:
		if len(h) != 3 && len(h) != 4 {
			return invalid("RESULT: %d fields, want 3 or 4", len(h))
		}
		if len(h) == 4 {
			if m.Disconnecting, ok = h[3].(bool); !ok {
				return invalid("RESULT: the disconnecting flag is %#v, want a bool", h[3])
			}
			m.HasDisconnecting = true
		}
		return m.idFor(dir, Request)
	case Heartbeat, Disconnect:
		if m.Type == Disconnect && dir == Request {
			return invalid("DISCONNECT is sent by the broker only")
		}
		if err := want(3); err != nil {
			return err
		}
		if err := m.id(true); err != nil {
			return err
		}
		return noPayload()
	}
	return nil
}

// idFor checks the id of a type that goes between the broker and both
// kinds of peers: a worker's id in direction worker, empty in the other,
// either with Any.
func (m *Message) idFor(dir, worker Direction) error {
	if dir == Any {
		if len(m.ID) != 0 && len(m.ID) != IDLen {
			return invalid("%s: a %d-byte id, want none or %d bytes", m.Type, len(m.ID), IDLen)
		}
		return nil
	}
	return m.id(dir == worker)
}

// id checks that the id is a worker's (IDLen bytes) or empty.
func (m *Message) id(worker bool) error {
	switch {
	case worker && len(m.ID) != IDLen:
		return invalid("%s: a %d-byte id, want a worker's %d bytes", m.Type, len(m.ID), IDLen)
	case !worker && len(m.ID) != 0:
		return invalid("%s: a %d-byte id, want none", m.Type, len(m.ID))
	}
	return nil
}

// Append appends m, header and payload, to dst. It does not check m: a
// test or a peer may mean to send something invalid.
func Append(dst []byte, m *Message) []byte {
	return append(appendHeader(dst, m), m.Payload...)
}

// appendHeader appends m's header, deterministically encoded.
func appendHeader(dst []byte, m *Message) []byte {
	h := []any{Version, uint8(m.Type), bytesOrEmpty(m.ID)}
	switch m.Type {
	case Ready:
		h = append(h, stringsOrEmpty(m.Services))
	case Job:
		h = append(h, m.Service, m.Timeout)
	case Result:
		if m.HasDisconnecting {
			h = append(h, m.Disconnecting)
		}
	}
	return marshal(dst, h)
}

func marshal(dst []byte, v any) []byte {
	buf := bytes.NewBuffer(dst)
	if err := encMode.MarshalToBuffer(v, buf); err != nil {
		panic("memodb: " + err.Error()) // strings, integers, bytes and bools always encode
	}
	return buf.Bytes()
}

// fxamacker encodes a nil slice as CBOR null: the header has empty ones.
func bytesOrEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func stringsOrEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// AppendReady appends a READY header (no payload follows one).
func AppendReady(dst []byte, services []string) []byte {
	return appendHeader(dst, &Message{Type: Ready, Services: services})
}

// AppendJob appends a JOB header; the payload goes right after it.
func AppendJob(dst, id []byte, service string, timeoutMS uint64) []byte {
	return appendHeader(dst, &Message{Type: Job, ID: id, Service: service, Timeout: timeoutMS})
}

// AppendResult appends a RESULT header without the disconnecting flag;
// the payload goes right after it.
func AppendResult(dst, id []byte) []byte {
	return appendHeader(dst, &Message{Type: Result, ID: id})
}

// AppendResultDisconnecting appends a worker's RESULT header with the
// disconnecting flag set: its last.
func AppendResultDisconnecting(dst, id []byte) []byte {
	return appendHeader(dst, &Message{Type: Result, ID: id, Disconnecting: true, HasDisconnecting: true})
}

// AppendHeartbeat appends a HEARTBEAT (no payload follows one).
func AppendHeartbeat(dst, id []byte) []byte {
	return appendHeader(dst, &Message{Type: Heartbeat, ID: id})
}

// AppendDisconnect appends a DISCONNECT (no payload follows one).
func AppendDisconnect(dst, id []byte) []byte {
	return appendHeader(dst, &Message{Type: Disconnect, ID: id})
}
