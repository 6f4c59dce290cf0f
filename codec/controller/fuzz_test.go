package controller

import (
	"bytes"
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"
)

var allKinds = [...]Kind{KindWorkerPulse, KindPulseResponse, KindControlMsg, KindWorkerResponse}

// FuzzParseFrame reads a buffer frame after frame as each kind, as a
// connection does, whole and cut at two points chosen by the input, with
// the default limit and a small one: every result is checked against the
// bytes (see checkFrames), and the frames are the same however the bytes
// arrive.
func FuzzParseFrame(f *testing.F) {
	streams := map[Kind][]byte{}
	for _, fr := range wireFrames() {
		f.Add([]byte(fr.bytes), uint16(5))
		streams[fr.kind] = append(streams[fr.kind], fr.bytes...)
	}
	for _, s := range streams {
		f.Add(s, uint16(len(s)/3))
	}
	f.Add([]byte(le(2)+"\x10\x80"), uint16(9))
	f.Add([]byte(le(1<<64-1)), uint16(0))
	f.Add([]byte(le(11)+"\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), uint16(12))
	f.Add([]byte(le(4)+"\x10\x05\x10\x02ab"+le(0)), uint16(13))

	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		for _, kind := range allKinds {
			for _, max := range []int{0, 32} {
				want, werr := checkFrames(t, data[:len(data):len(data)], kind, max)
				k := int(cut) % (len(data) + 1)
				for _, chunks := range [][][]byte{
					{data[:k], data[k:]},
					{data[:k/2], data[k/2 : k], data[k:]},
				} {
					got, err := parseStream(chunks, kind, max)
					if err == errNeedTooSmall {
						t.Fatalf("%v: need too small with chunks cut at %d", kind, k)
					}
					if err != werr || len(got) != len(want) {
						t.Fatalf("%v cut at %d: %d frames, %v; whole: %d frames, %v", kind, k, len(got), err, len(want), werr)
					}
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("%v cut at %d: frame %d = %q, whole %q", kind, k, i, got[i], want[i])
						}
					}
				}
			}
		}
	})
}

// checkFrames parses buf frame after frame, checking each result against
// the bytes and against proto.Unmarshal, and returns the frames (as
// parseStream gives them) and the error that stopped it.
func checkFrames(t *testing.T, buf []byte, kind Kind, max int) ([]string, error) {
	limit := uint64(max)
	if max <= 0 {
		limit = DefaultMaxFrame
	}
	hasExtra := kind == KindControlMsg || kind == KindWorkerResponse
	var frames []string
	for {
		f, n, need, err := ParseFrame(buf, kind, max)
		// What the bytes say, read independently of ParseFrame.
		var size uint64
		if len(buf) >= LenSize {
			size = binary.LittleEndian.Uint64(buf)
		}
		haveMsg := len(buf) >= LenSize && size <= limit && uint64(len(buf)-LenSize) >= size
		var m proto.Message
		var uerr error
		if haveMsg {
			m = newOf(kind)
			uerr = Unmarshal(buf[LenSize:LenSize+size], m)
		}
		extraSize := func() uint64 {
			switch m := m.(type) {
			case *ControlMsg:
				return m.ExtraSize
			case *WorkerResponse:
				return m.ExtraSize
			}
			return 0
		}

		switch {
		case err != nil:
			if n != 0 || need != 0 || f.Msg != nil || f.Extra != nil {
				t.Fatalf("%v: %v with (%d, %d, %q, %q)", kind, err, n, need, f.Msg, f.Extra)
			}
			switch err {
			case ErrTooLarge:
				// The prefix alone, or with the extra_size that Unmarshal finds.
				if len(buf) < LenSize || size <= limit && (!haveMsg || uerr != nil || extraSize() <= limit-size) {
					t.Fatalf("%v: ErrTooLarge for %q (limit %d)", kind, buf[:min(len(buf), 32)], limit)
				}
			case ErrMalformed:
				if !hasExtra || !haveMsg || uerr == nil {
					t.Fatalf("%v: ErrMalformed for %q, which Unmarshal takes", kind, buf[:min(len(buf), 32)])
				}
			default:
				t.Fatalf("%v: unexpected error %v", kind, err)
			}
			return frames, err

		case n == 0:
			if need <= len(buf) {
				t.Fatalf("%v: need %d with %d bytes at hand", kind, need, len(buf))
			}
			want := LenSize
			if len(buf) >= LenSize {
				want = LenSize + int(size)
				if haveMsg && hasExtra {
					want += int(extraSize())
				}
			}
			if need != want {
				t.Fatalf("%v: need %d, the bytes say %d", kind, need, want)
			}
			if haveMsg && hasExtra && uerr != nil {
				t.Fatalf("%v: waits for extra bytes of %q, which Unmarshal refuses: %v", kind, buf[LenSize:LenSize+size], uerr)
			}
			return frames, nil
		}

		if need != n || n != LenSize+len(f.Msg)+len(f.Extra) || !haveMsg ||
			!bytes.Equal(f.Msg, buf[LenSize:LenSize+size]) || !bytes.Equal(f.Extra, buf[LenSize+int(size):n]) {
			t.Fatalf("%v: frame (%q, %q, %d, %d) from %q", kind, f.Msg, f.Extra, n, need, buf[:min(len(buf), 64)])
		}
		if cap(f.Msg) != len(f.Msg) || cap(f.Extra) != len(f.Extra) {
			t.Fatalf("%v: views not capped", kind)
		}
		if uint64(len(f.Msg)+len(f.Extra)) > limit {
			t.Fatalf("%v: frame of %d+%d bytes over the limit %d", kind, len(f.Msg), len(f.Extra), limit)
		}
		if hasExtra {
			// The framer and proto.Unmarshal agree on the message and on
			// how many extra bytes follow it.
			if uerr != nil {
				t.Fatalf("%v: framed %q, which Unmarshal refuses: %v", kind, f.Msg, uerr)
			}
			if extraSize() != uint64(len(f.Extra)) {
				t.Fatalf("%v: %d extra bytes, extra_size %d", kind, len(f.Extra), extraSize())
			}
		} else if len(f.Extra) != 0 {
			t.Fatalf("%v: extra bytes %q", kind, f.Extra)
		}
		frames = append(frames, string(f.Msg)+"|"+string(f.Extra))
		buf = buf[n:]
	}
}

