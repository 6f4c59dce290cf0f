// Package tlsgate serves TLS in front of a gnet engine, which has no TLS of
// its own. A Gate accepts TCP connections with the standard library and
// does the TLS handshake with crypto/tls; then, for each connection, it
// registers one end of a Unix socketpair into the gnet engine and copies
// bytes between the TLS connection and the other end. The engine's handler
// sees an ordinary stream connection: one handler implementation serves
// plain-text and TLS peers alike.
//
// Each TLS connection costs two goroutines (one per direction, never one
// per request) and a socketpair. A handler finds the TLS peer's address,
// and tells the gate when it closes the connection, through the *Peer that
// c.Context() holds when OnOpen runs.
package tlsgate

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Config configures a Gate.
type Config struct {
	// TLS is the server configuration; it must hold a certificate.
	TLS *tls.Config
	// KeepAlive configures TCP keepalive on accepted connections; with
	// Enable false, no probes are sent (as gnet's listeners by default).
	KeepAlive net.KeepAliveConfig
	// HandshakeTimeout bounds a TLS handshake, so that a peer that connects
	// and stays silent cannot hold a goroutine; 0 = DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the handshakes in flight; further connections
	// wait in the kernel's accept queue. 0 = DefaultMaxHandshakes.
	MaxHandshakes int
	// CloseGrace is how long, once the engine has closed a connection, the
	// peer has to read each piece of what was left to send; 0 =
	// DefaultCloseGrace.
	CloseGrace time.Duration
	// Log receives handshake failures and accept errors; nil = none.
	Log *zap.Logger
}

const (
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultMaxHandshakes    = 256
	DefaultCloseGrace       = 30 * time.Second
)

// bufSize is each direction's copy buffer: one TLS record's worth of
// plain text, the most a tls.Conn read returns.
const bufSize = 16 << 10

// Gate is a TLS listener feeding a gnet engine.
type Gate struct {
	cfg  Config
	ln   net.Listener
	log  *zap.Logger
	sem  chan struct{} // one token per handshake in flight
	quit chan struct{} // closed by Close
	wg   sync.WaitGroup

	closeOnce sync.Once
	mu        sync.Mutex
	links     map[*link]struct{}
	closed    bool
}

// Listen binds addr ("host:port"; port 0 picks one, see Addr) on network
// "tcp", "tcp4" or "tcp6". Start begins accepting.
func Listen(network, addr string, cfg Config) (*Gate, error) {
	if cfg.TLS == nil || (len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil && cfg.TLS.GetConfigForClient == nil) {
		return nil, errors.New("tlsgate: no certificate")
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.CloseGrace <= 0 {
		cfg.CloseGrace = DefaultCloseGrace
	}
	lc := net.ListenConfig{KeepAliveConfig: cfg.KeepAlive}
	if !cfg.KeepAlive.Enable {
		lc.KeepAlive = -1 // Go would otherwise probe every 15s
	}
	ln, err := lc.Listen(context.Background(), network, addr)
	if err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Gate{
		cfg:   cfg,
		ln:    ln,
		log:   log,
		sem:   make(chan struct{}, cfg.MaxHandshakes),
		quit:  make(chan struct{}),
		links: make(map[*link]struct{}),
	}, nil
}

// Addr is the bound address.
func (g *Gate) Addr() net.Addr { return g.ln.Addr() }

// Start accepts connections and hands them, once their handshake is done,
// to eng. eng must be running: gnet calls OnBoot before it creates the
// event loops, and Register fails until they exist. An engine's first
// OnTick (with gnet.WithTicker) comes after, so it is a safe signal. eng
// must not balance with gnet's default RoundRobin, whose counter Register
// would update from the gate's goroutines while the engine's acceptor does
// too (gnet says so): gnet.LeastConnections only reads.
func (g *Gate) Start(eng gnet.Engine) {
	g.wg.Add(1)
	go g.accept(eng)
}

// Close stops accepting and drops the connections still in their
// handshake. Established connections go on until the engine closes them
// or their peer leaves; Wait waits for them.
func (g *Gate) Close() error {
	var err error
	g.closeOnce.Do(func() {
		close(g.quit)
		err = g.ln.Close()
		g.mu.Lock()
		g.closed = true
		for l := range g.links {
			if !l.live {
				l.raw.Close()
			}
		}
		g.mu.Unlock()
	})
	return err
}

// Wait waits, after Close, for every connection to end: what the engine
// wrote before closing them is relayed to the peers meanwhile. When ctx
// ends first, the remaining connections are cut.
func (g *Gate) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	for l := range g.links {
		l.abort()
	}
	g.mu.Unlock()
	<-done
	return ctx.Err()
}

