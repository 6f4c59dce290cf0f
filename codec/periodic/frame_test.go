package periodic

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// rawFrame builds a frame by hand, independently of the encoders: magic, the
// payload's length big-endian, the payload.
func rawFrame(magic, payload string) string {
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(payload)))
	return magic + string(size[:]) + payload
}

func TestParseFrameTable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		buf     string
		magic   string
		max     int
		payload string
		n, need int
		err     error
	}{
		{"handshake client", "\x00REQ\x00\x00\x00\x01\x01", ReqMagic, 0, "\x01", 9, 9, nil},
		{"handshake worker", "\x00REQ\x00\x00\x00\x01\x02", ReqMagic, 0, "\x02", 9, 9, nil},
		{"empty payload", "\x00REQ\x00\x00\x00\x00", ReqMagic, 0, "", 8, 8, nil},
		{"reply", "\x00RES\x00\x00\x00\x03a\x00\x01", ResMagic, 0, "a\x00\x01", 11, 11, nil},
		{"trailing bytes stay", "\x00REQ\x00\x00\x00\x01\x09\x00REQ", ReqMagic, 0, "\x09", 9, 9, nil},
		{"top bit of size ignored", "\x00REQ\x80\x00\x00\x02hi", ReqMagic, 0, "hi", 10, 10, nil},
		{"top bit with a huge size", "\x00REQ\xff\xff\xff\xff", ReqMagic, 0, "", 0, 0, ErrTooLarge},
		{"at the limit", "\x00REQ\x00\x00\x00\x04abcd", ReqMagic, 4, "abcd", 12, 12, nil},
		{"over the limit, no body yet", "\x00REQ\x00\x00\x00\x05", ReqMagic, 4, "", 0, 0, ErrTooLarge},
		{"default limit", "\x00REQ\x04\x00\x00\x01", ReqMagic, 0, "", 0, 0, ErrTooLarge},
		{"negative max is the default", "\x00REQ\x04\x00\x00\x00", ReqMagic, -1, "", 0, HeaderSize + DefaultMaxFrame, nil},
		{"empty buffer", "", ReqMagic, 0, "", 0, HeaderSize, nil},
		{"magic prefix", "\x00RE", ReqMagic, 0, "", 0, HeaderSize, nil},
		{"header only", "\x00REQ\x00\x00\x00\x05", ReqMagic, 0, "", 0, 13, nil},
		{"part of the body", "\x00REQ\x00\x00\x00\x05abc", ReqMagic, 0, "", 0, 13, nil},
		{"RES where REQ is due", "\x00RES\x00\x00\x00\x00", ReqMagic, 0, "", 0, 0, ErrBadMagic},
		{"REQ where RES is due", "\x00REQ\x00\x00\x00\x00", ResMagic, 0, "", 0, 0, ErrBadMagic},
		{"bad first byte", "G", ReqMagic, 0, "", 0, 0, ErrBadMagic},
		{"bad third byte", "\x00Rx", ReqMagic, 0, "", 0, 0, ErrBadMagic},
		{"lower case", "\x00req\x00\x00\x00\x00", ReqMagic, 0, "", 0, 0, ErrBadMagic},
		{"gearman text line", "status\n", ReqMagic, 0, "", 0, 0, ErrBadMagic},
	} {
		buf := []byte(tc.buf)
		payload, n, need, err := ParseFrame(buf[:len(buf):len(buf)], tc.magic, tc.max)
		if string(payload) != tc.payload || n != tc.n || need != tc.need || err != tc.err {
			t.Errorf("%s: ParseFrame = (%q, %d, %d, %v), want (%q, %d, %d, %v)",
				tc.name, payload, n, need, err, tc.payload, tc.n, tc.need, tc.err)
		}
		if n > 0 && cap(payload) != len(payload) {
			t.Errorf("%s: payload cap %d > len %d", tc.name, cap(payload), len(payload))
		}
	}
}

