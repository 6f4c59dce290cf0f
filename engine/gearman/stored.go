package gearman

import codec "switchyard/codec/gearman"

// A background submit is acknowledged (JOB_CREATED) only once a durable
// store has its record, and the loop does not wait for the disk meanwhile:
// the scheduler answers later (sched.SubmitReq.Stored), from the store's
// goroutine. A connection's replies keep their order all the same: from
// the first JOB_CREATED that waits, every reply the connection gets waits
// behind it, in held, and each answer releases what comes before the end
// of its JOB_CREATED. The store answers in the order of the submits, so the
// first answer is always for the first hold.

// hold is a waiting JOB_CREATED: its bytes in the held stream, which is
// cn.held followed by cn.out[cn.heldOut:].
type hold struct{ start, end int }

// holding reports whether replies must wait for the store.
func (cn *conn) holding() bool { return len(cn.holds) > 0 }

// appendJobCreated appends JOB_CREATED for id, held when the store has yet
// to answer (waiting).
func (cn *conn) appendJobCreated(id uint64, waiting bool) {
	if waiting && !cn.holding() {
		cn.heldOut = len(cn.out) // what came before goes now
	}
	start := len(cn.out)
	var p int
	cn.out, p = codec.Begin(cn.out, codec.Res, codec.JobCreated)
	cn.out = cn.srv.handles.append(cn.out, id)
	cn.out = codec.End(cn.out, p)
	if waiting {
		base := len(cn.held) - cn.heldOut
		cn.holds = append(cn.holds, hold{start: base + start, end: base + len(cn.out)})
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

// release applies the store's answers that came in: each lets the replies
// up to its JOB_CREATED go, or turns that JOB_CREATED into QUEUE_ERROR
// when the record did not make it to disk (the job is gone then). Runs on
// the loop, before the event adds replies of its own.
func (cn *conn) release(acks []error) {
	if len(acks) == 0 {
		return
	}
	cn.held = append(cn.held, cn.out[cn.heldOut:]...)
	cn.out = cn.out[:cn.heldOut]
	for _, err := range acks {
		h := cn.holds[0]
		cn.holds = cn.holds[1:]
		if err != nil {
			cn.out = append(cn.out, cn.held[:h.start]...)
			cn.out = codec.AppendError(cn.out, errQueue, err.Error())
		} else {
			cn.out = append(cn.out, cn.held[:h.end]...)
		}
		cn.cutHeld(h.end)
	}
	// What came after the last answered JOB_CREATED goes too, up to the
	// next one still waiting.
	if cn.holding() {
		next := cn.holds[0].start
		cn.out = append(cn.out, cn.held[:next]...)
		cn.cutHeld(next)
	} else {
		cn.out = append(cn.out, cn.held...)
		cn.held = cn.held[:0]
	}
	cn.heldOut = len(cn.out)
}

// cutHeld drops the first n bytes of the held stream (all in cn.held).
func (cn *conn) cutHeld(n int) {
	k := copy(cn.held, cn.held[n:])
	cn.held = cn.held[:k]
	for i := range cn.holds {
		cn.holds[i].start -= n
		cn.holds[i].end -= n
	}
}

// holdBack moves the replies that must wait out of cn.out, so that flush
// writes only what may go. Runs on the loop at the end of an event.
func (cn *conn) holdBack() {
	if !cn.holding() {
		return
	}
	cn.held = append(cn.held, cn.out[cn.heldOut:]...)
	cn.out = cn.out[:cn.heldOut]
	cn.heldOut = 0
}
