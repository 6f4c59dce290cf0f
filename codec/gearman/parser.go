package gearman

import (
	"bytes"
	"encoding/binary"
	"sync"
)

// Parser parses one connection's stream of frames, whose bytes arrive in
// pieces of any size, as Parse does, but resumes a frame cut short instead
// of parsing it again from its start: however its frames are split, each
// byte is looked at a bounded number of times, so a slow sender of a long
// line or a large packet costs time in proportion to its bytes, not to
// their square.
//
// Each call is given the bytes that follow those consumed by the calls
// before. A frame wholly inside them is parsed in place. The frame they end
// inside is left unfinished in one of two ways:
//
//   - A binary packet stays in the caller's buffer (consumed == 0): its
//     header says how long it is, so the caller lets its bytes gather and
//     calls again, with them at the front of buf, once Need bytes are there.
//     The parser remembers what it has checked of them.
//   - A text line has no length to wait for: the parser consumes what has
//     come of it, keeping a copy, and next looks only at the bytes after.
//
// Parsing allocates nothing once a connection has split a short line: a
// line split across calls is copied into a small buffer the parser keeps,
// or, if longer, into one of MaxLineSize bytes borrowed from a pool shared
// by all parsers and handed back at the next call, so that an idle
// connection holds none.
//
// The zero Parser is ready to use, with DefaultMaxPacket as its limit.
type Parser struct {
	// MaxSize bounds a binary packet's body; <= 0 means DefaultMaxPacket.
	MaxSize int

	state parserState
	have  int                // bytes of an incomplete packet that were at hand (inPacket)
	need  int                // that packet's whole length, once its header has come; else 0
	line  []byte             // the start of a text line that has not ended (inLine)
	small []byte             // line's buffer while it fits smallLine bytes; kept
	long  *[MaxLineSize]byte // line's buffer past that, from longLines
}

// longLines lends the buffers of lines longer than smallLine.
var longLines = sync.Pool{New: func() any { return new([MaxLineSize]byte) }}

// parserState says what the bytes of the next call continue.
type parserState uint8

const (
	atFrame  parserState = iota // nothing: a frame starts with the next byte
	inPacket                    // a binary packet, left in the caller's buffer
	inLine                      // a text line, the part received kept in line
	lineDone                    // as atFrame, the last frame a line kept in line
)

// smallLine is the size of the buffer a Parser keeps for lines split across
// calls. Admin commands are short; a longer line gets a buffer of its own.
const smallLine = 256

// Parse parses the next frame of the stream into p. buf holds the bytes
// that follow those consumed so far: when the last call left a binary packet
// unfinished, buf starts with that packet's bytes again, as many or more.
//
// It returns how many bytes of buf it used and whether p now holds a frame.
// p's slices point into buf, or for a line received over several calls into
// the parser's buffer; they are valid until the next call.
//
//   - frame: p holds one frame, consumed bytes long from buf's front (less
//     for a line whose start came before).
//   - !frame, consumed > 0: buf ended inside a text line; the parser has
//     kept its bytes. Call again with the bytes that follow.
//   - !frame, consumed == 0, err == nil: buf holds an unfinished binary
//     packet. Call again with those bytes and more; earlier than Need bytes
//     is allowed but only waits.
//
// Errors are Parse's. ErrTruncated comes with its frame; the others end the
// stream (consumed == 0, no frame) and are reported as soon as Parse would
// report them for the stream's bytes so far. Call Reset before using the
// Parser for another stream.
func (ps *Parser) Parse(buf []byte, p *Packet) (consumed int, frame bool, err error) {
	if ps.state != atFrame || len(buf) == 0 || buf[0] != 0 {
		return ps.parse(buf, p)
	}

	// A binary packet from its start: the common case, the engine's hot
	// path, parsed here without a further call.
	//
	// Check as much of the magic as has arrived, so garbage is refused at
	// once rather than after 12 bytes that may never come.
	switch {
	case len(buf) > 1 && buf[1] != 'R',
		len(buf) > 2 && buf[2] != 'E',
		len(buf) > 3 && buf[3] != 'Q' && buf[3] != 'S':
		return 0, false, ErrBadMagic
	}
	if len(buf) < HeaderSize {
		ps.state, ps.have, ps.need = inPacket, len(buf), 0
		return 0, false, nil
	}

	maxSize := ps.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxPacket
	}
	// Compare in uint64: the size field is a uint32 and int may be 32 bits.
	size := binary.BigEndian.Uint32(buf[8:12])
	if uint64(size) > uint64(maxSize) {
		return 0, false, ErrTooLarge
	}
	end := HeaderSize + int(size)
	if len(buf) < end {
		ps.state, ps.have, ps.need = inPacket, len(buf), end
		return 0, false, nil
	}

	p.Magic = Req
	if buf[3] == 'S' {
		p.Magic = Res
	}
	p.Type = Type(binary.BigEndian.Uint32(buf[4:8]))
	p.Text = false
	p.NWords = 0
	p.Line = nil

	body := buf[HeaderSize:end:end]
	argc := p.Type.Argc()
	switch {
	case argc < 0:
		p.Args[0] = body
		p.NArgs = 1
		return end, true, nil
	case argc == 0:
		p.NArgs = 0
		return end, true, nil
	}
	for i := 0; i < argc-1; i++ {
		nul := bytes.IndexByte(body, 0)
		if nul < 0 {
			p.Args[i] = body
			p.NArgs = i + 1
			return end, true, ErrTruncated
		}
		p.Args[i] = body[:nul:nul]
		body = body[nul+1:]
	}
	p.Args[argc-1] = body
	p.NArgs = argc
	return end, true, nil
}

