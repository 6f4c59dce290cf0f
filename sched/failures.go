package sched

import (
	"strconv"
	"strings"
	"time"
)

// Each function keeps its latest Config.Failures failures, newest over
// oldest in a ring made at its first: when, which job, from which source,
// how, and why in up to MaxFailureText bytes, in buffers the ring reuses,
// so that a failure costs no allocation once its function's ring is full.
// Memory is bounded by what is live: Config.Failures slots of about
// MaxFailureText + 100 bytes for each function that has failed, gone with
// the function (--function-ttl).

// FailKind is how a job failed.
type FailKind uint8

const (
	// FailReported: its worker reported a failure (Update Fail).
	FailReported FailKind = iota
	// FailException: its worker reported an exception.
	FailException
	// FailRetries: it used up its retries (Config.JobRetries): its
	// workers went away or overran their run timeouts.
	FailRetries
	// FailQueueTimeout: it waited in its queue past its
	// SubmitReq.QueueTimeout.
	FailQueueTimeout
)

// String is the kind as the operator endpoints name it.
func (k FailKind) String() string {
	switch k {
	case FailReported:
		return "fail"
	case FailException:
		return "exception"
	case FailRetries:
		return "retries"
	case FailQueueTimeout:
		return "queue_timeout"
	}
	return "unknown"
}

// MaxFailureText bounds the text a failure keeps; past it, it is cut.
const MaxFailureText = 512

// Failure is one failure of a job, as Failures lists them.
type Failure struct {
	Func   string
	At     time.Time // by the scheduler's wall clock
	ID     uint64
	Unique string
	Source Source // the source of the job's submitter (Client.SetSource)
	Kind   FailKind
	// Worker is the name (Worker.SetName) of the worker that reported
	// it, or that ran the job last; "" if none or unnamed.
	Worker string
	// Retried says the job went back to its queue (a job submitted with
	// RetryForever) instead of ending.
	Retried bool
	// Text says why: what the worker reported (Update.Reason, then an
	// exception's data), or, for FailRetries and FailQueueTimeout, the
	// scheduler's words.
	Text string
}

// failRing is a function's latest failures. Guarded by its shard lock.
type failRing struct {
	slots []failSlot // grows to Config.Failures, then is reused
	next  int        // the slot the next failure takes once it is full
}

type failSlot struct {
	at      time.Time
	id      uint64
	unique  string
	worker  string
	text    []byte
	src     Source
	kind    FailKind
	retried bool
}

// failed keeps a failure of j, of kind, reported by w (nil: none), with
// what the worker said (reason, then data); retried: j went back to its
// queue. Caller holds j's shard lock.
func (s *Sched) failed(j *Job, kind FailKind, w *Worker, reason string, data []byte, retried bool) {
	if s.failKeep == 0 {
		return
	}
	f := j.fn
	r := f.fails
	if r == nil {
		r = &failRing{}
		f.fails = r
	}
	var sl *failSlot
	if len(r.slots) < s.failKeep {
		r.slots = append(r.slots, failSlot{})
		sl = &r.slots[len(r.slots)-1]
	} else {
		sl = &r.slots[r.next]
		r.next = (r.next + 1) % len(r.slots)
	}
	if w == nil {
		w = j.worker
	}
	text := sl.text[:0]
	*sl = failSlot{at: s.clock.Wall(), id: j.id, unique: strings.Clone(j.Unique()), src: j.src, kind: kind, retried: retried}
	if w != nil {
		sl.worker = w.Name()
	}
	switch kind {
	case FailRetries:
		text = append(text, "lost "...)
		text = strconv.AppendUint(text, uint64(j.retries), 10)
		text = append(text, " attempts: its workers went away or overran their run timeouts"...)
	case FailQueueTimeout:
		text = append(text, "waited in its queue past its queue timeout"...)
		if j.ext != nil && j.ext.queueWait > 0 {
			text = append(text, " ("...)
			text = strconv.AppendFloat(text, j.ext.queueWait.Seconds(), 'g', -1, 64)
			text = append(text, " s)"...)
		}
	default:
		text = append(text, reason...)
		if len(data) > 0 {
			if reason != "" {
				text = append(text, ": "...)
			}
			text = append(text, data[:min(len(data), max(MaxFailureText-len(text), 0))]...)
		}
	}
	sl.text = text[:min(len(text), MaxFailureText)]
}

// appendFailures appends f's failures to dst, newest first. Caller holds
// f's shard lock.
func appendFailures(dst []Failure, f *function) []Failure {
	r := f.fails
	if r == nil {
		return dst
	}
	n := len(r.slots)
	for i := range n {
		// The newest is the one before next (next is 0 until full).
		sl := &r.slots[(r.next-1-i+2*n)%n]
		dst = append(dst, Failure{Func: f.name, At: sl.at, ID: sl.id, Unique: sl.unique, Source: sl.src,
			Kind: sl.kind, Worker: sl.worker, Retried: sl.retried, Text: string(sl.text)})
	}
	return dst
}

// Failures appends the failures function name keeps to dst, newest first.
func (s *Sched) Failures(name []byte, dst []Failure) []Failure {
	sh := s.shardFor(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if f := sh.funcs[string(name)]; f != nil {
		dst = appendFailures(dst, f)
	}
	return dst
}

// FailuresChunked hands fn the failures every function keeps, a chunk
// at a time (each function's newest first), as FuncsChunked does: copied
// under a short hold of a shard's lock, fn running with no lock held,
// the slice reused once fn returns.
func (s *Sched) FailuresChunked(fn func([]Failure)) {
	if s.failKeep == 0 {
		return
	}
	// Handed on before a function's failures could overflow a chunk.
	eachChunk(s, chunk, chunk-s.failKeep, func(buf []Failure, f *function, _ int64) []Failure {
		if f.fails == nil {
			return buf
		}
		return appendFailures(buf, f)
	}, fn)
}
