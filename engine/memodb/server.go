// Package memodb serves the MemoDB broker protocol (bcdb's memodb-broker;
// see docs/memodb.md) over NNG: one mangos REP socket, on every listener,
// that MemoDB clients and workers reach with REQ sockets, many of them
// multiplexed over one connection with contexts. A MemoDB service is a
// function of the scheduler every protocol shares: a client's JOB is a
// foreground job of it, which any worker of the function runs, MemoDB's or
// another protocol's, and a MemoDB worker runs jobs of its services
// whoever submitted them.
//
// A request is answered on the REP context it came in on. A few receiver
// goroutines each receive on a context of their own and handle what comes
// in; a request that cannot be answered at once (a worker with no job to
// run, a client whose job is not done) is parked with its context, and the
// receiver goes on with another context from a free list. Nothing waits
// on a parked request: its reply is sent when the scheduler says so (a
// Waker's Wake, a Listener's Notify, an Expirer's Expired), by the
// receiver whose request caused it, or else by one of a few sender
// goroutines, and its context goes back on the free list.
//
// # How it maps onto sched
//
// Its clients are tagged with its own Source (Client.SetSource), so that
// Stats counts its jobs apart. READY -> NewWorker and CanDo per service;
// it grabs (GrabAttempt: the JOB carries the attempt's timeout) or parks
// like Periodic's GRAB_JOB: Sleep, and Wake means "grab and reply now". A
// client's JOB -> Submit with a Listener, Timeout = the JOB's timeout,
// QueueTimeout = --memodb-queue-timeout (its Fail leaves the request
// unanswered); every worker message -> Worker.ExpectWithin (a heartbeat
// while idle, the job's timeout and a heartbeat while it runs), whose
// lapse (Expirer) sends an idle worker HEARTBEAT and forgets one that was
// due to answer, its job requeued; RESULT -> Update(Complete); RESULT with
// disconnecting, or a lapse -> Close.
package memodb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.nanomsg.org/mangos/v3"
	"go.nanomsg.org/mangos/v3/protocol/rep"
	_ "go.nanomsg.org/mangos/v3/transport/ipc" // ipc:// listeners
	_ "go.nanomsg.org/mangos/v3/transport/tcp" // tcp:// dialers (the tests' peers); the server listens through metered.go
	"go.uber.org/zap"

	codec "switchyard/codec/memodb"
	"switchyard/engine/budget"
	"switchyard/sched"
)

// Config is the MemoDB frontend's configuration.
type Config struct {
	// Addrs are NNG URLs to listen on: tcp://HOST:PORT (port 0: one the
	// kernel picks, see Addrs), tls+tcp://HOST:PORT (NNG's TLS, as nng's
	// clients speak it: TLS then the SP protocol) or ipc:///path.
	Addrs []string
	// TLS configures the tls+tcp:// listeners; it must hold a
	// certificate.
	TLS *tls.Config
	// QueueTimeout bounds how long a client's job waits for a worker;
	// 0 = 10 s, as memodb-broker.
	QueueTimeout time.Duration
	// Heartbeat is how long an idle worker waits before it is sent a
	// HEARTBEAT, and how long a worker has to answer one; 0 = 10 s, as
	// memodb-broker.
	Heartbeat time.Duration
	// MaxMessage is the largest message received (mangos's maximum
	// receive size): a larger one closes its connection. 0 = 64 MiB.
	MaxMessage int
	// SendTimeout bounds how long a reply may wait to be queued on its
	// connection; past it the connection is closed. 0 = 10 s.
	SendTimeout time.Duration
	// MaxWorkers bounds the workers known at once; a READY beyond it is
	// left unanswered. 0 = 65536.
	MaxWorkers int
	// Receivers and Senders are the goroutines that receive requests and
	// that send the replies the scheduler's callbacks make; 0 = 4 and 2.
	Receivers, Senders int
	// Budget is the server's memory budget: a tcp:// connection holds it
	// for the message it is reading (see metered.go). nil: none.
	Budget *budget.Budget
}

