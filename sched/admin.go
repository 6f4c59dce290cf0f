package sched

import (
	"cmp"
	"slices"
	"time"
)

// JobStatus answers GET_STATUS.
type JobStatus struct {
	Known, Running bool
	Num, Den       uint32
	Clients        int // attached listeners
	Unique         string
}

// Status reports on a job by id; Known is false for an unknown id.
func (s *Sched) Status(id uint64) JobStatus {
	sh := s.shardOf(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return statusOf(sh.job(id))
}

func statusOf(j *Job) JobStatus {
	if j == nil {
		return JobStatus{}
	}
	st := JobStatus{Known: true, Running: j.state == stateRunning, Clients: j.clients(), Unique: j.Unique()}
	if j.ext != nil {
		st.Num, st.Den = j.ext.num, j.ext.den
	}
	return st
}

// StatusUnique finds a live job by its unique alone, in any function. It
// looks only in the functions that have unique jobs, not in every function
// known: a client asks on an event loop.
func (s *Sched) StatusUnique(unique []byte) JobStatus {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for f := range sh.keyed {
			if j := f.uniqueJob(string(unique)); j != nil {
				st := statusOf(j)
				sh.mu.Unlock()
				return st
			}
		}
		sh.mu.Unlock()
	}
	return JobStatus{}
}

// FuncStat is one function's line in the admin status.
type FuncStat struct {
	Name     string
	Seq      uint64 // creation order
	Queued   [3]int // waiting jobs by priority
	Delayed  int    // jobs not due yet
	Blocked  int    // jobs waiting for their predecessors (SubmitReq.After)
	Running  int
	Workers  int
	MaxQueue [3]int
	Events   Counts // what happened to its jobs since it was made, whatever their source
	Paused   bool   // see Pause
	// OldestWait is how long the job that has waited longest at the head
	// of its queues has waited: 0 when none waits, and without
	// Config.Latency.
	OldestWait time.Duration
}

// Total is queued + delayed + blocked + running, gearmand's TOTAL column.
func (f FuncStat) Total() int {
	return f.Queued[0] + f.Queued[1] + f.Queued[2] + f.Delayed + f.Blocked + f.Running
}

// chunk bounds the work a listing does per hold of a shard's lock: table
// slots looked at, or functions copied. A hold is then a few hundred
// microseconds at most, so a listing of millions of jobs never makes that
// shard's submits and grabs wait longer than that.
const chunk = 4096

// FuncsChunked hands fn every known function, a chunk at a time. A chunk
// is copied under a short hold of its shard's lock and fn runs with no lock
// held; the slice is reused once fn returns. Functions created or dropped
// meanwhile may or may not be seen, and none is seen twice.
func (s *Sched) FuncsChunked(fn func([]FuncStat)) {
	eachChunk(s, chunk, chunk, func(buf []FuncStat, f *function, now int64) []FuncStat {
		return append(buf, statOf(f, now))
	}, fn)
}

// eachChunk is the walk of FuncsChunked and its kin: add appends what a
// function gives (perhaps nothing) under its shard's lock, as of now (a
// latency reading); once the buffer holds full entries, fn has them with
// no lock held, and the buffer, cleared, is reused. size is the buffer's
// first capacity.
func eachChunk[T any](s *Sched, size, full int, add func(buf []T, f *function, now int64) []T, fn func([]T)) {
	buf := make([]T, 0, size)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		now := s.latency()
		for _, f := range sh.funcs {
			buf = add(buf, f, now)
			if len(buf) > 0 && len(buf) >= full {
				// Let the shard's traffic in. A range over a map may go on
				// after the map changed: what was added may be missed,
				// what was deleted before being reached is, and nothing
				// comes twice.
				sh.mu.Unlock()
				fn(buf)
				clear(buf)
				buf = buf[:0]
				sh.mu.Lock()
				now = s.latency()
			}
		}
		sh.mu.Unlock()
	}
	if len(buf) > 0 {
		fn(buf)
	}
}

