package memodb

import (
	"encoding/binary"
	"sync"
	"time"

	"go.nanomsg.org/mangos/v3"
	"go.uber.org/zap"

	codec "switchyard/codec/memodb"
	"switchyard/sched"
)

// worker is one MemoDB worker: what READY made, known by its 4-byte id
// until it disconnects or goes silent. Each of its requests may come on
// any context of any connection; at most one is parked at a time.
type worker struct {
	srv *Server
	sw  *sched.Worker
	key uint32
	id  [codec.IDLen]byte

	// The connection its last message came on, under srv.mu: when it
	// closes, the worker is gone (see pipeEvent).
	pipe mangos.Pipe
	ps   *pipeState

	mu    sync.Mutex // guards the fields below, and orders the calls on sw
	state wstate
	r     req       // wParked: the request waiting for a job
	job   uint64    // wRunning: the job sent to it
	due   time.Time // when sw's deadline passes; zero: none
	// closing: its connection closed while it ran a job, and its RESULT
	// has until due (pipeLinger) to come out of the socket's queue.
	closing bool
}

// pipeLinger is how long a worker whose connection closed while it ran a
// job is kept for its RESULT. mangos reports the close on its own
// goroutine, while what the connection sent before it may still wait in
// the socket's queue for a receiver: a RESULT sent just before the close
// came after the worker had been forgotten (its job went back to the
// queue, the result was answered DISCONNECT and lost), once in five runs
// under -race.
const pipeLinger = 500 * time.Millisecond

type wstate uint8

const (
	wBusy      wstate = iota // a receiver is handling its request
	wParked                  // its request waits for a job (r)
	wHeartbeat               // a HEARTBEAT went out; its answer is due
	wRunning                 // a JOB went out; its RESULT is due
	wGone                    // disconnected, timed out or stopped: unknown from now on
)

// ready registers a worker for services and serves its first request.
func (s *Server) ready(r req, services []string, rc *receiver) bool {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return false
	}
	if len(s.workers) >= s.cfg.MaxWorkers {
		s.mu.Unlock()
		s.log.Warn("memodb: too many workers; a READY is not answered", zap.Int("workers", s.cfg.MaxWorkers))
		return false
	}
	key := s.nextID
	for s.workers[key] != nil {
		key++
	}
	s.nextID = key + 1
	w := &worker{srv: s, key: key}
	// memodb-broker's id is its uint32 in the host's byte order: little
	// endian on the machines it ran on.
	binary.LittleEndian.PutUint32(w.id[:], key)
	w.sw = s.sched.NewWorker(w)
	s.workers[key] = w
	closed := s.bindLocked(w, r.pipe)
	s.mu.Unlock()
	for _, name := range services {
		w.sw.CanDo([]byte(name), 0)
	}
	s.log.Debug("memodb: worker ready", zap.Binary("id", w.id[:]), zap.Strings("services", services))
	if closed {
		// Its connection is gone: no reply can reach it.
		w.gone("its connection closed before its READY was handled")
		return false
	}
	w.mu.Lock()
	return w.serve(r, rc)
}

// fromWorker handles a RESULT or a HEARTBEAT.
func (s *Server) fromWorker(r req, msg *codec.Message, rc *receiver) bool {
	s.mu.Lock()
	w := s.workers[binary.LittleEndian.Uint32(msg.ID)]
	closed := w != nil && s.bindLocked(w, r.pipe)
	s.mu.Unlock()
	if w == nil {
		s.log.Debug("memodb: a request from an unknown worker; DISCONNECT", zap.Binary("id", msg.ID), zap.Stringer("type", msg.Type))
		s.disconnect(r, msg.ID)
		return false
	}
	return w.request(r, msg, rc, closed)
}

