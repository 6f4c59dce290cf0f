package controller

import (
	"encoding/binary"
	"testing"
)

// le is a length prefix: n as a uint64 little-endian.
func le(n uint64) string {
	var b [LenSize]byte
	binary.LittleEndian.PutUint64(b[:], n)
	return string(b[:])
}

func TestParseFrameTable(t *testing.T) {
	for _, tc := range []struct {
		name       string
		buf        string
		kind       Kind
		max        int
		msg, extra string
		n, need    int
		err        error
	}{
		{"empty buffer", "", KindWorkerPulse, 0, "", "", 0, LenSize, nil},
		{"part of the prefix", "\x02\x00\x00", KindControlMsg, 0, "", "", 0, LenSize, nil},
		{"prefix only", le(2), KindWorkerPulse, 0, "", "", 0, 10, nil},
		{"part of the message", le(2) + "\x08", KindWorkerPulse, 0, "", "", 0, 10, nil},
		{"empty message", le(0), KindWorkerPulse, 0, "", "", 8, 8, nil},
		{"empty control message", le(0), KindControlMsg, 0, "", "", 8, 8, nil},
		{"pulse", le(2) + "\x08\x01", KindWorkerPulse, 0, "\x08\x01", "", 10, 10, nil},
		{"trailing bytes stay", le(2) + "\x08\x01" + le(0), KindWorkerPulse, 0, "\x08\x01", "", 10, 10, nil},
		{"extra after a pulse is the next frame", le(2) + "\x10\x03abc", KindWorkerPulse, 0, "\x10\x03", "", 10, 10, nil},
		{"control with extra", le(2) + "\x10\x03abc", KindControlMsg, 0, "\x10\x03", "abc", 13, 13, nil},
		{"response with extra", le(2) + "\x18\x03abcdef", KindWorkerResponse, 0, "\x18\x03", "abc", 13, 13, nil},
		{"response's field 2 is not extra_size", le(2) + "\x10\x03abc", KindWorkerResponse, 0, "\x10\x03", "", 10, 10, nil},
		{"control's field 3 is not extra_size", le(2) + "\x18\x03abc", KindControlMsg, 0, "\x18\x03", "", 10, 10, nil},

		// Truncated extra bytes: need is the whole frame.
		{"no extra yet", le(2) + "\x10\x05", KindControlMsg, 0, "", "", 0, 15, nil},
		{"part of the extra", le(2) + "\x10\x05abc", KindControlMsg, 0, "", "", 0, 15, nil},
		{"all but one extra byte", le(2) + "\x18\x05abcd", KindWorkerResponse, 0, "", "", 0, 15, nil},

		// extra_size as proto.Unmarshal reads it.
		{"last extra_size wins", le(4) + "\x10\x05\x10\x02ab", KindControlMsg, 0, "\x10\x05\x10\x02", "ab", 14, 14, nil},
		{"overlong varint", le(3) + "\x10\x82\x00ab", KindControlMsg, 0, "\x10\x82\x00", "ab", 13, 13, nil},
		{"extra_size with the bytes wire type is unknown", le(3) + "\x12\x01\x05", KindControlMsg, 0, "\x12\x01\x05", "", 11, 11, nil},
		{"unknown fields skipped", le(13) + "\x28\x01\x31\x00\x00\x00\x00\x00\x00\x00\x00\x10\x01", KindControlMsg, 0, "", "", 0, 22, nil},
		{"unknown fields then extra_size", le(13) + "\x2a\x02hi\x35\x00\x00\x00\x00\x10\x01\x08\x02z", KindControlMsg, 0, "\x2a\x02hi\x35\x00\x00\x00\x00\x10\x01\x08\x02", "z", 22, 22, nil},

		// Malformed messages, where extra_size must be read.
		{"truncated varint", le(2) + "\x10\x80", KindControlMsg, 0, "", "", 0, 0, ErrMalformed},
		{"truncated tag", le(1) + "\x80", KindWorkerResponse, 0, "", "", 0, 0, ErrMalformed},
		{"field number 0", le(2) + "\x00\x01", KindControlMsg, 0, "", "", 0, 0, ErrMalformed},
		{"bytes field past the end", le(2) + "\x2a\x05", KindControlMsg, 0, "", "", 0, 0, ErrMalformed},
		{"end group with no start", le(1) + "\x2c", KindWorkerResponse, 0, "", "", 0, 0, ErrMalformed},
		{"field number above the largest", le(8) + "00\x80\x80\x80\x8000", KindControlMsg, 0, "", "", 0, 0, ErrMalformed},
		{"varint over 64 bits", le(11) + "\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", KindControlMsg, 0, "", "", 0, 0, ErrMalformed},
		// ... are not looked at where no extra bytes follow.
		{"malformed pulse is framed", le(2) + "\x10\x80", KindWorkerPulse, 0, "\x10\x80", "", 10, 10, nil},
		{"malformed response is framed", le(1) + "\x80", KindPulseResponse, 0, "\x80", "", 9, 9, nil},

		// Limits: max bounds message plus extra bytes.
		{"message at the limit", le(4) + "\x08\x01\x10\x02", KindWorkerPulse, 4, "\x08\x01\x10\x02", "", 12, 12, nil},
		{"message over the limit, from the prefix alone", le(5), KindWorkerPulse, 4, "", "", 0, 0, ErrTooLarge},
		{"huge length", le(1<<64 - 1), KindWorkerPulse, 0, "", "", 0, 0, ErrTooLarge},
		{"length with the top bit", le(1<<63 + 2), KindControlMsg, 0, "", "", 0, 0, ErrTooLarge},
		{"default limit", le(DefaultMaxFrame + 1), KindWorkerPulse, 0, "", "", 0, 0, ErrTooLarge},
		{"default limit reached", le(DefaultMaxFrame), KindWorkerPulse, -1, "", "", 0, LenSize + DefaultMaxFrame, nil},
		{"message and extra at the limit", le(2) + "\x10\x03abc", KindControlMsg, 5, "\x10\x03", "abc", 13, 13, nil},
		{"extra over the limit, before it arrives", le(2) + "\x10\x04", KindControlMsg, 5, "", "", 0, 0, ErrTooLarge},
		{"huge extra_size", le(11) + "\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", KindWorkerResponse, 0, "", "", 0, 0, ErrTooLarge},
		{"extra_size past the default limit", le(5) + "\x18\x80\x80\x80\x20", KindWorkerResponse, 0, "", "", 0, 0, ErrTooLarge},
		{"extra_size at the default limit", le(5) + "\x18\xfb\xff\xff\x1f", KindWorkerResponse, 0, "", "", 0, LenSize + DefaultMaxFrame, nil},

		{"kind 0", le(0), 0, 0, "", "", 0, 0, ErrKind},
		{"kind 5", "", 5, 0, "", "", 0, 0, ErrKind},
	} {
		buf := []byte(tc.buf)
		f, n, need, err := ParseFrame(buf[:len(buf):len(buf)], tc.kind, tc.max)
		if string(f.Msg) != tc.msg || string(f.Extra) != tc.extra || n != tc.n || need != tc.need || err != tc.err {
			t.Errorf("%s: ParseFrame = (%q, %q, %d, %d, %v), want (%q, %q, %d, %d, %v)",
				tc.name, f.Msg, f.Extra, n, need, err, tc.msg, tc.extra, tc.n, tc.need, tc.err)
		}
		if n == 0 && (f.Msg != nil || f.Extra != nil) {
			t.Errorf("%s: no frame, but views %q %q", tc.name, f.Msg, f.Extra)
		}
		if cap(f.Msg) != len(f.Msg) || cap(f.Extra) != len(f.Extra) {
			t.Errorf("%s: views not capped: msg %d/%d, extra %d/%d", tc.name,
				len(f.Msg), cap(f.Msg), len(f.Extra), cap(f.Extra))
		}
	}
}

