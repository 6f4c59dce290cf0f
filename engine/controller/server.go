// Package controller serves the Worker–Controller protocol: switchyard is
// the controller. Workers register and pulse on a main unix socket (one
// WorkerPulse and one PulseResponse per connection, on gnet event loops);
// switchyard pushes tasks to each worker over the worker's own socket,
// <dir>/<worker_id>.sock, from one goroutine per worker, one exchange at a
// time, each bounded by a timeout. A worker serves the functions of
// Config.Funcs, on the scheduler every other protocol feeds: a task is a
// job, its task_id the job's id, its extra bytes the payload, and the
// result of a FETCH completes the job for whoever submitted it.
//
// # How it maps onto sched
//
// Its clients are tagged with its own Source (Client.SetSource), so that
// Stats counts its jobs apart. REGISTER -> NewWorker and CanDo; every
// pulse -> Worker.ExpectWithin(next_pulse), whose lapse (Expirer) removes
// the worker; a pulse's task_id is checked against Worker.Holding. The
// controller pushes: a free worker sleeps (Sleep), and Wake means "grab
// and push now". BUSY -> Requeue with Front; TASK_FAILED -> Worker.Retry;
// FETCH's result -> Update(Complete); SHUTDOWN, FAILED or a dead socket ->
// Close.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"go.uber.org/zap"

	codec "switchyard/codec/controller"
	"switchyard/engine/budget"
	"switchyard/engine/internal/gnetloop"
	"switchyard/engine/listen"
	"switchyard/engine/workerline"
	"switchyard/sched"
)

// Config is the controller's configuration.
type Config struct {
	// Socket is the main socket's path; workers' sockets are beside it.
	Socket string
	// Funcs are the functions every controller worker serves.
	Funcs []string
	// Loops is the number of event loops for the main socket; 0 = 1,
	// plenty for pulses, which come at most about once a second a worker.
	Loops int
	// Timeout bounds one exchange with a worker (dial, write, read), and
	// how long a connection to the main socket may take to send its
	// pulse; 0 = 10 s.
	Timeout time.Duration
	// MaxExtra bounds the extra bytes a worker may send (a result); 0 =
	// 64 MiB.
	MaxExtra int
	// MaxWorkers bounds the registered workers; REGISTER beyond it is
	// answered FAILED. 0 = 65536.
	MaxWorkers int
	// RegisterGrace is how long a worker that registered without a
	// next_pulse has to send its first pulse; 0 = 60 s.
	RegisterGrace time.Duration
	// Budget is the memory budget the main socket's connections hold
	// against (see engine/budget); nil = none.
	Budget *budget.Budget
}

// Server is a running controller: its main socket on a gnetloop.Server,
// which takes one pulse a connection.
type Server struct {
	cfg   Config
	sched *sched.Sched
	log   *zap.Logger
	dir   string
	loop  *gnetloop.Server

	stopOnce sync.Once

	mu      sync.Mutex // guards workers, nextID and conns
	workers map[uint64]*worker
	nextID  uint64
	conns   map[*pulseConn]time.Time // main-socket connections, since when

	draining atomic.Bool
	wg       sync.WaitGroup // worker goroutines

	pulses sync.Pool // *codec.WorkerPulse
}

// New prepares a controller; Start binds it.
func New(cfg Config, s *sched.Sched, log *zap.Logger) *Server {
	if cfg.Loops <= 0 {
		cfg.Loops = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxExtra <= 0 {
		cfg.MaxExtra = 64 << 20
	}
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = 65536
	}
	if cfg.RegisterGrace <= 0 {
		cfg.RegisterGrace = time.Minute
	}
	if log == nil {
		log = zap.NewNop()
	}
	srv := &Server{
		cfg:     cfg,
		sched:   s,
		log:     log,
		dir:     filepath.Dir(cfg.Socket),
		workers: make(map[uint64]*worker),
		conns:   make(map[*pulseConn]time.Time),
	}
	srv.loop = gnetloop.New(gnetloop.Config{Name: "controller", Addrs: []string{"unix://" + cfg.Socket}, Loops: cfg.Loops, Budget: cfg.Budget, Log: log}, srv)
	srv.pulses.New = func() any { return new(codec.WorkerPulse) }
	return srv
}

