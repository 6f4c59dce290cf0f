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
	start := len(cn.out)
	var p int
	cn.out, p = codec.Begin(cn.out, codec.Res, codec.JobCreated)
	cn.out = cn.srv.handles.Append(cn.out, id)
	cn.out = codec.End(cn.out, p)
	if waiting {
		cn.held.Mark(cn.out, start, len(cn.out))
	}
}

// stored is the scheduler's answer for a held JOB_CREATED. It runs on the
// store's goroutine: the answer goes to the loop like a listener update.
func (cn *conn) stored(_ uint64, err error) {
	if !cn.openOutbox() {
		return
	}
	cn.acks = append(cn.acks, err)
	cn.sendOutbox()
}

// queueError replaces a JOB_CREATED whose record did not make it to disk.
func queueError(dst []byte, err error) []byte { return codec.AppendError(dst, errQueue, err.Error()) }
