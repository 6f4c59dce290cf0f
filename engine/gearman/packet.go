package gearman

import (
	"strconv"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/engine/internal/gnetloop"
	"switchyard/engine/source"
	"switchyard/sched"
)

// gearmand's error replies, code and text.
const (
	errInvalidMagic   = "INVALID_MAGIC"
	errInvalidCommand = "INVALID_COMMAND"
	errUnknownOption  = "UNKNOWN_OPTION"
	errJobNotFound    = "JOB_NOT_FOUND"
	errTooLarge       = "ARGUMENT_TOO_LARGE"
	errQueue          = "QUEUE_ERROR"

	textInvalidMagic   = "Request magic expected"
	textInvalidCommand = "Command not expected"
	textUnknownOption  = "Server does not recognize given option"
	textUniqueTooLarge = "Unique value too large"
	textQueueFull      = "Job queue is full"
)

// gearmand words JOB_NOT_FOUND differently for each work packet.
var jobNotFoundText = [...]string{
	sched.Data:      "Job does not exist on server",
	sched.Warning:   "Job does not exist on server",
	sched.Status:    "Job given in work result not found",
	sched.Complete:  "Job given in work result not found",
	sched.Fail:      "Job given in work result not found",
	sched.Exception: "An exception was received for a job that does not exist",
}

// packet acts on one binary packet, appending any reply to cn.Out.
func (cn *conn) packet(p *codec.Packet) {
	if p.Magic != codec.Req {
		cn.Out = codec.AppendError(cn.Out, errInvalidMagic, textInvalidMagic)
		return
	}
	switch p.Type {
	case codec.SubmitJob:
		cn.submit(p, sched.Normal, false)
	case codec.SubmitJobBg:
		cn.submit(p, sched.Normal, true)
	case codec.SubmitJobHigh:
		cn.submit(p, sched.High, false)
	case codec.SubmitJobHighBg:
		cn.submit(p, sched.High, true)
	case codec.SubmitJobLow:
		cn.submit(p, sched.Low, false)
	case codec.SubmitJobLowBg:
		cn.submit(p, sched.Low, true)
	case codec.SubmitJobEpoch, codec.SubmitReduceJob, codec.SubmitReduceJobBackground:
		cn.submit(p, sched.Normal, p.Type != codec.SubmitReduceJob)

	case codec.GetStatus:
		cn.getStatus(p.Arg(0))
	case codec.GetStatusUnique:
		cn.getStatusUnique(p.Arg(0))
	case codec.EchoReq:
		cn.Out = codec.AppendPacket(cn.Out, codec.Res, codec.EchoRes, p.Arg(0))
	case codec.OptionReq:
		if string(p.Arg(0)) != "exceptions" {
			cn.Out = codec.AppendError(cn.Out, errUnknownOption, textUnknownOption)
			return
		}
		cn.exceptions.Store(true)
		cn.Out = codec.AppendPacket(cn.Out, codec.Res, codec.OptionRes, p.Arg(0))
	case codec.SetClientID:
		id := append([]byte(nil), p.Arg(0)...)
		cn.Lock()
		cn.clientID = id
		cn.Unlock()

	case codec.CanDo:
		cn.asWorker().CanDo(p.Arg(0), 0)
	case codec.CanDoTimeout:
		cn.asWorker().CanDo(p.Arg(0), canDoTimeout(p.Arg(1)))
	case codec.CantDo:
		cn.asWorker().CantDo(p.Arg(0))
	case codec.ResetAbilities:
		cn.asWorker().Reset()
	case codec.PreSleep:
		w := cn.asWorker()
		// While draining, sleep for good: a NOOP would only bring a
		// GRAB_JOB that gets NO_JOB, and then PRE_SLEEP again.
		if !cn.srv.loop.Draining() && w.Sleep() {
			cn.Out = appendNoop(cn.Out)
		} else {
			// gearmand drops a sleeping worker's job timeout, so a job it
			// still holds runs to the end without being offered to
			// another worker (libgearman sends PRE_SLEEP on a stale NO_JOB
			// while it runs one).
			w.ClearTimeouts()
		}
	case codec.GrabJob, codec.GrabJobUniq, codec.GrabJobAll:
		cn.grab(p.Type)
	case codec.WorkData:
		cn.update(p, sched.Data)
	case codec.WorkWarning:
		cn.update(p, sched.Warning)
	case codec.WorkStatus:
		cn.update(p, sched.Status)
	case codec.WorkComplete:
		cn.update(p, sched.Complete)
	case codec.WorkFail:
		cn.update(p, sched.Fail)
	case codec.WorkException:
		cn.update(p, sched.Exception)

	default:
		// Responses, SUBMIT_JOB_SCHED, ALL_YOURS and unknown types.
		cn.Out = codec.AppendError(cn.Out, errInvalidCommand, textInvalidCommand)
	}
}

