package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Relay is a follower's listener for one of a protocol's addresses: every
// connection it accepts is carried to the leader's listener for the same
// protocol, byte for byte in both directions, so that a client that knows
// one node's address is served by whichever node leads. It speaks no
// protocol: Gearman, TLS, HTTP, ZeroMQ and NNG all pass through alike.
//
// When the leader changes, every relayed connection is closed, as a
// restart of a single server closes them: clients reconnect, and reach the
// new leader. Until a leader is known, a new connection waits for one,
// for at most holdTimeout. Nothing waits on the old leader: a change of
// target (and Close) ends the dials toward it at once, and closes the
// connections to it, which a leader cut off from the network would
// otherwise hold until TCP gives up.
type Relay struct {
	name string
	ln   net.Listener
	log  *zap.Logger

	mu     sync.Mutex
	target string            // the leader's address; "" while unknown
	known  chan struct{}     // closed once target is set, replaced when it is cleared
	conns  map[*relayed]bool // open relayed connections
	closed bool
	// dials is the context of the dials toward target: cancelled when the
	// target changes, and by Close.
	dials  context.Context
	cancel context.CancelFunc
	// acceptErr is why accepting fails, while it does (a process out of
	// file descriptors); nil otherwise.
	acceptErr error
	stop      chan struct{} // closed by Close: ends the accept loop's pause
	open      atomic.Int64
	// dial dials the leader (a test's may wait until its context ends,
	// as a dial toward a host cut off does).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	done sync.WaitGroup
}

const (
	// holdTimeout bounds how long a connection waits for a leader to
	// relay to.
	holdTimeout = 5 * time.Second
	// dialTimeout bounds a dial to the leader, which a change of leader
	// ends sooner.
	dialTimeout = 2 * time.Second
	// acceptPause is the first pause after a failed accept, doubled up
	// to maxAcceptPause while accepting fails (as net/http's server
	// does).
	acceptPause    = 5 * time.Millisecond
	maxAcceptPause = time.Second
)

type relayed struct {
	client, leader net.Conn
}

func (c *relayed) close() {
	c.client.Close()
	if c.leader != nil {
		c.leader.Close()
	}
}

// Listen binds a relay on network ("tcp" or "unix") and addr.
func Listen(name, network, addr string, log *zap.Logger) (*Relay, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return Serve(name, ln, log), nil
}

// Serve relays the connections ln accepts; Close closes ln.
func Serve(name string, ln net.Listener, log *zap.Logger) *Relay {
	return serve(name, ln, log, (&net.Dialer{Timeout: dialTimeout}).DialContext)
}

func serve(name string, ln net.Listener, log *zap.Logger, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Relay {
	if log == nil {
		log = zap.NewNop()
	}
	r := &Relay{name: name, ln: ln, log: log, known: make(chan struct{}), conns: make(map[*relayed]bool),
		stop: make(chan struct{}), dial: dial}
	r.dials, r.cancel = context.WithCancel(context.Background())
	r.done.Add(1)
	go r.accept()
	return r
}

// Addr is the bound address.
func (r *Relay) Addr() net.Addr { return r.ln.Addr() }

// Conns is the number of connections being relayed.
func (r *Relay) Conns() int { return int(r.open.Load()) }

// SetTarget points new connections at the leader's address ("": no
// leader known). A change closes every connection relayed so far, and
// ends the dials toward the old address.
func (r *Relay) SetTarget(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if addr == r.target || r.closed {
		return
	}
	for c := range r.conns {
		c.close()
	}
	clear(r.conns)
	r.cancel()
	r.dials, r.cancel = context.WithCancel(context.Background())
	if r.target == "" {
		close(r.known) // waiting connections go on
	} else if addr == "" {
		r.known = make(chan struct{})
	}
	r.target = addr
}

// Err is why the relay cannot accept connections, while it cannot; nil
// while it can.
func (r *Relay) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acceptErr
}

