package gearhttp

// Request smuggling, and what this file does about it. A request with both
// Content-Length and Transfer-Encoding says two things about where its
// body ends; a proxy in front of the server may believe the one and the
// server the other, and then bytes the proxy took for a body are a request
// to the server (RFC 9112 §6.3, §11.2). net/http takes the chunked body and
// deletes the Content-Length before a handler sees the request, so a
// handler cannot tell such a request from a plain chunked one. The
// listener's connections therefore follow the bytes net/http reads, as
// net/http frames them, far enough to see every request head's
// Content-Length and Transfer-Encoding fields; the handler asks its
// connection about the request it serves (framedConn.verdict).
//
// The follower never needs to find where a chunked body ends: a request
// with Transfer-Encoding is the last one it follows on its connection, and
// the handler closes the connection after answering it (or refuses it, with
// a Content-Length too). Bodies it follows are Content-Length bytes, or
// none. If it meets what it cannot follow (a head net/http would refuse,
// in which case net/http closes the connection itself), it stops there the
// same way: the request is served if net/http serves it, and the
// connection is closed after it. A request after the point where it
// stopped, which the closing rules out, would be refused: the check fails
// closed. FuzzFraming holds it to net/http's own parser.

import (
	"context"
	"net"
	"sync/atomic"
)

// framer follows one connection's requests. It only counts and matches:
// no byte is kept.
type framer struct {
	state uint8
	heads int64 // request heads begun; the current one's number, from 1

	// Between requests: CR or LF net/http skips after a POST.
	skip int

	// In a head.
	line    int   // lines of the head ended; 0: in the request line
	col     int   // bytes of the current line so far
	cr      bool  // the last byte was a CR, its meaning not known yet
	method  uint8 // the request line's method matched against POST
	name    uint8 // the field name so far matches: nameCL, nameTE, both or neither
	field   uint8 // the current field (a continuation line's is the one it continues)
	isPost  bool  // the method is POST
	hasCL   bool  // a valid Content-Length was seen
	badCL   bool  // a Content-Length net/http refuses was seen
	hasTE   bool
	clFirst uint64 // the first Content-Length's value
	clVal   uint64 // the Content-Length being read
	clState uint8

	body uint64 // bytes of the body not yet seen
}

const (
	fHeadStart uint8 = iota // before a request line: skipping what net/http skips
	fHead                   // in a request head
	fBody                   // in a Content-Length body
	fStopped                // no longer following
)

// Field names matched, as bits of framer.name.
const (
	nameCL = 1 << iota
	nameTE
)

// The current line's field.
const (
	fieldNone  uint8 = iota // the request line, or a field name before its colon
	fieldOther              // a field of no interest
	fieldCL                 // Content-Length
	fieldTE                 // Transfer-Encoding
)

var (
	clName = []byte("content-length")
	teName = []byte("transfer-encoding")
)

// The method matched against POST.
const (
	methodPrefix uint8 = iota // the bytes so far are a prefix of POST
	methodOther
	methodDone
)

// A Content-Length value, as net/http reads one: the field's lines joined
// by a space and trimmed, then decimal digits only, below 2^63.
const (
	clLead   uint8 = iota // no digit yet
	clDigits              // in the digits
	clTrail               // after the digits: only white space may follow
	clBad                 // not a number net/http takes
)

// ending is how following ended, for the head it ended on.
type ending uint8

const (
	going    ending = iota // still following
	lastOne                // the head is the last followed: close after its answer
	smuggled               // the head has Content-Length and Transfer-Encoding: refuse it
)

// feed follows b, the next bytes net/http reads. Once following ends it
// returns how, and the number of the head it ended on.
func (f *framer) feed(b []byte) (ending, int64) {
	for i := 0; i < len(b); i++ {
		switch f.state {
		case fStopped:
			return going, 0
		case fBody:
			n := min(f.body, uint64(len(b)-i))
			f.body -= n
			i += int(n) - 1
			if f.body == 0 {
				f.nextHead()
			}
		case fHeadStart:
			if c := b[i]; f.skip > 0 && (c == '\r' || c == '\n') {
				f.skip--
				continue
			}
			f.heads++
			*f = framer{state: fHead, heads: f.heads}
			i-- // the byte begins the request line
		case fHead:
			c := b[i]
			var st ending
			switch {
			case c == '\n':
				f.cr = false
				st = f.endLine()
			case f.cr && f.line > 0:
				// A CR that does not end a header line: net/http refuses it.
				st = lastOne
			case c == '\r':
				if f.cr {
					st = f.content('\r')
				}
				f.cr = true
			default:
				if f.cr {
					f.cr = false
					st = f.content('\r')
				}
				if st == going {
					st = f.content(c)
				}
			}
			if st != going {
				f.state = fStopped
				return st, f.heads
			}
		}
	}
	return going, 0
}

// nextHead waits for the next request.
func (f *framer) nextHead() {
	f.state, f.skip = fHeadStart, 0
	if f.isPost {
		// net/http skips up to 4 CR or LF after a POST (RFC 7230 §3.5,
		// for clients that end a body with a line end it does not count).
		f.skip = 4
	}
}