// Defaults of Config.
const (
	DefaultListen       = "tcp://127.0.0.1:12703"
	DefaultQueueTimeout = 10 * time.Second
	DefaultHeartbeat    = 10 * time.Second
	defaultMaxMessage   = 64 << 20
	defaultSendTimeout  = 10 * time.Second
	defaultMaxWorkers   = 65536
	defaultReceivers    = 4
	defaultSenders      = 2
	// writeQueue is how many replies may wait for a connection's writer
	// before a send waits (mangos's REP has none by default).
	writeQueue = 64
	// maxFree bounds the idle contexts kept for reuse.
	maxFree = 1024
	// maxBacktrace is the most a request's NNG header (request id and
	// hops) may add to a message.
	maxBacktrace = 8 * 4
)

// Server is a running MemoDB frontend.
type Server struct {
	cfg   Config
	sched *sched.Sched
	log   *zap.Logger
	// origin is this frontend's token in sched's Update.Origin and
	// SubmitReq.Origin: a callback that carries it runs on a receiver,
	// which may send the reply itself.
	origin   *byte
	draining atomic.Bool
	closing  atomic.Bool

	sock      mangos.Socket
	listeners []mangos.Listener
	addrs     []string

	// mu guards the fields below. It is never held across a call into
	// mangos: mangos calls pipeEvent, which takes it, on its own
	// goroutines (the accept loop's among them).
	mu      sync.Mutex
	free    []mangos.Context
	workers map[uint32]*worker
	nextID  uint32
	pending map[*pending]struct{}
	pipes   map[mangos.Pipe]*pipeState // connections known, see pipeEvent
	npipes  int                        // the attached ones

	out      outbox
	wg       sync.WaitGroup // receivers and senders
	stopOnce sync.Once

	// note, when set (tests), hears what happened to requests and
	// workers that sends nothing to the peer: "invalid" (a request not
	// answered), "dropped" (a client's job failed or found no worker),
	// "forgotten" (a worker). Set before Start.
	note func(what string)
}

func (s *Server) noted(what string) {
	if s.note != nil {
		s.note(what)
	}
}

// New prepares a server; Start binds it.
func New(cfg Config, s *sched.Sched, log *zap.Logger) *Server {
	if cfg.QueueTimeout <= 0 {
		cfg.QueueTimeout = DefaultQueueTimeout
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = defaultMaxMessage
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = defaultSendTimeout
	}
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = defaultMaxWorkers
	}
	if cfg.Receivers <= 0 {
		cfg.Receivers = defaultReceivers
	}
	if cfg.Senders <= 0 {
		cfg.Senders = defaultSenders
	}
	if log == nil {
		log = zap.NewNop()
	}
	srv := &Server{
		cfg:     cfg,
		sched:   s,
		log:     log,
		origin:  new(byte),
		workers: make(map[uint32]*worker),
		pipes:   make(map[mangos.Pipe]*pipeState),
		// Ids start at random, as memodb-broker's: a worker of an earlier
		// process is most likely unknown here, and told to start over.
		nextID:  rand.Uint32(),
		pending: make(map[*pending]struct{}),
	}
	srv.out.cond.L = &srv.out.mu
	return srv
}

// CheckURL accepts what Start can listen on: tcp://HOST:PORT and
// tls+tcp://HOST:PORT (HOST may be empty for every address) and
// ipc:///absolute/path.
func CheckURL(v string) error {
	scheme, rest, ok := strings.Cut(v, "://")
	switch {
	case !ok:
		return errors.New("want tcp://HOST:PORT, tls+tcp://HOST:PORT or ipc:///path")
	case scheme == "ipc":
		if !strings.HasPrefix(rest, "/") {
			return errors.New("an ipc path must be absolute")
		}
		return nil
	case scheme == "tcp" || scheme == "tls+tcp":
		u, err := url.Parse(v)
		if err != nil || u.Port() == "" || u.Path != "" || u.User != nil || u.RawQuery != "" {
			return fmt.Errorf("want %s://HOST:PORT", scheme)
		}
		if _, err := strconv.ParseUint(u.Port(), 10, 16); err != nil {
			return fmt.Errorf("bad port %q", u.Port())
		}
		return nil
	}
	return fmt.Errorf("unknown scheme %q: want tcp, tls+tcp or ipc", scheme)
}

