package dwork

// What zmq4 v0.17.0 leaves to its user, a server facing any client that
// can reach the port, and what this file does about it. zmq4 is driven
// through its public API only; its sockets read and write through a
// net.Conn, and a zmq4 transport (RegisterTransport) decides which one.
// The guarded transport hands zmq4 connections that:
//
//   - bound what a peer may make zmq4 allocate. zmq4 reads a ZMTP frame by
//     allocating the size its header claims, up to 2^63-1 bytes, before a
//     byte of the body has come (Conn.read): one header is enough to crash
//     the process. It also takes any number of frames in a message. The
//     guard follows the ZMTP framing of everything zmq4 reads and cuts the
//     connection before zmq4 sees a header over the limits.
//   - finish the handshake in time. zmq4 greets each peer in its one
//     accept goroutine, with no deadline: a peer that connects and says
//     nothing stops the socket accepting anyone else, for ever. The guard
//     hands a connection to zmq4 only once the peer has sent its first
//     byte (a port scanner or a TCP health check never does), and closes
//     one whose handshake is not over within the handshake timeout (which
//     frees zmq4's accept loop). zmq4 also leaks the descriptor of a peer
//     it turns away (a bad greeting, a socket type that cannot talk to a
//     ROUTER): the same timer closes those.
//   - never block the writer. zmq4 writes a reply straight to the socket,
//     with no deadline, from the goroutine that called Send: a client that
//     stops reading would stop the one goroutine that serves everyone.
//     The guard's Write appends to the connection's own buffer, bounded,
//     and one goroutine per connection writes it out, each write bounded
//     by the write timeout; a connection whose buffer overflows or whose
//     write times out is closed.
//   - count: past a maximum number of connections, new ones are closed as
//     they are accepted.
//   - hold the memory budget (engine/budget) for what a peer makes zmq4
//     hold: from a frame's header, the message's frames, until the peer's
//     next message begins (zmq4 has handed it on by then, to the socket's
//     queue of 10 messages), and the replies waiting to be written. A
//     header the budget cannot take closes the connection before zmq4
//     allocates the frame; the budget cuts the largest holders as it does
//     everywhere.
//
// It does not tell the server which connections close: a dwork host is
// its name, not a connection (see locations.go).
//
// Errors the guard returns to zmq4 are net.Errors that are not timeouts,
// so that zmq4 marks the connection closed and removes it from the socket
// (it keeps a connection whose read failed otherwise).

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"switchyard/engine/budget"
)

// guardConfig holds the guard's limits.
type guardConfig struct {
	handshake time.Duration // from accept to the end of the ZMTP handshake
	write     time.Duration // one write of a connection's buffer
	maxOut    int           // bytes waiting to be written to one connection
	maxMsg    int64         // bytes in one message, all frames together
	maxFrames int           // frames in one message
	maxCmd    int64         // bytes in one command frame (READY, PING, ...)
	maxConns  int64         // open connections
	budget    *budget.Budget
	log       *zap.Logger
}

// guardError is what the guard returns to zmq4: a net.Error that is not a
// timeout, so zmq4 drops the connection.
type guardError string

func (e guardError) Error() string   { return "dwork: " + string(e) }
func (e guardError) Timeout() bool   { return false }
func (e guardError) Temporary() bool { return false }

var (
	errGuardClosed   = guardError("connection closed")
	errGuardOverflow = guardError("too many replies waiting for a client that does not read")
	errGuardBudget   = guardError("the server's memory budget is spent: a message refused")
)

// ZMTP 3 framing, as the guard follows it (rfc.zeromq.org/spec/23).
const (
	zmtpGreeting = 64 // signature (10), version (2), mechanism (20), as-server (1), filler (31)
	zmtpMore     = 0x1
	zmtpLong     = 0x2
	zmtpCommand  = 0x4
)

