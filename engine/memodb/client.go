package memodb

import (
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	codec "switchyard/codec/memodb"
	"switchyard/engine/source"
	"switchyard/sched"
)

// pending is a client's JOB request, parked until its job ends. It is the
// job's sched.Listener: a Complete is answered RESULT with the result; a
// Fail (no worker took the job within the queue timeout, or it ran out of
// retries) or an Exception leaves the request unanswered, as memodb-broker
// does, and the client's REQ socket sends it again after its resend time.
type pending struct {
	srv    *Server
	r      req
	client *sched.Client
	done   atomic.Bool // answered, dropped or abandoned: once
}

// maxTimeout caps a JOB's timeout (a uint64 of milliseconds): a century.
const maxTimeout = 100 * 365 * 24 * time.Hour

// millis is a JOB's timeout as a duration.
func millis(ms uint64) time.Duration {
	if ms > uint64(maxTimeout/time.Millisecond) {
		return maxTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// submit makes the job of a client's JOB request and parks the request.
func (s *Server) submit(r req, msg *codec.Message, rc *receiver) (parked bool) {
	p := &pending{srv: s, r: r}
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return false
	}
	s.pending[p] = struct{}{}
	s.mu.Unlock()
	p.client = s.sched.NewClient(p)
	p.client.SetSource(source.MemoDB)
	_, err := p.client.Submit(&sched.SubmitReq{
		Func:         []byte(msg.Service),
		Priority:     sched.Normal, // as a plain Gearman SUBMIT_JOB
		Payload:      msg.Payload,
		Timeout:      millis(msg.Timeout),
		QueueTimeout: s.cfg.QueueTimeout,
		Origin:       rc,
	})
	if err != nil {
		// A maxqueue, say. MemoDB has no error reply: the client asks again.
		s.log.Warn("memodb: a JOB could not be queued; not answered", zap.String("service", msg.Service), zap.Error(err))
		p.take()
		return false
	}
	// From here on the request is the job's: Notify answers it, maybe
	// already on another goroutine.
	return true
}

// take claims the request's answer, once, and stops tracking it.
func (p *pending) take() bool {
	if !p.done.CompareAndSwap(false, true) {
		return false
	}
	p.srv.mu.Lock()
	delete(p.srv.pending, p)
	p.srv.mu.Unlock()
	return true
}

// resultHeader is the header of every RESULT to a client: ["memo01", 3, h”].
var resultHeader = codec.AppendResult(nil, nil)

// Notify implements sched.Listener.
func (p *pending) Notify(_ uint64, u *sched.Update) {
	switch u.Kind {
	case sched.Complete:
		if !p.take() {
			return
		}
		m := newMessage(len(resultHeader) + len(u.Data))
		m.Body = append(append(m.Body, resultHeader...), u.Data...)
		e := event{kind: evReply, r: p.r, m: m}
		if rc, ok := u.Origin.(*receiver); ok && rc.srv == p.srv {
			rc.later = append(rc.later, e) // sent once that receiver's request is done
			return
		}
		p.srv.out.put(e)
	case sched.Fail, sched.Exception:
		if !p.take() {
			return
		}
		p.srv.log.Debug("memodb: a client's job failed or found no worker in time; its request is not answered")
		p.srv.release(p.r.ctx)
		p.srv.noted("dropped")
	}
}

// abandon withdraws the request at Stop: its job, if still queued, is
// dropped; its context is closed with the socket.
func (p *pending) abandon() {
	if p.take() {
		p.client.Close()
	}
}
