package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	codec "switchyard/codec/controller"
	"switchyard/sched"
)

// worker is one registered worker. Its goroutine (run) makes every
// exchange with it, one at a time; the event loops that take its pulses
// and the scheduler that wakes it only set flags and kick it.
type worker struct {
	srv  *Server
	id   uint64
	sock string
	sw   *sched.Worker
	kick chan struct{}

	mu       sync.Mutex
	booting  bool // registered, not pulsed since: its socket may not listen yet
	refused  bool // answered BUSY or TASK_FAILED: no task until its next pulse
	inFlight bool // an exchange is under way: a pulse's task_id may lag it
	// A pulse during an exchange is checked once it is over, against what
	// the worker held before it and after.
	flightFrom uint64
	latePulse  bool
	lateTask   uint64
	// The first pulse after an exchange may also lag it: the worker sent
	// it on the main socket before it answered on its own, and the two
	// sockets are read apart. It is checked as a late one.
	landed   bool
	lastTask uint64 // the task it finished last, which it may still report
	fetch    bool   // FETCH_ME: it has a message for us
	restart  bool   // its task_id disagreed with ours: send RESTART
	gone     bool   // shut down, lapsed or dropped
	why      string // why it is gone, for the log

	held           []uint64 // scratch for Holding, under mu
	out, in, extra []byte   // the goroutine's buffers, reused
	ctl            codec.ControlMsg
	resp           codec.WorkerResponse
}

func newWorker(s *Server, id uint64) *worker {
	w := &worker{srv: s, id: id, booting: true, kick: make(chan struct{}, 1),
		sock: filepath.Join(s.dir, strconv.FormatUint(id, 10)+".sock")}
	w.sw = s.sched.NewWorker(w)
	return w
}

// Wake implements sched.Waker: work may be waiting.
func (w *worker) Wake(any) { w.nudge() }

// Expired implements sched.Expirer: no pulse came in time. What it held is
// back in its queue already.
func (w *worker) Expired() { w.end("missed its pulse deadline") }

func (w *worker) nudge() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// end takes the worker off the live list and has its goroutine close it.
// why is logged; "" for a worker that said SHUTDOWN.
func (w *worker) end(why string) {
	w.srv.forget(w)
	w.mu.Lock()
	if !w.gone {
		w.gone, w.why = true, why
	}
	w.mu.Unlock()
	w.nudge()
}

// heard is a pulse (OK, or FETCH_ME with fetch): the deadline moves, a
// worker that just registered becomes free, one that refused a task may get
// another, and a task_id that is not what it holds gets it restarted.
func (w *worker) heard(taskID, nextPulse uint64, fetch bool) {
	w.sw.ExpectWithin(pulseWait(nextPulse))
	w.mu.Lock()
	switch {
	case w.gone:
	case w.booting:
		// Its first pulse: no task goes to a worker before it, so it
		// holds none and has finished none, and any task_id but 0
		// disagrees.
		w.check(taskID, false, 0)
	case w.inFlight:
		w.latePulse, w.lateTask = true, taskID
	default:
		w.check(taskID, w.landed, w.flightFrom)
		w.landed = false
	}
	w.booting, w.refused = false, false
	w.fetch = w.fetch || fetch
	w.mu.Unlock()
	w.nudge()
}

// check compares the task a pulse reports with the one the worker holds:
// another gets it a RESTART. A worker keeps reporting the task it finished
// until it gets another (moevm's does): that is no disagreement while it
// holds none. A pulse sent during an exchange (late) may also report what
// it held before the exchange, or the task it finished before that.
// Caller holds w.mu.
func (w *worker) check(taskID uint64, late bool, before uint64) {
	ours := w.heldTask()
	ok := taskID == ours || (ours == 0 && taskID == w.lastTask)
	if late {
		ok = ok || taskID == before || (before == 0 && taskID == w.lastTask)
	}
	if !ok {
		w.restart = true
		w.why = fmt.Sprintf("reported task %d, holds %d", taskID, ours)
	}
}

