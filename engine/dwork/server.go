// Package dwork serves dwork's QueryMsg API (frobnitzem/dwork's hub) over
// ZeroMQ: a ROUTER socket (github.com/go-zeromq/zmq4) that REQ clients
// talk to, one QueryMsg per message, on the scheduler every other protocol
// shares. A dwork task is a background job of one function (Config.Func):
// its unique and its payload are the task's name, it waits for its
// predecessors (sched's dependencies), and it is remembered once it ends
// (sched's ended notes), so a worker of that function from any protocol
// can run it and a late Create of it is known to be late.
//
// One goroutine receives, handles and replies; no request waits (Steal
// answers NotFound at once when nothing is ready). A Create waits for the
// durable store before its OK, without holding that goroutine: the reply
// goes out from the store's callback. Each host that steals is a location,
// one sched.Worker named after it: a host is its name, not a connection
// (see locations.go). It keeps what it holds until it completes it or
// sends Exit, or, with Config.HostTimeout, until it has been silent that
// long.
//
// # How it maps onto sched
//
// Its clients are tagged with its own Source (Client.SetSource), so that
// Stats counts its jobs apart. Create -> Submit with Background, Unique =
// Payload = the task's name, After (its predecessors), Remember and
// Stored, and again on an existing name to add some; a worker per location
// (SetName); Steal -> Grab, never Sleep; completion -> UpdateNamed(Complete), on
// behalf of the location holding it; Lookup -> Find (running), else EndedJob; Exit ->
// Holding and Requeue with Front, then Close.
package dwork

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	codec "switchyard/codec/dwork"
	"switchyard/engine/budget"
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// Config is the dwork frontend's configuration.
type Config struct {
	// Addrs are where to listen: tcp://HOST:PORT, HOST "*" or empty for
	// every address, PORT "*" or 0 for one the kernel picks (see Addrs).
	Addrs []string
	// Func is the function dwork tasks belong to; "" = "dwork".
	Func string
	// Host is the origin of the tasks Steal hands out; "" = the host name.
	Host string
	// MaxLocations bounds the hosts known at once; 0 = 65536.
	MaxLocations int
	// LocationTTL forgets a host not heard from for this long that holds
	// no task; 0 = 10 minutes.
	LocationTTL time.Duration
	// MaxConns bounds open connections; 0 = 16384.
	MaxConns int
	// HandshakeTimeout bounds a new connection's ZMTP handshake; 0 = 10 s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds one write to a client, and MaxOutbound the bytes
	// waiting for it; past either the connection is closed. 0 = 10 s and
	// 4 × codec.MaxMessage.
	WriteTimeout time.Duration
	MaxOutbound  int
	// HostTimeout takes a host that has sent nothing naming it (a Steal,
	// a completion) for this long as exited, as an Exit does: its tasks go
	// back to the queue, first in line, and it is forgotten. 0 = never, as
	// with dwork's hub: a host holds its tasks until it completes them or
	// sends Exit. Connections closing never count: dwork's clients open
	// one per command.
	HostTimeout time.Duration
	// Budget is the server's memory budget, which the messages a peer has
	// zmq4 hold and the replies waiting for it are held against (see
	// guard.go); nil: none.
	Budget *budget.Budget
}

// Defaults of Config.
const (
	DefaultFunc         = "dwork"
	defaultMaxLocations = 65536
	defaultLocationTTL  = 10 * time.Minute
	defaultMaxConns     = 16384
	defaultHandshake    = 10 * time.Second
	defaultWrite        = 10 * time.Second
)

// Limits on what a client may send, beyond codec's: a message up to
// hardMaxMessage bytes is read and, if over codec.MaxMessage, answered
// Error; a larger one closes the connection before it is read.
const (
	hardMaxMessage = 2 * codec.MaxMessage
	maxFrames      = 256     // frames in one message (a REQ sends 2)
	maxCommand     = 1 << 16 // a ZMTP command's bytes (READY's metadata)
)

// Server is a running dwork frontend.
type Server struct {
	cfg      Config
	sched    *sched.Sched
	log      *zap.Logger
	h        *handler
	draining atomic.Bool

	sock     zmq4.Socket
	ln       *guardListener
	addrs    []net.Addr
	closing  atomic.Bool
	done     chan struct{} // the serving goroutine has returned
	stopOnce sync.Once
	frames   [][]byte // a reply's frames, the serving goroutine's

	// hmu serializes the handler (and its table of locations) between the
	// serving goroutine, the sweeper and the operator endpoints' listing.
	hmu       sync.Mutex
	sweepWG   sync.WaitGroup
	sweepDone chan struct{} // closed by Stop: the sweeper returns
}