// wantNeed is what ParseFrame must say for the first k bytes of a frame
// whose message is msgLen bytes long and whose whole length is total: the
// prefix, then the message, then the whole frame.
func wantNeed(k, msgLen, total int) int {
	switch {
	case k < LenSize:
		return LenSize
	case k < LenSize+msgLen:
		return LenSize + msgLen
	}
	return total
}

// TestParseFrameSplit feeds every frame of the table one byte at a time:
// every proper prefix is "need more" with the right need, the whole frame
// is the frame. Each prefix is capped at its length so that reading past it
// panics rather than finding bytes that have not arrived.
func TestParseFrameSplit(t *testing.T) {
	for _, f := range wireFrames() {
		raw := []byte(f.bytes)
		ml := msgLen(f)
		for k := 0; k < len(raw); k++ {
			fr, n, need, err := ParseFrame(raw[:k:k], f.kind, 0)
			if want := wantNeed(k, ml, len(raw)); fr.Msg != nil || n != 0 || need != want || err != nil {
				t.Fatalf("%s: prefix %d/%d: ParseFrame = (%q, %d, %d, %v), want need %d",
					f.name, k, len(raw), fr.Msg, n, need, err, want)
			}
		}
		fr, n, need, err := ParseFrame(raw[:len(raw):len(raw)], f.kind, 0)
		if n != len(raw) || need != n || err != nil ||
			string(fr.Msg) != f.bytes[LenSize:LenSize+ml] || string(fr.Extra) != f.extra {
			t.Fatalf("%s: ParseFrame = (%q, %q, %d, %d, %v)", f.name, fr.Msg, fr.Extra, n, need, err)
		}
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errNeedTooSmall = testError("need does not exceed the bytes at hand")

// parseStream reads frames as a connection does: bytes arrive in the chunks
// given, are appended to a buffer, and whole frames are taken from its
// front. It returns each frame as its message and extra bytes joined by a
// "|", and the first error.
func parseStream(chunks [][]byte, kind Kind, max int) ([]string, error) {
	var buf []byte
	var frames []string
	for _, c := range chunks {
		buf = append(buf, c...)
		for {
			f, n, need, err := ParseFrame(buf, kind, max)
			if err != nil {
				return frames, err
			}
			if n == 0 {
				if need <= len(buf) {
					return frames, errNeedTooSmall
				}
				break
			}
			frames = append(frames, string(f.Msg)+"|"+string(f.Extra))
			buf = buf[n:]
		}
	}
	return frames, nil
}

// TestParseFrameStream joins the table's frames of each kind into one
// stream, as a connection would carry them back to back, and cuts it at
// every point and also feeds it one byte at a time: the frames are the same
// every way.
func TestParseFrameStream(t *testing.T) {
	for _, kind := range []Kind{KindWorkerPulse, KindPulseResponse, KindControlMsg, KindWorkerResponse} {
		var stream []byte
		var want []string
		for _, f := range wireFrames() {
			if f.kind == kind {
				stream = append(stream, f.bytes...)
				want = append(want, f.bytes[LenSize:LenSize+msgLen(f)]+"|"+f.extra)
			}
		}
		check := func(how string, chunks [][]byte) {
			t.Helper()
			got, err := parseStream(chunks, kind, 0)
			if err != nil || len(got) != len(want) {
				t.Fatalf("%v %s: %d frames, %v; want %d", kind, how, len(got), err, len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%v %s: frame %d = %q, want %q", kind, how, i, got[i], want[i])
				}
			}
		}
		check("whole", [][]byte{stream})
		for k := 0; k <= len(stream); k++ {
			check("split", [][]byte{stream[:k], stream[k:]})
		}
		for k := 0; k <= len(stream); k += 3 {
			check("split twice", [][]byte{stream[:k/2], stream[k/2 : k], stream[k:]})
		}
		var bytewise [][]byte
		for i := range stream {
			bytewise = append(bytewise, stream[i:i+1])
		}
		check("byte by byte", bytewise)
	}
}

func TestParseFrameAllocs(t *testing.T) {
	frames := wireFrames()
	allocs := testing.AllocsPerRun(100, func() {
		for _, f := range frames {
			raw := []byte(f.bytes) // does not escape: on the stack or optimized away
			_, _, _, _ = ParseFrame(raw, f.kind, 0)
		}
	})
	if allocs != 0 {
		t.Errorf("ParseFrame allocates %v times per table", allocs)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		KindWorkerPulse: "WorkerPulse", KindPulseResponse: "PulseResponse",
		KindControlMsg: "ControlMsg", KindWorkerResponse: "WorkerResponse",
		0: "Kind(0)", 9: "Kind(9)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}
