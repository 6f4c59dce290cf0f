package sched

import "unsafe"

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
	stateDone                    // removed from the shard
)

// Job is one unit of work. Its id, function, unique, payload and reducer
// never change after Submit, so a frontend may read them without a lock
// once it holds the *Job (from Grab or Jobs). With Config.Release the
// payload is valid only until the job ends.
type Job struct {
	id         uint64
	fn         *function
	unique     string
	payload    []byte
	reducer    string
	prio       Priority
	background bool
	byPayload  bool  // coalesce on the payload (gearman's unique "-")
	owned      bool  // payload is the frontend's buffer, see Config.Release
	when       int64 // unix seconds; 0 = run now

	// Mutable state, guarded by the job's shard lock.
	state      jobState
	retries    uint32
	num, den   uint32 // last WORK_STATUS
	worker     *Worker
	prev, next *Job // function priority list
	wprev      *Job // worker's held list (guarded by worker.mu)
	wnext      *Job
	listeners  *attach // doubly linked list of attached clients
	nlisteners uint32
	timer      *timer // made on first use: most jobs never wait on a clock
}

// jobWithPayload holds a job and a small payload in one allocation, so a
// typical queued job costs one malloc instead of two: with a million jobs
// queued, allocation was a fifth of the server's time in background
// submits. The payload's size is chosen to fill the 256-byte size class.
type jobWithPayload struct {
	Job
	data [smallPayload]byte
}

const smallPayload = 256 - unsafe.Sizeof(Job{})

// newJob returns a job holding r's payload: r's own buffer when the caller
// gave it away, else a copy.
func newJob(r *SubmitReq) *Job {
	switch {
	case r.OwnPayload:
		return &Job{payload: r.Payload, owned: true} // its capacity is Release's to reuse
	case len(r.Payload) <= int(smallPayload):
		jp := &jobWithPayload{}
		jp.payload = jp.data[:copy(jp.data[:], r.Payload):len(r.Payload)]
		if len(r.Payload) == 0 {
			jp.payload = nil
		}
		return &jp.Job
	default:
		return &Job{payload: append([]byte(nil), r.Payload...)}
	}
}

// clock returns the job's timer, making it on first use. Caller holds the
// job's shard lock.
func (j *Job) clock(kind timerKind) *timer {
	if j.timer == nil {
		j.timer = &timer{job: j}
	}
	j.timer.kind = kind
	return j.timer
}

// stopClock disarms the job's timer, if it has one.
func (j *Job) stopClock(w *wheel) {
	if j.timer != nil {
		w.cancel(j.timer)
	}
}

// key is the coalescing key: the unique, or the payload for "-".
func (j *Job) key() string {
	if j.byPayload {
		return bytesString(j.payload)
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
func (j *Job) Payload() []byte { return j.payload }

// Reducer is the reducer function of a map/reduce job ("" when none).
func (j *Job) Reducer() string { return j.reducer }

// Priority is the queue the job waits in.
func (j *Job) Priority() Priority { return j.prio }

// Background reports whether the job was submitted without a listener.
func (j *Job) Background() bool { return j.background }

// When is the unix time the job was asked to run at (0: immediately).
func (j *Job) When() int64 { return j.when }

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