// FuzzDecode decodes a message of each kind into a reused message and
// validates it against each request type: nothing panics, and a message
// that decodes re-encodes to a frame that parses and decodes to the same
// message and validates the same way.
func FuzzDecode(f *testing.F) {
	for _, fr := range wireFrames() {
		f.Add([]byte(fr.bytes[LenSize : LenSize+msgLen(fr)]))
	}
	f.Add([]byte("\x08\x07\x10\x01\x10\x02\x2a\x03abc\x48\x01"))
	f.Add([]byte("\x08\xff\xff\xff\xff\x0f"))
	f.Add([]byte("\x10\x80"))

	reused := [...]proto.Message{new(WorkerPulse), new(PulseResponse), new(ControlMsg), new(WorkerResponse)}
	f.Fuzz(func(t *testing.T, data []byte) {
		for i, kind := range allKinds {
			m := reused[i]
			if err := Unmarshal(data, m); err != nil {
				continue
			}
			// The same message with extra_size 0, as Append writes it
			// with no extra bytes.
			want := proto.Clone(m)
			switch w := want.(type) {
			case *ControlMsg:
				w.ExtraSize = 0
			case *WorkerResponse:
				w.ExtraSize = 0
			}
			_ = validateAll(m)
			verdicts := validateAll(want)

			buf := appendAny(nil, kind, want, nil)
			fr, n, _, err := ParseFrame(buf, kind, 0)
			if err != nil || n != len(buf) || len(fr.Extra) != 0 {
				t.Fatalf("%v %v: re-encoded frame %q: %d, %v", kind, want, buf, n, err)
			}
			got := newOf(kind)
			if err := Unmarshal(fr.Msg, got); err != nil || !proto.Equal(got, want) {
				t.Fatalf("%v: %v re-decoded as %v, %v", kind, want, got, err)
			}
			if v := validateAll(got); v != verdicts {
				t.Fatalf("%v %v: validation %q after a round trip, %q before", kind, want, v, verdicts)
			}
		}
	})
}

// validateAll runs every Validate function that applies to m, for every
// request type it may answer, and sums up the verdicts.
func validateAll(m proto.Message) string {
	var s []byte
	add := func(err error) {
		if err != nil {
			s = append(s, err.Error()...)
		}
		s = append(s, ';')
	}
	switch m := m.(type) {
	case *WorkerPulse:
		err := ValidateWorkerPulse(m)
		add(err)
		s = append(s, ControllerErrorFor(err).String()...)
		_ = NextPulse(m)
	case *PulseResponse:
		for t := range PulseType(4) {
			add(ValidatePulseResponse(t, m))
		}
	case *ControlMsg:
		add(ValidateControlMsg(m))
	case *WorkerResponse:
		for t := range ControlType(4) {
			add(ValidateWorkerResponse(t, m))
		}
	}
	return string(s)
}