// New prepares a server; Start binds and runs it.
func New(cfg Config, s *sched.Sched, log *zap.Logger) *Server {
	if cfg.Func == "" {
		cfg.Func = DefaultFunc
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.MaxLocations <= 0 {
		cfg.MaxLocations = defaultMaxLocations
	}
	if cfg.LocationTTL <= 0 {
		cfg.LocationTTL = defaultLocationTTL
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = defaultMaxConns
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = defaultHandshake
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = defaultWrite
	}
	if cfg.MaxOutbound <= 0 {
		cfg.MaxOutbound = 4 * codec.MaxMessage
	}
	if log == nil {
		log = zap.NewNop()
	}
	srv := &Server{cfg: cfg, sched: s, log: log, done: make(chan struct{}), sweepDone: make(chan struct{})}
	locs := newLocations(s, cfg.Func, cfg.MaxLocations, cfg.LocationTTL)
	locs.hostTimeout, locs.log = max(cfg.HostTimeout, 0), log
	srv.h = newHandler(s, cfg.Func, cfg.Host, locs, &srv.draining, log)
	srv.h.send = srv.sendLater
	return srv
}

// ListenAddr turns a tcp://HOST:PORT URL as ZeroMQ writes it into an
// address for net.Listen: HOST "*" or empty is every address, PORT "*"
// is 0 (the kernel picks).
func ListenAddr(url string) (string, error) {
	rest, ok := strings.CutPrefix(url, "tcp://")
	if !ok {
		return "", errors.New("want tcp://HOST:PORT")
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", errors.New("want tcp://HOST:PORT")
	}
	if host == "*" {
		host = ""
	}
	if port == "*" {
		port = "0"
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return "", fmt.Errorf("bad port %q", port)
	}
	if strings.ContainsAny(host, "/ ") {
		return "", fmt.Errorf("bad host %q", host)
	}
	return net.JoinHostPort(host, port), nil
}

// Start binds every address and starts serving.
func (s *Server) Start() error {
	if len(s.cfg.Addrs) == 0 {
		return errors.New("dwork: no address to listen on")
	}
	var raws []net.Listener
	fail := func(err error) error {
		for _, r := range raws {
			r.Close()
		}
		return err
	}
	for _, url := range s.cfg.Addrs {
		addr, err := ListenAddr(url)
		if err != nil {
			return fail(fmt.Errorf("dwork: %s: %w", url, err))
		}
		r, err := net.Listen("tcp", addr)
		if err != nil {
			return fail(fmt.Errorf("dwork: listen on %s: %w", url, err))
		}
		raws = append(raws, r)
		s.addrs = append(s.addrs, r.Addr())
	}
	if err := registerTransport(); err != nil {
		return fail(err)
	}
	s.ln = newGuardListener(raws, guardConfig{
		handshake: s.cfg.HandshakeTimeout,
		write:     s.cfg.WriteTimeout,
		maxOut:    s.cfg.MaxOutbound,
		maxMsg:    hardMaxMessage,
		maxFrames: maxFrames,
		maxCmd:    maxCommand,
		maxConns:  int64(s.cfg.MaxConns),
		budget:    s.cfg.Budget,
		log:       s.log,
	})
	zlog, err := zap.NewStdLogAt(s.log, zapcore.DebugLevel)
	if err != nil {
		s.ln.Close()
		return fmt.Errorf("dwork: %w", err)
	}
	s.sock = zmq4.NewRouter(context.Background(), zmq4.WithLogger(zlog))
	if err := s.sock.Listen(transportName + "://" + offer(s.ln)); err != nil {
		s.sock.Close()
		s.ln.Close()
		return fmt.Errorf("dwork: %w", err)
	}
	go s.serve()
	s.sweepWG.Go(s.sweeper)
	return nil
}

// Addrs returns the bound addresses, one per Config.Addrs and in that
// order. Valid once Start has returned nil.
func (s *Server) Addrs() []net.Addr { return append([]net.Addr(nil), s.addrs...) }

// Conns is the number of connections open to the server's listeners,
// ZeroMQ handshakes under way included. Valid once Start has returned nil.
func (s *Server) Conns() int { return int(s.ln.conns.Load()) }

// Func is the function dwork tasks belong to.
func (s *Server) Func() string { return s.cfg.Func }

// Drain stops handing out tasks, for a graceful stop: Steal answers
// NotFound; completions, Creates, Lookups and Exits are still served.
func (s *Server) Drain(context.Context) error {
	s.draining.Store(true)
	return nil
}

// Stop closes the socket and every connection, waits for the serving
// goroutine (at most until ctx ends), and gives back the tasks each
// location holds, first in line.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	if s.sock == nil {
		return nil // never started
	}
	s.stopOnce.Do(func() {
		s.closing.Store(true)
		s.sock.Close()
		close(s.sweepDone)
		s.sweepWG.Wait()
		select {
		case <-s.done:
			s.h.locs.closeAll()
		case <-ctx.Done():
			err = ctx.Err()
		}
		s.ln.wait()
	})
	return err
}

// sweepEvery is how often the sweeper looks: a quarter of the shorter of
// the TTL and the host timeout, so that a host is taken as exited at most
// a quarter late, within [10 ms, 1 s].
func (s *Server) sweepEvery() time.Duration {
	d := s.cfg.LocationTTL
	if t := s.cfg.HostTimeout; t > 0 {
		d = min(d, t)
	}
	return min(max(d/4, 10*time.Millisecond), time.Second)
}

