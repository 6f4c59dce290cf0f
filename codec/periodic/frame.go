package periodic

import (
	"encoding/binary"
	"errors"
)

const (
	// HeaderSize is the length of a frame's header: 4 bytes of magic and a
	// 4-byte big-endian payload size.
	HeaderSize = 8
	// DefaultMaxFrame bounds a frame's payload when ParseFrame is given no
	// limit. The real server has no bound at all; 64 MiB holds any job.
	DefaultMaxFrame = 64 << 20
)

// The two magics. They are string constants, not variables, so that no
// package can change them and they can be compared and appended without
// conversion.
const (
	ReqMagic = "\x00REQ" // every frame a client or worker sends
	ResMagic = "\x00RES" // every frame the server sends
)

// sizeMask keeps the low 31 bits of the size field: the real server
// (protocol.ParseHeader) clears the top bit before reading the payload.
const sizeMask = 0x7fffffff

// Errors returned by ParseFrame. Both leave the stream unparseable: the real
// server closes the connection (on a wrong magic; it has no size limit).
var (
	ErrBadMagic = errors.New("periodic: bad magic")
	ErrTooLarge = errors.New("periodic: frame too large")
)

// ParseFrame reads one frame with the given magic (ReqMagic or ResMagic) from
// the front of buf. It returns the payload, a view into buf capped at its
// length so that appending to it cannot overwrite the next frame, and the
// number of bytes the frame took.
//
// consumed == 0 with a nil error means buf holds no whole frame yet. need
// then says how long buf must be for ParseFrame to return the frame:
// HeaderSize until the header has arrived, the whole frame's length after, so
// a caller can wait for that many bytes without parsing again. On success
// need == consumed; with an error it is 0.
//
// The size's top bit is ignored, as the real server ignores it. A size above
// max is ErrTooLarge (max <= 0 means DefaultMaxFrame), reported from the
// header alone. A wrong magic is ErrBadMagic, reported as soon as the bytes at
// hand rule the magic out.
func ParseFrame(buf []byte, magic string, max int) (payload []byte, consumed, need int, err error) {
	// Compare what has arrived of the magic, so garbage is refused without
	// waiting for bytes that may never come.
	n := min(len(buf), len(magic))
	if string(buf[:n]) != magic[:n] {
		return nil, 0, 0, ErrBadMagic
	}
	if len(buf) < HeaderSize {
		return nil, 0, HeaderSize, nil
	}
	if max <= 0 {
		max = DefaultMaxFrame
	}
	// size is at most 2^31-1, so it fits an int even where int is 32 bits.
	size := int(binary.BigEndian.Uint32(buf[4:HeaderSize]) & sizeMask)
	if size > max {
		return nil, 0, 0, ErrTooLarge
	}
	end := HeaderSize + size
	if len(buf) < end {
		return nil, 0, end, nil
	}
	return buf[HeaderSize:end:end], end, end, nil
}

// BeginFrame appends magic and a size placeholder, and returns dst and the
// frame's offset in it. Append the payload, then call EndFrame: the payload is
// written in place, without being measured first.
func BeginFrame(dst []byte, magic string) (out []byte, start int) {
	start = len(dst)
	dst = append(dst, magic...)
	return append(dst, 0, 0, 0, 0), start
}

// EndFrame sets the size of the frame that BeginFrame started at start to the
// number of bytes appended since. The payload must stay under 2 GiB (the size
// field's top bit is not part of the size); ParseFrame's limit keeps frames
// far smaller.
func EndFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start+4:], uint32(len(dst)-start-HeaderSize))
	return dst
}

// AppendHandshake appends the first frame of a connection: a payload of one
// byte, the client type (TypeClient or TypeWorker), with no message id.
func AppendHandshake(dst []byte, clientType byte) []byte {
	dst = append(dst, ReqMagic...)
	return append(dst, 0, 0, 0, 1, clientType)
}