// scanner follows the ZMTP stream a peer sends: the greeting, then frames
// (a flags byte, a 1- or 8-byte size, the body). It sees every byte before
// zmq4 does and refuses what breaks the limits.
type scanner struct {
	state     uint8
	need      int64 // bytes left in the greeting, the size or the body
	off       int   // bytes of the greeting seen
	flags     byte
	size      uint64
	msgBytes  int64 // the current message's frames so far
	msgFrames int
	commands  int // command frames seen whole: the first is READY
	// held is what the peer makes zmq4 hold, by the headers seen: the
	// current message's frames (their whole sizes, from each header on),
	// and the last message until the next begins.
	held, last int64
}

const (
	scanGreeting uint8 = iota
	scanFlags
	scanSize
	scanBody
)

// feed scans b, the next bytes from the peer.
func (s *scanner) feed(b []byte, cfg *guardConfig) error {
	for len(b) > 0 {
		switch s.state {
		case scanGreeting:
			if s.off == 0 && s.need == 0 {
				s.need = zmtpGreeting
			}
			k := int(min(s.need, int64(len(b))))
			for _, c := range b[:k] {
				switch {
				case s.off == 0 && c != 0xff, s.off == 9 && c != 0x7f:
					return guardError("not a ZMTP greeting")
				case s.off == 10 && c < 3:
					return guardError(fmt.Sprintf("ZMTP version %d: only 3 and later are served", c))
				}
				s.off++
			}
			b = b[k:]
			if s.need -= int64(k); s.need == 0 {
				s.state = scanFlags
			}
		case scanFlags:
			s.flags = b[0]
			b = b[1:]
			if s.flags&^(zmtpMore|zmtpLong|zmtpCommand) != 0 {
				return guardError(fmt.Sprintf("ZMTP frame flags %#x", s.flags))
			}
			if s.flags&zmtpCommand != 0 && s.flags&zmtpMore != 0 {
				return guardError("a ZMTP command with more frames")
			}
			s.state, s.size, s.need = scanSize, 0, 1
			if s.flags&zmtpLong != 0 {
				s.need = 8
			}
		case scanSize:
			for s.need > 0 && len(b) > 0 {
				s.size = s.size<<8 | uint64(b[0])
				b = b[1:]
				s.need--
			}
			if s.need > 0 {
				continue
			}
			if err := s.admit(cfg); err != nil {
				return err
			}
			s.state, s.need = scanBody, int64(s.size)
			if s.need == 0 {
				s.frameDone()
			}
		case scanBody:
			k := min(s.need, int64(len(b)))
			b = b[k:]
			if s.need -= k; s.need == 0 {
				s.frameDone()
			}
		}
	}
	return nil
}

// admit checks a frame's size, known from its header, against the limits.
func (s *scanner) admit(cfg *guardConfig) error {
	if s.flags&zmtpCommand != 0 {
		if s.size > uint64(cfg.maxCmd) {
			return guardError(fmt.Sprintf("a ZMTP command of %d bytes, at most %d", s.size, cfg.maxCmd))
		}
		return nil
	}
	if s.msgFrames+1 > cfg.maxFrames {
		return guardError(fmt.Sprintf("a message of more than %d frames", cfg.maxFrames))
	}
	if s.size > uint64(cfg.maxMsg-s.msgBytes) {
		return guardError(fmt.Sprintf("a message of more than %d bytes", cfg.maxMsg))
	}
	if s.msgFrames == 0 {
		s.held -= s.last // a new message: zmq4 has handed the last one on
		s.last = 0
	}
	s.held += int64(s.size)
	return nil
}

// frameDone ends the frame whose body has been seen.
func (s *scanner) frameDone() {
	s.state = scanFlags
	if s.flags&zmtpCommand != 0 {
		s.commands++
		return
	}
	s.msgFrames++
	s.msgBytes += int64(s.size)
	if s.flags&zmtpMore == 0 {
		s.last = s.msgBytes
		s.msgFrames, s.msgBytes = 0, 0
	}
}

// guardListener is the listener zmq4 accepts from: it merges every
// configured address into one stream of guarded connections.
type guardListener struct {
	cfg   guardConfig
	raws  []net.Listener
	ready chan *guardConn // connections whose peer has spoken, for Accept
	done  chan struct{}
	once  sync.Once
	conns atomic.Int64
	wg    sync.WaitGroup // accept loops
}