// heldTask is the task the worker holds, 0 for none. Caller holds w.mu.
func (w *worker) heldTask() uint64 {
	w.held = w.sw.Holding(w.held[:0])
	if len(w.held) == 0 {
		return 0
	}
	return w.held[0]
}

// takeOff marks an exchange under way. Caller holds w.mu.
func (w *worker) takeOff() {
	w.inFlight = true
	w.flightFrom = w.heldTask()
}

// land ends an exchange and checks the pulse that came meanwhile, if any.
func (w *worker) land() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight = false
	w.landed = true
	if w.latePulse {
		w.latePulse = false
		w.check(w.lateTask, true, w.flightFrom)
	}
}

// pulseWait is how long a next_pulse gives: 0 is due now, the next tick.
func pulseWait(nextPulse uint64) time.Duration {
	if nextPulse == 0 {
		return time.Nanosecond
	}
	return sched.Seconds(int64(min(nextPulse, math.MaxInt64)))
}

// run is the worker's goroutine.
func (w *worker) run() {
	defer w.srv.wg.Done()
	for range w.kick {
		for w.step() {
		}
		w.mu.Lock()
		gone, why := w.gone, w.why
		w.mu.Unlock()
		if gone {
			w.sw.Close() // what it holds goes back to its queue
			if why != "" {
				w.srv.log.Warn("controller: worker dropped", zap.Uint64("worker", w.id), zap.String("why", why))
			}
			return
		}
	}
}

// step does the next thing the worker's state calls for and reports
// whether there may be more.
func (w *worker) step() bool {
	w.mu.Lock()
	switch {
	case w.gone:
		w.mu.Unlock()
		return false
	case w.restart:
		w.restart, w.gone = false, true
		w.mu.Unlock()
		w.srv.forget(w)
		// It is dropped whatever it answers.
		w.exchange(codec.ControlType_CTRL_RESTART, 0, nil)
		return false
	case w.fetch:
		w.fetch = false
		w.takeOff()
		w.mu.Unlock()
		w.fetchResult()
		return true
	case w.booting || w.refused || w.srv.draining.Load():
		w.mu.Unlock()
		return false
	}
	w.mu.Unlock()
	if w.sw.Running() > 0 {
		return false // one task at a time
	}
	j := w.sw.Grab()
	if j == nil {
		return w.sw.Sleep() // true: work came meanwhile
	}
	w.push(j.ID(), j.Payload())
	return true
}

// push sends SET_TASK.
func (w *worker) push(id uint64, payload []byte) {
	w.mu.Lock()
	w.inFlight, w.flightFrom = true, 0
	w.mu.Unlock()
	resp, _, err := w.exchange(codec.ControlType_CTRL_SET_TASK, id, payload)
	defer w.land()
	if errors.Is(err, codec.ErrUnexpectedWorkerError) && resp.Error == codec.WorkerError_WORKER_ERR_TASK_FAILED {
		err = nil // the spec gives it to FETCH; it means the same here: could not do it
	}
	switch {
	case errors.Is(err, errNoAnswer):
		w.settle(id, err)
	case err != nil:
		w.end("SET_TASK: " + err.Error())
	case resp.Error == codec.WorkerError_WORKER_ERR_OK:
	case resp.Error == codec.WorkerError_WORKER_ERR_BUSY:
		// Another worker's, first in line, as it was.
		w.sw.Requeue(id, sched.RequeueReq{Front: true})
		w.refuse()
	case resp.Error == codec.WorkerError_WORKER_ERR_TASK_FAILED:
		w.sw.Retry(id)
		w.refuse()
	default:
		w.end("SET_TASK answered " + resp.Error.String())
	}
}

// settle resolves a SET_TASK that went out and was not answered: did the
// worker take the task? GET_STATUS says. If it did, it keeps it; if not,
// the task goes back first in line, for another worker; if it does not
// answer that either, it is gone.
func (w *worker) settle(id uint64, setErr error) {
	st, _, err := w.exchange(codec.ControlType_CTRL_GET_STATUS, 0, nil)
	switch {
	case err != nil:
		w.end(fmt.Sprintf("SET_TASK: %v; GET_STATUS: %v", setErr, err))
	case st.TaskId == id:
	default:
		w.sw.Requeue(id, sched.RequeueReq{Front: true})
		w.refuse()
	}
}