// workerSocket matches the worker sockets a controller's directory holds.
var workerSocket = regexp.MustCompile(`^[0-9]+\.sock$`)

// Start makes the socket's directory, removes the worker sockets a dead
// controller left there (a live main socket is an error), binds the main
// socket and returns once it accepts connections.
func (s *Server) Start() error {
	if s.cfg.Socket == "" {
		return errors.New("controller: no socket path")
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	// The main socket first: a live one means another controller, whose
	// workers' sockets must not be touched.
	if _, err := listen.ClaimUnix([]string{"unix://" + s.cfg.Socket}); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := s.removeStale(); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return s.loop.Start()
}

// removeStale removes the worker sockets in the directory: their workers
// registered with a controller that is gone and must register again. Only
// sockets named as ours are touched.
func (s *Server) removeStale() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 || !workerSocket.MatchString(e.Name()) {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Stop closes the main socket, ends every worker's session (what they
// hold goes back to the queues) and waits for their goroutines, at most
// until ctx ends.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		err = s.loop.Stop(ctx)
		s.mu.Lock()
		ws := make([]*worker, 0, len(s.workers))
		for _, w := range s.workers {
			ws = append(ws, w)
		}
		s.mu.Unlock()
		for _, w := range ws {
			w.end("controller stopping")
		}
		finished := make(chan struct{})
		go func() { s.wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
		}
	})
	return err
}

// Socket is the main socket's path.
func (s *Server) Socket() string { return s.cfg.Socket }

// Drain stops pushing tasks, for a graceful stop: results are still
// fetched.
func (s *Server) Drain(context.Context) error {
	s.draining.Store(true)
	return nil
}

// Workers is the number of registered workers.
func (s *Server) Workers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.workers)
}

// Conns is the number of connections: to the main socket, and to each
// registered worker's socket.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) + len(s.workers)
}

// pulseConn is a connection to the main socket: one pulse in, one
// answer out (gnetloop.Session).
type pulseConn struct {
	*gnetloop.Conn
	srv *Server
}

// Open implements gnetloop.Handler.
func (s *Server) Open(c *gnetloop.Conn) gnetloop.Session {
	pc := &pulseConn{Conn: c, srv: s}
	s.mu.Lock()
	s.conns[pc] = time.Now()
	s.mu.Unlock()
	return pc
}

// Closed implements gnetloop.Session.
func (pc *pulseConn) Closed() {
	pc.srv.mu.Lock()
	delete(pc.srv.conns, pc)
	pc.srv.mu.Unlock()
}

// Tick implements gnetloop.Ticker: it closes main-socket connections that
// sent no pulse in time, so a client that connects and says nothing holds
// no descriptor for ever.
func (s *Server) Tick() time.Duration {
	cutoff := time.Now().Add(-s.cfg.Timeout)
	s.mu.Lock()
	for pc, since := range s.conns {
		if since.Before(cutoff) {
			delete(s.conns, pc)
			s.log.Warn("controller: a connection to the main socket sent no pulse in time; closed",
				zap.Duration("timeout", s.cfg.Timeout))
			pc.C.Close()
		}
	}
	s.mu.Unlock()
	return time.Second
}

// maxPulse bounds a pulse's frame: a WorkerPulse is at most 4 varints.
const maxPulse = 1 << 10

// Traffic implements gnetloop.Session: one pulse in, one answer out, and
// the connection closes, as the protocol has it.
func (pc *pulseConn) Traffic() gnet.Action {
	s, c := pc.srv, pc.C
	// Until the whole frame is there, look at its length prefix alone: a
	// pulse sent a byte at a time is then peeked (and, across gnet's ring
	// seam, copied) and parsed once, not again at every byte.
	have := c.InboundBuffered()
	if have < codec.LenSize {
		return gnet.None
	}
	prefix, _ := c.Peek(codec.LenSize)
	_, _, need, err := codec.ParseFrame(prefix, codec.KindWorkerPulse, maxPulse)
	if err != nil {
		s.log.Warn("controller: bad frame on the main socket; closed", zap.Error(err))
		return gnet.Close
	}
	if have < need {
		return gnet.None // the rest of the frame is on its way
	}
	buf, _ := c.Peek(need)
	f, n, _, _ := codec.ParseFrame(buf, codec.KindWorkerPulse, maxPulse) // n == need
	p := s.pulses.Get().(*codec.WorkerPulse)
	defer s.pulses.Put(p)
	var resp codec.PulseResponse
	if err := codec.Unmarshal(f.Msg, p); err != nil {
		s.log.Warn("controller: a pulse that does not decode", zap.Error(err))
		resp.Error = codec.ControllerError_CTRL_ERR_FAILED
	} else {
		s.pulse(p, &resp)
	}
	var out [32]byte // a PulseResponse is two varints
	c.Write(codec.AppendPulseResponse(out[:0], &resp))
	c.Discard(n)
	return gnet.Close // its answer is flushed first
}