func newGuardListener(raws []net.Listener, cfg guardConfig) *guardListener {
	l := &guardListener{cfg: cfg, raws: raws, ready: make(chan *guardConn), done: make(chan struct{})}
	for _, r := range raws {
		l.wg.Add(1)
		go l.acceptLoop(r)
	}
	return l
}

// Accept implements net.Listener for zmq4.
func (l *guardListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: it closes every address. Connections
// already handed to zmq4 are zmq4's to close.
func (l *guardListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		for _, r := range l.raws {
			r.Close()
		}
	})
	return nil
}

// wait returns once every accept loop has ended (after Close).
func (l *guardListener) wait() { l.wg.Wait() }

// Addr implements net.Listener: the first address.
func (l *guardListener) Addr() net.Addr { return l.raws[0].Addr() }

// acceptLoop accepts on one address until Close. A temporary failure
// (out of descriptors) is retried after a pause that doubles up to a
// second, as net/http's server does.
func (l *guardListener) acceptLoop(r net.Listener) {
	defer l.wg.Done()
	var pause time.Duration
	for {
		c, err := r.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			l.cfg.log.Warn("dwork: accept failed; retrying", zap.Error(err), zap.Duration("after", pause))
			select {
			case <-time.After(pause):
			case <-l.done:
				return
			}
			continue
		}
		pause = 0
		if l.conns.Add(1) > l.cfg.maxConns {
			l.conns.Add(-1)
			l.cfg.log.Warn("dwork: too many connections; one refused", zap.Int64("max", l.cfg.maxConns),
				zap.Stringer("peer", c.RemoteAddr()))
			c.Close()
			continue
		}
		go l.greet(newGuardConn(c, l))
	}
}

// greet waits for the peer's first bytes, then hands the connection to
// zmq4: a peer that never speaks never reaches zmq4's accept loop, which
// would wait on it with every later connection behind. What it read is
// zmq4's first read.
func (l *guardListener) greet(c *guardConn) {
	c.rbuf = make([]byte, readBuf)
	n, err := c.Conn.Read(c.rbuf)
	c.rend = n
	if n > 0 && c.rbuf[0] != 0xff {
		err = guardError("not a ZMTP greeting")
	} else if n > 0 {
		err = nil // any error comes again with the next read
	}
	if err != nil {
		l.cfg.log.Debug("dwork: connection closed before its handshake", zap.Stringer("peer", c.RemoteAddr()), zap.Error(err))
		c.Close()
		return
	}
	go c.writeLoop()
	select {
	case l.ready <- c:
	case <-l.done:
		c.Close()
	}
}

// guardConn is one guarded connection. zmq4 reads it from one goroutine
// at a time (its handshake, then its reader); Write may come from any.
type guardConn struct {
	net.Conn
	l     *guardListener
	timer *time.Timer // the handshake's deadline

	// The read side, zmq4's reading goroutine's only. zmq4 reads a frame's
	// header and its body with a read each: rbuf saves the system calls.
	scan       scanner
	rbuf       []byte
	rpos, rend int
	shook      atomic.Bool // the handshake is over: zmq4 reads messages
	taken      int64       // what hold has taken for scan.held

	// hold is the connection's share of the memory budget; it is taken
	// and given under mu, and released once closed is set.
	hold *budget.Holder

	mu      sync.Mutex
	wake    sync.Cond
	out     []byte // waiting to be written
	writing int    // bytes the writer is writing, out of the last out
	spare   []byte
	closed  bool
	closeMu sync.Once
	gone    chan struct{} // closed by Close
}

func newGuardConn(c net.Conn, l *guardListener) *guardConn {
	g := &guardConn{Conn: c, l: l, gone: make(chan struct{})}
	g.wake.L = &g.mu
	// The budget cuts under its lock: the close goes on elsewhere.
	g.hold = l.cfg.budget.Hold(func() { go g.Close() })
	g.timer = time.AfterFunc(l.cfg.handshake, g.handshakeOver)
	return g
}

// handshakeOver closes the connection unless zmq4 has taken it: it is a
// peer that stalled, or one zmq4 turned away without closing it.
func (c *guardConn) handshakeOver() {
	if !c.shook.Load() {
		c.l.cfg.log.Debug("dwork: no ZMTP handshake in time; connection closed", zap.Stringer("peer", c.RemoteAddr()),
			zap.Duration("timeout", c.l.cfg.handshake))
		c.Close()
	}
}

