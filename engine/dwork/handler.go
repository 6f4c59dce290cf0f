package dwork

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"

	codec "switchyard/codec/dwork"
	"switchyard/engine/source"
	"switchyard/sched"
)

// handler answers requests: one message in, its reply out. It is the
// server's one goroutine's; nothing in it blocks (Steal never waits) and
// nothing in it knows sockets: a reply is bytes, and an envelope is
// opaque frames handed back with the reply.
type handler struct {
	s        *sched.Sched
	client   *sched.Client // submits every task, background
	fn       string        // the dwork function
	fnb      []byte
	host     string // origin of stolen tasks
	log      *zap.Logger
	locs     *locations
	now      func() time.Time // the locations' clock; time.Now outside tests
	draining *atomic.Bool     // Steal hands out nothing
	// send delivers a reply that could not be made at once (a Create whose
	// tasks a durable store is writing), from the store's goroutine.
	send func(env [][]byte, reply []byte)

	// Reused from request to request.
	req    codec.QueryMsg
	rep    codec.QueryMsg
	repLoc string
	sub    sched.SubmitReq
	after  []sched.Key
	upd    sched.Update
	stolen []*stolenTask
	held   []uint64
	out    []byte
	mine   func(*sched.Worker) bool // ours, made once
}

// The reply types, shared by every reply (never written).
var (
	typeTransfer = codec.QueryMsg_Transfer
	typeNotFound = codec.QueryMsg_NotFound
	typeOK       = codec.QueryMsg_OK
	typeError    = codec.QueryMsg_Error
	stateStolen  = codec.TaskMsg_Stolen
)

// stolenTask is one task of a Steal's reply, with everything it points
// to, kept for the next reply.
type stolenTask struct {
	msg  codec.TaskMsg
	log  codec.TaskMsg_LogMsg
	logs [1]*codec.TaskMsg_LogMsg
	name string
	time int64
}

func newHandler(s *sched.Sched, fn, host string, locs *locations, draining *atomic.Bool, log *zap.Logger) *handler {
	client := s.NewClient(nil)
	client.SetSource(source.Dwork)
	h := &handler{
		s:        s,
		client:   client,
		fn:       fn,
		fnb:      []byte(fn),
		host:     host,
		log:      log,
		locs:     locs,
		now:      time.Now,
		draining: draining,
		send:     func([][]byte, []byte) {},
		upd:      sched.Update{Kind: sched.Complete},
	}
	h.mine = h.ours
	return h
}

// handle answers one message, body, which came in envelope env. It returns
// the reply, valid until the next call, or nil when the reply will go
// through h.send (with env) later.
func (h *handler) handle(body []byte, env [][]byte) []byte {
	h.reset(typeError)
	if err := codec.Decode(body, &h.req); err != nil {
		h.log.Warn("dwork: a message that does not decode; answered Error", zap.Error(err))
		return h.encode()
	}
	if err := codec.ValidateRequest(&h.req); err != nil {
		h.log.Warn("dwork: an ill-formed request; answered Error", zap.Error(err))
		return h.encode()
	}
	switch h.req.GetType() {
	case codec.QueryMsg_Create:
		return h.create(env)
	case codec.QueryMsg_Steal:
		h.steal()
	case codec.QueryMsg_Transfer:
		h.complete()
	case codec.QueryMsg_Lookup:
		h.lookup()
	case codec.QueryMsg_Exit:
		h.exit()
	}
	return h.encode()
}

// refuse is the reply to a message that is not one request (a ZeroMQ
// envelope without a body, or with several frames of it).
func (h *handler) refuse() []byte {
	h.reset(typeError)
	return h.encode()
}

// reset starts the reply over, with type t and nothing else.
func (h *handler) reset(t codec.QueryMsg_Type) {
	clear(h.rep.Task) // the request's tasks, echoed by a NotFound
	h.rep.Task = h.rep.Task[:0]
	h.rep.Type, h.rep.Name, h.rep.N, h.rep.Location = ptrType(t), nil, nil, nil
}

func ptrType(t codec.QueryMsg_Type) *codec.QueryMsg_Type {
	switch t {
	case codec.QueryMsg_Transfer:
		return &typeTransfer
	case codec.QueryMsg_NotFound:
		return &typeNotFound
	case codec.QueryMsg_OK:
		return &typeOK
	}
	return &typeError
}

func (h *handler) encode() []byte {
	h.out = codec.Append(h.out[:0], &h.rep)
	return h.out
}

// bytesOf is s as bytes, without a copy, for sched's calls that take
// []byte and copy what they keep.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// pendingCreate is a Create whose tasks a durable store is writing: its
// reply goes out when the last is on disk (sched's SubmitReq.Stored).
type pendingCreate struct {
	h      *handler
	env    [][]byte
	left   atomic.Int32 // writes not answered yet, plus one held while submitting
	failed atomic.Bool
}

func (p *pendingCreate) stored(_ uint64, err error) {
	if err != nil {
		p.h.log.Warn("dwork: a created task could not be stored; answered Error", zap.Error(err))
		p.failed.Store(true)
	}
	p.done()
}

// done counts one write (or the submitting) as over; the last sends the
// reply, from the store's goroutine, in a buffer of its own.
func (p *pendingCreate) done() {
	if p.left.Add(-1) != 0 {
		return
	}
	rep := codec.QueryMsg{Type: &typeOK}
	if p.failed.Load() {
		rep.Type = &typeError
	}
	p.h.send(p.env, codec.Append(nil, &rep))
}

