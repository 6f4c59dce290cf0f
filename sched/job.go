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
// A Job is 88 bytes, and its unique and a small payload follow it in the
// same allocation (see newJob): one with a 36-byte unique (a UUID, as
// libgearman sends with every job) and a 64-byte payload fills a 192-byte
// object. With a million jobs queued every byte of it is a megabyte, and
// on a virtual machine each new page the queue touches costs a fault far
// dearer than the submit itself. What most jobs never need (a reducer, a
// timer, a status, when an attempt began, the attributes a submit or a
// requeue may set) is in ext.
type Job struct {
	// Set at submit and changed only by a replace of a waiting job: a
	// frontend holding the job reads them without a lock.
	id uint64
	fn *function
	// The payload's first byte; plen is its length. One the frontend gave
	// away (flagOwned) is ext.held as well, whose capacity the frontend
	// gets back; one of 4 GiB or more is ext.held, with plen bigPayload.
	pdata *byte
	plen  uint32
	ulen  uint16   // the unique's length: its bytes follow the Job (see Unique), or, uniqueInExt, ext.unique holds it
	prio  Priority // the queue it waits in
	attrs jobAttrs

	// Mutable state, guarded by the job's shard lock.
	worker *Worker
	// prev and next link the job into the one list it is in: its
	// function's priority queue while it waits there (guarded by the shard
	// lock), its worker's held list while it runs (guarded by worker.mu as
	// well; hold and release move it, holding both).
	prev, next *Job
	listeners  *attach // doubly linked list of attached clients; nil: none
	ext        *jobExt // made on first use: most jobs need none of it
	stamp      int64   // with Config.Latency: when it entered its queue, or, running, when its attempt began (see latency); else 0
	retries    uint32  // attempts lost (see Config.JobRetries)
	src        Source  // the submitting client's, see Client.SetSource
	state      jobState
	background bool // runs with no listener (a background submit made or joined it)
	flags      jobFlags
}

// jobAttrs are a job's bits that change only while no worker holds it, so
// that a frontend may read them without a lock (see Job).
type jobAttrs uint8

const (
	attrByPayload jobAttrs = 1 << iota // the payload is the coalescing key (SubmitReq.CoalesceOnPayload)
	attrReducer                        // ext.reducer is set: a map/reduce job
)

// jobFlags are a job's bits that the scheduler alone reads, under the
// job's shard lock.
type jobFlags uint8

const (
	flagOwned    jobFlags = 1 << iota // payload is the frontend's buffer, see SetRelease
	flagForever                       // SubmitReq.RetryForever
	flagRemember                      // SubmitReq.Remember, until its note is made
)

func (j *Job) is(f jobFlags) bool { return j.flags&f != 0 }

func (j *Job) set(f jobFlags, on bool) {
	if on {
		j.flags |= f
	} else {
		j.flags &^= f
	}
}

// bigPayload is plen for a payload too long for it, kept in ext.held.
const bigPayload = ^uint32(0)

// uniqueInExt is ulen for a unique too long to follow the Job, kept in
// ext.unique.
const uniqueInExt = ^uint16(0)

// jobExt is what only some jobs need: a timer (a due time, a run timeout)
// and the attributes a submit or a requeue may set. Keeping it out of Job
// keeps the common job one small allocation.
type jobExt struct {
	timer
	when      int64         // unix seconds the job was asked to run at; 0 = at once
	timeout   time.Duration // each attempt's run timeout; 0 = the ability's
	counter   int64         // SubmitReq.Counter plus every RequeueReq.Step
	started   int64         // when the latest attempt began, 1 + ns after the scheduler's epoch; 0 = never or not recorded (see grab)
	prevStart int64         // started of the attempt before the latest, see Attempt
	queueWait time.Duration // SubmitReq.QueueTimeout
	num, den  uint32        // the latest status its worker reported (Update's Data and Den)

	// Set before the job is published, or by a replace of a waiting job,
	// and flagged in Job.attrs, Job.plen and Job.ulen, so that a frontend
	// reads them without a lock.
	reducer string // the reducer function of a map/reduce job
	unique  string // a unique too long to follow the Job (uniqueInExt)
	held    []byte // the payload, whole, when it is the frontend's (flagOwned, for its release) or of 4 GiB or more

	// Dependencies, see deps.go.
	blocked int32    // predecessors not ended yet (+1 while edges are made)
	succ    []uint64 // the jobs waiting for this one
	after   []Key    // every predecessor it was submitted with, for its record
}

// A job, its unique and a small payload share one allocation, so a
// typical queued job costs one malloc instead of three: with a million
// jobs queued, allocation was a fifth of the server's time in background
// submits, and each object rounded up to its size class wastes the rest.
// jobWith is a Job with room for room bytes after it; jobClasses lists
// the sizes, each one of Go's size classes, so that no byte of an object
// is wasted but the ones its unique and payload leave over.
type jobWith[Room any] struct {
	Job
	room Room
}

const jobSize = unsafe.Sizeof(Job{})

func newJobWith[Room any]() (*Job, []byte) {
	jw := new(jobWith[Room])
	return &jw.Job, unsafe.Slice((*byte)(unsafe.Pointer(&jw.room)), unsafe.Sizeof(jw.room))
}

