package gearman

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// TestSlowSender: long admin lines and large packets written a few bytes at
// a time, so that the server gets them over many events and resumes each
// frame where the last event left it, are answered as if sent whole; a line
// too long is refused when its limit is reached.
func TestSlowSender(t *testing.T) {
	// longName fills a "create function" line to n bytes with ending.
	longName := func(n int, ending string) string {
		return strings.Repeat("f", n-len("create function ")-len(ending))
	}
	longest := longName(codec.MaxLineSize, "\r\n")
	spaced := strings.Repeat(" ", 2000)
	echo := func(n int) string { return strings.Repeat("e", n) }
	tests := []struct {
		name   string
		send   []byte
		chunks []int
		want   []byte
		closes bool
	}{
		{"longest line, CRLF",
			[]byte("create function " + longest + "\r\nstatus\n"), []int{1, 100},
			[]byte("OK\r\n" + longest + "\t0\t0\t0\n.\n"), false},
		{"longest line, LF",
			[]byte("create function " + longName(codec.MaxLineSize, "\n") + "\n" + "version\n"), []int{1, 100},
			[]byte("OK\r\nOK 0.0.0-test\n"), false},
		{"words far apart",
			[]byte(spaced + "create" + spaced + "function" + spaced + "g" + spaced + "\nstatus\n"), []int{1, 100},
			[]byte("OK\r\ng\t0\t0\t0\n.\n"), false},
		{"line too long",
			[]byte("create function " + longName(codec.MaxLineSize, "")), []int{1, 100},
			[]byte("ERR LINE_TOO_LONG Line+too+long\r\n"), true},
		{"lines and packets",
			bytes.Join([][]byte{[]byte("create function a\n"), req(codec.EchoReq, "b"), []byte("version\r\n"),
				req(codec.EchoReq, echo(1000))}, nil), []int{1, 5},
			bytes.Join([][]byte{[]byte("OK\r\n"), res(codec.EchoRes, "b"), []byte("OK 0.0.0-test\n"),
				res(codec.EchoRes, echo(1000))}, nil), false},
		{"packet kept in gnet's buffer",
			req(codec.EchoReq, echo(largeBody-codec.HeaderSize)), []int{100, 1000},
			res(codec.EchoRes, echo(largeBody-codec.HeaderSize)), false},
		{"packet read into its own buffer",
			req(codec.EchoReq, echo(3*largeBody)), []int{100, 1000},
			res(codec.EchoRes, echo(3*largeBody)), false},
	}
	for _, tt := range tests {
		for _, chunk := range tt.chunks {
			t.Run(fmt.Sprintf("%s/%d", tt.name, chunk), func(t *testing.T) {
				addr, _ := startServer(t, Config{}, sched.Config{})
				p := dial(t, addr)
				for rest := tt.send; len(rest) > 0; {
					n := min(chunk, len(rest))
					p.send(rest[:n])
					rest = rest[n:]
				}
				p.c.SetReadDeadline(time.Now().Add(10 * time.Second))
				got := make([]byte, len(tt.want))
				if _, err := io.ReadFull(p.r, got); err != nil {
					t.Fatalf("reading the reply: %v (got %s)", err, clip(got))
				}
				if !bytes.Equal(got, tt.want) {
					t.Fatalf("got  %s\nwant %s", clip(got), clip(tt.want))
				}
				if tt.closes {
					p.closed()
					return
				}
				p.send(req(codec.EchoReq, "after"))
				p.expect(res(codec.EchoRes, "after"))
			})
		}
	}
}

// TestLineWithoutNewlineAtClose: as with gearmand, a line the peer never
// ends is not run when it closes or half-closes, however it arrived.
func TestLineWithoutNewlineAtClose(t *testing.T) {
	for _, chunk := range []int{1, 1 << 10} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			addr, _ := startServer(t, Config{}, sched.Config{})
			p := dial(t, addr)
			line := []byte("create function lost" + strings.Repeat(" ", 300))
			for rest := line; len(rest) > 0; {
				n := min(chunk, len(rest))
				p.send(rest[:n])
				rest = rest[n:]
			}
			p.c.(*net.TCPConn).CloseWrite()
			p.closed() // EOF and not a byte before it
			a := dial(t, addr)
			a.send([]byte("status\n"))
			if got := a.listing(); got != ".\n" {
				t.Errorf("status after the unended line: %q", got)
			}
		})
	}
}

// TestReadMax: a turn of a loop reads about loopRead of large packets,
// gnet's 64 KiB reads counted, so that a lone 1 MiB packet comes in one
// event and forty large readers cannot make a turn, and the ECHO waiting
// behind it, long.
func TestReadMax(t *testing.T) {
	tests := []struct {
		large int
		want  int
	}{
		{0, 1 << 20},
		{1, 1 << 20},
		{2, (1<<20+64<<10)/2 - 64<<10},
		{8, (1<<20+64<<10)/8 - 64<<10},
		{16, 4 << 10},
		{17, 0},
		{40, 0},
	}
	for _, tt := range tests {
		gl := &gearLoop{large: tt.large}
		if got := gl.readMax(); got != tt.want {
			t.Errorf("readMax with %d large readers = %d, want %d", tt.large, got, tt.want)
		}
		// What one turn reads of them all: gnet's reads and readMax each.
		if turn := max(tt.large, 1) * (gnetRead + gl.readMax()); tt.large <= 16 && turn > loopRead {
			t.Errorf("%d large readers read %d bytes a turn, over loopRead %d", tt.large, turn, loopRead)
		}
	}
}
