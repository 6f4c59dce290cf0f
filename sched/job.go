package sched

import (
	"time"
	"unsafe"
)

// Priority orders a function's three queues; High is served first.
type Priority uint8

const (
	High Priority = iota
	Normal
	Low
	numPriorities
)

type jobState uint8

const (
	stateQueued  jobState = iota // in its function's priority list
	stateDelayed                 // in the shard's wheel until due
	stateRunning                 // held by a worker
	stateBlocked                 // waiting for its predecessors to end (SubmitReq.After)
	stateDone                    // removed from the shard
)

// Job is one unit of work. Its id, function, unique, payload and reducer
// do not change while a worker holds the job (a replace changes a waiting
// job only), so a frontend may read them without a lock once Grab has
// handed it the *Job. With a release set for its submitter (SetRelease) the payload is valid only until
// the job ends.
//
// A Job is 128 bytes, so that one with a 64-byte payload fills a 192-byte
// object (see newJob): with a million jobs queued every byte of it is a
// megabyte, and on a virtual machine each new page the queue touches costs
// a fault far dearer than the submit itself. What most jobs never need
// (a reducer, a timer, the attributes a submit or a requeue may set) is in
// ext.
type Job struct {
	id     uint64
	fn     *function
	unique string
	// The payload, in three words less one: data and its length and
	// capacity (only a payload the frontend gave away, see Config.Release,
	// uses the capacity). One of 4 GiB or more is ext.bigPayload, with
	// plen bigPayload.
	pdata      *byte
	plen, pcap uint32
	prio       Priority
	attrs      jobAttrs // set at submit, changed only by a replace (of a waiting job)
	owned      bool     // payload is the frontend's buffer, see SetRelease
	background bool     // runs with no listener (a background submit made or joined it)
	forever    bool     // SubmitReq.RetryForever
	remember   bool     // SubmitReq.Remember, until its note is made
	src        Source   // the submitting client's, see Client.SetSource
	state      jobState // mutable, as are the fields after it: shard lock

	// Mutable state, guarded by the job's shard lock.
	started    int64 // when the latest attempt began, 1 + ns after the scheduler's epoch; 0 = never or not recorded (see GrabAttempt)
	stamp      int64 // with Config.Latency: when it entered its queue, or, running, when its attempt began (see latency); else 0
	retries    uint32
	num, den   uint32 // last WORK_STATUS
	nlisteners uint32
	worker     *Worker
	// prev and next link the job into the one list it is in: its
	// function's priority queue while it waits there (guarded by the shard
	// lock), its worker's held list while it runs (guarded by worker.mu as
	// well; hold and release move it, holding both).
	prev, next *Job
	listeners  *attach // doubly linked list of attached clients
	ext        *jobExt // made on first use: most jobs need none of it
}

// jobAttrs are a job's bits that change only while no worker holds it, so
// that a frontend may read them without a lock (see Job).
type jobAttrs uint8

const (
	attrByPayload jobAttrs = 1 << iota // the payload is the coalescing key (SubmitReq.CoalesceOnPayload)
	attrReducer                        // ext.reducer is set: a map/reduce job
)

// bigPayload is plen for a payload too long for it, kept in ext.bigPayload.
const bigPayload = ^uint32(0)

// jobExt is what only some jobs need: a timer (a due time, a run timeout)
// and the attributes a submit or a requeue may set. Keeping it out of Job
// keeps the common job one small allocation.
type jobExt struct {
	timer
	when      int64         // unix seconds the job was asked to run at; 0 = at once
	timeout   time.Duration // each attempt's run timeout; 0 = the ability's
	counter   int64         // SubmitReq.Counter plus every RequeueReq.Step
	prevStart int64         // started of the attempt before the latest, see Attempt
	queueWait time.Duration // SubmitReq.QueueTimeout

	// Set before the job is published, or by a replace of a waiting job,
	// and flagged in Job.attrs and Job.plen, so that a frontend reads them
	// without a lock.
	reducer    string // the reducer function of a map/reduce job
	bigPayload []byte // a payload of 4 GiB or more

	// Dependencies, see deps.go.
	blocked int32    // predecessors not ended yet (+1 while edges are made)
	succ    []uint64 // the jobs waiting for this one
	after   []Key    // every predecessor it was submitted with, for its record
}

// A job and a small payload share one allocation, so a typical queued job
// costs one malloc instead of two: with a million jobs queued, allocation
// was a fifth of the server's time in background submits. The sizes fill
// Go's 160- to 256-byte size classes, 32 bytes apart; 64 bytes, the payload
// of the benchmarks, fills the 192-byte one.
type (
	jobWithPayload160 struct {
		Job
		data [160 - jobSize]byte
	}
	jobWithPayload192 struct {
		Job
		data [192 - jobSize]byte
	}
	jobWithPayload224 struct {
		Job
		data [224 - jobSize]byte
	}
	jobWithPayload256 struct {
		Job
		data [256 - jobSize]byte
	}
)

const jobSize = unsafe.Sizeof(Job{})