// request handles the worker's RESULT or HEARTBEAT. closed: the
// connection it came on has closed; the RESULT still counts, and then the
// worker is gone.
func (w *worker) request(r req, msg *codec.Message, rc *receiver, closed bool) bool {
	w.mu.Lock()
	switch w.state {
	case wGone:
		w.mu.Unlock()
		w.srv.disconnect(r, w.id[:])
		return false
	case wRunning:
		if msg.Type == codec.Heartbeat {
			// It should be running its job: out of step, as
			// memodb-broker calls it. It starts over; the job goes back.
			w.mu.Unlock()
			w.srv.log.Info("memodb: a HEARTBEAT from a worker that was sent a JOB; DISCONNECT", zap.Binary("id", w.id[:]))
			w.forget()
			w.srv.disconnect(r, w.id[:])
			return false
		}
		job := w.job
		w.state, w.job, w.closing = wBusy, 0, false
		w.expectWithin(w.srv.cfg.Heartbeat)
		// The reply to its client is made here and sent once this request
		// is done (rc), with no lock held.
		if err := w.sw.Update(job, &sched.Update{Kind: sched.Complete, Data: msg.Payload, Origin: rc}); err != nil {
			w.srv.log.Debug("memodb: a RESULT for a job the worker no longer holds (timed out and ended, or removed)",
				zap.Binary("id", w.id[:]), zap.Error(err))
		}
	case wParked:
		if !msg.Disconnecting && !closed {
			// The request it is waiting on, again: an NNG REQ socket resends
			// a request that got no reply, after its resend time or at once
			// on a new connection. The new one waits in its place.
			old := w.r
			w.r = r
			w.expectWithin(w.srv.cfg.Heartbeat)
			w.mu.Unlock()
			w.srv.release(old.ctx)
			return true
		}
	case wHeartbeat:
		// Its answer to the HEARTBEAT (or, after a lost connection, the
		// request it had sent before, again): it asks for work.
		w.state = wBusy
	}
	if msg.Type == codec.Result && msg.Disconnecting {
		w.mu.Unlock()
		w.srv.log.Debug("memodb: worker disconnecting", zap.Binary("id", w.id[:]))
		w.forget()
		w.srv.disconnect(r, w.id[:])
		return false
	}
	if closed {
		// No reply can reach it, and no job should go its way.
		w.mu.Unlock()
		w.gone("its connection closed before its request was handled")
		return false
	}
	return w.serve(r, rc)
}

// serve answers the worker's request r with a job, or parks it. Called
// with w.mu held; it unlocks.
func (w *worker) serve(r req, rc *receiver) (parked bool) {
	if w.state == wGone { // timed out or stopped meanwhile
		w.mu.Unlock()
		w.srv.disconnect(r, w.id[:])
		return false
	}
	for {
		if m := w.grab(); m != nil {
			w.mu.Unlock()
			w.srv.reply(r, m)
			return false
		}
		w.state, w.r = wParked, r
		w.expectWithin(w.srv.cfg.Heartbeat)
		if w.srv.draining.Load() || !w.sw.Sleep() {
			w.mu.Unlock()
			return true
		}
		// Work came in while it was looking: look again.
	}
}

// grab takes the worker's next job, if any and if jobs are handed out,
// and returns the JOB that sends it; the worker is then running it.
// Caller holds w.mu.
func (w *worker) grab() *mangos.Message {
	if w.srv.draining.Load() {
		return nil
	}
	var a sched.Attempt
	j := w.sw.GrabAttempt(&a)
	if j == nil {
		return nil
	}
	w.state, w.job, w.r = wRunning, j.ID(), req{}
	// The job's timeout runs in sched (it requeues the job); the worker
	// is gone if it is silent a heartbeat longer, and until then its
	// late RESULT still counts if no other attempt has finished the job.
	// With no timeout it may take as long as it needs: the protocol has
	// no sign of life while a job runs.
	if a.Timeout > 0 {
		w.expectWithin(a.Timeout + w.srv.cfg.Heartbeat)
	} else {
		w.expectWithin(0)
	}
	ms := uint64((a.Timeout + time.Millisecond - 1) / time.Millisecond)
	payload := j.Payload()
	m := newMessage(32 + len(j.Func()) + len(payload))
	m.Body = codec.AppendJob(m.Body, w.id[:], j.Func(), ms)
	m.Body = append(m.Body, payload...)
	return m
}

// expectWithin moves the worker's deadline. Caller holds w.mu.
func (w *worker) expectWithin(d time.Duration) {
	if d > 0 {
		w.due = time.Now().Add(d)
	} else {
		w.due = time.Time{}
	}
	w.sw.ExpectWithin(d)
}

