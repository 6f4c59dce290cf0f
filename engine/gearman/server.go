// Package gearman serves the Gearman protocol, binary and text admin, on
// gnet event loops, translating packets into calls on the shared scheduler.
package gearman

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	codec "switchyard/codec/gearman"
	"switchyard/engine/listen"
	"switchyard/engine/tlsgate"
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// Config is the Gearman listener's configuration; main fills it from
// gearmand-compatible flags.
type Config struct {
	// Addrs are gnet addresses, e.g. "tcp://127.0.0.1:4730".
	Addrs []string
	// TLSAddrs are addresses ("host:port") served with TLS, through
	// engine/tlsgate into the same event loops and handler. Addrs may be
	// empty when TLSAddrs is not.
	TLSAddrs []string
	// TLS configures TLSAddrs' listeners; it must hold a certificate.
	TLS *tls.Config
	// Loops is the number of event loops; 0 = one per CPU.
	Loops int
	// HandlePrefix replaces "H:<hostname>" in job handles.
	HandlePrefix string
	// Exceptions makes every connection receive WORK_EXCEPTION (--exceptions).
	Exceptions bool
	// MaxPacket bounds a packet's body; 0 = codec.DefaultMaxPacket.
	MaxPacket int
	// MaxOutbound closes a connection whose unread replies exceed it; 0 = 256 MiB.
	MaxOutbound int
	// Keepalive enables TCP keepalive with the given idle time, interval and count
	// (zero values leave the system defaults).
	Keepalive         bool
	KeepaliveIdle     time.Duration
	KeepaliveInterval time.Duration
	KeepaliveCount    int
	// Version is what the "version" admin command reports.
	Version string
	// Verbose is what the "verbose" admin command reports (gearmand level name).
	Verbose string
	// Shutdown is called (on its own goroutine) each time an admin sends
	// "shutdown" (graceful false) or "shutdown graceful" (true). nil makes
	// both unknown commands, as they are in gearmand 1.1.20.
	Shutdown func(graceful bool)
	// MoreWorkers, if set, appends lines for the "workers" admin command
	// after the connections': the workers other frontends serve.
	MoreWorkers func(dst []byte) []byte
	// Commands are text admin commands beyond gearmand's, by their first
	// word in lower case ("cluster"): each is handed the other words and
	// runs off the event loop; its reply is written as returned, line
	// endings included.
	Commands map[string]func(args []string) string
}

// Server is a running Gearman frontend.
type Server struct {
	gnet.BuiltinEventEngine
	cfg     Config
	sched   *sched.Sched
	log     *zap.Logger
	handles codec.Handles

	eng      gnet.Engine
	addrs    []net.Addr // bound at boot, in the order of cfg.Addrs
	bootErr  error      // why OnBoot refused to start
	booted   chan struct{}
	done     chan error
	shutOnce sync.Once

	gates    []*tlsgate.Gate // one per cfg.TLSAddrs
	running  chan struct{}   // closed at the first OnTick: the event loops exist
	tickOnce sync.Once

	mu    sync.Mutex // guards conns and loops
	conns map[*conn]struct{}
	loops map[gnet.EventLoop]*loop
	wakes atomic.Int64 // cross-goroutine hand-offs that cost a gnet wake
	hooks atomic.Pointer[listHooks]

	draining atomic.Bool // Drain was called: no new connections, no new work
}

