package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ControllerWorkers runs many Worker–Controller workers in this process,
// each as the spec describes one: it registers on the controller's main
// socket, listens on <dir>/<worker_id>.sock beside it, and pulses OK every
// Pulse with next_pulse. It takes a task (SET_TASK) when it holds none and
// finishes it at once: it answers OK, sends a FETCH_ME pulse, and answers
// the FETCH that follows with OK and the result.
//
// Each worker has one goroutine, which accepts on its socket and answers
// one ControlMsg per connection; a few pulser goroutines share the OK
// pulses of all of them, spread evenly over the interval. A worker's
// pulses and its answers are serialized (a pulse holds the worker from
// reading its task_id until the controller has answered), as in a
// single-threaded worker, so a pulse never reports a task_id that an
// answer has already made stale. A pulse reports the task the worker
// holds, 0 once it has handed the result over: the spec's "the task the
// worker is running".
type ControllerWorkers struct {
	// Socket is the controller's main socket. Workers' sockets go in its
	// directory, so the path must leave room for "/<id>.sock" within the
	// 107 bytes of a unix socket path.
	Socket  string
	Workers int
	// Pulse is how often each worker pulses OK; NextPulse (seconds) is
	// what each pulse announces, and must leave the pulser some slack.
	Pulse     time.Duration
	NextPulse uint64
	// Result is FETCH's extra bytes; nil hands back the task's own.
	Result []byte
	// Timeout bounds each exchange (dial, write, read), registering them
	// all, and the SHUTDOWNs at Stop; 0 = 10 s.
	Timeout time.Duration
}

// ControllerResult is what the workers did.
type ControllerResult struct {
	Registered int
	Tasks      int64 // SET_TASKs taken (answered OK)
	Results    int64 // FETCHes answered with a result
	Busy       int64 // SET_TASKs answered BUSY (a second task while holding one)
	NoFetch    int64 // FETCHes with nothing to hand over
	Statuses   int64 // GET_STATUSes answered
	FetchMes   int64 // FETCH_ME pulses answered OK
	Pulses     int64 // OK pulses answered OK
	// Measured is the OK pulses answered inside the window given to
	// Measure; PulseLatency their round trips (dial to answer), µs.
	Measured     int64
	PulseLatency *hdrhistogram.Histogram
	Restarted    int64 // RESTARTs received: the worker stopped
	Unknown      int64 // pulses answered UNKNOWN_ID: the controller had dropped the worker
}

// ControllerPool is a running set of ControllerWorkers.
type ControllerPool struct {
	cfg     ControllerWorkers
	workers []*ctlWorker
	pulsers []*ctlPulser
	cancel  context.CancelFunc
	wg      sync.WaitGroup // pulsers and workers' goroutines
	window  atomic.Pointer[Phase]
	closing atomic.Bool

	mu   sync.Mutex
	errs []error
}

// ctlWorker is one worker.
type ctlWorker struct {
	pool *ControllerPool
	id   uint64
	sock string
	ln   *net.UnixListener
	// mu serializes the worker's pulses with its answers, and guards task
	// and payload.
	mu      sync.Mutex
	task    uint64 // the task it holds, 0 for none
	payload []byte // that task's extra bytes, when Result is nil
	pulse   ctlPulseConn
	in      []byte
	extra   []byte
	out     []byte
	// Counts, written by its goroutine and under mu, read once it is done.
	tasks, results, busy, noFetch, statuses, fetchMes int64
	restarted, unknown                                int64
	stopped                                           bool // RESTART, UNKNOWN_ID or an error: not pulsed any more
}

// ctlPulseConn makes pulses: one connection to the main socket each.
type ctlPulseConn struct {
	d   net.Dialer
	out []byte
	in  []byte
}

// ctlPulser pulses OK for a stripe of the workers.
type ctlPulser struct {
	workers  []*ctlWorker
	offsets  []time.Duration // each worker's place in the interval
	conn     ctlPulseConn
	pulses   int64
	measured int64
	unknown  int64
	latency  *hdrhistogram.Histogram
}

// ctlPulsers is how many goroutines share the OK pulses: a pulse is a
// round trip of some tens of µs, so a few keep up with thousands a second
// and one slow answer does not hold up the rest.
const ctlPulsers = 4

