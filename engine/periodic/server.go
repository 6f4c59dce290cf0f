// Package periodic serves Lupino's Periodic protocol (v0.1.7) on gnet event
// loops, over TCP and unix sockets, translating frames into calls on the
// scheduler that also serves Gearman: one namespace of functions and jobs.
package periodic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	codec "switchyard/codec/periodic"
	"switchyard/engine/listen"
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
	// MaxGrabs bounds the GRAB_JOBs one worker may have waiting; 0 = 4096.
	MaxGrabs int
}

// Server is a running Periodic frontend.
type Server struct {
	gnet.BuiltinEventEngine
	cfg    Config
	sched  *sched.Sched
	log    *zap.Logger
	submit *sched.Client // every Periodic job is background: one client submits them all

	eng      gnet.Engine
	addrs    []net.Addr
	paths    []string // unix socket files to remove at exit
	bootErr  error
	booted   chan struct{}
	done     chan error
	stopOnce sync.Once

	mu    sync.Mutex // guards conns and loops
	conns map[*conn]struct{}
	loops map[gnet.EventLoop]*loop

	draining atomic.Bool // Drain was called: no new connections, no new work

	// Above these sizes STATUS and LOAD run off the loop (DUMP always
	// does); tests lower them.
	inlineFuncs, inlineLoad int
}

// New prepares a server; Start binds and runs it.
func New(cfg Config, s *sched.Sched, log *zap.Logger) *Server {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = codec.DefaultMaxFrame
	}
	if cfg.MaxOutbound <= 0 {
		cfg.MaxOutbound = 256 << 20
	}
	if cfg.MaxGrabs <= 0 {
		cfg.MaxGrabs = 4096
	}
	if cfg.Loops <= 0 {
		cfg.Loops = runtime.NumCPU()
	}
	if log == nil {
		log = zap.NewNop()
	}
	submit := s.NewClient(nil)
	submit.SetSource(source.Periodic)
	return &Server{
		cfg:    cfg,
		sched:  s,
		log:    log,
		submit: submit,
		booted: make(chan struct{}),
		done:   make(chan error, 1),
		conns:  make(map[*conn]struct{}),
		loops:  make(map[gnet.EventLoop]*loop),

		inlineFuncs: inlineFuncs,
		inlineLoad:  inlineLoad,
	}
}

// Start takes over the unix socket paths (a stale file is replaced, a live
// one is an error), binds every address and returns once the event loops
// accept connections.
func (s *Server) Start() error {
	if err := listen.Check(s.cfg.Addrs, false); err != nil {
		return fmt.Errorf("periodic: %w", err)
	}
	paths, err := listen.ClaimUnix(s.cfg.Addrs)
	if err != nil {
		return fmt.Errorf("periodic: %w", err)
	}
	s.paths = paths
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(s.cfg.Loops),
		gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(listen.Logger{L: s.log.Sugar()}),
	}
	go func() { s.done <- gnet.Rotate(s, s.cfg.Addrs, opts...) }()
	select {
	case <-s.booted:
		return nil
	case err := <-s.done:
		s.removePaths()
		if err == nil {
			err = s.bootErr
		}
		if err == nil {
			err = errors.New("engine stopped before it started")
		}
		return fmt.Errorf("periodic: listen on %v: %w", s.cfg.Addrs, err)
	}
}

// OnBoot implements gnet.EventHandler: the listeners are bound, so the
// ports picked for port 0 can be read.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	addrs, err := listen.Bound(eng, s.cfg.Addrs)
	if err != nil {
		s.bootErr = err
		return gnet.Shutdown
	}
	s.addrs = addrs
	close(s.booted)
	return gnet.None
}

// Addrs returns the bound addresses, one per Config.Addrs and in that
// order. Valid once Start has returned nil.
func (s *Server) Addrs() []net.Addr { return append([]net.Addr(nil), s.addrs...) }

// Stop closes the listeners and every connection (a worker's running jobs
// go back to their queues) and removes the unix socket files.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		go s.eng.Stop(ctx)
		select {
		case err = <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		s.removePaths()
	})
	return err
}

func (s *Server) removePaths() {
	for _, p := range s.paths {
		os.Remove(p)
	}
}

// Conns is the number of open connections.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Drain stops handing out jobs and closes new connections at once, for a
// graceful stop: the jobs workers hold may finish, and waiting GRAB_JOBs
// stay unanswered until the connections close.
func (s *Server) Drain(context.Context) error {
	s.draining.Store(true)
	return nil
}

// OnOpen implements gnet.EventHandler.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.draining.Load() {
		return nil, gnet.Close
	}
	cn := &conn{srv: s, c: c, lp: s.loopOf(c), need: codec.HeaderSize, fd: c.Fd(), peer: workerline.Peer(c.RemoteAddr(), c.LocalAddr())}
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
	return gnet.None
}

// OnTraffic implements gnet.EventHandler.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	return c.Context().(*conn).traffic()
}
