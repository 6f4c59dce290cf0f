package dwork

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	codec "switchyard/codec/dwork"
	"switchyard/engine/budget"
	"switchyard/sched"
)

// A raw ZMTP 3.0 peer, for what zmq4's own sockets would never send.

// greeting is a ZMTP 3.0 greeting with the NULL mechanism.
func greeting() []byte {
	g := make([]byte, zmtpGreeting)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	return g
}

// command is a ZMTP command frame.
func command(name string, body []byte) []byte {
	b := append([]byte{byte(len(name))}, name...)
	b = append(b, body...)
	return append([]byte{zmtpCommand, byte(len(b))}, b...)
}

// ready is a DEALER's READY command.
func ready() []byte {
	var md []byte
	md = append(md, byte(len("Socket-Type")))
	md = append(md, "Socket-Type"...)
	md = binary.BigEndian.AppendUint32(md, uint32(len("DEALER")))
	md = append(md, "DEALER"...)
	return command("READY", md)
}

// shortFrame and longFrame are frame headers.
func shortFrame(flags byte, size int) []byte { return []byte{flags, byte(size)} }

func longFrame(flags byte, size uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{flags | zmtpLong}, size)
}

// dialZMTP connects as a DEALER and finishes the handshake.
func dialZMTP(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(replyTimeout))
	if _, err := c.Write(append(greeting(), ready()...)); err != nil {
		t.Fatal(err)
	}
	var g [zmtpGreeting]byte
	if _, err := io.ReadFull(c, g[:]); err != nil {
		t.Fatalf("the server's greeting: %v", err)
	}
	var h [2]byte
	if _, err := io.ReadFull(c, h[:]); err != nil || h[0] != zmtpCommand {
		t.Fatalf("the server's READY: %x, %v", h, err)
	}
	if _, err := io.ReadFull(c, make([]byte, h[1])); err != nil {
		t.Fatalf("the server's READY: %v", err)
	}
	c.SetDeadline(time.Time{})
	return c
}

// waitClosed reads c until the server closes it: nil, or why not.
func waitClosed(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(replyTimeout))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("the connection is still open")
	}
	return nil // EOF, or reset
}

var testGuard = guardConfig{maxMsg: 100, maxFrames: 3, maxCmd: 50, log: zap.NewNop()}

func TestScanner(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		err  string // "" for none
	}{
		{"handshake", append(greeting(), ready()...), ""},
		{"not ZMTP", []byte("GET / HTTP/1.1\r\n"), "not a ZMTP greeting"},
		{"bad signature end", append(append([]byte{0xff}, make([]byte, 8)...), 0x00), "not a ZMTP greeting"},
		{"ZMTP 2", func() []byte { g := greeting(); g[10] = 1; return g }(), "ZMTP version 1"},
		{"messages at the limits", concat(greeting(), ready(),
			shortFrame(zmtpMore, 0), shortFrame(zmtpMore, 0), shortFrame(0, 100), make([]byte, 100),
			longFrame(0, 100), make([]byte, 100)), ""},
		{"a frame over", concat(greeting(), ready(), longFrame(0, 101)), "more than 100 bytes"},
		{"frames over", concat(greeting(), ready(), shortFrame(zmtpMore, 60), make([]byte, 60), shortFrame(0, 41)), "more than 100 bytes"},
		{"too many frames", concat(greeting(), ready(), shortFrame(zmtpMore, 0), shortFrame(zmtpMore, 0), shortFrame(zmtpMore, 0), shortFrame(0, 0)), "more than 3 frames"},
		{"huge size", concat(greeting(), longFrame(0, 1<<63)), "more than 100 bytes"},
		{"a command over", concat(greeting(), []byte{zmtpCommand, 51}), "command of 51 bytes"},
		{"a command with more", concat(greeting(), []byte{zmtpCommand | zmtpMore, 1}), "command with more"},
		{"reserved flags", concat(greeting(), []byte{0x08, 0}), "flags 0x8"},
	} {
		for _, split := range []int{0, 1} { // all at once, and a byte at a time
			var s scanner
			var err error
			if split == 0 {
				err = s.feed(tc.in, &testGuard)
			} else {
				for i := range tc.in {
					if err = s.feed(tc.in[i:i+1], &testGuard); err != nil {
						break
					}
				}
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("%s (split %d): %v", tc.name, split, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%s (split %d): error %v, want one saying %q", tc.name, split, err, tc.err)
			}
			if tc.name == "handshake" && s.commands != 1 {
				t.Errorf("handshake: %d commands seen, want READY", s.commands)
			}
		}
	}
}