// StartControllerWorkers registers the workers, each listening on its
// socket and free (it has pulsed once), and starts their pulses. It
// returns once all are registered, or with an error (and none left
// running) if one could not be in time. ctx bounds the pool's life: when it
// ends, the pulses stop (Stop is still to be called).
func StartControllerWorkers(ctx context.Context, cfg ControllerWorkers) (*ControllerPool, error) {
	if cfg.Workers < 1 || cfg.Pulse <= 0 || cfg.NextPulse == 0 {
		return nil, fmt.Errorf("controller workers: %d workers, pulse %v, next_pulse %d s: want at least one worker and both set",
			cfg.Workers, cfg.Pulse, cfg.NextPulse)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	// 107 bytes, the longest unix socket path, less "/NNNNNNNNNN.sock".
	if dir := filepath.Dir(cfg.Socket); len(dir) > 107-16 {
		return nil, fmt.Errorf("controller workers: directory %q too long for unix socket paths", dir)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &ControllerPool{cfg: cfg, cancel: cancel, workers: make([]*ctlWorker, cfg.Workers)}
	// Registering them all is bounded by one Timeout. It goes on
	// concurrently, but not all at once: a listen backlog or an event loop
	// need not take a thousand connections in one go.
	regCtx, regCancel := context.WithTimeout(ctx, cfg.Timeout)
	defer regCancel()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var registered atomic.Int64
	for i := range p.workers {
		w := &ctlWorker{pool: p}
		p.workers[i] = w
		select {
		case sem <- struct{}{}:
		case <-regCtx.Done():
		}
		if regCtx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := w.register(regCtx); err != nil {
				p.fail(err)
				regCancel() // stop the others registering
				return
			}
			registered.Add(1)
		})
	}
	wg.Wait()
	if n := registered.Load(); n < int64(cfg.Workers) {
		// Stop's error holds the registrations' errors; without one, time
		// ran out or ctx ended.
		err := regCtx.Err()
		if len(p.errs) > 0 {
			err = nil
		}
		_, stopErr := p.Stop()
		return nil, errors.Join(fmt.Errorf("controller workers: %d of %d registered", n, cfg.Workers), err, stopErr)
	}
	for _, w := range p.workers {
		p.wg.Go(w.serve)
	}
	n := min(ctlPulsers, len(p.workers))
	for j := range n {
		ps := &ctlPulser{latency: NewLatencyHistogram()}
		for i := j; i < len(p.workers); i += n {
			ps.workers = append(ps.workers, p.workers[i])
			ps.offsets = append(ps.offsets, cfg.Pulse*time.Duration(i)/time.Duration(len(p.workers)))
		}
		p.pulsers = append(p.pulsers, ps)
	}
	start := time.Now()
	for _, ps := range p.pulsers {
		p.wg.Go(func() { ps.run(ctx, p, start) })
	}
	return p, nil
}

// Measure sets the window whose OK pulses are measured (Phase.Start and
// End; its other fields are not used).
func (p *ControllerPool) Measure(ph *Phase) { p.window.Store(ph) }

