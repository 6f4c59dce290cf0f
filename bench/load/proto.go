package load

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Packet types used by the load generators (gearmand's numbering).
const (
	typeCanDo        uint32 = 1
	typePreSleep     uint32 = 4
	typeNoop         uint32 = 6
	typeSubmitJob    uint32 = 7
	typeJobCreated   uint32 = 8
	typeGrabJob      uint32 = 9
	typeNoJob        uint32 = 10
	typeJobAssign    uint32 = 11
	typeWorkComplete uint32 = 13
	typeWorkFail     uint32 = 14
	typeEchoReq      uint32 = 16
	typeEchoRes      uint32 = 17
	typeSubmitJobBg  uint32 = 18
	typeError        uint32 = 19
	typeWorkExcept   uint32 = 25
)

const headerSize = 12

// maxBody bounds what a reader accepts, so that a corrupt size field fails
// the run instead of allocating gigabytes.
const maxBody = 256 << 20

var (
	reqMagic = [4]byte{0, 'R', 'E', 'Q'}
	resMagic = [4]byte{0, 'R', 'E', 'S'}
)

// writePacket writes a request packet whose arguments are joined by NULs. It
// writes the header and each argument straight into w, so a 1 MiB payload is
// copied once (or not at all, when bufio passes it through).
func writePacket(w *bufio.Writer, typ uint32, args ...[]byte) error {
	size := 0
	for i, a := range args {
		if i > 0 {
			size++
		}
		size += len(a)
	}
	var hdr [headerSize]byte
	copy(hdr[:4], reqMagic[:])
	binary.BigEndian.PutUint32(hdr[4:8], typ)
	binary.BigEndian.PutUint32(hdr[8:12], uint32(size))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	for i, a := range args {
		if i > 0 {
			if err := w.WriteByte(0); err != nil {
				return err
			}
		}
		if _, err := w.Write(a); err != nil {
			return err
		}
	}
	return nil
}

// packetReader reads response packets. The body it returns is valid until
// the next call to next.
type packetReader struct {
	r    *bufio.Reader
	body []byte
}

func newPacketReader(r io.Reader, size int) *packetReader {
	return &packetReader{r: bufio.NewReaderSize(r, size)}
}

// next reads one response packet.
func (p *packetReader) next() (typ uint32, body []byte, err error) {
	hdr, err := p.r.Peek(headerSize)
	if err != nil {
		return 0, nil, err
	}
	if [4]byte(hdr[:4]) != resMagic {
		return 0, nil, fmt.Errorf("bad response magic %q", hdr[:4])
	}
	typ = binary.BigEndian.Uint32(hdr[4:8])
	size := binary.BigEndian.Uint32(hdr[8:12])
	if size > maxBody {
		return 0, nil, fmt.Errorf("response body of %d bytes", size)
	}
	if _, err := p.r.Discard(headerSize); err != nil {
		return 0, nil, err
	}
	if cap(p.body) < int(size) {
		p.body = make([]byte, size)
	}
	p.body = p.body[:size]
	if _, err := io.ReadFull(p.r, p.body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return typ, p.body, nil
}

// complete reports whether a whole packet is already buffered, i.e. whether
// next will return without reading from the connection. Callers flush their
// writes when it is false, so replies to a burst of packets leave in one
// write and nothing is held back while the reader blocks.
func (p *packetReader) complete() bool {
	n := p.r.Buffered()
	if n < headerSize {
		return false
	}
	hdr, _ := p.r.Peek(headerSize)
	return n >= headerSize+int(binary.BigEndian.Uint32(hdr[8:12]))
}

// splitArg cuts the first NUL-terminated argument off body. Without a NUL
// the whole body is the argument.
func splitArg(body []byte) (arg, rest []byte) {
	for i, c := range body {
		if c == 0 {
			return body[:i], body[i+1:]
		}
	}
	return body, nil
}

// serverError turns an ERROR packet (code NUL text) into an error.
func serverError(body []byte) error {
	code, text := splitArg(body)
	return fmt.Errorf("server ERROR %s: %s", code, text)
}