// Start opens the socket, binds every address and starts serving.
func (s *Server) Start() error {
	if len(s.cfg.Addrs) == 0 {
		return errors.New("memodb: no address to listen on")
	}
	for _, a := range s.cfg.Addrs {
		if err := CheckURL(a); err != nil {
			return fmt.Errorf("memodb: %s: %w", a, err)
		}
	}
	sock, err := rep.NewSocket()
	if err != nil {
		return fmt.Errorf("memodb: %w", err)
	}
	for name, v := range map[string]any{
		// mangos counts the request's backtrace in: a request id, and an
		// id for each device it came through (8 at most, REP's TTL).
		mangos.OptionMaxRecvSize: s.cfg.MaxMessage + maxBacktrace,
		mangos.OptionWriteQLen:   writeQueue,
	} {
		if err := sock.SetOption(name, v); err != nil {
			sock.Close()
			return fmt.Errorf("memodb: option %s: %w", name, err)
		}
	}
	// Before any listener: every connection's attaching is seen (a
	// worker's messages are matched to a connection pipeEvent knows).
	sock.SetPipeEventHook(s.pipeEvent)
	for _, a := range s.cfg.Addrs {
		at, opts := a, map[string]any(nil)
		switch {
		case strings.HasPrefix(a, "tcp://"):
			at, opts = meteredListenAddr(a), map[string]any{optionBudget: s.cfg.Budget}
		case strings.HasPrefix(a, tlsScheme):
			if s.cfg.TLS == nil {
				sock.Close()
				return fmt.Errorf("memodb: %s: no TLS certificate", a)
			}
			at, opts = meteredListenAddr(a), map[string]any{optionBudget: s.cfg.Budget, optionTLS: s.cfg.TLS}
		}
		l, err := sock.NewListener(at, opts)
		if err == nil {
			err = l.Listen()
		}
		if err != nil {
			sock.Close()
			return fmt.Errorf("memodb: listen on %s: %w", a, err)
		}
		s.listeners = append(s.listeners, l)
		// The listener's address names the port the kernel picked for a
		// tcp://HOST:0 (mangos's tcp listener reads it back after bind).
		s.addrs = append(s.addrs, l.Address())
	}
	s.sock = sock
	for range s.cfg.Receivers {
		s.wg.Go(s.receive)
	}
	for range s.cfg.Senders {
		s.wg.Go(s.send)
	}
	return nil
}

// Addrs returns the bound addresses as URLs, one per Config.Addrs and in
// that order: tcp://127.0.0.1:PORT with the port bound. Valid once Start
// has returned nil.
func (s *Server) Addrs() []string { return append([]string(nil), s.addrs...) }

// Drain stops handing out jobs, for a graceful stop: workers are kept
// waiting (and sent heartbeats), results are still taken, and clients'
// jobs still queued.
func (s *Server) Drain(context.Context) error {
	s.draining.Store(true)
	return nil
}

// Stop closes the socket (every parked request goes unanswered), gives
// back the jobs MemoDB workers hold, withdraws the queued jobs of MemoDB
// clients, and waits for its goroutines, at most until ctx ends.
func (s *Server) Stop(ctx context.Context) error {
	if s.sock == nil {
		return nil // never started
	}
	var err error
	s.stopOnce.Do(func() {
		s.closing.Store(true)
		s.sock.Close()
		s.out.close()
		s.mu.Lock()
		ws := make([]*worker, 0, len(s.workers))
		for _, w := range s.workers {
			ws = append(ws, w)
		}
		ps := make([]*pending, 0, len(s.pending))
		for p := range s.pending {
			ps = append(ps, p)
		}
		s.mu.Unlock()
		for _, w := range ws {
			w.forget()
		}
		for _, p := range ps {
			p.abandon()
		}
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	})
	return err
}

// Workers is the number of MemoDB workers known.
func (s *Server) Workers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.workers)
}

// Conns is the number of connections open to the server's listeners.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.npipes
}

// pipeState is what the server knows of one connection (a mangos pipe).
type pipeState struct {
	attached bool
	closed   bool                 // detached: its workers are being forgotten
	workers  map[*worker]struct{} // the workers whose last message came on it
}