// newJob returns a job holding r's payload: r's own buffer when the caller
// gave it away, else a copy.
func newJob(r *SubmitReq) *Job {
	n := len(r.Payload)
	var j *Job
	var data []byte
	switch {
	case r.OwnPayload:
		j = &Job{owned: true}
		j.setPayload(r.Payload) // its capacity is Release's to reuse
		return j
	case n == 0:
		return &Job{}
	case n <= len(jobWithPayload160{}.data):
		jp := &jobWithPayload160{}
		j, data = &jp.Job, jp.data[:n:n]
	case n <= len(jobWithPayload192{}.data):
		jp := &jobWithPayload192{}
		j, data = &jp.Job, jp.data[:n:n]
	case n <= len(jobWithPayload224{}.data):
		jp := &jobWithPayload224{}
		j, data = &jp.Job, jp.data[:n:n]
	case n <= len(jobWithPayload256{}.data):
		jp := &jobWithPayload256{}
		j, data = &jp.Job, jp.data[:n:n]
	default:
		j = &Job{}
		j.setPayload(append([]byte(nil), r.Payload...))
		return j
	}
	copy(data, r.Payload)
	j.setPayload(data)
	return j
}

// payload is the job's payload. A frontend may call it without a lock
// (see Job); the scheduler calls it under the job's shard lock.
func (j *Job) payload() []byte {
	switch {
	case j.plen == bigPayload:
		return j.ext.bigPayload
	case j.pdata == nil:
		return nil
	}
	return unsafe.Slice(j.pdata, j.pcap)[:j.plen]
}

// setPayload makes p the job's payload. Caller holds the job's shard lock
// (or is its only owner, before Submit publishes it), and the job is
// waiting: no worker holds it.
func (j *Job) setPayload(p []byte) {
	if j.ext != nil {
		j.ext.bigPayload = nil
	}
	if uint64(cap(p)) >= uint64(bigPayload) {
		j.pdata, j.pcap, j.plen = nil, 0, bigPayload
		j.more().bigPayload = p
		return
	}
	j.pdata, j.plen, j.pcap = unsafe.SliceData(p), uint32(len(p)), uint32(cap(p))
}

// more returns the job's jobExt, making it on first use. Caller holds the
// job's shard lock (or is its only owner, before Submit publishes it).
func (j *Job) more() *jobExt {
	if j.ext == nil {
		j.ext = &jobExt{timer: timer{job: j}}
	}
	return j.ext
}

// clock returns the job's timer, set to kind. Caller holds the job's shard
// lock.
func (j *Job) clock(kind timerKind) *timer {
	t := &j.more().timer
	t.kind = kind
	return t
}

// stopClock disarms the job's timer, if it has one.
func (j *Job) stopClock(w *wheel) {
	if j.ext != nil {
		w.cancel(&j.ext.timer)
	}
}

// late lists the workers whose run timeout the job overran (see
// reportedBy); nil for most jobs.
func (j *Job) late() []*Worker {
	if j.ext == nil {
		return nil
	}
	return j.ext.late
}

// key is the coalescing key: the unique, or the payload for "-".
func (j *Job) key() string {
	if j.attrs&attrByPayload != 0 {
		return bytesString(j.payload())
	}
	return j.unique
}

// ID is the job's id; its low bits name the shard.
func (j *Job) ID() uint64 { return j.id }

// Func is the function name.
func (j *Job) Func() string { return j.fn.name }

// Unique is the client-given unique id ("" when none).
func (j *Job) Unique() string { return j.unique }

// Payload is the workload; callers must not modify it.
func (j *Job) Payload() []byte { return j.payload() }

// Reducer is the reducer function of a map/reduce job ("" when none).
func (j *Job) Reducer() string {
	if j.attrs&attrReducer == 0 {
		return ""
	}
	return j.ext.reducer
}

// setReducer makes r the job's reducer. Caller holds the job's shard lock
// (or is its only owner, before Submit publishes it), and no worker holds
// the job.
func (j *Job) setReducer(r string) {
	if r == "" {
		j.attrs &^= attrReducer
		if j.ext != nil {
			j.ext.reducer = ""
		}
		return
	}
	j.more().reducer = r
	j.attrs |= attrReducer
}

// Priority is the queue the job waits in.
func (j *Job) Priority() Priority { return j.prio }

// When is the unix time the job was asked to run at (0: immediately). A
// requeue with a delay changes it: read it under Grab's Attempt.
func (j *Job) when() int64 {
	if j.ext == nil {
		return 0
	}
	return j.ext.when
}

// jobList is an intrusive FIFO of jobs.
type jobList struct {
	head, tail *Job
	n          int
}

func (l *jobList) pushBack(j *Job) {
	j.next = nil
	j.prev = l.tail
	if l.tail != nil {
		l.tail.next = j
	} else {
		l.head = j
	}
	l.tail = j
	l.n++
}

func (l *jobList) pushFront(j *Job) {
	j.prev = nil
	j.next = l.head
	if l.head != nil {
		l.head.prev = j
	} else {
		l.tail = j
	}
	l.head = j
	l.n++
}

func (l *jobList) remove(j *Job) {
	if j.prev != nil {
		j.prev.next = j.next
	} else {
		l.head = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	} else {
		l.tail = j.prev
	}
	j.prev, j.next = nil, nil
	l.n--
}

func (l *jobList) popFront() *Job {
	j := l.head
	if j != nil {
		l.remove(j)
	}
	return j
}