// statOf is f's line as of now (a latency reading). Caller holds f's
// shard lock.
func statOf(f *function, now int64) FuncStat {
	return FuncStat{
		Name:       f.name,
		Seq:        f.seq,
		Queued:     [3]int{f.queues[High].n, f.queues[Normal].n, f.queues[Low].n},
		Delayed:    f.delayed,
		Blocked:    f.blocked,
		Running:    f.running,
		Workers:    f.workers,
		MaxQueue:   f.maxQueue,
		Events:     f.events,
		Paused:     f.paused,
		OldestWait: f.oldestWait(now),
	}
}

// FuncStatOf is function name's line; false for a function the scheduler
// does not know.
func (s *Sched) FuncStatOf(name []byte) (FuncStat, bool) {
	sh := s.shardFor(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f := sh.funcs[string(name)]
	if f == nil {
		return FuncStat{}, false
	}
	return statOf(f, s.latency()), true
}

// Funcs snapshots every known function, in creation order.
func (s *Sched) Funcs() []FuncStat {
	var out []FuncStat
	s.FuncsChunked(func(c []FuncStat) { out = append(out, c...) })
	slices.SortFunc(out, func(a, b FuncStat) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// NumFuncs is the number of known functions.
func (s *Sched) NumFuncs() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.funcs)
		sh.mu.Unlock()
	}
	return n
}

// JobInfo is one job's line in the admin job listings.
type JobInfo struct {
	ID         uint64
	Func       string
	Unique     string
	Retries    uint32
	Running    bool
	Background bool
	Clients    int
}

// JobsChunked hands fn every live job, a chunk at a time, in id order
// within each shard. A chunk is copied under a short hold of its shard's
// lock (see chunk) and fn runs with no lock held; the slice is reused once
// fn returns. Jobs submitted or ended meanwhile may or may not be seen, and
// none is seen twice.
func (s *Sched) JobsChunked(fn func([]JobInfo)) {
	buf := make([]JobInfo, 0, chunk)
	add := func(j *Job) { buf = append(buf, infoOf(j)) }
	for i := range s.shards {
		sh := &s.shards[i]
		for seq, done := uint64(0), false; !done; {
			sh.mu.Lock()
			seq, done = sh.jobs.walk(seq, chunk, add)
			sh.mu.Unlock()
			if len(buf) > 0 {
				fn(buf)
				buf = buf[:0]
			}
		}
	}
}

func infoOf(j *Job) JobInfo {
	return JobInfo{ID: j.id, Func: j.fn.name, Unique: j.Unique(), Retries: j.retries,
		Running: j.state == stateRunning, Background: j.background, Clients: j.clients()}
}