// pipeEvent keeps Conns and the connections' workers. mangos calls it on
// the goroutine that accepted the connection (attaching, attached) and on
// one of its own (detached), which may run before attached, or for a pipe
// that never attached; every pipe is reported attaching first, before any
// of its messages is received. A pipe counts from attached to detached
// only if it was still known when attached.
//
// Nothing here calls into mangos or waits: it updates the server's own
// tables under s.mu (never held across a mangos call) and hands a closed
// connection's workers to the senders (the outbox never blocks). mangos
// v3.4.2 deadlocks the accepting goroutine, for good, if a pipe is closed
// from its attaching hook (addPipe locks the pipe twice), and a hook that
// waited on anything mangos holds would stall every new connection; this
// hook can do neither.
func (s *Server) pipeEvent(ev mangos.PipeEvent, p mangos.Pipe) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev {
	case mangos.PipeEventAttaching:
		s.pipes[p] = &pipeState{}
	case mangos.PipeEventAttached:
		if ps := s.pipes[p]; ps != nil && !ps.attached {
			ps.attached = true
			s.npipes++
		}
	case mangos.PipeEventDetached:
		ps := s.pipes[p]
		if ps == nil {
			return
		}
		delete(s.pipes, p)
		if ps.attached {
			s.npipes--
		}
		ps.closed = true
		for w := range ps.workers {
			s.out.put(event{kind: evPipeClosed, w: w, ps: ps})
		}
	}
}

// bindLocked records that w's message came on p and reports whether that
// connection has closed already (its closing missed w, which is to be
// forgotten once the message is handled). Caller holds s.mu.
func (s *Server) bindLocked(w *worker, p mangos.Pipe) (closed bool) {
	switch {
	case p == nil:
		return false
	case w.pipe == p:
		return w.ps.closed
	}
	s.unbindLocked(w)
	ps := s.pipes[p]
	if ps == nil {
		// Detached before this message was handled: every pipe is known
		// from its attaching on.
		return true
	}
	if ps.workers == nil {
		ps.workers = make(map[*worker]struct{})
	}
	ps.workers[w] = struct{}{}
	w.pipe, w.ps = p, ps
	return false
}

// unbindLocked forgets w's connection. Caller holds s.mu.
func (s *Server) unbindLocked(w *worker) {
	if w.ps != nil {
		delete(w.ps.workers, w)
	}
	w.pipe, w.ps = nil, nil
}