// asWorker makes the connection a worker at its first worker packet; the
// worker is set under Lock for other goroutines' listings (workerRef).
func (cn *conn) asWorker() *sched.Worker {
	if cn.worker == nil {
		gnetloop.Guarded(cn.Conn, &cn.worker, cn.srv.sched.NewWorker(cn))
	}
	return cn.worker
}

// canDoTimeout reads CAN_DO_TIMEOUT's value: milliseconds, at least a second.
func canDoTimeout(b []byte) time.Duration {
	ms := parseInt(b)
	if ms == 0 {
		return 0
	}
	if ms < 1000 {
		ms = 1000
	}
	return time.Duration(ms) * time.Millisecond
}

func (cn *conn) submit(p *codec.Packet, prio sched.Priority, bg bool) {
	req := sched.SubmitReq{Func: p.Arg(0), Unique: p.Arg(1), Priority: prio, Background: bg, Origin: cn.Loop()}
	switch p.Type {
	case codec.SubmitJobEpoch:
		req.When = parseInt(p.Arg(2))
		req.Payload = p.Arg(3)
	case codec.SubmitReduceJob, codec.SubmitReduceJobBackground:
		req.Reducer = p.Arg(2)
		req.Payload = p.Arg(4)
	default:
		req.Payload = p.Arg(2)
	}
	if len(req.Unique) > codec.MaxUniqueSize || len(req.Reducer) > codec.MaxUniqueSize {
		cn.Out = codec.AppendError(cn.Out, errTooLarge, textUniqueTooLarge)
		return
	}
	if cn.own != nil {
		// The payload is the packet's last bytes. Given away with the
		// buffer's full capacity, it can hold a packet again once the job
		// is done with it (see bodyPool).
		req.Payload = cn.own[len(cn.own)-len(req.Payload):]
		req.OwnPayload = true
	}
	if string(req.Unique) == "-" {
		req.CoalesceOnPayload = true
	}
	if cn.client == nil {
		cn.client = cn.srv.sched.NewClient(cn)
		cn.client.SetSource(source.Gearman)
		cn.onStore = cn.stored
	}
	if bg {
		req.Stored = cn.onStore // acknowledged once on disk, see stored.go
	}
	id, err := cn.client.Submit(&req)
	if req.Kept {
		cn.own = nil // the job's now, back through releasePayload
	}
	switch err {
	case nil:
	case sched.ErrQueueFull:
		cn.Out = codec.AppendError(cn.Out, errQueue, textQueueFull)
		return
	default:
		cn.Out = codec.AppendError(cn.Out, errQueue, err.Error())
		return
	}
	cn.appendJobCreated(id, req.Waiting)
}

