// Package gearman serves the Gearman protocol, binary and text admin, on
// gnet event loops, translating packets into calls on the shared scheduler.
//
// # How it maps onto sched
//
// Its clients are tagged with its own Source (Client.SetSource), so that
// Stats counts its jobs apart. SUBMIT_JOB* -> Client.Submit (BG variants
// without attaching; SUBMIT_JOB_EPOCH with When);
// CAN_DO/CAN_DO_TIMEOUT/CANT_DO/ RESET_ABILITIES ->
// Worker.CanDo/CantDo/Reset; GRAB_JOB* -> Worker.Grab; PRE_SLEEP ->
// Worker.Sleep (true means send NOOP now; false, Worker.ClearTimeouts as
// gearmand drops a sleeping worker's job timeout), Waker.Wake -> NOOP;
// WORK_* -> Worker.Update; GET_STATUS(_UNIQUE) ->
// Sched.Status/StatusUnique; admin -> Sched.Funcs, Jobs, Cancel,
// CreateFunc, DropFunc, SetMaxQueue.
package gearman

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	codec "switchyard/codec/gearman"
	"switchyard/engine/budget"
	"switchyard/engine/internal/gnetloop"
	"switchyard/engine/internal/tlsgate"
	"switchyard/engine/source"
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
	// Budget is the memory budget connections hold against (see
	// engine/budget); nil: none.
	Budget *budget.Budget
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
	// MoreWorkers, if set, lists the other protocols' workers, which the
	// "workers" admin command shows after Gearman's own connections: the
	// scheduler's counts in "status" take them all in.
	MoreWorkers func() []workerline.Worker
	// Commands are text admin commands beyond gearmand's, by their first
	// word in lower case ("cluster"): each is handed who asks and the
	// other words, and runs off the event loop; its reply is written as
	// returned, line endings included.
	Commands map[string]func(c Caller, args []string) string
}

// Caller is who sent an admin command of Config.Commands.
type Caller struct {
	// Remote is the peer's address.
	Remote string
	// Cert names the client certificate the connection presented and the
	// server verified (a TLS listener with client certificates required),
	// "" if none: only then may a command change what the server is.
	Cert string
}

// Server is a running Gearman frontend: a gnetloop.Server with this
// package's sessions, and the TLS listeners (engine/tlsgate) that feed the
// same loops.
type Server struct {
	cfg     Config
	sched   *sched.Sched
	log     *zap.Logger
	handles codec.Handles
	loop    *gnetloop.Server

	gates []*tlsgate.Gate // one per cfg.TLSAddrs
	hooks atomic.Pointer[testHooks]
}

// New prepares a server; Start binds and runs it.
func New(cfg Config, s *sched.Sched, log *zap.Logger) *Server {
	if cfg.HandlePrefix == "" {
		cfg.HandlePrefix = codec.DefaultHandlePrefix()
	}
	if cfg.MaxPacket <= 0 {
		cfg.MaxPacket = codec.DefaultMaxPacket
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
	// Large packets are read into pooled buffers the jobs keep
	// (OwnPayload); they come back here when the jobs end.
	s.SetRelease(source.Gearman, releasePayload)
	return &Server{
		cfg:     cfg,
		sched:   s,
		log:     log,
		handles: codec.NewHandles(cfg.HandlePrefix),
	}
}

// Start binds every address and returns once the event loops accept
// connections, or with the error that stopped them. A port of 0 binds a
// port the kernel picks; Addrs tells which.
func (s *Server) Start() error {
	if err := s.listenTLS(); err != nil {
		return err
	}
	lcfg := gnetloop.Config{Name: "gearman", Addrs: s.cfg.Addrs, AllowNoAddrs: len(s.gates) > 0,
		Loops: s.cfg.Loops, MaxOutbound: s.cfg.MaxOutbound, Budget: s.cfg.Budget, Log: s.log}
	if len(s.cfg.Addrs) == 0 && len(s.gates) > 0 {
		// TLS only: gnet still wants a listener of its own.
		ph, remove, err := tlsgate.Placeholder()
		if err != nil {
			s.closeGates()
			return err
		}
		defer remove()
		lcfg.Listen = []string{ph}
	}
	if s.cfg.Keepalive {
		idle := s.cfg.KeepaliveIdle
		if idle <= 0 {
			idle = 2 * time.Hour // the Linux default
		}
		lcfg.Options = append(lcfg.Options, gnet.WithTCPKeepAlive(idle))
		if s.cfg.KeepaliveInterval > 0 {
			lcfg.Options = append(lcfg.Options, gnet.WithTCPKeepInterval(s.cfg.KeepaliveInterval))
		}
		if s.cfg.KeepaliveCount > 0 {
			lcfg.Options = append(lcfg.Options, gnet.WithTCPKeepCount(s.cfg.KeepaliveCount))
		}
	}
	if len(s.gates) > 0 {
		// Registering a TLS connection fails until the loops exist; and
		// gnet's default RoundRobin balancer is not safe for the gates'
		// Register calls.
		lcfg.WaitForLoops = true
		lcfg.Options = append(lcfg.Options, gnet.WithLoadBalancing(gnet.LeastConnections))
	}
	s.loop = gnetloop.New(lcfg, s)
	if err := s.loop.Start(); err != nil {
		s.closeGates()
		return err
	}
	for _, g := range s.gates {
		g.Start(s.loop.Engine())
	}
	return nil
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

// Stop closes the listeners and every connection.
func (s *Server) Stop(ctx context.Context) error {
	s.closeGates()
	err := s.loop.Stop(ctx)
	// The loops have closed every connection; the TLS ones still relay
	// what was written to them before.
	for _, g := range s.gates {
		if werr := g.Wait(ctx); err == nil {
			err = werr
		}
	}
	return err
}

// Conns is the number of open connections.
func (s *Server) Conns() int { return s.loop.Conns() }

// Addrs returns the addresses the server listens on, one per Config.Addrs
// and in that order, with the ports the kernel picked for port 0. It is
// valid once Start has returned nil.
func (s *Server) Addrs() []net.Addr { return s.loop.Addrs() }

// TLSAddrs returns the addresses of the TLS listeners, one per
// Config.TLSAddrs and in that order, as Addrs does for the plain ones.
func (s *Server) TLSAddrs() []net.Addr {
	out := make([]net.Addr, len(s.gates))
	for i, g := range s.gates {
		out[i] = g.Addr()
	}
	return out
}

// Open implements gnetloop.Handler: a new connection's session.
func (s *Server) Open(c *gnetloop.Conn) gnetloop.Session {
	gc := c.C
	cn := &conn{Conn: c, srv: s, gl: loopOf(c.Loop()), ip: workerline.Peer(gc.RemoteAddr(), gc.LocalAddr())}
	cn.ps.MaxSize = s.cfg.MaxPacket
	if p := tlsgate.PeerOf(gc); p != nil {
		// A TLS connection: gnet's end is a socketpair, the peer is there.
		cn.tls, cn.ip = p, workerline.Peer(p.RemoteAddr(), nil)
	}
	cn.exceptions.Store(s.cfg.Exceptions)
	cn.onStore = cn.stored
	cn.take, cn.apply = cn.takeHandOffs, cn.applyHandOffs
	return cn
}

// snapshot returns the open connections ordered by fd, for "workers".
func (s *Server) snapshot() []*conn {
	ss := s.loop.Sessions()
	out := make([]*conn, len(ss))
	for i, x := range ss {
		out[i] = x.(*conn)
	}
	return out
}

func (s *Server) shutdown(graceful bool) {
	if s.cfg.Shutdown != nil {
		go s.cfg.Shutdown(graceful)
	}
}