// Read implements net.Conn for zmq4, scanning what it returns.
func (c *guardConn) Read(p []byte) (int, error) {
	if !c.shook.Load() && c.scan.commands > 0 {
		// zmq4 reads again after the peer's READY: the handshake went
		// through and the connection is zmq4's.
		c.shook.Store(true)
		c.timer.Stop()
	}
	var n int
	var err error
	switch {
	case c.rpos < c.rend:
		n = copy(p, c.rbuf[c.rpos:c.rend])
		c.rpos += n
	case len(p) >= len(c.rbuf):
		n, err = c.Conn.Read(p)
	default:
		c.rpos, c.rend = 0, 0
		c.rend, err = c.Conn.Read(c.rbuf)
		n = copy(p, c.rbuf[:c.rend])
		c.rpos = n
		if c.rend > n {
			err = nil // comes again with the next read from the socket
		}
	}
	if n > 0 {
		serr := c.scan.feed(p[:n], &c.l.cfg)
		if serr == nil && !c.account() {
			serr = errGuardBudget
		}
		if serr != nil {
			c.l.cfg.log.Warn("dwork: connection closed", zap.Stringer("peer", c.RemoteAddr()), zap.Error(serr))
			c.Close()
			return 0, serr
		}
	}
	return n, err
}

// account brings what the connection holds of the budget to what the
// scanner says zmq4 holds; false if the budget cannot give it (before
// zmq4 has read the header that asks for it).
func (c *guardConn) account() bool {
	if c.scan.held == c.taken {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.hold.Follow(&c.taken, c.scan.held)
}

// Write implements net.Conn for zmq4: p is queued for the connection's
// writer and Write returns at once.
func (c *guardConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, errGuardClosed
	}
	if waiting := len(c.out) + len(p); waiting > c.l.cfg.maxOut {
		c.mu.Unlock() // c.out is the writer's again: waiting was counted under the lock
		c.l.cfg.log.Warn("dwork: a client does not read its replies; connection closed", zap.Stringer("peer", c.RemoteAddr()),
			zap.Int("waiting", waiting))
		c.Close()
		return 0, errGuardOverflow
	}
	if len(c.out) == 0 {
		c.wake.Signal()
	}
	c.out = append(c.out, p...)
	c.hold.Set(int64(len(c.out) + c.writing))
	c.mu.Unlock()
	return len(p), nil
}

// spareMax bounds the buffer a connection keeps for its next writes, and
// readBuf is its read buffer.
const (
	spareMax = 64 << 10
	readBuf  = 4 << 10
)

// writeLoop writes what Write queued, until the connection closes.
func (c *guardConn) writeLoop() {
	c.mu.Lock()
	for {
		for len(c.out) == 0 && !c.closed {
			c.wake.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			return
		}
		buf := c.out
		c.out = c.spare[:0]
		c.writing = len(buf)
		c.mu.Unlock()
		c.Conn.SetWriteDeadline(time.Now().Add(c.l.cfg.write))
		if _, err := c.Conn.Write(buf); err != nil {
			c.l.cfg.log.Debug("dwork: write failed; connection closed", zap.Stringer("peer", c.RemoteAddr()), zap.Error(err))
			c.Close()
			return
		}
		c.mu.Lock()
		c.writing = 0
		c.hold.Set(int64(len(c.out)))
		if cap(buf) <= spareMax {
			c.spare = buf[:0]
		} else {
			c.spare = nil
		}
	}
}

// Close implements net.Conn; replies not yet written are dropped.
func (c *guardConn) Close() error {
	var err error
	c.closeMu.Do(func() {
		// c.timer is left to run out: it may be what called Close, and
		// closing again does nothing.
		c.mu.Lock()
		c.closed = true
		c.out = nil
		c.wake.Broadcast()
		c.mu.Unlock()
		c.hold.Release() // after closed: no Take or Give follows
		c.l.conns.Add(-1)
		err = c.Conn.Close()
		close(c.gone)
	})
	return err
}