// fetchResult sends FETCH after a FETCH_ME.
func (w *worker) fetchResult() {
	resp, extra, err := w.exchange(codec.ControlType_CTRL_FETCH, 0, nil)
	defer w.land()
	if err != nil {
		w.end("FETCH: " + err.Error())
		return
	}
	switch resp.Error {
	case codec.WorkerError_WORKER_ERR_NO_FETCH:
		return
	case codec.WorkerError_WORKER_ERR_OK, codec.WorkerError_WORKER_ERR_TASK_FAILED:
	default:
		w.end("FETCH answered " + resp.Error.String())
		return
	}
	id := resp.TaskId
	if held := w.sw.Holding(nil); len(held) == 0 || held[0] != id {
		w.mu.Lock()
		w.restart = true
		w.why = fmt.Sprintf("FETCH answered for task %d, which it does not hold", id)
		w.mu.Unlock()
		return
	}
	if resp.Error == codec.WorkerError_WORKER_ERR_TASK_FAILED {
		w.sw.Retry(id) // for another worker: this one may not take it back at once
		w.refuse()
	} else {
		w.sw.Update(id, &sched.Update{Kind: sched.Complete, Data: extra})
	}
	w.mu.Lock()
	w.lastTask = id
	w.mu.Unlock()
}

// refuse keeps tasks from the worker until its next pulse.
func (w *worker) refuse() {
	w.mu.Lock()
	w.refused = true
	w.mu.Unlock()
}

var (
	// errFrame is a worker's answer that is not a WorkerResponse frame.
	errFrame = errors.New("answer is not a WorkerResponse frame")
	// errNoAnswer: the message went out and no answer came back, so the
	// worker may or may not have acted on it.
	errNoAnswer = errors.New("no answer")
)

// maxResponse bounds a WorkerResponse's frame: three varints.
const maxResponse = 1 << 10

// exchange makes one connection to the worker's socket: ControlMsg and
// extra out, WorkerResponse and its extra bytes in, all within
// Config.Timeout. The returned extra bytes are valid until the next
// exchange.
func (w *worker) exchange(typ codec.ControlType, taskID uint64, extra []byte) (*codec.WorkerResponse, []byte, error) {
	// A task or result of megabytes leaves no buffer that size behind.
	for _, b := range []*[]byte{&w.out, &w.extra} {
		if cap(*b) > 1<<20 {
			*b = nil
		}
	}
	timeout := w.srv.cfg.Timeout
	c, err := net.DialTimeout("unix", w.sock, timeout)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))

	w.ctl.Reset()
	w.ctl.Type = typ
	if typ == codec.ControlType_CTRL_SET_TASK {
		w.ctl.TaskId = &taskID
	}
	w.out = codec.AppendControlMsg(w.out[:0], &w.ctl, extra)
	if _, err := c.Write(w.out); err != nil {
		return nil, nil, err
	}

	var size [codec.LenSize]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	n := binary.LittleEndian.Uint64(size[:])
	if n > maxResponse {
		return nil, nil, fmt.Errorf("%w: length %d", errFrame, n)
	}
	w.in = growTo(w.in, int(n))
	if _, err := io.ReadFull(c, w.in); err != nil {
		return nil, nil, err
	}
	w.resp.Reset()
	if err := codec.Unmarshal(w.in, &w.resp); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errFrame, err)
	}
	if err := codec.ValidateWorkerResponse(typ, &w.resp); err != nil {
		return &w.resp, nil, err
	}
	if w.resp.ExtraSize > uint64(w.srv.cfg.MaxExtra) {
		return nil, nil, fmt.Errorf("%d extra bytes, more than %d", w.resp.ExtraSize, w.srv.cfg.MaxExtra)
	}
	w.extra = growTo(w.extra, int(w.resp.ExtraSize))
	if _, err := io.ReadFull(c, w.extra); err != nil {
		return nil, nil, err
	}
	return &w.resp, w.extra, nil
}

func growTo(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
