package memodb

// mangos's TCP transport reads a message by allocating the size its
// 8-byte header claims (up to OptionMaxRecvSize) before a byte of the body
// has come: a peer that sends headers and trickles bodies makes the server
// hold up to --max-packet per connection, with no bound on the sum. The
// metered transport is mangos's TCP with connections that follow the SP
// framing of what they read and hold the memory budget for it: from a
// message's header until the connection's next message begins (mangos has
// handed the message on by then). A header the budget cannot take closes
// the connection before mangos allocates for it; the budget cuts the
// largest holders as it does everywhere. ipc:// is left as mangos has it:
// its peers are local users the socket's permissions let in.
//
// tls+tcp:// is the same transport with TLS under the SP stream (as
// mangos's and nng's tls+tcp): each connection's handshake runs on a
// goroutine of its own within tlsHandshakeTimeout, at most maxTLSHandshakes
// at a time, before mangos sees the connection; the metering reads the
// plain text.

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"go.nanomsg.org/mangos/v3"
	"go.nanomsg.org/mangos/v3/transport"

	"switchyard/engine/budget"
)

const (
	// meteredScheme is the metered transport's: the server listens on
	// meteredScheme://HOST:PORT for a tcp:// address.
	meteredScheme = "switchyard-metered-tcp"
	// optionBudget is the listener option that names the budget.
	optionBudget = "switchyard-budget"
	// optionTLS is the listener option that makes it speak TLS: a
	// *tls.Config.
	optionTLS = "switchyard-tls"
	// tlsScheme is the scheme of a TLS address.
	tlsScheme = "tls+tcp://"
	// tlsHandshakeTimeout bounds a TLS handshake, so that a peer that
	// connects and stays silent holds nothing for long.
	tlsHandshakeTimeout = 10 * time.Second
	// maxTLSHandshakes bounds the handshakes in flight; more connections
	// wait in the kernel's accept queue.
	maxTLSHandshakes = 256
	// spHandshake is the bytes of the SP handshake each side sends first:
	// "\x00SP\x00", the protocol (2 bytes), 2 reserved.
	spHandshake = 8
	// acceptPause is the wait after a failed accept.
	acceptPause = 10 * time.Millisecond
)

var registerMetered sync.Once

// meteredListenAddr registers the metered transport (once) and returns
// the address to listen on for tcp://HOST:PORT or tls+tcp://HOST:PORT.
func meteredListenAddr(addr string) string {
	registerMetered.Do(func() { transport.RegisterTransport(meteredTransport{}) })
	_, hostPort, _ := strings.Cut(addr, "://")
	return meteredScheme + "://" + hostPort
}

type meteredTransport struct{}

func (meteredTransport) Scheme() string { return meteredScheme }

func (meteredTransport) NewDialer(string, mangos.Socket) (transport.Dialer, error) {
	return nil, errors.New("memodb: the metered transport only listens")
}

func (t meteredTransport) NewListener(addr string, sock mangos.Socket) (transport.Listener, error) {
	host, err := transport.StripScheme(t, addr)
	if err != nil {
		return nil, err
	}
	return &meteredListener{addr: host, proto: sock.Info(), handshaker: transport.NewConnHandshaker(),
		closed: make(chan struct{}), sem: make(chan struct{}, maxTLSHandshakes), shaking: make(map[net.Conn]bool)}, nil
}

// meteredListener accepts TCP connections, meters them, and hands them to
// mangos's handshaker as its TCP listener does.
type meteredListener struct {
	addr       string
	proto      transport.ProtocolInfo
	handshaker transport.Handshaker
	closed     chan struct{}
	closeOnce  sync.Once

	mu      sync.Mutex
	ln      net.Listener
	maxRecv int
	budget  *budget.Budget
	tls     *tls.Config   // nil: plain TCP
	sem     chan struct{} // one token per TLS handshake in flight
	shaking map[net.Conn]bool
	wg      sync.WaitGroup
}

func (l *meteredListener) Listen() error {
	select {
	case <-l.closed:
		return mangos.ErrClosed
	default:
	}
	ln, err := net.Listen("tcp", strings.TrimPrefix(l.addr, "*"))
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	go l.accept(ln)
	return nil
}

func (l *meteredListener) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: the next may do, after a
			// pause rather than at once.
			select {
			case <-l.closed:
				return
			case <-time.After(acceptPause):
			}
			continue
		}
		l.mu.Lock()
		cfg := l.tls
		l.mu.Unlock()
		if cfg == nil {
			l.start(c)
			continue
		}
		select {
		case l.sem <- struct{}{}:
		case <-l.closed:
			c.Close()
			return
		}
		l.mu.Lock()
		l.shaking[c] = true
		l.mu.Unlock()
		l.wg.Add(1)
		go l.handshake(c, cfg)
	}
}