func (p *ControllerPool) fail(err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

// Stop ends the pulses, closes the workers' sockets, tells the controller
// each worker is shutting down, and returns what they did. Its error
// lists what went wrong meanwhile, the RESTARTs and UNKNOWN_IDs included.
func (p *ControllerPool) Stop() (ControllerResult, error) {
	p.closing.Store(true)
	p.cancel()
	for _, w := range p.workers {
		if w != nil && w.ln != nil {
			w.ln.Close()
		}
	}
	p.wg.Wait()
	res := ControllerResult{PulseLatency: NewLatencyHistogram()}
	for _, ps := range p.pulsers {
		res.Pulses += ps.pulses
		res.Measured += ps.measured
		res.Unknown += ps.unknown
		res.PulseLatency.Merge(ps.latency)
	}
	// SHUTDOWN, so that a controller that serves on (the tests share one)
	// holds no dead workers; bounded as a whole, not per worker.
	deadline := time.Now().Add(p.cfg.Timeout)
	var shutdownErr error
	for _, w := range p.workers {
		if w == nil || w.id == 0 {
			continue
		}
		res.Registered++
		res.Tasks += w.tasks
		res.Results += w.results
		res.Busy += w.busy
		res.NoFetch += w.noFetch
		res.Statuses += w.statuses
		res.FetchMes += w.fetchMes
		res.Restarted += w.restarted
		res.Unknown += w.unknown
		if w.stopped || shutdownErr != nil || time.Now().After(deadline) {
			continue
		}
		// UNKNOWN_ID is no error here: the controller may have dropped it
		// already, and that was counted when it happened.
		if _, _, err := w.pulse.pulse(p.cfg.Socket, pulseShutdown, w.id, 0, 0, deadline); err != nil {
			shutdownErr = fmt.Errorf("controller worker %d: SHUTDOWN: %w", w.id, err)
		}
	}
	p.mu.Lock()
	errs := firstErrs(p.errs)
	p.mu.Unlock()
	if res.Restarted > 0 {
		errs = append(errs, fmt.Errorf("%d controller workers got RESTART", res.Restarted))
	}
	if res.Unknown > 0 {
		errs = append(errs, fmt.Errorf("%d pulses answered UNKNOWN_ID: the controller dropped live workers", res.Unknown))
	}
	return res, errors.Join(append(errs, shutdownErr)...)
}

// firstErrs keeps an error list readable when many workers fail alike.
func firstErrs(errs []error) []error {
	const keep = 3
	if len(errs) <= keep {
		return errs
	}
	return append(errs[:keep:keep], fmt.Errorf("... and %d more", len(errs)-keep))
}

// register sends REGISTER, listens on the worker's socket and pulses once,
// which makes the worker free.
func (w *ctlWorker) register(ctx context.Context) error {
	cfg := &w.pool.cfg
	deadline, _ := ctx.Deadline()
	if err := ctx.Err(); err != nil {
		return err
	}
	code, id, err := w.pulse.pulse(cfg.Socket, pulseRegister, 0, 0, cfg.NextPulse, deadline)
	switch {
	case err != nil:
		return fmt.Errorf("controller worker: REGISTER: %w", err)
	case code != ctrlErrOK || id == 0:
		return fmt.Errorf("controller worker: REGISTER answered %s, worker_id %d", ctlErrName(code), id)
	}
	w.id = id
	w.sock = filepath.Join(filepath.Dir(cfg.Socket), strconv.FormatUint(id, 10)+".sock")
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", w.sock)
	if err != nil {
		return fmt.Errorf("controller worker %d: %w", id, err)
	}
	w.ln = ln.(*net.UnixListener)
	code, _, err = w.pulse.pulse(cfg.Socket, pulseOK, id, 0, cfg.NextPulse, deadline)
	switch {
	case err != nil:
		return fmt.Errorf("controller worker %d: first pulse: %w", id, err)
	case code != ctrlErrOK:
		return fmt.Errorf("controller worker %d: first pulse answered %s", id, ctlErrName(code))
	}
	return nil
}

// serve answers the controller on the worker's socket until the socket is
// closed or the worker is told to stop.
func (w *ctlWorker) serve() {
	for {
		c, err := w.ln.AcceptUnix()
		if err != nil {
			if !w.pool.closing.Load() {
				w.stop()
				w.pool.fail(fmt.Errorf("controller worker %d: accept: %w", w.id, err))
			}
			return
		}
		more, err := w.answer(c)
		c.Close()
		if err != nil && !w.pool.closing.Load() {
			w.pool.fail(fmt.Errorf("controller worker %d: %w", w.id, err))
		}
		if !more {
			w.stop()
			w.ln.Close()
			return
		}
	}
}

// stop marks the worker as no longer pulsing.
func (w *ctlWorker) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

// answer reads one ControlMsg and its extra bytes and answers it. more is
// false once the worker must stop (RESTART, or a pulse the controller did
// not take).
func (w *ctlWorker) answer(c *net.UnixConn) (more bool, err error) {
	cfg := &w.pool.cfg
	deadline := time.Now().Add(cfg.Timeout)
	if err := c.SetDeadline(deadline); err != nil {
		return true, err
	}
	msg, err := readCtlMsg(c, &w.in)
	if err != nil {
		return true, fmt.Errorf("reading a ControlMsg: %w", err)
	}
	f, err := parseCtlFields(msg)
	if err != nil {
		return true, err
	}
	typ, extraSize, taskID := f.v[1], f.v[2], f.v[3]
	const maxExtra = 64 << 20
	if extraSize > maxExtra {
		return true, fmt.Errorf("ControlMsg with %d extra bytes", extraSize)
	}
	w.extra = growBuf(w.extra, int(extraSize))
	if _, err := io.ReadFull(c, w.extra); err != nil {
		return true, fmt.Errorf("reading %d extra bytes: %w", extraSize, err)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	switch typ {
	case ctlSetTask:
		if w.task != 0 || taskID == 0 {
			w.busy++
			return true, w.reply(c, workerErrBusy, w.task, nil)
		}
		w.task = taskID
		if cfg.Result == nil {
			w.payload = append(w.payload[:0], w.extra...)
		}
		w.tasks++
		if err := w.reply(c, workerErrOK, taskID, nil); err != nil {
			return true, err
		}
		c.Close() // answered; the FETCH comes on a connection of its own
		// Done at once: ask to be fetched.
		code, _, err := w.pulse.pulse(cfg.Socket, pulseFetchMe, w.id, taskID, cfg.NextPulse, time.Now().Add(cfg.Timeout))
		switch {
		case err != nil:
			return true, fmt.Errorf("FETCH_ME: %w", err)
		case code == ctrlErrUnknownID:
			w.unknown++
			return false, nil
		case code != ctrlErrOK:
			return true, fmt.Errorf("FETCH_ME answered %s", ctlErrName(code))
		}
		w.fetchMes++
		return true, nil
	case ctlFetch:
		if w.task == 0 {
			w.noFetch++
			return true, w.reply(c, workerErrNoFetch, 0, nil)
		}
		result := cfg.Result
		if result == nil {
			result = w.payload
		}
		id := w.task
		w.task = 0
		w.results++
		return true, w.reply(c, workerErrOK, id, result)
	case ctlGetStatus:
		w.statuses++
		return true, w.reply(c, workerErrOK, w.task, nil)
	case ctlRestart:
		w.restarted++
		w.task = 0
		return false, w.reply(c, workerErrOK, 0, nil)
	}
	return true, w.reply(c, workerErrFailed, w.task, nil)
}

// reply writes a WorkerResponse and its extra bytes. Caller holds w.mu.
func (w *ctlWorker) reply(c *net.UnixConn, code, taskID uint64, extra []byte) error {
	w.out = appendWorkerResponse(w.out[:0], code, taskID, extra)
	if cap(w.out) > 1<<20 {
		defer func() { w.out = nil }() // a megabyte result leaves no such buffer behind
	}
	_, err := c.Write(w.out)
	return err
}

// run pulses its workers OK, each every Pulse at its offset from start,
// until ctx ends. A pulse that is late goes at once.
func (ps *ctlPulser) run(ctx context.Context, p *ControllerPool, start time.Time) {
	cfg := &p.cfg
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for round := time.Duration(0); ; round++ {
		for i, w := range ps.workers {
			due := start.Add(round*cfg.Pulse + ps.offsets[i])
			if wait := time.Until(due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					return
				}
			} else if ctx.Err() != nil {
				return
			}
			if err := ps.pulseOne(p, w); err != nil && !p.closing.Load() {
				p.fail(err)
			}
		}
	}
}

// pulseOne sends worker w's OK pulse, holding the worker meanwhile.
func (ps *ctlPulser) pulseOne(p *ControllerPool, w *ctlWorker) error {
	cfg := &p.cfg
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil
	}
	begin := time.Now()
	code, _, err := ps.conn.pulse(cfg.Socket, pulseOK, w.id, w.task, cfg.NextPulse, begin.Add(cfg.Timeout))
	if err != nil {
		return fmt.Errorf("controller worker %d: pulse: %w", w.id, err)
	}
	switch code {
	case ctrlErrOK:
	case ctrlErrUnknownID:
		ps.unknown++
		w.stopped = true
		return nil
	default:
		return fmt.Errorf("controller worker %d: pulse answered %s", w.id, ctlErrName(code))
	}
	ps.pulses++
	end := time.Now()
	if ph := p.window.Load(); ph != nil && ph.measured(end) && !begin.Before(ph.Start) {
		ps.measured++
		recordLatency(ps.latency, end.Sub(begin))
	}
	return nil
}

// pulse makes one connection to the main socket: a WorkerPulse out, its
// PulseResponse back. It returns the response's error and worker_id.
func (pc *ctlPulseConn) pulse(socket string, typ, workerID, taskID, nextPulse uint64, deadline time.Time) (code, id uint64, err error) {
	pc.d.Deadline = deadline
	c, err := pc.d.Dial("unix", socket)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	if err := c.SetDeadline(deadline); err != nil {
		return 0, 0, err
	}
	pc.out = appendWorkerPulse(pc.out[:0], typ, workerID, taskID, nextPulse)
	if _, err := c.Write(pc.out); err != nil {
		return 0, 0, err
	}
	msg, err := readCtlMsg(c, &pc.in)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, 0, fmt.Errorf("no PulseResponse: %w", err)
		}
		return 0, 0, err
	}
	f, err := parseCtlFields(msg)
	if err != nil {
		return 0, 0, err
	}
	return f.v[1], f.v[2], nil
}