// TestParseFrameSplit feeds every frame of the message tables one byte at a
// time: every proper prefix is "need more" with the right need, the whole
// frame is the frame. Each prefix is capped at its length so that reading
// past it panics rather than finding the next bytes.
func TestParseFrameSplit(t *testing.T) {
	for _, f := range wireFrames() {
		raw := []byte(f.bytes)
		for k := 0; k < len(raw); k++ {
			p, n, need, err := ParseFrame(raw[:k:k], f.magic, 0)
			want := HeaderSize
			if k >= HeaderSize {
				want = len(raw)
			}
			if p != nil || n != 0 || need != want || err != nil {
				t.Fatalf("%s: prefix %d/%d: ParseFrame = (%q, %d, %d, %v), want need %d",
					f.name, k, len(raw), p, n, need, err, want)
			}
		}
		p, n, need, err := ParseFrame(raw[:len(raw):len(raw)], f.magic, 0)
		if n != len(raw) || need != n || err != nil || string(p) != f.bytes[HeaderSize:] {
			t.Fatalf("%s: ParseFrame = (%q, %d, %d, %v)", f.name, p, n, need, err)
		}
	}
}

// parseStream reads frames as a connection does: bytes arrive in the chunks
// given, are appended to a buffer, and whole frames are taken from its front.
// It returns the payloads and the first error.
func parseStream(chunks [][]byte, magic string, max int) ([]string, error) {
	var buf, out []byte
	var payloads []string
	for _, c := range chunks {
		buf = append(buf, c...)
		for {
			p, n, need, err := ParseFrame(buf, magic, max)
			if err != nil {
				return payloads, err
			}
			if n == 0 {
				if need <= len(buf) {
					return payloads, errNeedTooSmall
				}
				break
			}
			out = append(out[:0], p...)
			payloads = append(payloads, string(out))
			buf = buf[n:]
		}
	}
	return payloads, nil
}

type testError string

func (e testError) Error() string { return string(e) }

const errNeedTooSmall = testError("need does not exceed the bytes at hand")

// TestParseFrameStream cuts the stream of all the tables' client frames (and
// of all server frames) at every point and also feeds it one byte at a time,
// as nats-server's parser tests do: the payloads are the same every way.
func TestParseFrameStream(t *testing.T) {
	for _, magic := range []string{ReqMagic, ResMagic} {
		var stream []byte
		var want []string
		for _, f := range wireFrames() {
			if f.magic == magic {
				stream = append(stream, f.bytes...)
				want = append(want, f.bytes[HeaderSize:])
			}
		}
		check := func(how string, chunks [][]byte) {
			t.Helper()
			got, err := parseStream(chunks, magic, 0)
			if err != nil || len(got) != len(want) {
				t.Fatalf("%q %s: %d payloads, %v; want %d", magic, how, len(got), err, len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%q %s: payload %d = %q, want %q", magic, how, i, got[i], want[i])
				}
			}
		}
		check("whole", [][]byte{stream})
		for k := 0; k <= len(stream); k++ {
			check("split", [][]byte{stream[:k], stream[k:]})
		}
		var bytewise [][]byte
		for i := range stream {
			bytewise = append(bytewise, stream[i:i+1])
		}
		check("byte by byte", bytewise)
	}
}

func TestBeginEndFrame(t *testing.T) {
	dst := []byte("prefix")
	dst, start := BeginFrame(dst, ResMagic)
	if start != 6 || string(dst) != "prefix\x00RES\x00\x00\x00\x00" {
		t.Fatalf("BeginFrame = %q, %d", dst, start)
	}
	dst = append(dst, "hello"...)
	dst = EndFrame(dst, start)
	if want := "prefix" + rawFrame(ResMagic, "hello"); string(dst) != want {
		t.Fatalf("EndFrame = %q, want %q", dst, want)
	}
	// An empty payload.
	dst, start = BeginFrame(nil, ReqMagic)
	if got := EndFrame(dst, start); string(got) != rawFrame(ReqMagic, "") {
		t.Fatalf("empty frame = %q", got)
	}
}

func TestAppendHandshake(t *testing.T) {
	for _, typ := range []byte{TypeClient, TypeWorker} {
		got := AppendHandshake([]byte("x"), typ)
		if want := "x" + rawFrame(ReqMagic, string([]byte{typ})); string(got) != want {
			t.Errorf("AppendHandshake(%d) = %q, want %q", typ, got, want)
		}
	}
	// It is what the real client sends first: type 1 or 2 alone, no id.
	if !bytes.Equal(AppendHandshake(nil, TypeWorker), []byte("\x00REQ\x00\x00\x00\x01\x02")) {
		t.Error("worker handshake bytes")
	}
}
