// Package gnetloop is what every gnet frontend needs, written once: the
// server's life (its listeners bound, the addresses the kernel picked read
// back, unix socket paths taken over and removed, a clean stop), the
// registry of its connections and event loops, and each connection's core
// (Conn): replies gathered in one buffer per event and written once,
// hand-offs from other goroutines with one loop wake per burst, the
// same-loop fast path, writes bounded by what the peer reads, and answers
// built off the loop. A protocol plugs in a Handler that makes a Session
// for each connection; the Session parses and acts.
package gnetloop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	"switchyard/engine/budget"
	"switchyard/engine/listen"
)

// Handler is a protocol: it makes each connection's session.
type Handler interface {
	// Open returns the session of a new connection, or nil to close it at
	// once. It runs on the connection's loop.
	Open(c *Conn) Session
}

// Session is one connection's protocol side. Its methods run on the
// connection's loop.
type Session interface {
	// Traffic handles the bytes gnet holds and what other goroutines
	// handed over, from Conn.Receive to Conn.Finish.
	Traffic() gnet.Action
	// Closed is called once the connection is gone, after the core has
	// stopped taking hand-offs.
	Closed()
}

// Ticker is a Handler that wants a call now and then, on a loop of its
// choosing: it returns when to be called again.
type Ticker interface {
	Tick() time.Duration
}

// ReadBuffer is what gnet reads from a readable socket before each event
// (the loop's read buffer), set here rather than left to gnet's default
// because sessions budget their own reads around it.
const ReadBuffer = 64 << 10

// Config is a server's.
type Config struct {
	// Name is the protocol's, in errors and log lines.
	Name string
	// Addrs are gnet addresses: "tcp://HOST:PORT" or "unix:///path".
	Addrs []string
	// AllowNoAddrs lets Addrs be empty (the caller has listeners of its
	// own feeding the loops, and gives gnet a placeholder in Listen).
	AllowNoAddrs bool
	// Listen, if set, replaces Addrs as what gnet binds (Addrs still
	// names the listeners reported): the TLS-only placeholder.
	Listen []string
	// Loops is the number of event loops; 0 = one per CPU.
	Loops int
	// MaxOutbound closes a connection whose unread replies exceed it;
	// 0 = 256 MiB.
	MaxOutbound int
	// Options are gnet's beyond the ones every server takes (multicore,
	// the loops, SO_REUSEADDR, TCP_NODELAY, the logger).
	Options []gnet.Option
	// WaitForLoops makes Start return only once the event loops exist
	// (gnet boots before it makes them): for connections registered with
	// the engine from outside, such as TLS ones. It turns gnet's ticker on.
	WaitForLoops bool
	// Budget counts what each connection holds (gnet's buffers, replies
	// held for the store, what the session reserves: Conn.Hold) against
	// one memory budget, which cuts off the connections that hold the
	// most when it is spent; nil: no accounting.
	Budget *budget.Budget
	Log    *zap.Logger
}

// Server runs a Handler on gnet event loops.
type Server struct {
	gnet.BuiltinEventEngine
	cfg Config
	h   Handler

	eng      gnet.Engine
	addrs    []net.Addr // bound at boot, in the order of cfg.Addrs
	paths    []string   // unix socket files to remove at exit
	bootErr  error
	booted   chan struct{}
	running  chan struct{} // closed at the first tick, with WaitForLoops
	tickOnce sync.Once
	done     chan error
	stopOnce sync.Once

	mu    sync.Mutex // guards conns and loops
	conns map[*Conn]Session
	loops map[gnet.EventLoop]*Loop

	draining atomic.Bool
	wakes    atomic.Int64 // hand-offs that cost a gnet wake
}

// New prepares a server; Start binds and runs it.
func New(cfg Config, h Handler) *Server {
	cfg.Loops = cmp.Or(cfg.Loops, runtime.NumCPU())
	cfg.MaxOutbound = cmp.Or(cfg.MaxOutbound, 256<<20)
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Server{cfg: cfg, h: h, booted: make(chan struct{}), running: make(chan struct{}),
		done: make(chan error, 1), conns: make(map[*Conn]Session), loops: make(map[gnet.EventLoop]*Loop)}
}

