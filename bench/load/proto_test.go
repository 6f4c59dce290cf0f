package load

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestWritePacket(t *testing.T) {
	tests := []struct {
		name string
		typ  uint32
		args [][]byte
		want string
	}{
		{"no arguments", typeGrabJob, nil, "\x00REQ\x00\x00\x00\x09\x00\x00\x00\x00"},
		{"one argument", typeCanDo, [][]byte{[]byte("fn")}, "\x00REQ\x00\x00\x00\x01\x00\x00\x00\x02fn"},
		{"submit with empty unique", typeSubmitJob, [][]byte{[]byte("fn"), nil, []byte("data")},
			"\x00REQ\x00\x00\x00\x07\x00\x00\x00\x08fn\x00\x00data"},
		{"complete", typeWorkComplete, [][]byte{[]byte("H:x:1"), []byte("r")},
			"\x00REQ\x00\x00\x00\x0d\x00\x00\x00\x07H:x:1\x00r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			if err := writePacket(w, tt.typ, tt.args...); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			if got := buf.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// res builds a response packet.
func res(typ byte, body string) string {
	n := len(body)
	return "\x00RES\x00\x00\x00" + string([]byte{typ}) + string([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + body
}

func TestPacketReader(t *testing.T) {
	stream := res(8, "H:x:1") + res(13, "H:x:1\x00result\x00with nul") + res(10, "") + res(6, "")
	want := []struct {
		typ  uint32
		body string
	}{
		{typeJobCreated, "H:x:1"},
		{typeWorkComplete, "H:x:1\x00result\x00with nul"},
		{typeNoJob, ""},
		{typeNoop, ""},
	}
	readers := map[string]io.Reader{
		"whole":        strings.NewReader(stream),
		"one byte":     iotest.OneByteReader(strings.NewReader(stream)),
		"half packets": iotest.HalfReader(strings.NewReader(stream)),
	}
	for name, r := range readers {
		t.Run(name, func(t *testing.T) {
			pr := newPacketReader(r, 16) // smaller than a packet: bodies span refills
			for _, w := range want {
				typ, body, err := pr.next()
				if err != nil {
					t.Fatal(err)
				}
				if typ != w.typ || string(body) != w.body {
					t.Errorf("got %d %q, want %d %q", typ, body, w.typ, w.body)
				}
			}
			if _, _, err := pr.next(); err != io.EOF {
				t.Errorf("after the last packet: %v, want EOF", err)
			}
		})
	}
}

func TestPacketReaderErrors(t *testing.T) {
	tests := []struct {
		name, stream, want string
	}{
		{"bad magic", "\x00REQ\x00\x00\x00\x06\x00\x00\x00\x00", "magic"},
		{"huge body", "\x00RES\x00\x00\x00\x06\x7f\x00\x00\x00", "response body"},
		{"truncated body", "\x00RES\x00\x00\x00\x08\x00\x00\x00\x05H:", "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := newPacketReader(strings.NewReader(tt.stream), 64).next()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestPacketReaderComplete(t *testing.T) {
	tests := []struct {
		name     string
		buffered string
		want     bool
	}{
		{"nothing", "", false},
		{"part of a header", "\x00RES\x00", false},
		{"header without body", res(8, "H:x:1")[:14], false},
		{"whole packet", res(8, "H:x:1"), true},
		{"empty body", res(10, ""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := newPacketReader(strings.NewReader(tt.buffered), 64)
			pr.r.Peek(len(tt.buffered)) // buffer everything the reader has
			if got := pr.complete(); got != tt.want {
				t.Errorf("complete() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSplitArg(t *testing.T) {
	tests := []struct{ body, arg, rest string }{
		{"H:x:1\x00fn\x00data", "H:x:1", "fn\x00data"},
		{"H:x:1", "H:x:1", ""},
		{"\x00data", "", "data"},
		{"", "", ""},
	}
	for _, tt := range tests {
		arg, rest := splitArg([]byte(tt.body))
		if string(arg) != tt.arg || string(rest) != tt.rest {
			t.Errorf("splitArg(%q) = %q, %q; want %q, %q", tt.body, arg, rest, tt.arg, tt.rest)
		}
	}
}