// content takes one byte of a line other than its line end.
func (f *framer) content(c byte) ending {
	col := f.col
	f.col++
	if f.line == 0 {
		switch {
		case f.method != methodPrefix:
		case c == ' ':
			f.isPost = col == 4
			f.method = methodDone
		case col >= 4 || c != "POST"[col]:
			f.method = methodOther
		}
		return going
	}
	if col == 0 {
		if c == ' ' || c == '\t' {
			// A continuation line (obsolete folding): more of the field
			// above, joined to it with a space.
			if f.line == 1 {
				return lastOne // net/http refuses one as the first header line
			}
			if f.field == fieldCL {
				f.clChar(' ')
			}
			return going
		}
		f.endField()
		f.name, f.field = nameCL|nameTE, fieldNone
	}
	switch f.field {
	case fieldNone:
		if c == ':' {
			f.field = fieldOther
			switch {
			case f.name&nameCL != 0 && col == len(clName):
				f.field, f.clVal, f.clState = fieldCL, 0, clLead
			case f.name&nameTE != 0 && col == len(teName):
				f.field, f.hasTE = fieldTE, true
			}
			return going
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if col >= len(clName) || clName[col] != c {
			f.name &^= nameCL
		}
		if col >= len(teName) || teName[col] != c {
			f.name &^= nameTE
		}
	case fieldCL:
		f.clChar(c)
	}
	return going
}

// clChar takes one byte of a Content-Length value.
func (f *framer) clChar(c byte) {
	switch {
	case c == ' ' || c == '\t':
		if f.clState == clDigits {
			f.clState = clTrail
		}
	case '0' <= c && c <= '9' && (f.clState == clLead || f.clState == clDigits):
		f.clState = clDigits
		d := uint64(c - '0')
		if f.clVal > (1<<63-1-d)/10 {
			f.clState = clBad
			return
		}
		f.clVal = f.clVal*10 + d
	default:
		f.clState = clBad
	}
}

// endField ends the field of the lines above, once a new field or the end
// of the head shows it has no more continuation lines.
func (f *framer) endField() {
	if f.field != fieldCL {
		return
	}
	f.field = fieldOther
	switch {
	case f.clState != clDigits && f.clState != clTrail:
		f.badCL = true // empty, or not a number
	case f.hasCL && f.clVal != f.clFirst:
		f.badCL = true // net/http refuses a different value again
	default:
		f.hasCL, f.clFirst = true, f.clVal
	}
}

// endLine ends a line of the head; an empty one (not the request line)
// ends the head.
func (f *framer) endLine() ending {
	line, col := f.line, f.col
	f.line, f.col = f.line+1, 0
	switch {
	case line == 0 && col == 0:
		return lastOne // an empty request line: net/http refuses it
	case line == 0:
		return going
	case col > 0 && f.field == fieldNone:
		return lastOne // a header line with no colon: net/http refuses it
	case col > 0:
		return going
	}
	// The end of the head.
	f.endField()
	switch {
	case (f.hasCL || f.badCL) && f.hasTE:
		return smuggled
	case f.hasTE, f.badCL:
		return lastOne
	}
	if f.hasCL && f.clFirst > 0 {
		f.state, f.body = fBody, f.clFirst
	} else {
		f.nextHead()
	}
	return going
}

// framedConn is a connection whose requests a framer follows; the framer
// runs in Read, which net/http calls from one goroutine at a time.
type framedConn struct {
	net.Conn
	fr       framer
	served   atomic.Int64 // requests handed to the handler
	stopAt   atomic.Int64 // the head the framer stopped on; 0: none
	smuggled atomic.Bool  // that head has Content-Length and Transfer-Encoding
}

func (c *framedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.fr.state != fStopped {
		if st, at := c.fr.feed(p[:n]); st != going {
			c.smuggled.Store(st == smuggled)
			c.stopAt.Store(at) // after smuggled: verdict loads them the other way round
		}
	}
	return n, err
}

// CloseWrite shuts the sending side, for badRequest's answer.
func (c *framedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// A request's verdict, for the handler.
type verdict uint8

const (
	serve      verdict = iota // as usual
	closeAfter                // the last request followed: close the connection after its answer
	refuse                    // refuse it with 400 and close the connection
)

// verdict judges the connection's next request. The handler calls it once
// for each request, in order: net/http hands a connection's requests to
// the handler one at a time, and each whole head has been read (so
// followed) by then.
func (c *framedConn) verdict() verdict {
	n := c.served.Add(1)
	at := c.stopAt.Load()
	switch {
	case at == 0 || n < at:
		return serve
	case n == at && !c.smuggled.Load():
		return closeAfter
	}
	return refuse
}

// framedListener hands net/http framed connections.
type framedListener struct{ net.Listener }

func (l framedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framedConn{Conn: c}, nil
}

// connKey is the context key of a request's framedConn.
type connKey struct{}

// withConn is http.Server's ConnContext: it puts the framedConn where the
// handler finds it.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*framedConn); ok {
		return context.WithValue(ctx, connKey{}, fc)
	}
	return ctx
}
