// Package periodic serves Lupino's Periodic protocol (v0.1.7) on gnet event
// loops, over TCP and unix sockets, translating frames into calls on the
// scheduler that also serves Gearman: one namespace of functions and jobs.
//
// # How it maps onto sched
//
// Its clients are tagged with its own Source (Client.SetSource), so that
// Stats counts its jobs apart. SUBMIT_JOB and LOAD -> Submit with
// Background, RetryForever, Replace, Unique = name, When = sched_at,
// Timeout, Counter; GRAB_JOB parks: the frontend calls Sleep and, on Wake,
// GrabAttempt (the Attempt gives the JSON's sched_at, counter and run_at);
// WORK_DONE -> Update(Complete); WORK_FAIL -> Update(Fail), which
// requeues; SCHED_LATER -> Worker.Requeue with Delay and Step; REMOVE_JOB
// -> Sched.Remove; DROP_FUNC -> Sched.Purge; STATUS -> FuncsChunked; DUMP
// -> JobViewsChunked.
package periodic

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	codec "switchyard/codec/periodic"
	"switchyard/engine/budget"
	"switchyard/engine/internal/gnetloop"
	"switchyard/engine/internal/tlsgate"
	"switchyard/engine/source"
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// Config is the Periodic listener's configuration.
type Config struct {
	// Addrs are gnet addresses, "tcp://HOST:PORT" or "unix:///path", and
	// "tls://HOST:PORT", served with TLS through engine/tlsgate into the
	// same loops. (Periodic's own CLI speaks no TLS; a client that does,
	// or a TLS tunnel, can.)
	Addrs []string
	// TLS configures the tls:// listeners; it must hold a certificate.
	TLS *tls.Config
	// Loops is the number of event loops; 0 = one per CPU.
	Loops int
	// MaxFrame bounds a frame's payload; 0 = codec.DefaultMaxFrame.
	MaxFrame int
	// MaxOutbound closes a connection whose unread replies exceed it; 0 = 256 MiB.
	MaxOutbound int
	// Budget is the memory budget connections hold against (see
	// engine/budget); nil: none.
	Budget *budget.Budget
	// MaxGrabs bounds the GRAB_JOBs one worker may have waiting; 0 = 4096.
	MaxGrabs int
}

// Server is a running Periodic frontend: a gnetloop.Server with this
// package's sessions.
type Server struct {
	cfg    Config
	sched  *sched.Sched
	log    *zap.Logger
	submit *sched.Client // every Periodic job is background: one client submits them all
	loop   *gnetloop.Server
	gates  []*tlsgate.Gate // one per tls:// address
	plain  []string        // the gnet addresses

	hooks atomic.Pointer[testHooks]
}

// testHooks let tests steer what is answered off the loop (Server.hooks;
// nil in production): the package's one style of test hook.
type testHooks struct {
	inlineFuncs, inlineLoad int // replace the constants of the same names
}

// inline is how large a STATUS (functions) and a LOAD (bytes) may be and
// still be handled on the loop; DUMP always runs off it.
func (s *Server) inline() (funcs, load int) {
	if h := s.hooks.Load(); h != nil {
		return h.inlineFuncs, h.inlineLoad
	}
	return inlineFuncs, inlineLoad
}

// New prepares a server; Start binds and runs it.
func New(cfg Config, s *sched.Sched, log *zap.Logger) *Server {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = codec.DefaultMaxFrame
	}
	if cfg.MaxGrabs <= 0 {
		cfg.MaxGrabs = 4096
	}
	if log == nil {
		log = zap.NewNop()
	}
	submit := s.NewClient(nil)
	submit.SetSource(source.Periodic)
	srv := &Server{
		cfg:    cfg,
		sched:  s,
		log:    log,
		submit: submit,
	}
	for _, a := range cfg.Addrs {
		if !strings.HasPrefix(a, tlsScheme) {
			srv.plain = append(srv.plain, a)
		}
	}
	return srv
}

const tlsScheme = "tls://"

// Start takes over the unix socket paths (a stale file is replaced, a live
// one is an error), binds every address and returns once the event loops
// accept connections.
func (s *Server) Start() error {
	for _, a := range s.cfg.Addrs {
		if !strings.HasPrefix(a, tlsScheme) {
			continue
		}
		g, err := tlsgate.Listen("tcp", strings.TrimPrefix(a, tlsScheme), tlsgate.Config{TLS: s.cfg.TLS, Log: s.log})
		if err != nil {
			s.closeGates()
			return fmt.Errorf("periodic: listen with TLS on %s: %w", a, err)
		}
		s.gates = append(s.gates, g)
	}
	lcfg := gnetloop.Config{Name: "periodic", Addrs: s.plain, AllowNoAddrs: len(s.gates) > 0, Loops: s.cfg.Loops,
		MaxOutbound: s.cfg.MaxOutbound, Budget: s.cfg.Budget, Log: s.log}
	if len(s.gates) > 0 {
		if len(s.plain) == 0 { // gnet wants a listener of its own
			ph, remove, err := tlsgate.Placeholder()
			if err != nil {
				s.closeGates()
				return err
			}
			defer remove()
			lcfg.Listen = []string{ph}
		}
		// As the Gearman port's gates: registering needs the loops, and a
		// balancer that is safe for the gates' Register calls.
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

func (s *Server) closeGates() {
	for _, g := range s.gates {
		g.Close()
	}
}

// Addrs returns the bound addresses of the plain listeners, one per
// tcp:// or unix:// address of Config.Addrs and in that order. Valid once
// Start has returned nil.
func (s *Server) Addrs() []net.Addr { return s.loop.Addrs() }

// Bound returns every bound address, one per Config.Addrs and in that
// order: HOST:PORT or a unix socket's path, and tls://HOST:PORT.
func (s *Server) Bound() []string {
	plain, gates := s.loop.Addrs(), s.gates
	var out []string
	for _, a := range s.cfg.Addrs {
		if strings.HasPrefix(a, tlsScheme) {
			out = append(out, tlsScheme+gates[0].Addr().String())
			gates = gates[1:]
			continue
		}
		out = append(out, plain[0].String())
		plain = plain[1:]
	}
	return out
}

// Stop closes the listeners and every connection (a worker's running jobs
// go back to their queues) and removes the unix socket files.
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

// Drain stops handing out jobs and closes new connections at once, for a
// graceful stop: the jobs workers hold may finish, and waiting GRAB_JOBs
// stay unanswered until the connections close.
func (s *Server) Drain(context.Context) error {
	s.closeGates() // TLS: refused at connect too; open ones go on
	s.loop.Drain()
	return nil
}

// Open implements gnetloop.Handler: a new connection's session.
func (s *Server) Open(c *gnetloop.Conn) gnetloop.Session {
	cn := &conn{Conn: c, srv: s, need: codec.HeaderSize, peer: workerline.Peer(c.C.RemoteAddr(), c.C.LocalAddr())}
	if p := tlsgate.PeerOf(c.C); p != nil {
		// A TLS connection: gnet's end is a socketpair, the peer is there.
		cn.tls, cn.peer = p, workerline.Peer(p.RemoteAddr(), nil)
	}
	cn.take, cn.apply = cn.takeHandOffs, cn.applyHandOffs
	return cn
}
