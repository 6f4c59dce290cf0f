package gearman

import (
	"bytes"
	"errors"
)

const (
	// HeaderSize is the length of a binary packet's header: magic, type, size.
	HeaderSize = 12
	// MaxUniqueSize is gearmand's GEARMAN_MAX_UNIQUE_SIZE; a longer unique is
	// refused (by the engine, with ARGUMENT_TOO_LARGE; Parse does not check).
	MaxUniqueSize = 64
	// MaxArgs is the most arguments any type carries (SUBMIT_JOB_SCHED), and
	// the most words kept from a text line.
	MaxArgs = 8
	// DefaultMaxPacket bounds a binary packet's body when Parse is given no
	// limit.
	DefaultMaxPacket = 64 << 20
	// MaxLineSize bounds a text line, its line ending included. gearmand
	// waits forever for the newline; we stop a peer that never sends one.
	MaxLineSize = 8 << 10
)

// Errors returned by Parse. ErrTruncated concerns one packet and comes with
// the packet's length as consumed, so that the caller knows where it ends;
// the others leave the stream unparseable and come with consumed == 0.
var (
	ErrBadMagic    = errors.New("gearman: bad magic")
	ErrTooLarge    = errors.New("gearman: packet too large")
	ErrTruncated   = errors.New("gearman: packet has too few arguments")
	ErrLineTooLong = errors.New("gearman: text line too long")
)

// Packet is one parsed frame: a binary packet or a text-admin line. All its
// slices point into the buffer given to Parse (or, for a line a Parser
// received in pieces, into the Parser's) and are valid until the caller
// discards or overwrites those bytes; they are capped at their own length, so
// appending to one cannot clobber the bytes that follow it.
//
// Only the first NArgs of Args and the first NWords of Words are meaningful:
// Parse does not clear the rest.
type Packet struct {
	Magic Magic // Req or Res; 0 for a text line
	Type  Type  // 0 for a text line
	Args  [MaxArgs][]byte
	NArgs int

	// Text is set for a text-admin line (first byte not NUL): Words holds
	// its space-separated words, NWords their count.
	Text   bool
	Words  [MaxArgs][]byte
	NWords int
	Line   []byte // the whole line without its line ending
}

// Arg returns argument i, or nil if the packet has no such argument.
func (p *Packet) Arg(i int) []byte {
	if i < 0 || i >= p.NArgs {
		return nil
	}
	return p.Args[i]
}

// Parse parses one frame from the front of buf into p and returns the number
// of bytes it used. consumed == 0 with a nil error means buf holds no complete
// frame yet: call again with more bytes. Parse keeps no state, so a frame
// cut short is looked at again from its start at the next call; a stream
// whose frames arrive in pieces wants a Parser, which resumes instead.
//
// A frame whose first byte is NUL is a binary packet; maxSize bounds its body
// (maxSize <= 0 means DefaultMaxPacket). Its arguments are split by
// Type.Argc: the first Argc()-1 end at a NUL, the last is the rest of the
// body. A type gearmand does not know yields one argument, the whole body, and
// no error: the caller decides the reply. A type without arguments ignores
// its body.
//
// Any other first byte starts a text line, ended by "\n" or "\r\n" and at most
// MaxLineSize bytes long. Its words are the runs of non-space bytes (leading,
// trailing and repeated spaces produce no empty words; an empty line has
// none). Past MaxArgs-1 words, the last word is the rest of the line from
// there on, spaces inside it kept and trailing spaces dropped.
//
// Errors:
//   - ErrBadMagic: the magic is neither "\x00REQ" nor "\x00RES"; reported as
//     soon as the bytes at hand rule out both. consumed == 0.
//   - ErrTooLarge: the header's size exceeds maxSize; reported from the header
//     alone, without waiting for the body. consumed == 0.
//   - ErrLineTooLong: MaxLineSize bytes without a newline. consumed == 0.
//   - ErrTruncated: the body has fewer NULs than its type needs. consumed is
//     the whole packet; p holds its magic, type and the arguments found (the
//     unterminated remainder last).
func Parse(buf []byte, maxSize int, p *Packet) (consumed int, err error) {
	if len(buf) == 0 {
		return 0, nil
	}
	if buf[0] != 0 {
		nl := lineEnd(buf, 0)
		if nl < 0 {
			if len(buf) >= MaxLineSize {
				return 0, ErrLineTooLong
			}
			return 0, nil
		}
		splitLine(buf[:nl+1:nl+1], p)
		return nl + 1, nil
	}
	ps := Parser{MaxSize: maxSize}
	consumed, _, err = ps.Parse(buf, p)
	return consumed, err
}

// lineEnd returns the index in buf of the newline that ends a text line of
// which kept bytes came before buf, or -1 if buf's part of the line holds
// none. A newline that would make the line longer than MaxLineSize does not
// count.
func lineEnd(buf []byte, kept int) int {
	window := buf[:min(len(buf), MaxLineSize-kept)]
	return bytes.IndexByte(window, '\n')
}

// splitLine fills p from frame, one whole text line, its "\n" included.
func splitLine(frame []byte, p *Packet) {
	nl := len(frame) - 1
	line := frame[:nl:nl]
	if nl > 0 && line[nl-1] == '\r' {
		line = line[: nl-1 : nl-1]
	}

	p.Magic = 0
	p.Type = 0
	p.NArgs = 0
	p.Text = true
	p.Line = line

	n := 0
	for i := 0; ; {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if i == len(line) {
			break
		}
		if n == MaxArgs-1 {
			end := len(line)
			for line[end-1] == ' ' {
				end--
			}
			p.Words[n] = line[i:end:end]
			n++
			break
		}
		j := i + 1
		for j < len(line) && line[j] != ' ' {
			j++
		}
		p.Words[n] = line[i:j:j]
		n++
		i = j
	}
	p.NWords = n
}
