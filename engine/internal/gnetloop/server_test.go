package gnetloop

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// lines is a toy protocol over the core, one command a line:
//
//	echo X      answers X at once
//	later X     answers X from another goroutine (a hand-off)
//	to N X      hands X to the connection named N (see name), from this event
//	name N      names this connection N
//	dump N      answers N lines "i" built off the loop
//	flood N     answers N bytes at once
type lines struct {
	mu    sync.Mutex
	named map[string]*lineConn
}

type lineConn struct {
	h    *lines
	c    *Conn
	take func()
	got  []string // the hand-offs a take moved, for tests
}

func (h *lines) Open(c *Conn) Session {
	lc := &lineConn{h: h, c: c}
	lc.take = func() {}
	return lc
}

func (lc *lineConn) Closed() {}

func (lc *lineConn) Traffic() gnet.Action {
	c := lc.c
	c.Receive(lc.take, nil)
	action := gnet.None
	for !c.Paused {
		n := c.C.InboundBuffered()
		buf, _ := c.C.Peek(n)
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		line := string(buf[:i])
		c.C.Discard(i + 1)
		cmd, arg, _ := strings.Cut(line, " ")
		switch cmd {
		case "echo":
			c.Out = append(c.Out, arg+"\n"...)
		case "later":
			go func() {
				if c.Open() {
					c.Outbox = append(c.Outbox, arg+"\n"...)
					c.Send()
				}
			}()
		case "name":
			lc.h.mu.Lock()
			lc.h.named[arg] = lc
			lc.h.mu.Unlock()
			c.Out = append(c.Out, "named\n"...)
		case "to":
			n, x, _ := strings.Cut(arg, " ")
			lc.h.mu.Lock()
			to := lc.h.named[n]
			lc.h.mu.Unlock()
			to.deliver(c.Loop(), x)
		case "dump":
			var k int
			fmt.Sscan(arg, &k)
			c.OffLoop(func(send func([]byte) bool) bool {
				for i := range k {
					if !send([]byte(fmt.Sprintf("%d\n", i))) {
						return false
					}
				}
				return true
			})
		case "flood":
			var k int
			fmt.Sscan(arg, &k)
			c.Out = append(c.Out, bytes.Repeat([]byte{'x'}, k)...)
		case "quit":
			action = gnet.Close
		}
	}
	return c.Finish(action)
}

// deliver is a callback from origin's goroutine: straight into Out when
// that is this connection's loop, else through the outbox.
func (lc *lineConn) deliver(origin any, x string) {
	c := lc.c
	if c.Local(origin) {
		c.Out = append(c.Out, x+"\n"...)
		return
	}
	if c.Open() {
		c.Outbox = append(c.Outbox, x+"\n"...)
		c.Send()
	}
}

func startLines(t *testing.T, cfg Config) (*Server, *lines) {
	t.Helper()
	h := &lines{named: map[string]*lineConn{}}
	cfg.Name = "lines"
	if cfg.Addrs == nil {
		cfg.Addrs = []string{"tcp://127.0.0.1:0"}
	}
	s := New(cfg, h)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s, h
}