// parseInt reads leading decimal digits as gearmand's atoi does (junk ends
// the number), capped far below overflow.
func parseInt(b []byte) int64 {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' || n > 1<<50 {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

func (cn *conn) getStatus(handle []byte) {
	var st sched.JobStatus
	if id, ok := cn.srv.handles.Parse(handle); ok {
		st = cn.srv.sched.Status(id)
	}
	var start int
	cn.Out, start = codec.Begin(cn.Out, codec.Res, codec.StatusRes)
	cn.Out = append(cn.Out, handle...)
	cn.Out = appendStatus(cn.Out, st)
	cn.Out = codec.End(cn.Out, start)
}

func (cn *conn) getStatusUnique(unique []byte) {
	st := cn.srv.sched.StatusUnique(unique)
	var start int
	cn.Out, start = codec.Begin(cn.Out, codec.Res, codec.StatusResUnique)
	cn.Out = append(cn.Out, unique...)
	cn.Out = appendStatus(cn.Out, st)
	cn.Out = append(cn.Out, 0)
	cn.Out = strconv.AppendUint(cn.Out, uint64(st.Clients), 10)
	cn.Out = codec.End(cn.Out, start)
}

// appendStatus appends "\0known\0running\0num\0den".
func appendStatus(dst []byte, st sched.JobStatus) []byte {
	dst = append(dst, 0, boolDigit(st.Known), 0, boolDigit(st.Running), 0)
	dst = strconv.AppendUint(dst, uint64(st.Num), 10)
	dst = append(dst, 0)
	return strconv.AppendUint(dst, uint64(st.Den), 10)
}

func boolDigit(b bool) byte {
	if b {
		return '1'
	}
	return '0'
}

func (cn *conn) grab(t codec.Type) {
	var j *sched.Job
	if !cn.srv.loop.Draining() { // a drain hands out no new work
		j = cn.asWorker().Grab()
	}
	if j == nil {
		cn.Out = codec.AppendHeader(cn.Out, codec.Res, codec.NoJob, 0)
		return
	}
	reply := codec.JobAssign
	switch t {
	case codec.GrabJobUniq:
		reply = codec.JobAssignUniq
	case codec.GrabJobAll:
		// gearmand sends JOB_ASSIGN_ALL only for map/reduce jobs.
		reply = codec.JobAssignUniq
		if j.Reducer() != "" {
			reply = codec.JobAssignAll
		}
	}
	var start int
	cn.Out, start = codec.Begin(cn.Out, codec.Res, reply)
	cn.Out = cn.srv.handles.Append(cn.Out, j.ID())
	cn.Out = append(cn.Out, 0)
	cn.Out = append(cn.Out, j.Func()...)
	cn.Out = append(cn.Out, 0)
	if reply != codec.JobAssign {
		cn.Out = append(cn.Out, j.Unique()...)
		cn.Out = append(cn.Out, 0)
	}
	if reply == codec.JobAssignAll {
		cn.Out = append(cn.Out, j.Reducer()...)
		cn.Out = append(cn.Out, 0)
	}
	if p := j.Payload(); len(p) > largeTail {
		cn.Out = codec.EndTail(cn.Out, start, len(p))
		cn.WriteTail(p)
		return
	}
	cn.Out = append(cn.Out, j.Payload()...)
	cn.Out = codec.End(cn.Out, start)
}

func (cn *conn) update(p *codec.Packet, kind sched.UpdateKind) {
	u := &cn.upd // a field, so the hot path does not allocate one per packet
	*u = sched.Update{Kind: kind, Origin: cn.Loop()}
	switch kind {
	case sched.Status:
		u.Data, u.Den = p.Arg(1), p.Arg(2)
	case sched.Fail:
		u.Reason = "WORK_FAIL" // kept as the failure's text (sched.Failures)
	case sched.Exception:
		u.Reason, u.Data = "WORK_EXCEPTION", p.Arg(1)
	default:
		u.Data = p.Arg(1)
	}
	var body *sharedBody
	if cn.own != nil && len(u.Data) > largeTail {
		// A large packet in a buffer of its own (see bodyPacket): clients
		// on other loops keep a reference to it (see Notify), and the last
		// one to write it gives the buffer back.
		body = share(cn.own)
		cn.own = nil
		cn.gl.body = body
	}
	id, ok := cn.srv.handles.Parse(p.Arg(0))
	if !ok || cn.worker == nil || cn.worker.Update(id, u) != nil {
		cn.Out = codec.AppendError(cn.Out, errJobNotFound, jobNotFoundText[kind])
	}
	if body != nil {
		cn.gl.body = nil
		body.drop()
	}
	*u = sched.Update{}
}