// context takes an idle context for a receiver, or opens one.
func (s *Server) context() (mangos.Context, error) {
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		c := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	c, err := s.sock.OpenContext()
	if err != nil {
		return nil, err
	}
	if err := c.SetOption(mangos.OptionSendDeadline, s.cfg.SendTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// release makes a context whose request is answered (or dropped) idle.
// A context that still holds a request it did not answer may be reused:
// its next receive forgets the request.
func (s *Server) release(c mangos.Context) {
	s.mu.Lock()
	if len(s.free) < maxFree && !s.closing.Load() {
		s.free = append(s.free, c)
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// receiver is one receiver goroutine's state. It is the Origin of the
// scheduler calls it makes: a callback that carries it runs on this
// goroutine, inside a request's handling, and leaves what it would send
// in later, sent once the request is done and no lock is held.
type receiver struct {
	srv   *Server
	later []event
}

// receive is a receiver goroutine: it receives on a context until a
// request parks it, then takes another.
func (s *Server) receive() {
	rc := &receiver{srv: s}
	for {
		c, err := s.context()
		if err != nil {
			if !s.closing.Load() {
				s.log.Error("memodb: cannot open a context; a receiver stops", zap.Error(err))
			}
			return
		}
		for {
			m, err := c.RecvMsg()
			if err != nil {
				if !s.closing.Load() {
					s.log.Error("memodb: receive failed; a receiver stops", zap.Error(err))
				}
				c.Close()
				return
			}
			parked := s.handle(req{ctx: c, pipe: m.Pipe}, m, rc)
			rc.flush()
			if parked {
				break
			}
		}
	}
}

// flush does what callbacks left for after the request.
func (rc *receiver) flush() {
	for i := range rc.later {
		e := &rc.later[i]
		switch e.kind {
		case evWake:
			e.w.deliver()
		case evReply:
			rc.srv.reply(e.r, e.m)
			rc.srv.release(e.r.ctx)
		}
		*e = event{}
	}
	rc.later = rc.later[:0]
}

// req is a request's way back: its context and the connection it came on.
type req struct {
	ctx  mangos.Context
	pipe mangos.Pipe
}

// handle acts on one request and reports whether its context was parked
// (its reply will be sent later). m is freed here.
func (s *Server) handle(r req, m *mangos.Message, rc *receiver) (parked bool) {
	defer m.Free()
	if len(m.Body) > s.cfg.MaxMessage {
		// What mangos lets through for a backtrace: as any message over
		// the limit, its connection is closed.
		s.log.Warn("memodb: a message over the size limit; closing its connection",
			zap.Int("bytes", len(m.Body)), zap.Int("max", s.cfg.MaxMessage), zap.String("from", peerName(r.pipe)))
		if r.pipe != nil {
			r.pipe.Close()
		}
		return false
	}
	var msg codec.Message
	if err := codec.Decode(m.Body, codec.Request, &msg); err != nil {
		// As memodb-broker: no reply. The client's REQ socket sends the
		// request again after its resend time.
		s.log.Warn("memodb: an invalid message; not answered", zap.Error(err), zap.String("from", peerName(r.pipe)))
		s.noted("invalid")
		return false
	}
	switch msg.Type {
	case codec.Ready:
		return s.ready(r, msg.Services, rc)
	case codec.Job:
		return s.submit(r, &msg, rc)
	default: // RESULT, HEARTBEAT
		return s.fromWorker(r, &msg, rc)
	}
}

// peerName names a request's connection for the log.
func peerName(p mangos.Pipe) string {
	if p == nil {
		return ""
	}
	if a, err := p.GetOption(mangos.OptionRemoteAddr); err == nil {
		if s, ok := a.(fmt.Stringer); ok {
			return p.Address() + " from " + s.String()
		}
	}
	return p.Address()
}

// reply sends m on r's context, which is then idle. It may wait up to
// SendTimeout for the connection's queue; past that the connection is
// closed. Callers hold no lock.
func (s *Server) reply(r req, m *mangos.Message) {
	if err := r.ctx.SendMsg(m); err != nil {
		m.Free()
		if !s.closing.Load() {
			s.log.Warn("memodb: a reply could not be sent; closing its connection", zap.Error(err), zap.String("to", peerName(r.pipe)))
			if r.pipe != nil && errors.Is(err, mangos.ErrSendTimeout) {
				r.pipe.Close()
			}
		}
	}
}

// newMessage returns a message whose body has room for n bytes.
func newMessage(n int) *mangos.Message {
	m := mangos.NewMessage(n)
	m.Body = m.Body[:0]
	return m
}

// disconnect answers a worker's request with DISCONNECT.
func (s *Server) disconnect(r req, id []byte) {
	m := newMessage(16)
	m.Body = codec.AppendDisconnect(m.Body, id)
	s.reply(r, m)
}

// An outbox holds what the scheduler's callbacks leave for the senders:
// they are called on goroutines that must not wait (an event loop, the
// timer), and a send may wait for its connection.
type outbox struct {
	mu     sync.Mutex
	cond   sync.Cond
	q      []event
	head   int // q[head:] are waiting
	closed bool
}

// event is one thing for a sender to do.
type event struct {
	kind eventKind
	w    *worker
	r    req
	m    *mangos.Message
	ps   *pipeState
}

type eventKind uint8

const (
	evWake       eventKind = iota // w may find work: grab and send it
	evExpired                     // w's deadline passed
	evReply                       // send m on r
	evPipeClosed                  // the connection ps, w's last, closed
)

func (o *outbox) put(e event) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		if e.m != nil {
			e.m.Free()
		}
		return
	}
	o.q = append(o.q, e)
	o.mu.Unlock()
	o.cond.Signal()
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cond.Broadcast()
}

// send is a sender goroutine.
func (s *Server) send() {
	o := &s.out
	var batch []event
	for {
		o.mu.Lock()
		for len(o.q) == o.head && !o.closed {
			o.cond.Wait()
		}
		if o.closed {
			o.mu.Unlock()
			return
		}
		// Take a few at a time: another sender may take the rest.
		n := min(len(o.q)-o.head, 16)
		batch = append(batch[:0], o.q[o.head:o.head+n]...)
		clear(o.q[o.head : o.head+n])
		if o.head += n; o.head == len(o.q) {
			o.q, o.head = o.q[:0], 0
		}
		o.mu.Unlock()
		for i := range batch {
			e := &batch[i]
			switch e.kind {
			case evWake:
				e.w.deliver()
			case evExpired:
				e.w.expire()
			case evPipeClosed:
				e.w.pipeClosed(e.ps)
			case evReply:
				s.reply(e.r, e.m)
				s.release(e.r.ctx)
			}
			*e = event{}
		}
	}
}
