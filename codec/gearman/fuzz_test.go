package gearman

import (
	"bytes"
	"testing"
	"unsafe"
)

// within reports whether s lies inside buf. Empty slices are not checked:
// they reference no bytes.
func within(buf, s []byte) bool {
	if len(s) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(buf))
}

// FuzzParse parses a buffer frame after frame, as a connection would, with the
// default limit and with a small one, checking what holds for any input.
func FuzzParse(f *testing.F) {
	var all []byte
	for _, fr := range frames(f) {
		f.Add([]byte(fr.bytes))
		all = append(all, fr.bytes...)
	}
	f.Add(all)
	f.Add([]byte("\x00REQ\x00\x00\x00\x07\xff\xff\xff\xff"))
	f.Add([]byte("\x00REX"))
	f.Add([]byte("workers\r\nstatus\n\x00REQ\x00\x00\x00\x09\x00\x00\x00\x00"))
	f.Add(append(bytes.Repeat([]byte("w "), MaxLineSize/2-1), "x\n\x00REQ"...))

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, max := range []int{0, 64} {
			checkStream(t, data[:len(data):len(data)], max)
		}
	})
}

func checkStream(t *testing.T, buf []byte, max int) {
	var p Packet
	for len(buf) > 0 {
		n, err := Parse(buf, max, &p)
		if n < 0 || n > len(buf) {
			t.Fatalf("consumed %d of %d", n, len(buf))
		}
		switch err {
		case nil, ErrTruncated:
		case ErrBadMagic, ErrTooLarge, ErrLineTooLong:
			if n != 0 {
				t.Fatalf("%v with consumed %d", err, n)
			}
			return
		default:
			t.Fatalf("unexpected error %v", err)
		}
		if n == 0 {
			if err != nil {
				t.Fatalf("%v with consumed 0", err)
			}
			return // need more
		}
		frame := buf[:n]
		if p.Text {
			checkLine(t, frame, &p)
		} else {
			checkBinary(t, frame, max, &p, err)
		}
		buf = buf[n:]
	}
}

func checkLine(t *testing.T, frame []byte, p *Packet) {
	if frame[0] == 0 || frame[len(frame)-1] != '\n' || len(frame) > MaxLineSize {
		t.Fatalf("text frame %q", frame)
	}
	if bytes.IndexByte(frame, '\n') != len(frame)-1 {
		t.Fatalf("text frame %q holds more than one line", frame)
	}
	if !within(frame, p.Line) || p.NWords < 0 || p.NWords > MaxArgs || p.NArgs != 0 {
		t.Fatalf("line %q NWords %d NArgs %d", p.Line, p.NWords, p.NArgs)
	}
	for i, w := range p.Words[:p.NWords] {
		if len(w) == 0 || w[0] == ' ' || w[len(w)-1] == ' ' || !within(p.Line, w) {
			t.Fatalf("word %d = %q of line %q", i, w, p.Line)
		}
		if i < MaxArgs-1 && bytes.IndexByte(w, ' ') >= 0 {
			t.Fatalf("word %d = %q holds a space", i, w)
		}
	}
	// Words are the line split on runs of spaces; past MaxArgs-1 words the
	// last one holds the rest.
	ref := splitSpaces(p.Line)
	if p.NWords < MaxArgs && len(ref) != p.NWords || len(ref) < p.NWords {
		t.Fatalf("words %q of line %q", p.Words[:p.NWords], p.Line)
	}
	sp := []byte(" ")
	for i := range p.NWords {
		want, got := ref[i], p.Words[i]
		if i == MaxArgs-1 {
			want, got = bytes.Join(ref[i:], sp), bytes.Join(splitSpaces(got), sp)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("word %d = %q of line %q", i, p.Words[i], p.Line)
		}
	}
}

// splitSpaces is a slow reference split on runs of ' ' only.
func splitSpaces(b []byte) [][]byte {
	var out [][]byte
	for _, w := range bytes.Split(b, []byte(" ")) {
		if len(w) > 0 {
			out = append(out, w)
		}
	}
	return out
}

func checkBinary(t *testing.T, frame []byte, max int, p *Packet, err error) {
	if max <= 0 {
		max = DefaultMaxPacket
	}
	if len(frame) < HeaderSize || len(frame)-HeaderSize > max {
		t.Fatalf("binary frame of %d bytes", len(frame))
	}
	if p.Magic != Req && p.Magic != Res || p.NArgs < 0 || p.NArgs > MaxArgs {
		t.Fatalf("Magic %v NArgs %d", p.Magic, p.NArgs)
	}
	for i, a := range p.Args[:p.NArgs] {
		if !within(frame[HeaderSize:], a) {
			t.Fatalf("arg %d = %q is not in the body", i, a)
		}
	}
	argc := p.Type.Argc()
	if err == ErrTruncated {
		if argc < 2 || p.NArgs >= argc {
			t.Fatalf("%v truncated with %d args", p.Type, p.NArgs)
		}
		return
	}
	if argc == 0 && len(frame) > HeaderSize {
		return // the body is ignored: re-encoding cannot restore it
	}
	again := AppendPacket(nil, p.Magic, p.Type, p.Args[:p.NArgs]...)
	if !bytes.Equal(again, frame) {
		t.Fatalf("re-encoding %v:\n% x\nwant\n% x", p.Type, again, frame)
	}
}

// FuzzParserSplit feeds a stream to a Parser in pieces whose lengths the
// fuzzer picks (each byte of cuts is one piece's length less one; the rest
// of the stream comes last), calling it at every piece or, with lazy, once
// Need bytes are there: the frames and the error must be those of the whole
// stream parsed at once, the error reported with the piece that brings it.
func FuzzParserSplit(f *testing.F) {
	var all []byte
	for _, fr := range frames(f) {
		f.Add([]byte(fr.bytes), []byte{0, 0, 0, 2, 7}, false)
		f.Add([]byte(fr.bytes), []byte{11}, true)
		all = append(all, fr.bytes...)
	}
	f.Add(all, []byte{0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233}, false)
	f.Add(all, bytes.Repeat([]byte{0}, 64), true)
	long := append(bytes.Repeat([]byte("w "), MaxLineSize/2-1), "x\n\x00REQ"...)
	f.Add(long, []byte{255, 255, 0, 128}, false)
	f.Add(long[:MaxLineSize-1], []byte{255, 255, 0, 128}, true)
	f.Add([]byte("status\r\n\x00REQ\x00\x00\x00\x10\x00\x00\x00\x01x\x00RE"), []byte{3, 6, 0, 0}, false)
	f.Add([]byte("\x00REQ\x00\x00\x00\x07\xff\xff\xff\xff"), []byte{0, 0, 0, 0, 0}, true)

	f.Fuzz(func(t *testing.T, data, cuts []byte, lazy bool) {
		var pieces [][]byte
		rest := data
		for _, c := range cuts {
			if len(rest) == 0 {
				break
			}
			n := min(int(c)+1, len(rest))
			pieces = append(pieces, bytes.Clone(rest[:n]))
			rest = rest[n:]
		}
		if len(rest) > 0 {
			pieces = append(pieces, bytes.Clone(rest))
		}
		for _, max := range []int{0, 64} {
			want := arrival(parseWhole(data, max), pieces)
			if got := feed(t, pieces, max, lazy); !sameOutcome(got, want) {
				t.Fatalf("max %d, %d pieces:\n%v\nwant\n%v", max, len(pieces), got, want)
			}
		}
	})
}