type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, network, addr string) *client {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) expect(lines ...string) {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, want := range lines {
		got, err := c.r.ReadString('\n')
		if err != nil || got != want+"\n" {
			c.t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
}

func TestServerAnswersInOrder(t *testing.T) {
	s, _ := startLines(t, Config{Loops: 2})
	addr := s.Addrs()[0].String()
	c := dial(t, "tcp", addr)
	// Pipelined, and split across writes: every reply, in order of the
	// requests answered on the loop.
	c.send("echo a\necho b\nec")
	c.send("ho c\n")
	c.expect("a", "b", "c")
	c.send("later d\n")
	c.expect("d")
	// An answer built off the loop comes after what came before it, and
	// what was pipelined after it waits for it.
	c.send("echo before\ndump 3\necho after\n")
	c.expect("before", "0", "1", "2", "after")
	if n := s.Conns(); n != 1 {
		t.Errorf("Conns = %d, want 1", n)
	}
}

// A hand-off from a connection of the same loop goes straight into the
// target's buffer, flushed at the end of the sender's event: no wake. One
// from another goroutine costs one.
func TestSameLoopHandOffWakesNothing(t *testing.T) {
	s, _ := startLines(t, Config{Loops: 1})
	addr := s.Addrs()[0].String()
	a, b := dial(t, "tcp", addr), dial(t, "tcp", addr)
	b.send("name b\n")
	b.expect("named")
	a.send("to b hello\nto b again\n")
	b.expect("hello", "again")
	if w := s.Wakes(); w != 0 {
		t.Errorf("%d wakes for same-loop hand-offs, want 0", w)
	}
	a.send("later x\n")
	a.expect("x")
	if w := s.Wakes(); w != 1 {
		t.Errorf("%d wakes for one hand-off from another goroutine, want 1", w)
	}
}

// A peer that does not read is cut off past MaxOutbound.
func TestTooFarBehindIsClosed(t *testing.T) {
	s, _ := startLines(t, Config{Loops: 1, MaxOutbound: 1 << 20})
	// A small receive buffer, set before the connection is made. Even so
	// the kernel took up to 12 MiB of one write on loopback (its send
	// buffer and the receiver's, both overcommitted): an 8 MiB flood was
	// sometimes taken whole and the peer never behind, 1 run in 20. The
	// flood is 32 MiB.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	nc, err := d.Dial("tcp", s.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &client{t: t, c: nc, r: bufio.NewReader(nc)}
	c.send(strings.Repeat("flood 1048576\n", 32))
	// Not reading until the server has cut it off, so that reading does
	// not make room in the kernel's buffers as the server writes.
	for deadline := time.Now().Add(10 * time.Second); s.Conns() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a peer 31 MiB behind is still connected")
		}
	}
	// Reading now: the data the kernel and gnet held, then the close.
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1<<20)
	total := 0
	for {
		n, err := c.r.Read(buf)
		total += n
		if err != nil {
			break
		}
	}
	t.Logf("read %d bytes before the close", total)
	if total >= 32<<20 {
		t.Errorf("read all %d bytes: the peer was not cut off", total)
	}
}

// Unix sockets: a stale file is replaced, the file is removed at Stop.
func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &lines{named: map[string]*lineConn{}}
	s := New(Config{Name: "lines", Addrs: []string{"unix://" + path}, Loops: 1}, h)
	if err := s.Start(); err == nil {
		t.Fatal("a file that is not a socket was taken over")
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path) // a socket left by a server that died
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	s = New(Config{Name: "lines", Addrs: []string{"unix://" + path}, Loops: 1}, h)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c := dial(t, "unix", path)
	c.send("echo u\n")
	c.expect("u")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket file after Stop: %v", err)
	}
}

// Drain refuses new connections and keeps the open ones.
func TestDrain(t *testing.T) {
	s, _ := startLines(t, Config{Loops: 1})
	addr := s.Addrs()[0].String()
	c := dial(t, "tcp", addr)
	c.send("echo 1\n")
	c.expect("1")
	s.Drain()
	d := dial(t, "tcp", addr)
	d.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := d.r.ReadByte(); err == nil {
		t.Error("a connection made while draining got a byte")
	}
	c.send("echo 2\n")
	c.expect("2")
}

// An answer built off the loop for a connection that closes meanwhile
// still reaches the peer when the peer half-closed after its request (nc
// -N does): gnet closes at EOF, the socket is kept for the answer. Not for
// an answer the socket's buffers cannot take while gnet holds part of it:
// gnet drops that at the close.
func TestOffLoopAnswerAfterHalfClose(t *testing.T) {
	s, _ := startLines(t, Config{Loops: 1})
	c := dial(t, "tcp", s.Addrs()[0].String())
	c.send("dump 2000\n")
	c.c.(*net.TCPConn).CloseWrite()
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := range 2000 {
		line, err := c.r.ReadString('\n')
		if err != nil || line != fmt.Sprintf("%d\n", i) {
			t.Fatalf("line %d: %q, %v", i, line, err)
		}
	}
}