// handshake does a TLS connection's handshake, then hands it on.
func (l *meteredListener) handshake(c net.Conn, cfg *tls.Config) {
	defer l.wg.Done()
	defer func() { <-l.sem }()
	tc := tls.Server(c, cfg)
	c.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	err := tc.Handshake()
	l.mu.Lock()
	delete(l.shaking, c)
	l.mu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	select {
	case <-l.closed:
		tc.Close()
	default:
		l.start(tc)
	}
}

// start meters a connection and hands it to mangos's handshaker.
func (l *meteredListener) start(c net.Conn) {
	l.mu.Lock()
	m := &meteredConn{Conn: c, need: spHandshake}
	m.hold = l.budget.Hold(func() { go m.Close() }) // the budget cuts under its lock
	p := transport.NewConnPipe(m, l.proto)
	p.SetOption(mangos.OptionMaxRecvSize, l.maxRecv)
	l.mu.Unlock()
	l.handshaker.Start(p)
}

func (l *meteredListener) Accept() (transport.Pipe, error) { return l.handshaker.Wait() }

// Address is the tcp:// (or tls+tcp://) URL of the bound address, as
// mangos's TCP listener says it.
func (l *meteredListener) Address() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	scheme := "tcp://"
	if l.tls != nil {
		scheme = tlsScheme
	}
	if l.ln != nil {
		return scheme + l.ln.Addr().String()
	}
	return scheme + l.addr
}

func (l *meteredListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.mu.Lock()
		if l.ln != nil {
			l.ln.Close()
		}
		for c := range l.shaking { // TLS handshakes in flight: cut
			c.Close()
		}
		l.mu.Unlock()
		l.wg.Wait()
		l.handshaker.Close()
	})
	return nil
}

func (l *meteredListener) SetOption(name string, v any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch name {
	case mangos.OptionMaxRecvSize:
		if n, ok := v.(int); ok {
			l.maxRecv = n
			return nil
		}
		return mangos.ErrBadValue
	case optionBudget:
		if b, ok := v.(*budget.Budget); ok {
			l.budget = b
			return nil
		}
		return mangos.ErrBadValue
	case optionTLS:
		if c, ok := v.(*tls.Config); ok {
			l.tls = c
			return nil
		}
		return mangos.ErrBadValue
	}
	return mangos.ErrBadOption
}

func (l *meteredListener) GetOption(name string) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch name {
	case mangos.OptionMaxRecvSize:
		return l.maxRecv, nil
	case optionBudget:
		return l.budget, nil
	case optionTLS:
		return l.tls, nil
	}
	return nil, mangos.ErrBadOption
}

// meteredConn follows the SP stream mangos reads (the handshake, then
// messages: an 8-byte big-endian size and the body) and holds the budget
// for it. mangos reads it from one goroutine at a time.
type meteredConn struct {
	net.Conn

	// The read side, the reading goroutine's only.
	need       int64 // bytes left of the handshake, the header or the body
	body       bool  // need counts the body's bytes
	header     [8]byte
	got        int   // bytes of header
	held, last int64 // the current message's size from its header; the last message's, until the next begins
	taken      int64 // what hold has of held+last

	mu     sync.Mutex // hold's Take and Give, and Release after closed
	hold   *budget.Holder
	closed bool
	once   sync.Once
}

// errMeteredBudget is what mangos's read gets when the budget refuses a
// message: the pipe closes.
var errMeteredBudget = errors.New("memodb: the server's memory budget is spent: a message refused")

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.scan(p[:n]) {
		c.Close()
		return 0, errMeteredBudget
	}
	return n, err
}

// scan follows b through the stream and holds the budget for what the
// headers in it announce; false if the budget cannot give it.
func (c *meteredConn) scan(b []byte) bool {
	for len(b) > 0 {
		switch {
		case c.need > 0: // the handshake, or a body
			k := min(c.need, int64(len(b)))
			b = b[k:]
			if c.need -= k; c.need == 0 && c.body {
				c.body = false
				c.last, c.held = c.held, 0
			}
		default: // a header
			k := copy(c.header[c.got:], b)
			b = b[k:]
			if c.got += k; c.got < len(c.header) {
				continue
			}
			c.got = 0
			size := int64(binary.BigEndian.Uint64(c.header[:]))
			if size < 0 {
				size = 0 // mangos refuses it
			}
			c.last, c.held = 0, size // a new message: mangos has handed the last one on
			c.need, c.body = size, size > 0
			if !c.account() {
				return false
			}
		}
	}
	return c.account()
}

// account brings what hold has to what the stream says mangos holds.
func (c *meteredConn) account() bool {
	want := c.held + c.last
	if want == c.taken {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.hold.Follow(&c.taken, want)
}

func (c *meteredConn) Close() error {
	var err error
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.hold.Release() // after closed: no Take or Give follows
		err = c.Conn.Close()
	})
	return err
}