func (g *Gate) accept(eng gnet.Engine) {
	defer g.wg.Done()
	var backoff time.Duration
	for {
		select {
		case g.sem <- struct{}{}:
		case <-g.quit:
			return
		}
		raw, err := g.ln.Accept()
		if err != nil {
			<-g.sem
			select {
			case <-g.quit:
				return
			default:
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does, rather than spin or give up for good.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			g.log.Error("tls accept", zap.Error(err), zap.Duration("retry in", backoff))
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-g.quit:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		l := &link{g: g, raw: raw}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			raw.Close()
			<-g.sem
			return
		}
		g.links[l] = struct{}{}
		g.wg.Add(2) // run and its up pump, see run
		g.mu.Unlock()
		go l.run(eng)
	}
}

// link is one TLS connection and its socketpair.
type link struct {
	g   *Gate
	raw net.Conn // the TCP connection
	tc  *tls.Conn
	our *net.UnixConn // our end of the socketpair; the engine has the other
	// live: the handshake is done (guarded by g.mu). Close leaves live
	// links to the engine.
	live bool

	engineClosed atomic.Bool
	abortOnce    sync.Once
}

// abort cuts the connection without ceremony: no close_notify, whatever
// is unsent is lost.
func (l *link) abort() {
	l.abortOnce.Do(func() {
		l.raw.Close()
		if l.our != nil {
			l.our.Close()
		}
	})
}

func (l *link) run(eng gnet.Engine) {
	g := l.g
	upStarted := false
	defer func() {
		if !upStarted {
			g.wg.Done() // the up pump's share
		}
		g.mu.Lock()
		delete(g.links, l)
		g.mu.Unlock()
		g.wg.Done()
	}()

	l.tc = tls.Server(l.raw, g.cfg.TLS)
	l.raw.SetDeadline(time.Now().Add(g.cfg.HandshakeTimeout))
	err := l.tc.Handshake()
	<-g.sem
	if err != nil {
		g.log.Warn("tls handshake", zap.Stringer("peer", l.raw.RemoteAddr()), zap.Error(err))
		l.raw.Close()
		return
	}
	l.raw.SetDeadline(time.Time{})

	engEnd, our, err := socketpair()
	if err != nil {
		g.log.Error("tls: socketpair", zap.Error(err))
		l.tc.Close()
		return
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		engEnd.Close()
		our.Close()
		l.raw.Close()
		return
	}
	l.our = our
	l.live = true
	g.mu.Unlock()

	// gnet dups engEnd's descriptor into its loop and closes engEnd. The
	// Peer rides along as the gnet connection's initial context.
	peer := &Peer{remote: l.raw.RemoteAddr(), l: l}
	ctx := gnet.NewNetConnContext(gnet.NewContext(context.Background(), peer), engEnd)
	res, err := eng.Register(ctx)
	if err != nil {
		engEnd.Close()
		g.log.Error("tls: register with the engine", zap.Error(err))
		l.abort()
		return
	}
	select {
	case r := <-res:
		if r.Err != nil || r.Conn == nil {
			g.log.Error("tls: register with the engine", zap.Error(r.Err))
			l.abort()
			return
		}
	case <-g.quit:
		l.abort()
		return
	}

	upStarted = true
	go l.up()
	l.down()
}

// up copies what the peer sends into the engine. At the peer's clean end
// (close_notify, or a FIN between records) it half-closes, so the engine
// reads EOF after the last request and can still answer it.
func (l *link) up() {
	defer l.g.wg.Done()
	buf := make([]byte, bufSize)
	for {
		n, err := l.tc.Read(buf)
		if n > 0 {
			if _, werr := l.our.Write(buf[:n]); werr != nil {
				l.abort() // the engine is gone
				return
			}
		}
		if err == io.EOF {
			l.our.CloseWrite()
			return
		}
		if err != nil {
			l.abort()
			return
		}
	}
}

// down copies what the engine writes to the peer until the engine closes
// its end, then closes the TLS connection with a close_notify.
func (l *link) down() {
	buf := make([]byte, bufSize)
	for {
		n, err := l.our.Read(buf)
		if n > 0 {
			if l.engineClosed.Load() {
				l.tc.SetWriteDeadline(time.Now().Add(l.g.cfg.CloseGrace))
			}
			if _, werr := l.tc.Write(buf[:n]); werr != nil {
				l.abort()
				return
			}
		}
		if err != nil {
			break
		}
	}
	l.tc.Close() // close_notify, bounded by crypto/tls's own 5s deadline
	l.abort()
}

// Peer is what a connection registered by a Gate carries as its gnet
// context when the handler's OnOpen runs.
type Peer struct {
	remote net.Addr
	l      *link
}

// RemoteAddr is the TLS peer's address (the gnet connection's own is the
// socketpair's).
func (p *Peer) RemoteAddr() net.Addr { return p.remote }

// ConnectionState is the TLS connection's: its version, its cipher, the
// client certificate it verified.
func (p *Peer) ConnectionState() tls.ConnectionState { return p.l.tc.ConnectionState() }

// EngineClosed tells the gate that the engine has closed the connection.
// What the engine wrote before is still relayed, but a peer that does not
// read it within CloseGrace per write is cut, so it cannot hold the
// connection's goroutines forever.
func (p *Peer) EngineClosed() {
	p.l.engineClosed.Store(true)
	p.l.tc.SetWriteDeadline(time.Now().Add(p.l.g.cfg.CloseGrace))
}

// PeerOf returns the Peer a connection registered by a Gate started with,
// or nil for any other connection. Call it in OnOpen, before replacing the
// connection's context.
func PeerOf(c gnet.Conn) *Peer {
	p, _ := c.Context().(*Peer)
	return p
}

// Placeholder returns a gnet address for an engine whose only listeners
// are gates: gnet refuses to Register into, or to Stop, an engine that has
// no listener of its own. The address is a Unix socket in a new private
// directory; call remove once the engine has booted. The path is gone then,
// so nobody can connect, while the bound socket satisfies gnet.
func Placeholder() (addr string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "tlsgate-")
	if err != nil {
		return "", nil, fmt.Errorf("tlsgate: placeholder listener: %w", err)
	}
	return "unix://" + filepath.Join(dir, "unused.sock"), func() { os.RemoveAll(dir) }, nil
}

// socketpair returns the two connected ends of a new Unix stream socket.
func socketpair() (a, b *net.UnixConn, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	if a, err = fileConn(fds[0]); err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	if b, err = fileConn(fds[1]); err != nil {
		a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

// fileConn turns fd into a *net.UnixConn (non-blocking, on Go's poller)
// and closes fd.
func fileConn(fd int) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), "tlsgate")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("socketpair end is a %T", c)
	}
	return uc, nil
}
