package periodic

import codec "switchyard/codec/periodic"

// A SUBMIT_JOB is answered SUCCESS only once a durable store has the job,
// without the loop waiting for the disk: the scheduler answers later
// (sched.SubmitReq.Stored), from the store's goroutine, and engine/held
// keeps the connection's replies in order behind the SUCCESSes that wait.

// stored is the scheduler's answer for a held SUCCESS; it runs on the
// store's goroutine and hands the answer to the loop.
func (cn *conn) stored(_ uint64, err error) {
	if cn.Open() {
		cn.acks = append(cn.acks, err)
		cn.Send()
	}
}

// releaseAcks applies the store's answers on the loop, one at a time: a
// SUCCESS whose job did not make it to disk becomes the error's text, as
// other refused submits are answered.
func (cn *conn) releaseAcks(acks []error) {
	for i := range acks {
		cn.failID = cn.ackIDs[0]
		cn.Out = cn.Held.Release(cn.Out, acks[i:i+1], cn.onFail)
		cn.ackIDs[0] = nil
		cn.ackIDs = cn.ackIDs[1:]
	}
	if len(cn.ackIDs) == 0 {
		cn.ackIDs = nil
	}
}

// storeError is what a SUCCESS that waits becomes when its job's record
// did not make it to disk.
func (cn *conn) storeError(dst []byte, err error) []byte {
	return codec.AppendData(dst, cn.failID, []byte(err.Error()))
}
