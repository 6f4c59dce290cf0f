package periodic

import (
	"bytes"
	"errors"
	"slices"
)

// Sep separates a payload's message id, command and arguments. The spec calls
// it "a NULL byte"; the real code (protocol.NullChar) uses these two bytes.
const Sep = "\x00\x01"

// Errors returned by ParseMessage, for the payloads on which the real server's
// protocol.ParseCommand panics; the panic ends the connection.
var (
	ErrNoSeparator = errors.New("periodic: message has no separator")
	ErrNoCommand   = errors.New("periodic: message has an empty command")
)

// Message is one payload after the handshake, split as the real server's
// protocol.ParseCommand splits it. ID and Data are views into the payload,
// capped at their length.
type Message struct {
	ID   []byte // echoed in every reply to this message
	Cmd  Command
	Data []byte // nil when the payload has no data
}

// ParseMessage splits a payload, msgID Sep cmd [Sep data], into m. It is
// bytes.SplitN(payload, Sep, 3) and the real server's rules on the parts:
//   - one part (no Sep): ErrNoSeparator;
//   - two parts whose second is not one byte long: Cmd Unknown and Data the
//     second part ("id" Sep gives an empty, non-nil Data);
//   - two parts whose second is one byte: Cmd that byte, Data nil;
//   - three parts with an empty second part: ErrNoCommand;
//   - three parts: Cmd the first byte of the second part (any bytes after it
//     are dropped), Data the third part, or nil when it is empty.
//
// Data keeps any further Seps: it is the rest of the payload, arguments and
// all (see NextArg and SplitArgs).
func ParseMessage(payload []byte, m *Message) error {
	i := bytes.Index(payload, sepBytes)
	if i < 0 {
		return ErrNoSeparator
	}
	m.ID = payload[:i:i]
	rest := payload[i+len(Sep):]
	j := bytes.Index(rest, sepBytes)
	if j < 0 {
		if len(rest) == 1 {
			m.Cmd, m.Data = Command(rest[0]), nil
		} else {
			m.Cmd, m.Data = Unknown, rest
		}
		return nil
	}
	if j == 0 {
		return ErrNoCommand
	}
	m.Cmd, m.Data = Command(rest[0]), nil
	if data := rest[j+len(Sep):]; len(data) > 0 {
		m.Data = data
	}
	return nil
}

// sepBytes is Sep for bytes.Index; the compiler does not turn a constant
// string into a []byte without allocating.
var sepBytes = []byte(Sep)

// NextArg splits data at its first Sep: arg is what comes before it, rest
// what comes after. Without a Sep, arg is all of data and rest is nil; so a
// nil rest means there are no more arguments, while an empty non-nil rest
// means data ended with Sep and one last, empty argument follows. ok is false
// when data is empty.
func NextArg(data []byte) (arg, rest []byte, ok bool) {
	if len(data) == 0 {
		return nil, nil, false
	}
	i := bytes.Index(data, sepBytes)
	if i < 0 {
		return data[:len(data):len(data)], nil, true
	}
	return data[:i:i], data[i+len(Sep):], true
}

// SplitArgs splits data as bytes.SplitN(data, Sep, len(parts)) does, into
// parts instead of a new slice, and returns how many parts it filled: the last
// one filled holds the rest of data, Seps and all. Empty data is one empty
// part. This is how the real server reads SCHED_LATER (handle, delay and an
// optional step: fewer than two parts and it ignores the message).
func SplitArgs(data []byte, parts [][]byte) int {
	n := 0
	for n < len(parts)-1 {
		i := bytes.Index(data, sepBytes)
		if i < 0 {
			break
		}
		parts[n] = data[:i:i]
		data = data[i+len(Sep):]
		n++
	}
	if n < len(parts) {
		parts[n] = data[:len(data):len(data)]
		n++
	}
	return n
}

// AppendReply appends a command reply, ResMagic size msgID Sep cmd: PONG,
// SUCCESS, NOOP, UNKNOWN.
func AppendReply(dst, msgID []byte, cmd Command) []byte {
	dst = slices.Grow(dst, HeaderSize+len(msgID)+len(Sep)+1)
	dst, start := BeginFrame(dst, ResMagic)
	dst = append(dst, msgID...)
	dst = append(dst, Sep...)
	dst = append(dst, byte(cmd))
	return EndFrame(dst, start)
}

// AppendData appends a reply without a command byte, ResMagic size msgID Sep
// data, as the real server sends STATUS, DUMP chunks, DUMP's "EOF" and (in
// switchyard) error texts. A client that parses it finds Cmd Unknown and data
// unless data is a single byte.
func AppendData(dst, msgID, data []byte) []byte {
	dst = slices.Grow(dst, HeaderSize+len(msgID)+len(Sep)+len(data))
	dst, start := BeginFrame(dst, ResMagic)
	dst = append(dst, msgID...)
	dst = append(dst, Sep...)
	dst = append(dst, data...)
	return EndFrame(dst, start)
}

// AppendRequest appends a request as go-periodic's Agent.Send writes it:
// ReqMagic size msgID Sep cmd, then Sep and each argument, so one argument,
// even an empty one, adds a Sep (Agent.Send adds one for non-nil data).
func AppendRequest(dst, msgID []byte, cmd Command, args ...[]byte) []byte {
	size := len(msgID) + len(Sep) + 1
	for _, a := range args {
		size += len(Sep) + len(a)
	}
	dst = slices.Grow(dst, HeaderSize+size)
	dst, start := BeginFrame(dst, ReqMagic)
	dst = append(dst, msgID...)
	dst = append(dst, Sep...)
	dst = append(dst, byte(cmd))
	for _, a := range args {
		dst = append(dst, Sep...)
		dst = append(dst, a...)
	}
	return EndFrame(dst, start)
}