// sweeper keeps the table of locations (locations.sweep) between the
// serving goroutine's requests, until Stop.
func (s *Server) sweeper() {
	t := time.NewTicker(s.sweepEvery())
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.sweep()
		case <-s.sweepDone:
			return
		}
	}
}

// sweep runs one sweep at the handler's clock.
func (s *Server) sweep() int {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	return s.h.locs.sweep(s.h.now())
}

// serve is the one goroutine that receives, handles and replies.
func (s *Server) serve() {
	defer close(s.done)
	for {
		msg, err := s.sock.Recv()
		if err != nil {
			if !s.closing.Load() {
				s.log.Error("dwork: the socket failed; no more requests are served", zap.Error(err))
			}
			return
		}
		if msg.Type == zmq4.CmdMsg {
			continue // a ZMTP command (PING) zmq4 passes on: not a request
		}
		env, body, ok := split(msg.Frames)
		s.hmu.Lock()
		var reply []byte
		if ok {
			reply = s.h.handle(body, env)
		} else {
			s.log.Warn("dwork: a message that is not one QueryMsg in a ZeroMQ envelope; answered Error",
				zap.Int("frames", len(msg.Frames)))
			reply = s.h.refuse()
		}
		s.hmu.Unlock()
		if reply != nil {
			// The reply is the handler's until its next request: this
			// goroutine's alone.
			s.frames = append(append(s.frames[:0], env...), reply)
			s.sendFrames(s.frames)
			clear(s.frames)
		}
	}
}

// split takes a message from the ROUTER apart: the envelope (the peer's
// identity, any relays' identities and, from a REQ socket, the empty
// delimiter), which the reply goes back with, and the one frame after it,
// the QueryMsg. A message from a DEALER may have no delimiter: then the
// identity alone is the envelope.
func split(frames [][]byte) (env [][]byte, body []byte, ok bool) {
	if len(frames) < 2 {
		return frames, nil, false
	}
	for i := 1; i < len(frames); i++ {
		if len(frames[i]) == 0 {
			return frames[:i+1], frames[min(i+1, len(frames)-1)], i+2 == len(frames)
		}
	}
	return frames[:1], frames[1], len(frames) == 2
}

// sendLater sends a reply made outside the serving goroutine.
func (s *Server) sendLater(env [][]byte, reply []byte) {
	s.sendFrames(append(env[:len(env):len(env)], reply))
}

// sendFrames sends a reply, frames[0] the peer's identity. zmq4 writes
// it into the guarded connections' buffers before returning (see
// guard.go): this never waits on the client.
func (s *Server) sendFrames(frames [][]byte) {
	if err := s.sock.Send(zmq4.NewMsgFrom(frames...)); err != nil && !s.closing.Load() {
		s.log.Debug("dwork: a reply was not sent", zap.Error(err))
	}
}

// The guarded transport (guard.go) is registered with zmq4 once, under a
// name of its own, and hands each Listen the guardListener offered to it.
const transportName = "switchyard-dwork"

var (
	registerOnce sync.Once
	registerErr  error
	offeredMu    sync.Mutex
	offered      = map[string]*guardListener{}
	offeredSeq   atomic.Uint64
)

func registerTransport() error {
	registerOnce.Do(func() { registerErr = zmq4.RegisterTransport(transportName, guardTransport{}) })
	return registerErr
}

// offer makes l the listener of the endpoint it returns.
func offer(l *guardListener) string {
	key := strconv.FormatUint(offeredSeq.Add(1), 10)
	offeredMu.Lock()
	offered[key] = l
	offeredMu.Unlock()
	return key
}

// guardTransport is a zmq4 transport that only listens, on listeners
// offered to it.
type guardTransport struct{}

func (guardTransport) Dial(context.Context, transport.Dialer, string) (net.Conn, error) {
	return nil, errors.New("dwork: the guarded transport only listens")
}

func (guardTransport) Listen(_ context.Context, key string) (net.Listener, error) {
	offeredMu.Lock()
	defer offeredMu.Unlock()
	l := offered[key]
	if l == nil {
		return nil, fmt.Errorf("dwork: no listener offered as %q", key)
	}
	delete(offered, key)
	return l, nil
}

func (guardTransport) Addr(ep string) (string, error) { return ep, nil }

// ListHosts lists the hosts known (the locations), the most recently
// heard from first, for the operator endpoints: each one a worker of the
// dwork function with no connection of its own, named by its location,
// with when it was last heard from.
func (s *Server) ListHosts() []workerline.Worker {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	ls := s.h.locs
	out := make([]workerline.Worker, 0, len(ls.byName))
	for l := ls.tail; l != nil; l = l.prev {
		out = append(out, workerline.Worker{FD: -1, Peer: "dwork", ID: l.name, Funcs: []string{s.cfg.Func},
			Protocol: "dwork", Sched: l.w, Heard: l.seen})
	}
	return out
}