// parse is Parse for all but a packet from its start.
func (ps *Parser) parse(buf []byte, p *Packet) (int, bool, error) {
	switch ps.state {
	case inLine:
		return ps.resumeLine(buf, p)
	case inPacket:
		return ps.resumePacket(buf, p)
	case lineDone: // p is done with the line now
		ps.dropLine()
		ps.state = atFrame
	}
	if len(buf) == 0 {
		return 0, false, nil
	}
	if buf[0] == 0 {
		return ps.Parse(buf, p)
	}
	nl := lineEnd(buf, 0)
	if nl >= 0 {
		splitLine(buf[:nl+1:nl+1], p)
		return nl + 1, true, nil
	}
	if len(buf) >= MaxLineSize {
		return 0, false, ErrLineTooLong
	}
	ps.state = inLine
	ps.keep(buf)
	return len(buf), false, nil
}

// resumePacket goes on with the binary packet at buf's front, of which the
// first ps.have bytes were checked before and whose length, once its header
// had come, is ps.need: nothing is looked at again until the header or the
// whole packet is there, and then only the 12 bytes of the header again.
func (ps *Parser) resumePacket(buf []byte, p *Packet) (int, bool, error) {
	if ps.need == 0 { // the header is not complete yet
		var err error
		if ps.have, err = checkMagic(buf, ps.have); err != nil {
			return 0, false, err
		}
		if len(buf) < HeaderSize {
			ps.have = max(ps.have, len(buf))
			return 0, false, nil
		}
	} else if len(buf) < ps.need {
		return 0, false, nil
	}
	ps.state = atFrame
	return ps.Parse(buf, p)
}

// checkMagic checks the bytes of a binary packet's magic in buf from index
// from on, as far as they have arrived, and returns the index it got to;
// buf[0] is known to be NUL. Garbage is refused at once rather than after
// twelve bytes that may never come.
func checkMagic(buf []byte, from int) (int, error) {
	to := min(len(buf), 4)
	for i := from; i < to; i++ {
		if c := buf[i]; c != "\x00REQ"[i] && (i != 3 || c != 'S') {
			return i, ErrBadMagic
		}
	}
	return max(from, to), nil
}

// resumeLine goes on with the text line whose start ps.line holds: only
// buf is scanned for its end.
func (ps *Parser) resumeLine(buf []byte, p *Packet) (int, bool, error) {
	nl := lineEnd(buf, len(ps.line))
	if nl < 0 {
		if len(ps.line)+len(buf) >= MaxLineSize {
			return 0, false, ErrLineTooLong
		}
		ps.keep(buf)
		return len(buf), false, nil
	}
	ps.keep(buf[:nl+1])
	ps.state = lineDone // ps.line stays until the next call, for p
	splitLine(ps.line[:len(ps.line):len(ps.line)], p)
	return nl + 1, true, nil
}

// keep appends b to the line kept so far, which never grows past
// MaxLineSize. A line that outgrows the small buffer moves to a long one.
func (ps *Parser) keep(b []byte) {
	if n := len(ps.line) + len(b); n > cap(ps.line) {
		switch {
		case n > smallLine:
			ps.long = longLines.Get().(*[MaxLineSize]byte)
			ps.line = append(ps.long[:0], ps.line...)
		case ps.small == nil:
			ps.small = make([]byte, 0, smallLine)
			fallthrough
		default:
			ps.line = ps.small[:0]
		}
	}
	ps.line = append(ps.line, b...)
}

// dropLine forgets the kept line and gives a long line's buffer back.
func (ps *Parser) dropLine() {
	ps.line = nil
	if ps.long != nil {
		longLines.Put(ps.long)
		ps.long = nil
	}
}

// Need returns how many bytes buf must hold for the next call to do more
// than wait: an unfinished packet's whole length once its header has come,
// and before that one more byte than the last call had, which may rule out
// the magic. Otherwise any byte can make progress: 1.
func (ps *Parser) Need() int {
	switch {
	case ps.state != inPacket:
		return 1
	case ps.need > 0:
		return ps.need
	}
	return ps.have + 1
}

// Reset forgets the frame in progress, as for a new stream. A caller that
// took an unfinished packet's bytes elsewhere (to read a large body into a
// buffer of its own) resets before parsing what follows.
func (ps *Parser) Reset() {
	ps.state, ps.have, ps.need = atFrame, 0, 0
	ps.dropLine()
}
