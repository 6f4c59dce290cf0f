package load

// The Periodic wire format (Lupino's periodic v0.1.7, commit dc57737; see
// docs/periodic.md), written from the protocol's description and the real
// server's code rather than shared with switchyard's codec, so that the two
// check each other.
//
// A frame is a magic ("\0REQ" to the server, "\0RES" from it), a 4-byte
// big-endian size and a payload. The first frame of a connection is the
// handshake, one byte: the client type. Every later payload is
//
//	msgID \x00\x01 cmd [\x00\x01 data]
//
// where msgID is opaque bytes echoed in the reply, cmd one byte, and data
// holds further arguments separated by \x00\x01 too.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Periodic commands used by the load generators.
const (
	pcmdNoop      byte = 0
	pcmdGrabJob   byte = 1
	pcmdWorkDone  byte = 3
	pcmdJobAssign byte = 5
	pcmdNoJob     byte = 6
	pcmdCanDo     byte = 7
	pcmdPing      byte = 9
	pcmdPong      byte = 10
	pcmdUnknown   byte = 12
	pcmdSubmitJob byte = 13
	pcmdStatus    byte = 14
	pcmdSuccess   byte = 16
)

// Periodic client types, the handshake's one byte.
const (
	periodicClient byte = 1
	periodicWorker byte = 2
)

const periodicHeaderSize = 8

// periodicSep separates the msgID, the command and the arguments.
var periodicSep = []byte{0, 1}

// writePeriodicHandshake writes the first frame of a connection.
func writePeriodicHandshake(w *bufio.Writer, clientType byte) error {
	_, err := w.Write([]byte{0, 'R', 'E', 'Q', 0, 0, 0, 1, clientType})
	return err
}

// writePeriodic writes a request frame: msgID, cmd, then the arguments, if
// any, each after a separator. Like writePacket it writes straight into w.
func writePeriodic(w *bufio.Writer, msgID []byte, cmd byte, args ...[]byte) error {
	size := len(msgID) + len(periodicSep) + 1
	for _, a := range args {
		size += len(periodicSep) + len(a)
	}
	var hdr [periodicHeaderSize]byte
	copy(hdr[:4], reqMagic[:])
	binary.BigEndian.PutUint32(hdr[4:], uint32(size))
	w.Write(hdr[:])
	w.Write(msgID)
	w.Write(periodicSep)
	w.WriteByte(cmd)
	for _, a := range args {
		w.Write(periodicSep)
		w.Write(a)
	}
	// bufio.Writer keeps its first error and returns it from every later
	// call, so checking the last is checking all.
	_, err := w.Write(nil)
	return err
}

// periodicReader reads response frames. The payload it returns is valid
// until the next call to next.
//
// A frame that fits in the buffer is consumed only once it is all there, so
// a read deadline that passes mid-frame (a paced client uses deadlines as
// timers) loses nothing: the next call finds the bytes where they were. A
// bigger frame is read in pieces, and an error in the middle of it is
// final.
type periodicReader struct {
	r       *bufio.Reader
	payload []byte
	broken  error
}

func newPeriodicReader(r io.Reader, size int) *periodicReader {
	return &periodicReader{r: bufio.NewReaderSize(r, size)}
}

// next reads one response frame and returns its payload.
func (p *periodicReader) next() ([]byte, error) {
	if p.broken != nil {
		return nil, p.broken
	}
	hdr, err := p.r.Peek(periodicHeaderSize)
	if err != nil {
		return nil, err
	}
	if [4]byte(hdr[:4]) != resMagic {
		return nil, fmt.Errorf("bad response magic %q", hdr[:4])
	}
	// The real server and client ignore the size's top bit.
	size := int(binary.BigEndian.Uint32(hdr[4:]) & 0x7fffffff)
	if size > maxBody {
		return nil, fmt.Errorf("response payload of %d bytes", size)
	}
	if periodicHeaderSize+size <= p.r.Size() {
		frame, err := p.r.Peek(periodicHeaderSize + size)
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the header came
		}
		if err != nil {
			return nil, err
		}
		p.payload = append(p.payload[:0], frame[periodicHeaderSize:]...)
		_, _ = p.r.Discard(len(frame)) // buffered: cannot fail
		return p.payload, nil
	}
	_, _ = p.r.Discard(periodicHeaderSize)
	if cap(p.payload) < size {
		p.payload = make([]byte, size)
	}
	p.payload = p.payload[:size]
	if _, err := io.ReadFull(p.r, p.payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		// Not wrapped: a deadline here is not a timer going off.
		p.broken = fmt.Errorf("reading a %d-byte frame: %v", size, err)
		return nil, p.broken
	}
	return p.payload, nil
}

