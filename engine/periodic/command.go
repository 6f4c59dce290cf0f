package periodic

import (
	"errors"
	"strconv"
	"time"
	"unsafe"

	"github.com/panjf2000/gnet/v2"

	codec "switchyard/codec/periodic"
	"switchyard/sched"
)

// errNameless answers a job with no function or no name: the real server
// says SUCCESS and silently drops it when it comes due.
var errNameless = errors.New("job func and name are required")

// clientCommand handles one command on a client connection.
func (cn *conn) clientCommand(m *codec.Message) gnet.Action {
	switch m.Cmd {
	case codec.Ping:
		cn.Out = codec.AppendReply(cn.Out, m.ID, codec.Pong)
	case codec.SubmitJob:
		if err := codec.DecodeJob(m.Data, &cn.job); err != nil {
			cn.Out = codec.AppendData(cn.Out, m.ID, []byte(err.Error()))
			break
		}
		waiting, err := cn.submitJob(&cn.job, cn.Loop(), cn.onStore)
		if err != nil {
			cn.Out = codec.AppendData(cn.Out, m.ID, []byte(err.Error()))
			break
		}
		start := len(cn.Out)
		cn.Out = codec.AppendReply(cn.Out, m.ID, codec.Success)
		if waiting { // SUCCESS once a durable store has the job, see stored.go
			cn.Held.Mark(cn.Out, start, len(cn.Out))
			cn.ackIDs = append(cn.ackIDs, append([]byte(nil), m.ID...))
		}
	case codec.RemoveJob:
		if err := codec.DecodeJob(m.Data, &cn.job); err != nil {
			cn.Out = codec.AppendData(cn.Out, m.ID, []byte(err.Error()))
			break
		}
		if _, err := cn.srv.sched.Remove(cn.job.Func, cn.job.Name); err != nil {
			// The real server's words (its in-memory store's).
			text := "Job " + string(cn.job.Func) + ":" + string(cn.job.Name) + " not exists."
			cn.Out = codec.AppendData(cn.Out, m.ID, []byte(text))
			break
		}
		cn.Out = codec.AppendReply(cn.Out, m.ID, codec.Success)
	case codec.DropFunc:
		cn.srv.sched.Purge(m.Data) // only when no worker has it; SUCCESS regardless
		cn.Out = codec.AppendReply(cn.Out, m.ID, codec.Success)
	case codec.Status:
		cn.status(m.ID)
	case codec.Dump:
		cn.dump(m.ID)
	case codec.Load:
		return cn.load(m.Data)
	default:
		cn.Out = codec.AppendReply(cn.Out, m.ID, codec.Unknown)
	}
	return gnet.None
}

// submitJob queues j as SUBMIT_JOB and LOAD do: (func, name) is unique and
// a resubmit replaces, a failure runs it again, and it outlives its client.
// With a durable store, stored hears when it is on disk (waiting).
func (cn *conn) submitJob(j *codec.Job, origin any, stored func(uint64, error)) (waiting bool, err error) {
	if len(j.Func) == 0 || len(j.Name) == 0 {
		return false, errNameless
	}
	r := sched.SubmitReq{
		Func:         j.Func,
		Unique:       j.Name,
		Payload:      j.Workload,
		Background:   true,
		RetryForever: true,
		Replace:      true,
		When:         j.SchedAt,
		Timeout:      sched.Seconds(j.Timeout),
		Counter:      j.Counter,
		Origin:       origin,
		Stored:       stored,
	}
	_, err = cn.srv.submit.Submit(&r)
	return r.Waiting, err
}

// unheard is the Stored of LOAD's submits: LOAD has no reply, so nothing
// waits for the disk; the jobs are stored all the same.
func unheard(uint64, error) {}