// Start takes over the unix socket paths (a stale file is replaced, a live
// one is an error), binds every address and returns once the event loops
// accept connections, or with the error that stopped them. A port of 0
// binds one the kernel picks; Addrs tells which.
func (s *Server) Start() error {
	if err := listen.Check(s.cfg.Addrs, s.cfg.AllowNoAddrs); err != nil {
		return fmt.Errorf("%s: %w", s.cfg.Name, err)
	}
	paths, err := listen.ClaimUnix(s.cfg.Addrs)
	if err != nil {
		return fmt.Errorf("%s: %w", s.cfg.Name, err)
	}
	s.paths = paths
	opts := append([]gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(s.cfg.Loops),
		gnet.WithReadBufferCap(ReadBuffer),
		gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(listen.Logger{L: s.cfg.Log.Sugar()}),
	}, s.cfg.Options...)
	_, ticks := s.h.(Ticker)
	if s.cfg.WaitForLoops || ticks {
		opts = append(opts, gnet.WithTicker(true))
	}
	addrs := s.cfg.Addrs
	if len(s.cfg.Listen) > 0 {
		addrs = s.cfg.Listen
	}
	go func() { s.done <- gnet.Rotate(s, addrs, opts...) }()
	ready := s.booted
	if s.cfg.WaitForLoops {
		ready = s.running
	}
	select {
	case <-ready:
		return nil
	case err := <-s.done:
		s.removePaths()
		err = cmp.Or(err, s.bootErr, errors.New("engine stopped before it started"))
		return fmt.Errorf("%s: listen on %v: %w", s.cfg.Name, s.cfg.Addrs, err)
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

// OnTick implements gnet.EventHandler: the first tick says the loops
// exist (WaitForLoops); the Handler's own ticks follow.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.tickOnce.Do(func() { close(s.running) })
	if t, ok := s.h.(Ticker); ok {
		return t.Tick(), gnet.None
	}
	return time.Hour, gnet.None
}

// Engine is gnet's engine, once Start has returned nil.
func (s *Server) Engine() gnet.Engine { return s.eng }

// Addrs returns the bound addresses, one per Config.Addrs and in that
// order. Valid once Start has returned nil.
func (s *Server) Addrs() []net.Addr { return slices.Clone(s.addrs) }

// Conns is the number of open connections.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Sessions returns the open connections' sessions, ordered by descriptor,
// for listings.
func (s *Server) Sessions() []Session {
	s.mu.Lock()
	cs := slices.Collect(maps.Keys(s.conns))
	s.mu.Unlock()
	slices.SortFunc(cs, func(a, b *Conn) int { return cmp.Compare(a.fd, b.fd) })
	out := make([]Session, 0, len(cs))
	s.mu.Lock()
	for _, c := range cs {
		if ss := s.conns[c]; ss != nil {
			out = append(out, ss)
		}
	}
	s.mu.Unlock()
	return out
}

// Loops returns the event loops connections have been opened on.
func (s *Server) Loops() []gnet.EventLoop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.loops))
}

// Wakes is how many hand-offs have cost a loop wake, for tests of the
// same-loop fast path.
func (s *Server) Wakes() int64 { return s.wakes.Load() }

// Drain makes the server refuse new connections at once (OnOpen closes
// them), for a graceful stop.
func (s *Server) Drain() { s.draining.Store(true) }

// Draining tells whether Drain was called.
func (s *Server) Draining() bool { return s.draining.Load() }

// Stop closes the listeners and every connection (their sessions'
// Closed run) and removes the unix socket files, at most until ctx ends.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		// gnet's Stop polls for the end every 500ms; the event loops are
		// done as soon as Rotate returns, so wait for that instead.
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

// OnOpen implements gnet.EventHandler.
func (s *Server) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	if s.draining.Load() {
		return nil, gnet.Close // accepted before the listeners closed, or they could not be
	}
	c := &Conn{C: gc, srv: s, loop: s.loopOf(gc), fd: gc.Fd()}
	c.hold = s.cfg.Budget.Hold(func() {
		s.cfg.Log.Sugar().Warnf("%s: closing %s: it holds %d bytes, more than any other connection, and the memory budget is spent",
			s.cfg.Name, gc.RemoteAddr(), c.hold.Held())
		gc.Close()
	})
	ss := s.h.Open(c)
	if ss == nil {
		c.hold.Release()
		return nil, gnet.Close
	}
	c.session = ss
	gc.SetContext(c)
	s.mu.Lock()
	s.conns[c] = ss
	s.mu.Unlock()
	return nil, gnet.None
}

// loopOf returns the shared state of gc's event loop.
func (s *Server) loopOf(gc gnet.Conn) *Loop {
	s.mu.Lock()
	defer s.mu.Unlock()
	el := gc.EventLoop()
	lp := s.loops[el]
	if lp == nil {
		lp = &Loop{}
		s.loops[el] = lp
	}
	return lp
}

// OnClose implements gnet.EventHandler.
func (s *Server) OnClose(gc gnet.Conn, _ error) gnet.Action {
	c, _ := gc.Context().(*Conn)
	if c == nil {
		return gnet.None
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.close()
	c.session.Closed()
	return gnet.None
}

// OnTraffic implements gnet.EventHandler.
func (s *Server) OnTraffic(gc gnet.Conn) gnet.Action {
	return gc.Context().(*Conn).session.Traffic()
}
