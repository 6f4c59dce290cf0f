package gearman

import codec "switchyard/codec/gearman"

// A background submit is acknowledged (JOB_CREATED) only once a durable
// store has its record, and the loop does not wait for the disk meanwhile:
// the scheduler answers later (sched.SubmitReq.Stored), from the store's
// goroutine, and engine/held keeps the connection's replies in order
// behind the JOB_CREATEDs that wait.

// appendJobCreated appends JOB_CREATED for id, held when the store has yet
// to answer (waiting).
func (cn *conn) appendJobCreated(id uint64, waiting bool) {
	start := len(cn.Out)
	var p int
	cn.Out, p = codec.Begin(cn.Out, codec.Res, codec.JobCreated)
	cn.Out = cn.srv.handles.Append(cn.Out, id)
	cn.Out = codec.End(cn.Out, p)
	if waiting {
		cn.Held.Mark(cn.Out, start, len(cn.Out))
	}
}

// stored is the scheduler's answer for a held JOB_CREATED. It runs on the
// store's goroutine: the answer goes to the loop like a listener update.
func (cn *conn) stored(_ uint64, err error) {
	if !cn.Open() {
		return
	}
	cn.acks = append(cn.acks, err)
	cn.Send()
}

// queueError replaces a JOB_CREATED whose record did not make it to disk.
func queueError(dst []byte, err error) []byte { return codec.AppendError(dst, errQueue, err.Error()) }
