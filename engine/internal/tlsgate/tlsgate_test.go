package tlsgate

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap/zaptest"

	"switchyard/engine/tlstest"
)

// echo is a gnet handler: it echoes what it reads, closes the connection
// on "quit", answers "bye" with byeSize bytes and closes, and answers
// "blob" with blobSize bytes, more than the socket buffers hold, and hands
// the connection to the test. It has no listener of its own: every
// connection comes through the gate.
type echo struct {
	gnet.BuiltinEventEngine
	eng    chan gnet.Engine
	booted gnet.Engine
	once   sync.Once
	peers  chan net.Addr  // each connection's peer, from OnOpen
	closed chan struct{}  // one per OnClose
	blobs  chan gnet.Conn // the connections that asked for a blob
}

const (
	byeSize  = 64 << 10 // fits in a socketpair's buffer: gnet writes it all before closing
	blobSize = 8 << 20
)

func (e *echo) OnBoot(eng gnet.Engine) gnet.Action {
	e.booted = eng
	return gnet.None
}

// OnTick hands the engine over the first time: the event loops exist by
// then (they do not yet at OnBoot).
func (e *echo) OnTick() (time.Duration, gnet.Action) {
	e.once.Do(func() { e.eng <- e.booted })
	return time.Hour, gnet.None
}

func (e *echo) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	p := PeerOf(c)
	var a net.Addr
	if p != nil {
		a = p.RemoteAddr()
	}
	e.peers <- a
	return nil, gnet.None
}

func (e *echo) OnTraffic(c gnet.Conn) gnet.Action {
	b, _ := c.Next(-1)
	switch string(b) {
	case "quit":
		return gnet.Close
	case "bye":
		c.Write(bytes.Repeat([]byte{'x'}, byeSize))
		return gnet.Close
	case "blob":
		c.Write(bytes.Repeat([]byte{'x'}, blobSize))
		e.blobs <- c
		return gnet.None
	}
	c.Write(b)
	return gnet.None
}

func (e *echo) OnClose(c gnet.Conn, _ error) gnet.Action {
	if p := PeerOf(c); p != nil {
		p.EngineClosed()
	}
	e.closed <- struct{}{}
	return gnet.None
}

type fixture struct {
	gate *Gate
	eng  gnet.Engine
	h    *echo
	cert *tlstest.Cert
}

// start runs a gnet engine without listeners and a gate on 127.0.0.1:0.
func start(t *testing.T, cfg Config) *fixture {
	t.Helper()
	h := &echo{eng: make(chan gnet.Engine, 1), peers: make(chan net.Addr, 64), closed: make(chan struct{}, 64), blobs: make(chan gnet.Conn, 1)}
	addr, remove, err := Placeholder()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	done := make(chan error, 1)
	go func() {
		done <- gnet.Run(h, addr, gnet.WithMulticore(true), gnet.WithNumEventLoop(2), gnet.WithTicker(true),
			gnet.WithLoadBalancing(gnet.LeastConnections))
	}()
	var eng gnet.Engine
	select {
	case eng = <-h.eng:
	case err := <-done:
		t.Fatalf("gnet: %v", err)
	}
	remove()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		go eng.Stop(ctx) // polls every 500ms; Run returns as soon as the loops are done
		select {
		case <-done:
		case <-ctx.Done():
		}
	})

	cert := tlstest.Server("gate")
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS()}}
	cfg.Log = zaptest.NewLogger(t)
	g, err := Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.Start(eng)
	t.Cleanup(func() {
		g.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Wait(ctx); err != nil {
			t.Errorf("gate wait: %v", err)
		}
	})
	return &fixture{gate: g, eng: eng, h: h, cert: cert}
}

func (f *fixture) dial(t *testing.T) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", f.gate.Addr().String(), &tls.Config{RootCAs: f.cert.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s after 10s", what)
		panic("unreachable")
	}
}

func TestEchoAndPeer(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t)
	for _, msg := range []string{"hello", strings.Repeat("y", 100<<10)} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes: %v, %d bytes back", len(msg), err, len(got))
		}
	}
	// The handler sees the TLS peer's address, not the socketpair's.
	if got, want := recv(t, f.h.peers, "OnOpen").String(), c.LocalAddr().String(); got != want {
		t.Errorf("peer %s, want %s", got, want)
	}
}

// Many handshakes and registrations at once, racing the engine's own
// acceptor-side bookkeeping (run with -race).
func TestConcurrentClients(t *testing.T) {
	f := start(t, Config{})
	const n = 32
	errs := make(chan error, n)
	for i := range n {
		go func() {
			c, err := tls.Dial("tcp", f.gate.Addr().String(), &tls.Config{RootCAs: f.cert.Pool()})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			msg := fmt.Sprintf("client %d", i)
			got := make([]byte, len(msg))
			if _, err := c.Write([]byte(msg)); err != nil {
				errs <- err
				return
			}
			if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
				errs <- fmt.Errorf("%s: got %q, %v", msg, got, err)
				return
			}
			errs <- nil
		}()
	}
	for range n {
		if err := recv(t, errs, "client"); err != nil {
			t.Error(err)
		}
	}
}