// New prepares a server; Start binds and runs it.
func New(cfg Config, s *sched.Sched, log *zap.Logger) *Server {
	if cfg.HandlePrefix == "" {
		cfg.HandlePrefix = codec.DefaultHandlePrefix()
	}
	if cfg.MaxPacket <= 0 {
		cfg.MaxPacket = codec.DefaultMaxPacket
	}
	if cfg.MaxOutbound <= 0 {
		cfg.MaxOutbound = 256 << 20
	}
	if cfg.Loops <= 0 {
		cfg.Loops = runtime.NumCPU()
	}
	if cfg.Version == "" {
		cfg.Version = "unknown"
	}
	if cfg.Verbose == "" {
		cfg.Verbose = "ERROR"
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Server{
		cfg:     cfg,
		sched:   s,
		log:     log,
		handles: codec.NewHandles(cfg.HandlePrefix),
		booted:  make(chan struct{}),
		running: make(chan struct{}),
		done:    make(chan error, 1),
		conns:   make(map[*conn]struct{}),
		loops:   make(map[gnet.EventLoop]*loop),
	}
}

// Start binds every address and returns once the event loops accept
// connections, or with the error that stopped them. A port of 0 binds a
// port the kernel picks; Addrs tells which.
func (s *Server) Start() error {
	if err := checkAddrs(s.cfg.Addrs, len(s.cfg.TLSAddrs) > 0); err != nil {
		return err
	}
	if err := s.listenTLS(); err != nil {
		return err
	}
	addrs := s.cfg.Addrs
	if len(addrs) == 0 {
		// TLS only: gnet still wants a listener of its own.
		ph, remove, err := tlsgate.Placeholder()
		if err != nil {
			s.closeGates()
			return err
		}
		defer remove()
		addrs = []string{ph}
	}
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(s.cfg.Loops),
		gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(listen.Logger{L: s.log.Sugar()}),
	}
	if s.cfg.Keepalive {
		idle := s.cfg.KeepaliveIdle
		if idle <= 0 {
			idle = 2 * time.Hour // the Linux default
		}
		opts = append(opts, gnet.WithTCPKeepAlive(idle))
		if s.cfg.KeepaliveInterval > 0 {
			opts = append(opts, gnet.WithTCPKeepInterval(s.cfg.KeepaliveInterval))
		}
		if s.cfg.KeepaliveCount > 0 {
			opts = append(opts, gnet.WithTCPKeepCount(s.cfg.KeepaliveCount))
		}
	}
	if len(s.gates) > 0 {
		// See OnTick; and gnet's default RoundRobin balancer is not safe
		// for the gates' Register calls.
		opts = append(opts, gnet.WithTicker(true), gnet.WithLoadBalancing(gnet.LeastConnections))
	}
	go func() { s.done <- gnet.Rotate(s, addrs, opts...) }()
	running := s.booted
	if len(s.gates) > 0 {
		running = s.running
	}
	select {
	case <-running:
		for _, g := range s.gates {
			g.Start(s.eng)
		}
		return nil
	case err := <-s.done:
		s.closeGates()
		if err == nil {
			err = s.bootErr
		}
		if err == nil {
			err = errors.New("gearman: engine stopped before it started")
		}
		return fmt.Errorf("gearman: listen on %v: %w", s.cfg.Addrs, err)
	}
}

// listenTLS binds cfg.TLSAddrs, with the plain listeners' keepalive.
func (s *Server) listenTLS() error {
	if len(s.cfg.TLSAddrs) == 0 {
		return nil
	}
	gcfg := tlsgate.Config{TLS: s.cfg.TLS, Log: s.log}
	if s.cfg.Keepalive {
		// gnet's defaults, so that both kinds of port probe alike.
		idle := cmp.Or(s.cfg.KeepaliveIdle, 2*time.Hour)
		gcfg.KeepAlive = net.KeepAliveConfig{Enable: true, Idle: idle,
			Interval: cmp.Or(s.cfg.KeepaliveInterval, idle/5), Count: cmp.Or(s.cfg.KeepaliveCount, 5)}
	}
	for _, a := range s.cfg.TLSAddrs {
		g, err := tlsgate.Listen("tcp", a, gcfg)
		if err != nil {
			s.closeGates()
			return fmt.Errorf("gearman: listen with TLS on %s: %w", a, err)
		}
		s.gates = append(s.gates, g)
	}
	return nil
}

func (s *Server) closeGates() {
	for _, g := range s.gates {
		g.Close()
	}
}

// OnTick implements gnet.EventHandler; the ticker runs only when there are
// TLS listeners. gnet calls OnBoot before it creates the event loops, and
// registering a TLS connection fails until they exist; the first tick
// comes after.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.tickOnce.Do(func() { close(s.running) })
	return time.Hour, gnet.None
}