// workerCommand handles one command on a worker connection. Workers get no
// reply to their reports, as from the real server.
func (cn *conn) workerCommand(m *codec.Message) gnet.Action {
	w := cn.worker
	switch m.Cmd {
	case codec.GrabJob:
		if len(cn.grabs) >= cn.srv.cfg.MaxGrabs {
			cn.srv.log.Sugar().Warnf("periodic: closing worker %s: over %d GRAB_JOBs waiting", cn.C.RemoteAddr(), cn.srv.cfg.MaxGrabs)
			return gnet.Close
		}
		cn.grabs = append(cn.grabs, len(cn.ids))
		cn.ids = append(cn.ids, m.ID...)
		cn.serveGrabs()
	case codec.WorkDone:
		handle, rest, _ := codec.NextArg(m.Data)
		if id, ok := parseHandle(handle); ok {
			w.Update(id, &sched.Update{Kind: sched.Complete, Data: rest, Origin: cn.Loop()})
		}
	case codec.WorkFail:
		handle, _, _ := codec.NextArg(m.Data)
		if id, ok := parseHandle(handle); ok {
			w.Update(id, &sched.Update{Kind: sched.Fail, Reason: "FAIL", Origin: cn.Loop()})
		}
	case codec.SchedLater:
		// handle, delay [, step]: split as the real server splits it, so a
		// step holding another separator reads as 0 there and here.
		var args [3][]byte
		n := codec.SplitArgs(m.Data, args[:])
		if n < 2 {
			break // the real server logs "invalid format" and goes on
		}
		if id, ok := parseHandle(args[0]); ok {
			w.Requeue(id, sched.RequeueReq{Delay: sched.Seconds(atoi(args[1])), Step: atoi(args[2])})
		}
	case codec.CanDo:
		if len(m.Data) > 0 {
			w.CanDo(m.Data, 0)
		}
	case codec.CantDo:
		w.CantDo(m.Data)
	case codec.Sleep:
		cn.Out = codec.AppendReply(cn.Out, m.ID, codec.Noop)
	case codec.Ping:
		cn.Out = codec.AppendReply(cn.Out, m.ID, codec.Pong)
	default:
		cn.Out = codec.AppendReply(cn.Out, m.ID, codec.Unknown)
	}
	return gnet.None
}

// serveGrabs answers the waiting GRAB_JOBs, oldest first, while jobs are
// due; then the worker sleeps until the scheduler wakes it.
func (cn *conn) serveGrabs() {
	for len(cn.grabs) > 0 && !cn.srv.loop.Draining() {
		j := cn.worker.GrabAttempt(&cn.grab)
		if j == nil {
			if cn.worker.Sleep() {
				continue // work arrived meanwhile
			}
			return
		}
		end := len(cn.ids)
		if len(cn.grabs) > 1 {
			end = cn.grabs[1]
		}
		cn.Out = cn.appendJobAssign(cn.Out, cn.ids[cn.grabs[0]:end], j)
		cn.grabs = cn.grabs[1:]
		if len(cn.grabs) == 0 {
			cn.grabs, cn.ids = cn.grabs[:0], cn.ids[:0]
		}
	}
}

// appendJobAssign appends JOB_ASSIGN: the handle, then the job's JSON as
// the real server sends it: as the job was before this run began, so
// status "ready" and run_at of the previous run.
func (cn *conn) appendJobAssign(dst, msgID []byte, j *sched.Job) []byte {
	a := &cn.grab
	cn.assigned = codec.Job{
		ID:       int64(j.ID()),
		Name:     stringBytes(j.Unique()),
		Func:     stringBytes(j.Func()),
		Workload: j.Payload(),
		Timeout:  int64(a.Timeout / time.Second),
		SchedAt:  a.When,
		RunAt:    unixOrZero(a.PrevStarted),
		Counter:  a.Counter,
	}
	dst = codec.AppendJobAssign(dst, msgID, &cn.assigned)
	cn.assigned = codec.Job{} // no reference to the job's memory
	return dst
}

// stringBytes views s as bytes, for encoders that only read them.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// parseHandle reads a job handle: the job id in decimal.
func parseHandle(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// atoi reads a decimal integer as Go's strconv.ParseInt would, 0 when it
// would fail (the real server ignores the error).
func atoi(b []byte) int64 {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
