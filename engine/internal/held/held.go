// Package held keeps a connection's replies in order behind
// acknowledgements that wait for the disk.
//
// A frontend acknowledges a durable submit only once the store has the
// job, and the store answers later, on its own goroutine, while the event
// loop goes on. The connection's replies must still reach it in the order
// of its requests: from the first acknowledgement that waits, every reply
// waits behind it, and each answer from the store lets go what comes
// before the next acknowledgement still waiting. The store answers in the
// order of the submits, so the first answer is always for the first hold.
//
// A Queue works on the connection's own reply buffer (out): the replies of
// an event are appended to out as usual, Mark records an acknowledgement
// just appended, HoldBack takes what must wait out of out before it is
// written, and Release applies the store's answers. Only the connection's
// event loop uses a Queue.
package held

// Queue is one connection's replies that wait.
type Queue struct {
	buf   []byte // the held stream: buf, then out[from:]
	holds []span // acknowledgements that wait, in order, within the stream
	from  int    // out[from:] is held too, while Holding
}

type span struct{ start, end int }

// Holding reports whether replies must wait.
func (q *Queue) Holding() bool { return len(q.holds) > 0 }

// Len is the bytes held back (in the queue, not in out).
func (q *Queue) Len() int { return len(q.buf) }

// Mark records that out[start:end], just appended, is an acknowledgement
// that waits for the store; it and everything after it are held.
func (q *Queue) Mark(out []byte, start, end int) {
	if !q.Holding() {
		q.from = start // what came before goes now
	}
	base := len(q.buf) - q.from
	q.holds = append(q.holds, span{base + start, base + end})
}

// HoldBack returns out without what must wait, which the queue keeps.
// Call it before writing out.
func (q *Queue) HoldBack(out []byte) []byte {
	if !q.Holding() {
		return out
	}
	q.buf = append(q.buf, out[q.from:]...)
	out = out[:q.from]
	q.from = 0 // the caller empties out once written: all of it is held next
	return out
}

// Release applies the store's answers, in order: each lets its
// acknowledgement go (or, for an error, whatever failed appends in its
// place), with everything up to the next acknowledgement still waiting.
// It returns out with what may go appended.
func (q *Queue) Release(out []byte, answers []error, failed func(dst []byte, err error) []byte) []byte {
	if len(answers) == 0 {
		return out
	}
	q.buf = append(q.buf, out[q.from:]...)
	out = out[:q.from]
	sent := 0 // q.buf[:sent] is in out
	for i, err := range answers {
		h := q.holds[i]
		if err != nil {
			out = append(out, q.buf[sent:h.start]...)
			out = failed(out, err)
		} else {
			out = append(out, q.buf[sent:h.end]...)
		}
		sent = h.end
	}
	q.holds = q.holds[:copy(q.holds, q.holds[len(answers):])]
	if q.Holding() {
		next := q.holds[0].start
		out = append(out, q.buf[sent:next]...)
		sent = next
	} else {
		out = append(out, q.buf[sent:]...)
		sent = len(q.buf)
	}
	q.cut(sent)
	q.from = len(out)
	return out
}

// cut drops the first n bytes of the held stream, all in buf: once per
// Release, however many answers it applies.
func (q *Queue) cut(n int) {
	k := copy(q.buf, q.buf[n:])
	q.buf = q.buf[:k]
	for i := range q.holds {
		q.holds[i].start -= n
		q.holds[i].end -= n
	}
}
