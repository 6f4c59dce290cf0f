package sched

// Dependencies: a job submitted with SubmitReq.After waits, blocked, until
// every job it names has ended. Each predecessor keeps the ids of the jobs
// waiting for it (jobExt.succ); each waiting job counts the predecessors it
// still waits for (jobExt.blocked). A predecessor that ends releases its
// successors one by one, each under its own shard's lock only, so no two
// shard locks are ever held together and no lock is global; a release is
// O(1).
//
// Edges are made after the job is in its shard, one at a time: the waiting
// job's count goes up first (with one extra count held until all its edges
// are made), then the edge goes into the predecessor, so a predecessor
// that ends at any moment releases nothing early.

// Key names a job by its function and unique.
type Key struct {
	Func, Unique string
}

// block parks a job that is in no list yet until its predecessors are
// linked and have ended: one count is held for the linking. Caller holds
// sh.mu.
func (sh *shard) block(j *Job) {
	j.state = stateBlocked
	j.fn.blocked++
	j.more().blocked = 1
}

// link makes the edges from the jobs after names to job id, in shard sh,
// then drops the count block took. A name with no live job is an ended
// predecessor: nothing to wait for. A job cannot wait for itself.
func (s *Sched) link(sh *shard, id uint64, after []Key) {
	for _, k := range after {
		psh := s.shardFor([]byte(k.Func))
		if psh == sh {
			sh.mu.Lock()
			j := sh.job(id)
			if j == nil || j.state != stateBlocked {
				sh.mu.Unlock()
				return // ended meanwhile (cancelled, removed)
			}
			if p := psh.live(k); p != nil && p != j {
				p.more().succ = append(p.ext.succ, id)
				j.ext.blocked++
			}
			sh.mu.Unlock()
			continue
		}
		sh.mu.Lock()
		j := sh.job(id)
		ok := j != nil && j.state == stateBlocked
		if ok {
			j.ext.blocked++
		}
		sh.mu.Unlock()
		if !ok {
			return
		}
		psh.mu.Lock()
		p := psh.live(k)
		if p != nil {
			p.more().succ = append(p.ext.succ, id)
		}
		psh.mu.Unlock()
		if p == nil {
			s.release(id)
		}
	}
	s.release(id)
}

// live is the job k names, in any state but ended. Caller holds sh.mu.
func (sh *shard) live(k Key) *Job {
	f := sh.funcs[k.Func]
	if f == nil {
		return nil
	}
	return f.uniqueJob(k.Unique)
}

// release counts one predecessor of job id as ended; the last one puts the
// job where it waits to run.
func (s *Sched) release(id uint64) {
	sh := s.shardOf(id)
	var wake wakeList
	sh.mu.Lock()
	j := sh.job(id)
	if j == nil || j.state != stateBlocked {
		sh.mu.Unlock()
		return
	}
	if j.ext.blocked--; j.ext.blocked > 0 {
		sh.mu.Unlock()
		return
	}
	f := j.fn
	f.blocked--
	s.place(sh, j, &wake)
	sh.mu.Unlock()
	s.wakeAll(sh, f, &wake, nil)
}

// ended is what follows the end of a job, outside every lock: its record
// is deleted, and the jobs waiting for it are released. Its successor list
// no longer changes: only a live job gets edges.
func (s *Sched) ended(j *Job) {
	if j.background && s.durable {
		s.store.Delete(j.id)
	}
	if j.ext != nil {
		for _, id := range j.ext.succ {
			s.release(id)
		}
	}
}

// rewait adds predecessors to a live job that is not running, for a
// submit that names it again with After: a job waiting in its queue or in
// the wheel is blocked again. It returns whether edges are to be linked.
// Caller holds sh.mu.
func (sh *shard) rewait(j *Job, after []Key) bool {
	switch j.state {
	case stateQueued, stateDelayed:
		sh.unplace(j)
		sh.block(j)
	case stateBlocked:
		j.ext.blocked++ // held for the linking, as block does
	default:
		return false // running: too late to wait
	}
	x := j.ext
	x.after = append(x.after, after...)
	return true
}