// pulse answers one WorkerPulse.
func (s *Server) pulse(p *codec.WorkerPulse, resp *codec.PulseResponse) {
	if err := codec.ValidateWorkerPulse(p); err != nil {
		resp.Error = codec.ControllerErrorFor(err)
		return
	}
	switch p.Type {
	case codec.PulseType_PULSE_REGISTER:
		id, err := s.register(p.NextPulse)
		if err != nil {
			s.log.Warn("controller: REGISTER refused", zap.Error(err))
			resp.Error = codec.ControllerError_CTRL_ERR_FAILED
			return
		}
		resp.WorkerId = &id
	case codec.PulseType_PULSE_OK, codec.PulseType_PULSE_FETCH_ME, codec.PulseType_PULSE_SHUTDOWN:
		s.mu.Lock()
		w := s.workers[p.WorkerId]
		s.mu.Unlock()
		if w == nil {
			resp.Error = codec.ControllerError_CTRL_ERR_UNKNOWN_ID
			return
		}
		if p.Type == codec.PulseType_PULSE_SHUTDOWN {
			w.end("")
			return
		}
		w.heard(p.TaskId, p.NextPulse, p.Type == codec.PulseType_PULSE_FETCH_ME)
	default:
		resp.Error = codec.ControllerError_CTRL_ERR_UNKNOWN_TYPE
	}
}

// register makes a worker: ids count from 1.
func (s *Server) register(nextPulse uint64) (uint64, error) {
	s.mu.Lock()
	if len(s.workers) >= s.cfg.MaxWorkers {
		s.mu.Unlock()
		return 0, fmt.Errorf("%d workers registered already", len(s.workers))
	}
	if s.draining.Load() {
		s.mu.Unlock()
		return 0, errors.New("the server is stopping")
	}
	s.nextID++
	w := newWorker(s, s.nextID)
	s.workers[w.id] = w
	s.mu.Unlock()
	for _, f := range s.cfg.Funcs {
		w.sw.CanDo([]byte(f), 0)
	}
	grace := s.cfg.RegisterGrace
	if nextPulse > 0 {
		grace = pulseWait(nextPulse)
	}
	w.sw.ExpectWithin(grace)
	s.wg.Add(1)
	go w.run()
	s.log.Debug("controller: worker registered", zap.Uint64("worker", w.id))
	return w.id, nil
}

// forget takes w off the live list: its pulses get UNKNOWN_ID from now on.
func (s *Server) forget(w *worker) {
	s.mu.Lock()
	if s.workers[w.id] == w {
		delete(s.workers, w.id)
	}
	s.mu.Unlock()
}

// ListWorkers lists the registered workers, newest first (workerline):
// FD -1 (a worker has no connection of its own to the server), the peer
// "unix:SOCKET", and worker-ID.
func (s *Server) ListWorkers() []workerline.Worker {
	s.mu.Lock()
	ws := slices.Collect(maps.Values(s.workers))
	s.mu.Unlock()
	slices.SortFunc(ws, func(a, b *worker) int { return cmp.Compare(b.id, a.id) })
	out := make([]workerline.Worker, 0, len(ws))
	for _, w := range ws {
		out = append(out, workerline.Worker{FD: -1, Peer: "unix:" + w.sock, ID: workerline.Numbered(w.id), Funcs: s.cfg.Funcs, Sched: w.sw})
	}
	return out
}
