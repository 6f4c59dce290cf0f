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
	"net"
	"sync/atomic"

	"go.uber.org/zap"

	codec "switchyard/codec/periodic"
	"switchyard/engine/budget"
	"switchyard/engine/internal/gnetloop"
	"switchyard/engine/source"
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// Config is the Periodic listener's configuration.
type Config struct {
	// Addrs are gnet addresses: "tcp://HOST:PORT" or "unix:///path".
	Addrs []string
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
	srv.loop = gnetloop.New(gnetloop.Config{Name: "periodic", Addrs: cfg.Addrs, Loops: cfg.Loops,
		MaxOutbound: cfg.MaxOutbound, Budget: cfg.Budget, Log: log}, srv)
	return srv
}

// Start takes over the unix socket paths (a stale file is replaced, a live
// one is an error), binds every address and returns once the event loops
// accept connections.
func (s *Server) Start() error { return s.loop.Start() }

// Addrs returns the bound addresses, one per Config.Addrs and in that
// order. Valid once Start has returned nil.
func (s *Server) Addrs() []net.Addr { return s.loop.Addrs() }

// Stop closes the listeners and every connection (a worker's running jobs
// go back to their queues) and removes the unix socket files.
func (s *Server) Stop(ctx context.Context) error { return s.loop.Stop(ctx) }

// Conns is the number of open connections.
func (s *Server) Conns() int { return s.loop.Conns() }

// Drain stops handing out jobs and closes new connections at once, for a
// graceful stop: the jobs workers hold may finish, and waiting GRAB_JOBs
// stay unanswered until the connections close.
func (s *Server) Drain(context.Context) error {
	s.loop.Drain()
	return nil
}

// Open implements gnetloop.Handler: a new connection's session.
func (s *Server) Open(c *gnetloop.Conn) gnetloop.Session {
	cn := &conn{Conn: c, srv: s, need: codec.HeaderSize, peer: workerline.Peer(c.C.RemoteAddr(), c.C.LocalAddr())}
	cn.take, cn.apply = cn.takeHandOffs, cn.applyHandOffs
	return cn
}