// Close closes the listener and every relayed connection, ends the dials,
// and waits for their goroutines: none waits on the network.
func (r *Relay) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	for c := range r.conns {
		c.close()
	}
	clear(r.conns)
	r.cancel()
	if r.target == "" {
		close(r.known)
	}
	close(r.stop)
	r.mu.Unlock()
	r.ln.Close()
	r.done.Wait()
}

// accept accepts connections until Close. An accept that fails otherwise
// (EMFILE, ENFILE: out of file descriptors) is logged, reported by Err,
// and tried again after a pause, which doubles while it fails.
func (r *Relay) accept() {
	defer r.done.Done()
	pause := time.Duration(0)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			var ne net.Error
			switch {
			case r.isClosed() || errors.Is(err, net.ErrClosed):
				return
			case errors.As(err, &ne) && ne.Timeout():
				continue
			}
			pause = min(max(2*pause, acceptPause), maxAcceptPause)
			r.failing(err, pause)
			timer.Reset(pause)
			select {
			case <-timer.C:
			case <-r.stop:
				timer.Stop()
				return
			}
			continue
		}
		if pause > 0 {
			pause = 0
			r.failing(nil, 0)
		}
		rc := &relayed{client: c}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.conns[rc] = true
		r.mu.Unlock()
		r.open.Add(1)
		r.done.Add(1)
		go r.serve(rc)
	}
}

func (r *Relay) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// failing records that accepting fails (err) or works again (nil), and
// logs each change.
func (r *Relay) failing(err error, pause time.Duration) {
	r.mu.Lock()
	was := r.acceptErr
	r.acceptErr = err
	r.mu.Unlock()
	switch {
	case err != nil && was == nil:
		r.log.Error("relay: cannot accept connections; trying again", zap.String("protocol", r.name),
			zap.Stringer("addr", r.ln.Addr()), zap.Error(err), zap.Duration("pause", pause))
	case err == nil && was != nil:
		r.log.Warn("relay: accepting connections again", zap.String("protocol", r.name), zap.Stringer("addr", r.ln.Addr()))
	}
}

// serve relays one connection: it waits for a leader, dials it, and copies
// both ways until either side ends.
func (r *Relay) serve(c *relayed) {
	defer r.done.Done()
	defer r.open.Add(-1)
	defer r.forget(c)
	target, dials, ok := r.waitTarget()
	if !ok {
		c.client.Close()
		return
	}
	up, err := r.dial(dials, "tcp", target)
	if err != nil {
		r.log.Debug("relay: cannot reach the leader", zap.String("protocol", r.name), zap.String("leader", target), zap.Error(err))
		c.client.Close()
		return
	}
	r.mu.Lock()
	if !r.conns[c] || dials.Err() != nil { // closed meanwhile: the leader changed, or Close
		r.mu.Unlock()
		up.Close()
		c.client.Close()
		return
	}
	c.leader = up
	r.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pipe(up, c.client)
	}()
	pipe(c.client, up)
	wg.Wait()
	c.close()
}

// pipe copies src to dst until src ends, then ends dst's writing half, so
// that a client's half-close reaches the leader and the other way round.
func pipe(dst, src net.Conn) {
	// read(2) and write(2) through a buffer, not the splice(2) io.Copy
	// picks between TCP sockets: a relayed batch is a few kilobytes, and
	// splicing it through a pipe cost more.
	buf := make([]byte, 32<<10)
	io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	} else {
		dst.Close()
	}
}

// waitTarget waits for a leader's address, for at most holdTimeout, and
// returns it with the context of dials toward it.
func (r *Relay) waitTarget() (string, context.Context, bool) {
	t := time.NewTimer(holdTimeout)
	defer t.Stop()
	for {
		r.mu.Lock()
		target, known, closed, dials := r.target, r.known, r.closed, r.dials
		r.mu.Unlock()
		if closed {
			return "", nil, false
		}
		if target != "" {
			return target, dials, true
		}
		select {
		case <-known:
		case <-t.C:
			return "", nil, false
		}
	}
}

func (r *Relay) forget(c *relayed) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}