func concat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// A peer that connects and says nothing, or stalls in its handshake, does
// not keep anyone else out, and is closed after the handshake timeout; a
// peer that is not ZMTP is closed at once.
func TestStalledPeers(t *testing.T) {
	e := start(t, Config{HandshakeTimeout: 300 * time.Millisecond}, sched.Config{})
	silent, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c := e.dial()
	wantType(t, "a client after a silent one", c.do(stealReq("h")), codec.QueryMsg_NotFound)

	stalled, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.Write(greeting()[:11])
	for name, conn := range map[string]net.Conn{"silent": silent, "stalled": stalled} {
		start := time.Now()
		if err := waitClosed(conn); err != nil {
			t.Fatalf("%s peer: %v", name, err)
		}
		if d := time.Since(start); d > replyTimeout/2 {
			t.Fatalf("%s peer closed after %v, handshake timeout 300ms", name, d)
		}
	}
	c2 := e.dial() // the stalled handshake held zmq4's accept loop until closed
	wantType(t, "a client after a stalled one", c2.do(stealReq("h")), codec.QueryMsg_NotFound)

	http, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer http.Close()
	http.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	if err := waitClosed(http); err != nil {
		t.Fatalf("HTTP peer: %v", err)
	}
}

// Past MaxConns a new connection is closed as it is accepted.
func TestMaxConns(t *testing.T) {
	e := start(t, Config{MaxConns: 1}, sched.Config{})
	c := e.dial()
	wantType(t, "the one client", c.do(stealReq("h")), codec.QueryMsg_NotFound)
	extra, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := waitClosed(extra); err != nil {
		t.Fatalf("a connection over the maximum: %v", err)
	}
	if e.logs.FilterMessageSnippet("too many connections").Len() != 1 {
		t.Fatal("no log line for the refused connection")
	}
	wantType(t, "the one client again", c.do(stealReq("h")), codec.QueryMsg_NotFound)
}

// pipeConn is a guardConn over one end of a net.Pipe, which buffers
// nothing: what the other end does not read stays in the guard's buffer.
func pipeConn(t *testing.T, cfg guardConfig) (*guardConn, net.Conn) {
	t.Helper()
	ours, theirs := net.Pipe()
	t.Cleanup(func() { theirs.Close() })
	cfg.log, cfg.handshake = zap.NewNop(), time.Hour
	l := &guardListener{cfg: cfg}
	l.conns.Add(1)
	g := newGuardConn(ours, l)
	t.Cleanup(func() { g.Close() })
	go g.writeLoop()
	return g, theirs
}

// Write never waits for the client: replies queue up to maxOut, and past
// that the connection is closed.
func TestWriteOverflow(t *testing.T) {
	g, peer := pipeConn(t, guardConfig{maxOut: 1000, write: time.Hour})
	var err error
	n := 0
	for ; n < 100 && err == nil; n++ {
		_, err = g.Write(make([]byte, 100))
	}
	if !errors.Is(err, errGuardOverflow) {
		t.Fatalf("after %d writes of 100 bytes, max 1000 waiting: %v, want overflow", n, err)
	}
	if _, err := g.Write([]byte{1}); !errors.Is(err, errGuardClosed) {
		t.Fatalf("write after overflow: %v, want closed", err)
	}
	if err := waitClosed(peer); err != nil {
		t.Fatal(err)
	}
	if g.l.conns.Load() != 0 {
		t.Fatalf("%d connections counted after close", g.l.conns.Load())
	}
}

