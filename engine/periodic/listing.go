package periodic

import (
	"strconv"

	"github.com/panjf2000/gnet/v2"

	codec "switchyard/codec/periodic"
	"switchyard/sched"
)

// Answers that walk every function or job are built off the event loop
// once they are large, so that one STATUS of a million functions or a DUMP
// of a million jobs never stops the loop's other connections: the
// connection pauses (its next commands wait in gnet's buffer), a goroutine
// builds the answer in chunks and hands each to gnet, and the connection
// resumes when it is done.

// inlineFuncs is the most functions a STATUS lists on the loop itself.
const inlineFuncs = 2048

// inlineLoad is the largest LOAD payload handled on the loop itself.
const inlineLoad = 64 << 10

// dumpFrameJobs is how many jobs one DUMP frame holds: the real server's 100.
const dumpFrameJobs = 100

// offLoop runs work off the loop (gnetloop.Conn.OffLoop), from the
// next frame's header on when the connection resumes.
func (cn *conn) offLoop(work func(send func([]byte) bool) (keep bool)) {
	cn.need = 0
	cn.OffLoop(work)
}

// status answers STATUS: one line per function, "func,workers,jobs,processing".
func (cn *conn) status(msgID []byte) {
	if funcs, _ := cn.srv.inline(); cn.srv.sched.NumFuncs() <= funcs {
		cn.Out = cn.appendStatus(cn.Out, msgID)
		return
	}
	id := append([]byte(nil), msgID...)
	cn.offLoop(func(send func([]byte) bool) bool {
		return send(cn.appendStatus(nil, id))
	})
}

func (cn *conn) appendStatus(dst, msgID []byte) []byte {
	dst, start := codec.BeginFrame(dst, codec.ResMagic)
	dst = append(dst, msgID...)
	dst = append(dst, codec.Sep...)
	cn.srv.sched.FuncsChunked(func(fs []sched.FuncStat) {
		for _, f := range fs {
			dst = append(dst, f.Name...)
			dst = append(dst, ',')
			dst = strconv.AppendInt(dst, int64(f.Workers), 10)
			dst = append(dst, ',')
			dst = strconv.AppendInt(dst, int64(f.Total()), 10)
			dst = append(dst, ',')
			dst = strconv.AppendInt(dst, int64(f.Running), 10)
			dst = append(dst, '\n')
		}
	})
	return codec.EndFrame(dst, start)
}

// dump answers DUMP: every job that outlives its client, dumpFrameJobs to
// a frame of {"jobs":[...]}, then "EOF". Always off the loop.
func (cn *conn) dump(msgID []byte) {
	id := append([]byte(nil), msgID...)
	cn.offLoop(func(send func([]byte) bool) bool {
		var buf []byte
		var j codec.Job
		n, start := 0, 0
		ok := true
		endFrame := func() {
			buf = codec.AppendJobListEnd(buf)
			buf = codec.EndFrame(buf, start)
			n = 0
		}
		cn.srv.sched.JobViewsChunked(func(vs []sched.JobView) {
			for i := range vs {
				v := &vs[i]
				if !v.Background || v.Unique == "" || !ok {
					continue // the real server leaves nameless jobs out too: LOAD would skip them
				}
				if n == 0 {
					buf, start = codec.BeginFrame(buf, codec.ResMagic)
					buf = append(buf, id...)
					buf = append(buf, codec.Sep...)
					buf = codec.AppendJobListStart(buf)
				}
				viewJob(v, &j)
				buf = codec.AppendJobListItem(buf, &j)
				if n++; n == dumpFrameJobs {
					endFrame()
				}
			}
			// Hand over what this chunk made: the views' payloads are
			// only valid until we return, and memory stays one chunk's.
			if len(buf) > 0 && n == 0 {
				ok = ok && send(buf)
				buf = nil
			}
		})
		if !ok {
			return false
		}
		if n > 0 {
			endFrame()
		}
		buf = codec.AppendData(buf, id, []byte("EOF"))
		return send(buf)
	})
}

// viewJob fills j with the job JSON of a dump: running jobs are
// "processing", and run_at is when the latest run began.
func viewJob(v *sched.JobView, j *codec.Job) {
	*j = codec.Job{
		ID:         int64(v.ID),
		Name:       stringBytes(v.Unique),
		Func:       stringBytes(v.Func),
		Workload:   v.Payload,
		Timeout:    int64(v.Timeout.Seconds()),
		SchedAt:    v.When,
		RunAt:      unixOrZero(v.Started),
		Counter:    v.Counter,
		Processing: v.Running,
	}
}

// load handles LOAD: every job with a func and a name is submitted as by
// SUBMIT_JOB. There is no reply. Input that does not decode loads nothing
// and closes the connection, as with the real server.
func (cn *conn) load(data []byte) gnet.Action {
	each := func(origin any) func(*codec.Job) error {
		return func(j *codec.Job) error {
			if len(j.Func) == 0 || len(j.Name) == 0 {
				return nil // skipped, as the real server does
			}
			_, err := cn.submitJob(j, origin, unheard)
			return err
		}
	}
	if _, load := cn.srv.inline(); len(data) <= load {
		if err := codec.DecodeJobList(data, each(cn.Loop())); err != nil {
			cn.srv.log.Sugar().Debugf("periodic: LOAD from %s: %v", cn.C.RemoteAddr(), err)
			return gnet.Close
		}
		return gnet.None
	}
	data = append([]byte(nil), data...) // gnet's buffer moves on
	cn.offLoop(func(func([]byte) bool) bool {
		if err := codec.DecodeJobList(data, each(nil)); err != nil {
			cn.srv.log.Sugar().Debugf("periodic: LOAD from %s: %v", cn.C.RemoteAddr(), err)
			return false
		}
		return true
	})
	return gnet.None
}