// jobClasses are Go's size classes from 96 to 512 bytes: a Job with its
// unique and payload up to maxInline bytes in all is one object of the
// smallest that holds it.
var jobClasses = [...]struct {
	size uintptr // the object's, a size class
	new  func() (*Job, []byte)
}{
	{96, newJobWith[[96 - jobSize]byte]},
	{112, newJobWith[[112 - jobSize]byte]},
	{128, newJobWith[[128 - jobSize]byte]},
	{144, newJobWith[[144 - jobSize]byte]},
	{160, newJobWith[[160 - jobSize]byte]},
	{176, newJobWith[[176 - jobSize]byte]},
	{192, newJobWith[[192 - jobSize]byte]},
	{208, newJobWith[[208 - jobSize]byte]},
	{224, newJobWith[[224 - jobSize]byte]},
	{240, newJobWith[[240 - jobSize]byte]},
	{256, newJobWith[[256 - jobSize]byte]},
	{288, newJobWith[[288 - jobSize]byte]},
	{320, newJobWith[[320 - jobSize]byte]},
	{352, newJobWith[[352 - jobSize]byte]},
	{384, newJobWith[[384 - jobSize]byte]},
	{416, newJobWith[[416 - jobSize]byte]},
	{448, newJobWith[[448 - jobSize]byte]},
	{480, newJobWith[[480 - jobSize]byte]},
	{512, newJobWith[[512 - jobSize]byte]},
}

// maxInline is the most bytes of unique and payload a job holds in its
// own allocation. A longer payload has one of its own; a unique longer
// than that is ext.unique.
const maxInline = 512 - int(jobSize)

// allocJob returns a new Job with room for n bytes after it (n <=
// maxInline), in the smallest object that holds them.
func allocJob(n int) (*Job, []byte) {
	need := jobSize + uintptr(n)
	for _, c := range jobClasses {
		if c.size >= need {
			j, room := c.new()
			return j, room[:n:n]
		}
	}
	panic("sched: job room over maxInline")
}

// newJob returns a job holding r's unique and payload: the payload is r's
// own buffer when the caller gave it away, else a copy.
func newJob(r *SubmitReq) *Job {
	u, p := len(r.Unique), len(r.Payload)
	longUnique := u > maxInline
	if longUnique {
		u = 0
	}
	inline := !r.OwnPayload && u+p <= maxInline
	n := u
	if inline {
		n += p
	}
	j, room := allocJob(n)
	if longUnique {
		j.ulen = uniqueInExt
		j.more().unique = string(r.Unique)
	} else {
		j.ulen = uint16(u)
		copy(room, r.Unique)
	}
	switch {
	case r.OwnPayload:
		j.flags |= flagOwned
		j.setPayload(r.Payload) // its capacity is Release's to reuse
	case inline:
		if p > 0 {
			copy(room[u:], r.Payload)
			j.setPayload(room[u : u+p : u+p])
		}
	default:
		j.setPayload(append([]byte(nil), r.Payload...))
	}
	return j
}

// payload is the job's payload. A frontend may call it without a lock
// (see Job); the scheduler calls it under the job's shard lock.
func (j *Job) payload() []byte {
	switch {
	case j.plen == bigPayload:
		return j.ext.held
	case j.pdata == nil:
		return nil
	}
	return unsafe.Slice(j.pdata, j.plen)
}

// setPayload makes p the job's payload. Caller holds the job's shard lock
// (or is its only owner, before Submit publishes it), and the job is
// waiting: no worker holds it. A payload the frontend gave away
// (flagOwned, set first) is kept whole in ext.lent too, for its release.
func (j *Job) setPayload(p []byte) {
	if j.ext != nil {
		j.ext.held = nil
	}
	if j.is(flagOwned) && p != nil {
		j.more().held = p
	}
	if uint64(len(p)) >= uint64(bigPayload) {
		j.pdata, j.plen = nil, bigPayload
		j.more().held = p
		return
	}
	j.pdata, j.plen = unsafe.SliceData(p), uint32(len(p))
	if len(p) == 0 {
		j.pdata = nil
	}
}

// lent is the payload the frontend gave away (flagOwned), whole, for its
// release.
func (j *Job) lent() []byte {
	if j.ext == nil {
		return nil
	}
	return j.ext.held
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

// started is when the job's latest attempt began (see jobExt.started).
func (j *Job) started() int64 {
	if j.ext == nil {
		return 0
	}
	return j.ext.started
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
	return j.Unique()
}

// ID is the job's id; its low bits name the shard.
func (j *Job) ID() uint64 { return j.id }

// Func is the function name.
func (j *Job) Func() string { return j.fn.name }

// Unique is the client-given unique id ("" when none). It lies in the
// job's own allocation, just past the Job (see newJob), and a string of
// it keeps the whole job alive: the scheduler copies what it keeps after
// the job ends.
func (j *Job) Unique() string {
	switch j.ulen {
	case 0:
		return ""
	case uniqueInExt:
		return j.ext.unique
	}
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(j), jobSize)), j.ulen)
}

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
