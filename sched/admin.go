package sched

import "sort"

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
	return JobStatus{Known: true, Running: j.state == stateRunning, Num: j.num, Den: j.den,
		Clients: int(j.nlisteners), Unique: j.unique}
}

// StatusUnique finds a live job by its unique alone, in any function (as
// gearmand's GET_STATUS_UNIQUE does).
func (s *Sched) StatusUnique(unique []byte) JobStatus {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, f := range sh.funcs {
			if j := f.unique[string(unique)]; j != nil {
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
	Running  int
	Workers  int
	MaxQueue [3]int
}

// Total is queued + delayed + running, gearmand's TOTAL column.
func (f FuncStat) Total() int {
	return f.Queued[0] + f.Queued[1] + f.Queued[2] + f.Delayed + f.Running
}

// Funcs snapshots every known function, in creation order.
func (s *Sched) Funcs() []FuncStat {
	var out []FuncStat
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, f := range sh.funcs {
			out = append(out, FuncStat{
				Name:     f.name,
				Seq:      f.seq,
				Queued:   [3]int{f.queues[High].n, f.queues[Normal].n, f.queues[Low].n},
				Delayed:  f.delayed,
				Running:  f.running,
				Workers:  f.workers,
				MaxQueue: f.maxQueue,
			})
		}
		sh.mu.Unlock()
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Seq < out[b].Seq })
	return out
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

// Jobs snapshots every live job, in id order within each shard.
func (s *Sched) Jobs() []JobInfo {
	var out []JobInfo
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.jobs.each(func(j *Job) {
			out = append(out, JobInfo{ID: j.id, Func: j.fn.name, Unique: j.unique, Retries: j.retries,
				Running: j.state == stateRunning, Background: j.background, Clients: int(j.nlisteners)})
		})
		sh.mu.Unlock()
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
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
	switch j.state {
	case stateQueued:
		j.fn.queues[j.prio].remove(j)
		sh.forget(j)
	case stateDelayed:
		j.stopClock(&sh.wheel)
		j.fn.delayed--
		sh.forget(j)
	}
	done := j.state == stateDone
	sh.mu.Unlock()
	notifyAll(ls, id, &Update{Kind: Fail})
	if done {
		s.forgetStored(j)
	}
	return nil
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