// However a connection ends, the other side learns it, and what was
// written before the end arrives.
func TestEnds(t *testing.T) {
	tests := []struct {
		name string
		// act ends the connection from the client's side, or asks the
		// engine to.
		act func(t *testing.T, c *tls.Conn)
		// want is what the client reads before EOF.
		want string
	}{
		{"client half-closes after a request", func(t *testing.T, c *tls.Conn) {
			c.Write([]byte("last"))
			if err := c.CloseWrite(); err != nil { // close_notify
				t.Fatal(err)
			}
		}, "last"},
		{"client half-closes the TCP stream", func(t *testing.T, c *tls.Conn) {
			c.Write([]byte("last"))
			c.NetConn().(*net.TCPConn).CloseWrite() // a FIN without close_notify
		}, "last"},
		{"engine closes", func(t *testing.T, c *tls.Conn) {
			c.Write([]byte("quit"))
		}, ""},
		{"engine writes and closes", func(t *testing.T, c *tls.Conn) {
			c.Write([]byte("bye"))
		}, strings.Repeat("x", byeSize)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, Config{})
			c := f.dial(t)
			tc.act(t, c)
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if string(got) != tc.want {
				t.Errorf("read %d bytes, want %d", len(got), len(tc.want))
			}
			recv(t, f.h.closed, "OnClose")
		})
	}
}

// A client that goes away abruptly closes the engine's connection.
func TestClientResets(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t)
	c.Write([]byte("ping"))
	io.ReadFull(c, make([]byte, 4))
	c.NetConn().(*net.TCPConn).SetLinger(0)
	c.NetConn().Close() // RST
	recv(t, f.h.closed, "OnClose")
}

// A peer that connects and says nothing is dropped after the handshake
// timeout, and never reaches the engine.
func TestHandshakeTimeout(t *testing.T) {
	f := start(t, Config{HandshakeTimeout: 50 * time.Millisecond})
	c, err := net.Dial("tcp", f.gate.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d, %v: want the gate to close the connection", n, err)
	}
	select {
	case a := <-f.h.peers:
		t.Fatalf("engine got a connection from %v", a)
	default:
	}
}

// Handshakes beyond MaxHandshakes wait until one in flight ends.
func TestMaxHandshakes(t *testing.T) {
	f := start(t, Config{MaxHandshakes: 1, HandshakeTimeout: time.Minute})
	silent, err := net.Dial("tcp", f.gate.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// silent holds the only slot: a handshake cannot finish meanwhile.
	// (Without the bound it finishes in well under the 200ms allowed.)
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	if c, err := tls.DialWithDialer(&d, "tcp", f.gate.Addr().String(), &tls.Config{RootCAs: f.cert.Pool()}); err == nil {
		c.Close()
		t.Fatal("handshake finished while the only slot was taken")
	}
	silent.Close()
	f.dial(t) // fails the test if it cannot
}

// Close drops connections still in their handshake; Wait then returns at
// once even though one of them never spoke.
func TestCloseDropsHandshakes(t *testing.T) {
	f := start(t, Config{HandshakeTimeout: time.Minute})
	silent, err := net.Dial("tcp", f.gate.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Once a live connection works, silent has been accepted: accept is
	// sequential.
	c := f.dial(t)
	c.Write([]byte("x"))
	io.ReadFull(c, make([]byte, 1))
	silent.SetReadDeadline(time.Now().Add(10 * time.Second))

	f.gate.Close()
	if _, err := silent.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent connection after Close: %v, want it closed", err)
	}
	// The live connection still works until the engine closes it.
	c.Write([]byte("y"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("live connection after Close: %v", err)
	}
	c.Write([]byte("quit"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.gate.Wait(ctx); err != nil {
		t.Fatalf("wait: %v", err)
	}
}

// A peer that stops reading cannot hold its link once the engine has
// closed the connection: CloseGrace cuts it.
func TestCloseGrace(t *testing.T) {
	f := start(t, Config{CloseGrace: 100 * time.Millisecond})
	c := f.dial(t)
	c.Write([]byte("blob")) // never read: the link blocks writing to c
	recv(t, f.h.blobs, "blob").Close()
	recv(t, f.h.closed, "OnClose")
	f.gate.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.gate.Wait(ctx); err != nil {
		t.Fatalf("wait: %v (the stalled link was not cut)", err)
	}
}

// Wait cuts what is still open when its context ends.
func TestWaitCutsAtDeadline(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t)
	c.Write([]byte("x"))
	io.ReadFull(c, make([]byte, 1))
	f.gate.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.gate.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait: %v, want the deadline", err)
	}
	if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the client's connection is still open")
	}
	recv(t, f.h.closed, "OnClose")
}

func TestListenNeedsCertificate(t *testing.T) {
	for _, cfg := range []Config{{}, {TLS: &tls.Config{}}} {
		if g, err := Listen("tcp", "127.0.0.1:0", cfg); err == nil {
			g.Close()
			t.Errorf("Listen(%+v) without a certificate succeeded", cfg)
		}
	}
}