// A write the client does not take within the write timeout closes the
// connection; what it does take arrives whole and in order.
func TestWriteTimeout(t *testing.T) {
	g, peer := pipeConn(t, guardConfig{maxOut: 1 << 20, write: 200 * time.Millisecond})
	want := []byte("first reply, second reply")
	g.Write(want[:12])
	g.Write(want[12:])
	got := make([]byte, len(want))
	peer.SetReadDeadline(time.Now().Add(replyTimeout))
	if _, err := io.ReadFull(peer, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	g.Write([]byte("unread"))
	select {
	case <-g.gone:
	case <-time.After(replyTimeout):
		t.Fatal("a write nobody reads did not close the connection")
	}
	if _, err := g.Write([]byte{1}); !errors.Is(err, errGuardClosed) {
		t.Fatalf("write after the timeout: %v, want closed", err)
	}
}

// The memory budget holds what a peer makes zmq4 hold: a message's frames
// from their headers until the next message begins, and the replies
// waiting for it. A header the budget cannot take closes the connection
// before zmq4 reads it.
func TestGuardBudget(t *testing.T) {
	tests := []struct {
		name    string
		frames  []uint64 // data frames, one message each
		used    []int64  // the budget used after each frame's header
		refused bool     // the last header is refused
	}{
		{"one message", []uint64{300}, []int64{300}, false},
		{"the last message is given back as the next begins", []uint64{300, 600, 100}, []int64{300, 600, 100}, false},
		{"over the budget", []uint64{300, 1001}, []int64{300, 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := budget.New(1000)
			g, peer := pipeConn(t, guardConfig{maxMsg: 1 << 20, maxFrames: 3, maxCmd: 200, budget: b, write: time.Hour, maxOut: 1 << 20})
			go func() {
				stream := append(greeting(), ready()...)
				for _, size := range tt.frames {
					stream = append(append(stream, longFrame(0, size)...), make([]byte, size)...)
				}
				peer.Write(stream)
			}()
			read := func(n int) error {
				_, err := io.ReadFull(g, make([]byte, n))
				return err
			}
			if err := read(zmtpGreeting + len(ready())); err != nil {
				t.Fatal(err)
			}
			for i, size := range tt.frames {
				err := read(9)
				if tt.refused && i == len(tt.frames)-1 {
					if !errors.Is(err, errGuardBudget) {
						t.Fatalf("header of %d bytes: %v, want the budget's refusal", size, err)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := b.Used(); got != tt.used[i] {
					t.Fatalf("after the header of frame %d (%d bytes): used %d, want %d", i, size, got, tt.used[i])
				}
				if err := read(int(size)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.refused && b.Refused() != 1 {
				t.Fatalf("refused %d, want 1", b.Refused())
			}
			g.Close()
			if got := b.Used(); got != 0 {
				t.Fatalf("used %d once the connection closed", got)
			}
		})
	}
}

// Replies waiting for a client are held against the budget until written.
func TestGuardBudgetReplies(t *testing.T) {
	b := budget.New(1 << 20)
	g, peer := pipeConn(t, guardConfig{budget: b, write: time.Hour, maxOut: 1 << 20})
	if _, err := g.Write(make([]byte, 700)); err != nil {
		t.Fatal(err)
	}
	// The writer has it, or it waits: either way, it is held.
	if got := b.Used(); got != 700 {
		t.Fatalf("used %d with a 700-byte reply unread, want 700", got)
	}
	if _, err := io.ReadFull(peer, make([]byte, 700)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(replyTimeout)
	for b.Used() != 0 { // the writer gives it back after its write returns
		if time.Now().After(deadline) {
			t.Fatalf("used %d after the reply was read", b.Used())
		}
		time.Sleep(time.Millisecond)
	}
}
