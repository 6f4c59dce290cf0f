package gearman

import (
	"encoding/binary"
	"slices"
)

// AppendHeader appends a packet header for a body of size bytes. Any magic
// other than Req is written as "\x00RES", what a server sends.
func AppendHeader(dst []byte, m Magic, t Type, size int) []byte {
	q := byte('S')
	if m == Req {
		q = 'Q'
	}
	return append(dst, 0, 'R', 'E', q,
		byte(t>>24), byte(t>>16), byte(t>>8), byte(t),
		byte(size>>24), byte(size>>16), byte(size>>8), byte(size))
}

// Begin appends a header with a zero size and returns dst and the header's
// offset in it. Append the NUL-separated arguments, then call End to patch
// the size: the body is written in place, e.g. a handle with
// strconv.AppendUint, without being measured first.
func Begin(dst []byte, m Magic, t Type) ([]byte, int) {
	return AppendHeader(dst, m, t, 0), len(dst)
}

// End sets the size of the packet that Begin started at start to the number
// of bytes appended since.
func End(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-HeaderSize))
	return dst
}

// EndTail is End for a packet whose last tail bytes are not in dst: the
// caller writes them separately (with writev), so a large payload is not
// copied into the reply buffer.
func EndTail(dst []byte, start, tail int) []byte {
	binary.BigEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-HeaderSize+tail))
	return dst
}

// AppendPacket appends a whole packet whose body is args joined by NULs.
func AppendPacket(dst []byte, m Magic, t Type, args ...[]byte) []byte {
	size := 0
	for _, a := range args {
		size += len(a) + 1
	}
	if size > 0 {
		size-- // no NUL after the last argument
	}
	dst = slices.Grow(dst, HeaderSize+size)
	dst = AppendHeader(dst, m, t, size)
	for i, a := range args {
		if i > 0 {
			dst = append(dst, 0)
		}
		dst = append(dst, a...)
	}
	return dst
}

// AppendError appends an ERROR response: code NUL text. The codes gearmand
// sends are libgearman's error names without "GEARMAN_", e.g.
// "INVALID_MAGIC", "Request magic expected".
func AppendError(dst []byte, code, text string) []byte {
	dst = slices.Grow(dst, HeaderSize+len(code)+1+len(text))
	dst = AppendHeader(dst, Res, Error, len(code)+1+len(text))
	dst = append(dst, code...)
	dst = append(dst, 0)
	return append(dst, text...)
}