// create submits each task: a background job of the dwork function whose
// unique and payload are its name, remembered once it ends, waiting for
// its predecessors. A name that is a live job adds the predecessors (sched
// does, unless it is running); one that has ended is done already.
func (h *handler) create(env [][]byte) []byte {
	for _, t := range h.req.Task {
		if t.GetName() == "" {
			h.log.Warn("dwork: Create of a task without a name; answered Error")
			return h.encode()
		}
	}
	p := &pendingCreate{h: h, env: append([][]byte(nil), env...)}
	p.left.Store(1)
	h.sub = sched.SubmitReq{Func: h.fnb, Background: true, Remember: true, Stored: p.stored}
	for _, t := range h.req.Task {
		name := bytesOf(t.GetName())
		h.after = h.after[:0]
		for _, d := range t.Pred {
			h.after = append(h.after, sched.Key{Func: h.fn, Unique: d.GetName()})
		}
		h.sub.Unique, h.sub.Payload, h.sub.After = name, name, h.after
		_, err := h.client.Submit(&h.sub)
		if h.sub.Waiting {
			p.left.Add(1)
		}
		if err != nil && !errors.Is(err, sched.ErrEnded) {
			h.log.Warn("dwork: Create of a task refused; answered Error", zap.String("task", t.GetName()), zap.Error(err))
			p.failed.Store(true)
			break
		}
	}
	clear(h.after)
	h.sub = sched.SubmitReq{}
	if p.left.Add(-1) != 0 {
		return nil // p.done answers
	}
	if !p.failed.Load() {
		h.reset(codec.QueryMsg_OK)
	}
	return h.encode()
}

// steal hands the location up to n ready tasks, each with its name, the
// server as its origin and a log entry {Stolen, now in µs}.
func (h *handler) steal() {
	h.reset(codec.QueryMsg_NotFound)
	n := codec.StealCount(&h.req)
	if n == 0 || h.draining.Load() {
		// Nothing handed out, but a host that is known is heard from:
		// a Steal of none is how one shows it is alive.
		h.locs.get(h.req.GetLocation(), h.now(), false)
		return
	}
	l := h.locs.get(h.req.GetLocation(), h.now(), true)
	if l == nil {
		h.log.Warn("dwork: too many locations, each holding tasks; a Steal got none",
			zap.String("location", h.req.GetLocation()), zap.Int("max", h.locs.max))
		return
	}
	at := time.Now().UnixMicro()
	for len(h.rep.Task) < n {
		j := l.w.Grab()
		if j == nil {
			break
		}
		name := j.Unique()
		if name == "" {
			// Submitted to the function without a unique (over Gearman):
			// no name to run it by, complete it or look it up.
			h.log.Warn("dwork: a job of the dwork function has no unique, so no task name; failed",
				zap.String("func", h.fn), zap.Uint64("id", j.ID()))
			l.w.Update(j.ID(), &sched.Update{Kind: sched.Fail, Reason: "dwork: a job of the dwork function has no unique, so no task name"})
			continue
		}
		st := h.stolenTask(len(h.rep.Task))
		st.name, st.time = name, at
		h.rep.Task = append(h.rep.Task, &st.msg)
	}
	if len(h.rep.Task) > 0 {
		l.active = true
		h.rep.Type = &typeTransfer
	}
}

// stolenTask returns the i-th reusable task of a Steal's reply.
func (h *handler) stolenTask(i int) *stolenTask {
	if i == len(h.stolen) {
		st := &stolenTask{}
		st.log.State, st.log.Time = &stateStolen, &st.time
		st.logs[0] = &st.log
		st.msg.Name, st.msg.Origin, st.msg.Log = &st.name, &h.host, st.logs[:]
		h.stolen = append(h.stolen, st)
	}
	return h.stolen[i]
}

// complete ends each named task that a location holds, whichever location
// reports it (the real hub frees a task's successors whoever completes
// it), and lists back the names no location holds.
func (h *handler) complete() {
	now := h.now()
	for _, t := range h.req.Task {
		if !h.completeOne(t.GetName()) {
			h.rep.Task = append(h.rep.Task, t)
		}
	}
	if l := h.locs.get(h.req.GetLocation(), now, false); l != nil {
		l.active = true
	}
	if len(h.rep.Task) > 0 {
		h.rep.Type = &typeNotFound
		return
	}
	h.rep.Type = &typeOK
}

func (h *handler) completeOne(name string) bool {
	return h.s.UpdateNamed(h.fnb, bytesOf(name), &h.upd, h.mine) == nil
}

// ours tells whether a job's worker is a dwork location's: a task that a
// worker of another protocol runs is that worker's to report.
func (h *handler) ours(w *sched.Worker) bool { return h.locs.holder(w.Name()) != nil }

// lookup says where a task runs, or ran if it ended within sched's
// retention of ended jobs.
func (h *handler) lookup() {
	h.reset(codec.QueryMsg_NotFound)
	name := h.req.GetName()
	if v, ok := h.s.Find(h.fnb, bytesOf(name)); ok {
		if !v.Running {
			return
		}
		h.repLoc = v.Worker
	} else if e, ok := h.s.EndedJob(h.fnb, bytesOf(name)); ok {
		h.repLoc = e.Worker
	} else {
		return
	}
	h.rep.Type, h.rep.Name, h.rep.Location = &typeOK, h.req.Name, &h.repLoc
}

// exit gives back what the location holds, first in line, and forgets it.
func (h *handler) exit() {
	h.reset(codec.QueryMsg_NotFound)
	l := h.locs.get(h.req.GetLocation(), h.now(), false)
	if l == nil {
		return
	}
	h.held = requeueHeld(l.w, h.held)
	h.locs.forget(l)
	if l.active {
		h.rep.Type = &typeOK
	}
}
