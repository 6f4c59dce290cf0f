package sched

import "time"

// What an operator does to a running scheduler beside gearmand's admin
// commands (admin.go): pause and resume a function, drop what waits in
// it, look at the jobs at the head of its queues and at what a worker
// holds.

// Pause stops handing out the jobs of function name: Grab passes it by,
// Sleep waits on, and no new job of it wakes a worker. It keeps taking
// submits (they queue), its running jobs run to their end, and its queue
// timeouts and due times go on. A pause is an admin setting: the
// function is not forgotten for idleness while it lasts. It is in memory
// only, like the rest of the scheduler's settings (maxqueue): a restart
// forgets it. ErrNoFunction for a function the scheduler does not know.
func (s *Sched) Pause(name []byte) error {
	sh := s.shardFor(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f := sh.funcs[string(name)]
	if f == nil {
		return ErrNoFunction
	}
	sh.busy(f)
	f.paused = true
	return nil
}

// Resume undoes Pause: the workers sleeping on the function are woken to
// take its jobs. ErrNoFunction for a function the scheduler does not know.
func (s *Sched) Resume(name []byte) error {
	sh := s.shardFor(name)
	var wake wakeList
	sh.mu.Lock()
	f := sh.funcs[string(name)]
	if f == nil {
		sh.mu.Unlock()
		return ErrNoFunction
	}
	f.paused = false
	if f.queued() > 0 {
		s.collectSleepers(f, &wake)
	}
	sh.settle(f)
	sh.mu.Unlock()
	s.wakeAll(sh, f, &wake, nil)
	return nil
}

// DropWaiting ends every job of function name that no worker holds: the
// queued ones, those due later and those waiting for their predecessors.
// Its running jobs, its workers and the function itself stay. The ended
// jobs' clients get a Fail, as with Cancel. It returns how many jobs it
// ended. They are ended a chunk at a time, so that a queue of millions
// does not hold its shard's lock for long; jobs submitted meanwhile may
// or may not be ended. ErrNoFunction for a function the scheduler does
// not know.
func (s *Sched) DropWaiting(name []byte) (int, error) {
	sh := s.shardFor(name)
	sh.mu.Lock()
	f := sh.funcs[string(name)]
	sh.mu.Unlock()
	if f == nil {
		return 0, ErrNoFunction
	}
	var e ender
	n := 0
	// The queues first, from their heads: no walk of the shard's jobs.
	for {
		sh.mu.Lock()
		for len(e.jobs) < chunk {
			j := f.head()
			if j == nil {
				break
			}
			e.add(j)
			sh.end(j) // off its queue: the next is the head now
		}
		more := len(e.jobs) == chunk
		rest := f.delayed + f.blocked
		n += e.finish(s, sh, false)
		if !more {
			if rest == 0 {
				return n, nil
			}
			break
		}
	}
	// Those due later or blocked are in no list of the function's: walk
	// the shard's jobs for them, as Purge does.
	for seq, done := uint64(0), false; !done; {
		sh.mu.Lock()
		seq, done = sh.jobs.walk(seq, chunk, func(j *Job) {
			if j.fn == f && (j.state == stateDelayed || j.state == stateBlocked) {
				e.add(j)
			}
		})
		n += e.finish(s, sh, true)
	}
	return n, nil
}

// head is the job Grab would take next from f, or nil. Caller holds its
// shard lock.
func (f *function) head() *Job {
	for p := range f.queues {
		if j := f.queues[p].head; j != nil {
			return j
		}
	}
	return nil
}

// ender ends jobs a chunk at a time: their listeners detached under the
// shard lock and told outside it.
type ender struct {
	jobs []*Job
	tell []told
	ls   []*Client
}

type told struct {
	c  *Client
	id uint64
}

// add detaches j's listeners and keeps it to be ended. Caller holds j's
// shard lock; finish must follow before it is released.
func (e *ender) add(j *Job) {
	e.ls = collect(e.ls[:0], j, true)
	for _, c := range e.ls {
		e.tell = append(e.tell, told{c, j.id})
	}
	clear(e.ls)
	e.jobs = append(e.jobs, j)
}

// finish ends the jobs added (unless the caller did: ended false),
// releases sh's lock (held by the caller), tells their listeners and
// returns how many there were.
func (e *ender) finish(s *Sched, sh *shard, end bool) int {
	for _, j := range e.jobs {
		if end {
			sh.end(j)
		}
	}
	sh.mu.Unlock()
	for _, t := range e.tell {
		t.c.l.Notify(t.id, &Update{Kind: Fail})
	}
	for _, j := range e.jobs {
		s.ended(j)
	}
	n := len(e.jobs)
	clear(e.jobs)
	clear(e.tell)
	e.jobs, e.tell = e.jobs[:0], e.tell[:0]
	return n
}

// WaitingJob is a job waiting in its function's queue, as Waiting lists
// it.
type WaitingJob struct {
	ID         uint64
	Unique     string
	Priority   Priority
	Background bool
	Retries    uint32
	Clients    int
	// Wait is how long it has waited in the queue (since its submit, due
	// time, release or requeue); 0 without Config.Latency.
	Wait time.Duration
}

// MaxWaiting bounds what Waiting lists.
const MaxWaiting = 1000

// Waiting lists the first limit jobs (at most MaxWaiting) Grab would take
// from function name, in that order: high priority first, each queue
// first in, first out. false for a function the scheduler does not know.
func (s *Sched) Waiting(name []byte, limit int) ([]WaitingJob, bool) {
	limit = min(limit, MaxWaiting)
	sh := s.shardFor(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f := sh.funcs[string(name)]
	if f == nil {
		return nil, false
	}
	now := s.latency()
	out := make([]WaitingJob, 0, min(limit, f.queued()))
	for p := range f.queues {
		for j := f.queues[p].head; j != nil && len(out) < limit; j = j.next {
			w := WaitingJob{ID: j.id, Unique: j.Unique(), Priority: j.prio, Background: j.background,
				Retries: j.retries, Clients: j.clients()}
			if now != 0 && j.stamp != 0 {
				w.Wait = time.Duration(now - j.stamp)
			}
			out = append(out, w)
		}
	}
	return out, true
}

// oldestWait is how long the job at the head of f's queues that has
// waited longest has waited, as of now (a latency reading); 0 when none
// waits or without Config.Latency. Each queue is first in, first out, so
// that is the longest any of its jobs has waited, but for one a worker
// turned down unstarted (RequeueReq.Front), whose wait starts again at
// the head. Caller holds f's shard lock.
func (f *function) oldestWait(now int64) time.Duration {
	if now == 0 {
		return 0
	}
	var d time.Duration
	for p := range f.queues {
		if j := f.queues[p].head; j != nil && j.stamp != 0 {
			d = max(d, time.Duration(now-j.stamp))
		}
	}
	return d
}

// HeldJob is a job a worker holds, as Worker.Held lists it.
type HeldJob struct {
	ID     uint64
	Func   string
	Unique string
	// For is how long this attempt has run; 0 if unknown (without
	// Config.Latency, for a job whose start was not read: see GrabAttempt).
	For time.Duration
}

// Held appends the jobs the worker holds to dst, with how long each has
// run. Safe from any goroutine: a listing's.
func (w *Worker) Held(dst []HeldJob) []HeldJob {
	var ids [4]uint64
	held := w.Holding(ids[:0])
	s := w.s
	for _, id := range held { // shard lock before worker lock, so one at a time
		sh := s.shardOf(id)
		sh.mu.Lock()
		if j := sh.job(id); j != nil && j.worker == w && j.state == stateRunning {
			h := HeldJob{ID: j.id, Func: j.fn.name, Unique: j.Unique()}
			switch {
			case j.stamp != 0:
				h.For = time.Duration(s.latency() - j.stamp)
			case j.started() != 0:
				h.For = s.clock.Now().Sub(s.epoch.Add(time.Duration(j.started() - 1)))
			}
			dst = append(dst, h)
		}
		sh.mu.Unlock()
	}
	return dst
}

// Idle is how long the worker has held no job: since it let go of its
// last one, or was made. -1 while it holds one, or without
// Config.Latency. Safe from any goroutine.
func (w *Worker) Idle() time.Duration {
	w.mu.Lock()
	n := w.nheld
	w.mu.Unlock()
	at := w.freeAt.Load()
	if n > 0 || at == 0 {
		return -1
	}
	return time.Duration(max(w.s.latency()-at, 0))
}