// Stop closes the listeners and every connection.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.shutOnce.Do(func() {
		s.closeGates()
		// gnet's Stop polls for the end every 500ms; the event loops are
		// done as soon as Rotate returns, so wait for that instead.
		go s.eng.Stop(ctx)
		select {
		case err = <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		// The loops have closed every connection; the TLS ones still
		// relay what was written to them before.
		for _, g := range s.gates {
			if werr := g.Wait(ctx); err == nil {
				err = werr
			}
		}
	})
	return err
}

// Conns is the number of open connections.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Addrs returns the addresses the server listens on, one per Config.Addrs
// and in that order, with the ports the kernel picked for port 0. It is
// valid once Start has returned nil.
func (s *Server) Addrs() []net.Addr {
	return append([]net.Addr(nil), s.addrs...)
}

// TLSAddrs returns the addresses of the TLS listeners, one per
// Config.TLSAddrs and in that order, as Addrs does for the plain ones.
func (s *Server) TLSAddrs() []net.Addr {
	out := make([]net.Addr, len(s.gates))
	for i, g := range s.gates {
		out[i] = g.Addr()
	}
	return out
}

// OnBoot implements gnet.EventHandler. The listeners are bound by now, so
// this is where the ports picked for port 0 can be read.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	addrs, err := boundAddrs(eng, s.cfg.Addrs)
	if err != nil {
		s.bootErr = err
		return gnet.Shutdown
	}
	s.addrs = addrs
	close(s.booted)
	return gnet.None
}

// checkAddrs refuses an address list gnet could not tell apart; none at
// all is fine only with TLS listeners.
func checkAddrs(addrs []string, tls bool) error {
	if err := listen.Check(addrs, tls); err != nil {
		return fmt.Errorf("gearman: %w", err)
	}
	return nil
}

func boundAddrs(eng gnet.Engine, protoAddrs []string) ([]net.Addr, error) {
	addrs, err := listen.Bound(eng, protoAddrs)
	if err != nil {
		return nil, fmt.Errorf("gearman: %w", err)
	}
	return addrs, nil
}

// OnOpen implements gnet.EventHandler.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.draining.Load() {
		// Accepted before the listeners closed, or they could not be.
		return nil, gnet.Close
	}
	cn := &conn{srv: s, c: c, lp: s.loopOf(c), fd: c.Fd(), ip: workerline.Peer(c.RemoteAddr(), c.LocalAddr())}
	cn.ps.MaxSize = s.cfg.MaxPacket
	if p := tlsgate.PeerOf(c); p != nil {
		// A TLS connection: gnet's end is a socketpair, the peer is there.
		cn.tls, cn.ip = p, workerline.Peer(p.RemoteAddr(), nil)
	}
	cn.exceptions.Store(s.cfg.Exceptions)
	c.SetContext(cn)
	s.mu.Lock()
	s.conns[cn] = struct{}{}
	s.mu.Unlock()
	return nil, gnet.None
}

// loopOf returns the shared state of c's event loop.
func (s *Server) loopOf(c gnet.Conn) *loop {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := c.EventLoop()
	lp := s.loops[el]
	if lp == nil {
		lp = &loop{}
		s.loops[el] = lp
	}
	return lp
}

// OnClose implements gnet.EventHandler.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	cn, _ := c.Context().(*conn)
	if cn == nil {
		return gnet.None
	}
	s.mu.Lock()
	delete(s.conns, cn)
	s.mu.Unlock()
	cn.close()
	if cn.tls != nil {
		cn.tls.EngineClosed()
	}
	return gnet.None
}

// OnTraffic implements gnet.EventHandler: parse every complete packet in
// the inbound buffer, act on each, then write all replies at once.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cn := c.Context().(*conn)
	return cn.traffic()
}

// snapshot returns the open connections ordered by fd, for "workers".
func (s *Server) snapshot() []*conn {
	s.mu.Lock()
	out := slices.Collect(maps.Keys(s.conns))
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *conn) int { return cmp.Compare(a.fd, b.fd) })
	return out
}

func (s *Server) shutdown(graceful bool) {
	if s.cfg.Shutdown != nil {
		go s.cfg.Shutdown(graceful)
	}
}