// Wake implements sched.Waker: work may be waiting for the parked worker.
// On a receiver (origin), it is done once that receiver's request is;
// elsewhere (an event loop, the timer) a sender does it.
func (w *worker) Wake(origin any) {
	if rc, ok := origin.(*receiver); ok && rc.srv == w.srv {
		rc.later = append(rc.later, event{kind: evWake, w: w})
		return
	}
	w.srv.out.put(event{kind: evWake, w: w})
}

// Expired implements sched.Expirer: the worker's deadline passed (and
// sched has put back the job it held). A sender handles it.
func (w *worker) Expired() { w.srv.out.put(event{kind: evExpired, w: w}) }

// deliver sends the parked worker a job, if one is there for it.
func (w *worker) deliver() {
	w.mu.Lock()
	for w.state == wParked {
		r := w.r
		if m := w.grab(); m != nil {
			w.mu.Unlock()
			w.srv.reply(r, m)
			w.srv.release(r.ctx)
			return
		}
		if w.srv.draining.Load() || !w.sw.Sleep() {
			break
		}
	}
	w.mu.Unlock()
}

// expire is what the worker's deadline passing means: an idle worker is
// sent a HEARTBEAT (or a job that has just come in); one that did not
// answer its HEARTBEAT, or ran out its job's time and a heartbeat's, is
// gone.
func (w *worker) expire() {
	w.mu.Lock()
	if w.state == wGone || w.due.IsZero() || time.Now().Before(w.due) {
		w.mu.Unlock() // moved since it fired
		return
	}
	if w.state == wParked {
		r := w.r
		m := w.grab()
		if m == nil {
			w.state, w.r = wHeartbeat, req{}
			w.expectWithin(w.srv.cfg.Heartbeat)
			m = newMessage(16)
			m.Body = codec.AppendHeartbeat(m.Body, w.id[:])
		}
		w.mu.Unlock()
		w.srv.reply(r, m)
		w.srv.release(r.ctx)
		return
	}
	state, closing := w.state, w.closing
	w.mu.Unlock()
	if closing { // the linger after its connection closed is over
		w.gone("its connection closed")
		return
	}
	w.srv.log.Info("memodb: a worker went silent; forgotten", zap.Binary("id", w.id[:]),
		zap.Bool("running a job", state == wRunning))
	w.forget()
}

// pipeClosed is the closing of connection ps, which w's last message
// came on: w is gone, unless a message of it has come on another
// connection since.
func (w *worker) pipeClosed(ps *pipeState) {
	s := w.srv
	s.mu.Lock()
	still := w.ps == ps
	s.mu.Unlock()
	if !still {
		return
	}
	w.mu.Lock()
	if w.state == wRunning {
		// Its RESULT may be on its way: see pipeLinger. Its job goes back
		// to the queue when the linger passes (expire), unless the RESULT
		// came (request, which forgets it then: its connection is closed).
		w.closing = true
		w.expectWithin(pipeLinger)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.gone("its connection closed")
}

// gone forgets the worker, whose connection closed, and logs why.
func (w *worker) gone(why string) {
	w.mu.Lock()
	state := w.state
	w.mu.Unlock()
	if state == wGone {
		return
	}
	w.srv.log.Info("memodb: worker forgotten: "+why, zap.Binary("id", w.id[:]), zap.Bool("running a job", state == wRunning))
	w.forget()
}

// forget makes the worker unknown: its next request gets DISCONNECT, a
// parked request goes unanswered, and a job it holds goes back to the
// queue.
func (w *worker) forget() {
	w.mu.Lock()
	if w.state == wGone {
		w.mu.Unlock()
		return
	}
	r := w.r
	w.state, w.r = wGone, req{}
	w.mu.Unlock()
	s := w.srv
	s.mu.Lock()
	if s.workers[w.key] == w {
		delete(s.workers, w.key)
	}
	s.unbindLocked(w)
	s.mu.Unlock()
	w.sw.Close()
	if r.ctx != nil {
		s.release(r.ctx)
	}
	s.noted("forgotten")
}