// complete reports whether a whole frame is already buffered (see
// packetReader.complete).
func (p *periodicReader) complete() bool {
	n := p.r.Buffered()
	if n < periodicHeaderSize {
		return false
	}
	hdr, _ := p.r.Peek(periodicHeaderSize)
	return n >= periodicHeaderSize+int(binary.BigEndian.Uint32(hdr[4:])&0x7fffffff)
}

// parsePeriodic splits a response payload as the real client does
// (protocol.ParseCommand): msgID, then a one-byte command and its data. A
// payload whose second part is not one byte and has no data after it (the
// STATUS reply, an error text) is command UNKNOWN with that part as data.
func parsePeriodic(payload []byte) (msgID []byte, cmd byte, data []byte, err error) {
	msgID, rest, ok := bytes.Cut(payload, periodicSep)
	if !ok {
		return nil, 0, nil, fmt.Errorf("reply %q has no separator", payload)
	}
	c, data, three := bytes.Cut(rest, periodicSep)
	switch {
	case !three && len(c) != 1:
		return msgID, pcmdUnknown, rest, nil
	case len(c) == 0:
		return nil, 0, nil, fmt.Errorf("reply %q has an empty command", payload)
	}
	return msgID, c[0], data, nil
}

// appendPeriodicJob appends a job's JSON as SUBMIT_JOB carries it, with
// every field of the real server's Job in its order. name, function and
// workload must need no JSON escaping; the load generators' do not.
func appendPeriodicJob(b []byte, function string, name, workload []byte, schedAt int64) []byte {
	b = append(b, `{"job_id":0,"name":"`...)
	b = append(b, name...)
	b = append(b, `","func":"`...)
	b = append(b, function...)
	b = append(b, `","workload":"`...)
	b = append(b, workload...)
	b = append(b, `","timeout":0,"sched_at":`...)
	b = strconv.AppendInt(b, schedAt, 10)
	return append(b, `,"run_at":0,"counter":0,"status":""}`...)
}

// jsonInt returns the integer value of key in a flat JSON object, e.g.
// jsonInt(job, `"sched_at"`), and false if the key or a number after it is
// missing. It is a scan, not a parser: enough for the server's job JSON,
// whose string values the load generators chose.
func jsonInt(obj []byte, key string) (int64, bool) {
	v, ok := jsonValue(obj, key)
	if !ok {
		return 0, false
	}
	return leadingInt(v)
}

// jsonStringPrefixInt returns the integer at the start of the string value
// of key, e.g. the submit time heading a workload.
func jsonStringPrefixInt(obj []byte, key string) (int64, bool) {
	v, ok := jsonValue(obj, key)
	if !ok || len(v) == 0 || v[0] != '"' {
		return 0, false
	}
	return leadingInt(v[1:])
}

// jsonValue returns what follows key and its colon.
func jsonValue(obj []byte, key string) ([]byte, bool) {
	i := bytes.Index(obj, []byte(key))
	if i < 0 {
		return nil, false
	}
	v := bytes.TrimLeft(obj[i+len(key):], " \t\r\n")
	if len(v) == 0 || v[0] != ':' {
		return nil, false
	}
	return bytes.TrimLeft(v[1:], " \t\r\n"), true
}

// leadingInt parses the decimal integer at the start of b.
func leadingInt(b []byte) (int64, bool) {
	end := 0
	if len(b) > 0 && b[0] == '-' {
		end = 1
	}
	for end < len(b) && b[end] >= '0' && b[end] <= '9' {
		end++
	}
	n, err := strconv.ParseInt(string(b[:end]), 10, 64)
	return n, err == nil
}