// Jobs snapshots every live job, in id order.
func (s *Sched) Jobs() []JobInfo {
	var out []JobInfo
	s.JobsChunked(func(c []JobInfo) { out = append(out, c...) })
	slices.SortFunc(out, func(a, b JobInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Cancel withdraws a job. Its clients get a Fail, as gearmand's "cancel job"
// sends them; a waiting job is removed, a running one is left to finish on
// its worker with nobody listening.
func (s *Sched) Cancel(id uint64) error {
	sh := s.shardOf(id)
	sh.mu.Lock()
	j := sh.job(id)
	if j == nil {
		sh.mu.Unlock()
		return ErrNotFound
	}
	ls := collect(nil, j, true)
	if j.state != stateRunning {
		sh.unplace(j)
		sh.forget(j)
	}
	done := j.state == stateDone
	sh.mu.Unlock()
	notifyAll(ls, id, &Update{Kind: Fail})
	if done {
		s.ended(j)
	}
	return nil
}

// Remove ends the live job that function fn knows by key (its unique),
// whatever it is doing: waiting, due later, or running, in which case its
// worker's result is dropped when it comes. Its clients get a Fail. It
// returns the job's id.
func (s *Sched) Remove(fn, key []byte) (uint64, error) {
	sh := s.shardFor(fn)
	sh.mu.Lock()
	f := sh.funcs[string(fn)]
	var j *Job
	if f != nil {
		j = f.uniqueJob(string(key))
	}
	if j == nil {
		sh.mu.Unlock()
		return 0, ErrNotFound
	}
	ls := collect(nil, j, true)
	sh.end(j)
	sh.mu.Unlock()
	notifyAll(ls, j.id, &Update{Kind: Fail})
	s.ended(j)
	return j.id, nil
}

// end removes a live job in any state. Caller holds sh.mu and has dealt
// with its listeners.
func (sh *shard) end(j *Job) {
	if j.state == stateRunning {
		j.worker.addEnded(j.id) // its result, if it comes, is dropped
		sh.s.finish(sh, j)
		return
	}
	sh.unplace(j)
	sh.forget(j)
}

// Find returns a view of the live job that function fn knows by key, with
// a copy of its payload.
func (s *Sched) Find(fn, key []byte) (JobView, bool) {
	sh := s.shardFor(fn)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f := sh.funcs[string(fn)]
	var j *Job
	if f != nil {
		j = f.uniqueJob(string(key))
	}
	if j == nil {
		return JobView{}, false
	}
	var v JobView
	s.view(j, &v, nil)
	v.Payload = append([]byte(nil), v.Payload...)
	return v, true
}

// UpdateNamed reports u for the running job named (fn, key) as the worker
// running it would (Worker.Update): for a protocol whose workers name
// their jobs, not their ids. ErrNotFound if no such job runs, or if its
// worker is not one mine (nil: any) accepts; mine runs under a shard lock
// and must not call the scheduler.
func (s *Sched) UpdateNamed(fn, key []byte, u *Update, mine func(*Worker) bool) error {
	sh := s.shardFor(fn)
	sh.mu.Lock()
	var j *Job
	if f := sh.funcs[string(fn)]; f != nil {
		j = f.uniqueJob(string(key))
	}
	if j == nil || j.state != stateRunning || j.worker == nil || mine != nil && !mine(j.worker) {
		sh.mu.Unlock()
		return ErrNotFound
	}
	w, id := j.worker, j.id
	sh.mu.Unlock()
	// The job may end in between: Update then says it is not found.
	return w.Update(id, u)
}

// JobView is a job as a dump shows it: everything needed to submit it again.
type JobView struct {
	ID         uint64
	Func       string
	Unique     string
	Payload    []byte
	Reducer    string
	Priority   Priority
	Background bool
	Running    bool
	Blocked    bool   // waiting for its predecessors
	Worker     string // the name of the worker running it, if any
	Retries    uint32
	Clients    int
	// As in Attempt: the due time, the attempts' run timeout, the counter;
	// Started is when the latest attempt began (zero if none has).
	When    int64
	Timeout time.Duration
	Counter int64
	Started time.Time
}

// view fills v from j; v.Payload is appended to arena when arena is not
// nil, else it is j's own. Caller holds j's shard lock.
func (s *Sched) view(j *Job, v *JobView, arena *[]byte) {
	*v = JobView{ID: j.id, Func: j.fn.name, Unique: j.Unique(), Payload: j.payload(), Reducer: j.Reducer(),
		Priority: j.prio, Background: j.background, Running: j.state == stateRunning, Blocked: j.state == stateBlocked,
		Retries: j.retries, Clients: j.clients(), Started: s.wallOf(j.started())}
	if j.worker != nil {
		v.Worker = j.worker.Name()
	}
	if x := j.ext; x != nil {
		v.When, v.Timeout, v.Counter = x.when, x.timeout, x.counter
	}
	if arena != nil {
		n := len(*arena)
		*arena = append(*arena, j.payload()...)
		v.Payload = (*arena)[n:len(*arena):len(*arena)]
	}
}

// viewBytes bounds the payload bytes one chunk of JobViewsChunked copies
// under a lock (a chunk stops early rather than copy megabytes at once).
const viewBytes = 1 << 20

// JobViewsChunked hands fn a view of every live job, payload included, a
// chunk at a time, as JobsChunked does. The views' payloads live in a
// buffer reused once fn returns: copy what you keep.
func (s *Sched) JobViewsChunked(fn func([]JobView)) {
	buf := make([]JobView, 0, chunk)
	var arena []byte
	for i := range s.shards {
		sh := &s.shards[i]
		for seq, done := uint64(0), false; !done; {
			sh.mu.Lock()
			seq, done = sh.jobs.walkUntil(seq, chunk, func(j *Job) bool {
				if len(arena) > 0 && len(arena)+len(j.payload()) > viewBytes {
					return false // next chunk
				}
				buf = append(buf, JobView{})
				s.view(j, &buf[len(buf)-1], &arena)
				return true
			})
			sh.mu.Unlock()
			if len(buf) > 0 {
				fn(buf)
				clear(buf)
				buf, arena = buf[:0], arena[:0]
			}
		}
	}
}

// Purge drops a function that has no workers together with every job it
// holds; their clients get a Fail. It returns how many jobs it ended.
// Jobs are ended a chunk at a time, so a huge function does not hold its
// shard's lock for long; ones submitted meanwhile keep the function.
func (s *Sched) Purge(name []byte) (int, error) {
	sh := s.shardFor(name)
	sh.mu.Lock()
	f := sh.funcs[string(name)]
	if f == nil {
		sh.mu.Unlock()
		return 0, ErrNoFunction
	}
	if f.workers > 0 {
		sh.mu.Unlock()
		return 0, ErrFunctionBusy
	}
	sh.mu.Unlock()
	n := 0
	var ended []*Job
	type told struct {
		c  *Client
		id uint64
	}
	var tell []told
	var ls []*Client
	for seq, done := uint64(0), false; !done; {
		sh.mu.Lock()
		seq, done = sh.jobs.walk(seq, chunk, func(j *Job) {
			if j.fn != f {
				return
			}
			ls = collect(ls[:0], j, true)
			for _, c := range ls {
				tell = append(tell, told{c, j.id})
			}
			ended = append(ended, j)
		})
		for _, j := range ended {
			sh.end(j)
		}
		sh.mu.Unlock()
		for _, t := range tell {
			t.c.l.Notify(t.id, &Update{Kind: Fail})
		}
		for _, j := range ended {
			s.ended(j)
		}
		n += len(ended)
		clear(ended)
		clear(tell)
		clear(ls)
		ended, tell = ended[:0], tell[:0]
	}
	sh.mu.Lock()
	if sh.funcs[f.name] == f && f.workers == 0 && f.total() == 0 {
		sh.busy(f)
		delete(sh.funcs, f.name)
	}
	sh.mu.Unlock()
	return n, nil
}

// CreateFunc makes a function known before any worker or job names it. It
// is kept until DropFunc, however long it stays idle.
func (s *Sched) CreateFunc(name []byte) {
	sh := s.shardFor(name)
	sh.mu.Lock()
	s.function(sh, name).kept = true
	sh.mu.Unlock()
}

// DropFunc forgets a function that has no workers and no jobs. (gearmand
// also drops one with queued jobs, losing them; we refuse.)
func (s *Sched) DropFunc(name []byte) error {
	sh := s.shardFor(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f := sh.funcs[string(name)]
	if f == nil {
		return ErrNoFunction
	}
	if f.workers > 0 || f.total() > 0 {
		return ErrFunctionBusy
	}
	sh.busy(f)
	delete(sh.funcs, f.name)
	return nil
}

// SetMaxQueue limits how many jobs a known function may hold (queued and
// running) before submits at each priority are refused; 0 = unlimited. Like
// gearmand, it does not create an unknown function.
func (s *Sched) SetMaxQueue(name []byte, max [3]int) {
	sh := s.shardFor(name)
	sh.mu.Lock()
	if f := sh.funcs[string(name)]; f != nil {
		f.maxQueue = max
		sh.busy(f) // an admin setting restarts the idle time, or ends it
		sh.settle(f)
	}
	sh.mu.Unlock()
}

// Len is the number of live jobs: queued, delayed and running.
func (s *Sched) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.jobs.n
		sh.mu.Unlock()
	}
	return n
}

// Running is the number of jobs a worker holds, across every function: what
// a graceful stop waits for.
func (s *Sched) Running() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, f := range sh.funcs {
			n += f.running
		}
		sh.mu.Unlock()
	}
	return n
}
