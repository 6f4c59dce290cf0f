package cluster

import (
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
// for at most holdTimeout.
type Relay struct {
	name string
	ln   net.Listener
	log  *zap.Logger

	mu     sync.Mutex
	target string            // the leader's address; "" while unknown
	known  chan struct{}     // closed once target is set, replaced when it is cleared
	conns  map[*relayed]bool // open relayed connections
	closed bool
	open   atomic.Int64

	done sync.WaitGroup
}

// holdTimeout bounds how long a connection waits for a leader to relay
// to, and a dial to it.
const holdTimeout = 5 * time.Second

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
	if log == nil {
		log = zap.NewNop()
	}
	r := &Relay{name: name, ln: ln, log: log, known: make(chan struct{}), conns: make(map[*relayed]bool)}
	r.done.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the bound address.
func (r *Relay) Addr() net.Addr { return r.ln.Addr() }

// Conns is the number of connections being relayed.
func (r *Relay) Conns() int { return int(r.open.Load()) }

// SetTarget points new connections at the leader's address ("": no
// leader known). A change closes every connection relayed so far.
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
	if r.target == "" {
		close(r.known) // waiting connections go on
	} else if addr == "" {
		r.known = make(chan struct{})
	}
	r.target = addr
}

// Close closes the listener and every relayed connection, and waits for
// their goroutines.
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
	if r.target == "" {
		close(r.known)
	}
	r.mu.Unlock()
	r.ln.Close()
	r.done.Wait()
}

func (r *Relay) accept() {
	defer r.done.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
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

// serve relays one connection: it waits for a leader, dials it, and copies
// both ways until either side ends.
func (r *Relay) serve(c *relayed) {
	defer r.done.Done()
	defer r.open.Add(-1)
	defer r.forget(c)
	target, ok := r.waitTarget()
	if !ok {
		c.client.Close()
		return
	}
	up, err := net.DialTimeout("tcp", target, holdTimeout)
	if err != nil {
		r.log.Debug("relay: cannot reach the leader", zap.String("protocol", r.name), zap.String("leader", target), zap.Error(err))
		c.client.Close()
		return
	}
	r.mu.Lock()
	if !r.conns[c] { // closed meanwhile: the leader changed, or Close
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

// waitTarget waits for a leader's address, for at most holdTimeout.
func (r *Relay) waitTarget() (string, bool) {
	t := time.NewTimer(holdTimeout)
	defer t.Stop()
	for {
		r.mu.Lock()
		target, known, closed := r.target, r.known, r.closed
		r.mu.Unlock()
		if closed {
			return "", false
		}
		if target != "" {
			return target, true
		}
		select {
		case <-known:
		case <-t.C:
			return "", false
		}
	}
}

func (r *Relay) forget(c *relayed) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}
