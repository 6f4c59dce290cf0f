package sched

import "time"

// Advance fires every timer due at or before now: delayed jobs enter their
// queues (waking sleepers), overrunning jobs are taken back as retries. The
// ticker calls it; with Config.Tick < 0 the owner does.
func (s *Sched) Advance(now time.Time) {
	s.leaseBack()
	tick := s.ticks(now)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.wheel.n == 0 {
			sh.wheel.now = tick
			sh.mu.Unlock()
			continue
		}
		var due []*Job
		var late []*Job
		var lapsed []*Worker
		var expired []*Job
		var rewake []*ability
		sh.wheel.advance(tick, func(t *timer) {
			switch t.kind {
			case timerDue:
				due = append(due, t.job)
			case timerTimeout:
				late = append(late, t.job)
			case timerQueued:
				expired = append(expired, t.job)
			case timerDeadline:
				t.worker.lapsed = true
				lapsed = append(lapsed, t.worker)
			case timerRewake:
				rewake = append(rewake, abilityOf(t))
			}
		})
		for _, j := range due {
			if j.state != stateDelayed {
				continue
			}
			j.fn.delayed--
			j.state = stateQueued
			j.fn.queues[j.prio].pushBack(j)
			s.queuedAt(j)
			s.queueClock(sh, j)
		}
		sh.mu.Unlock()
		for _, a := range rewake {
			var wl wakeList
			sh.mu.Lock()
			s.rewoken(a, &wl)
			sh.mu.Unlock()
			s.wakeAll(sh, a.fn, &wl, nil)
		}
		for _, j := range due {
			var wl wakeList
			sh.mu.Lock()
			s.collectSleepers(j.fn, &wl)
			sh.mu.Unlock()
			s.wakeAll(sh, j.fn, &wl, nil)
		}
		for _, j := range late {
			sh.mu.Lock()
			w := j.worker
			sh.mu.Unlock()
			if w != nil {
				s.retry(j, w, true)
			}
		}
		for _, w := range lapsed {
			w.lapse()
		}
		for _, j := range expired {
			s.expire(sh, j)
		}
	}
}

// queueClock arms a queued job's QueueTimeout. Caller holds sh.mu.
func (s *Sched) queueClock(sh *shard, j *Job) {
	if x := j.ext; x != nil && x.queueWait > 0 {
		sh.wheel.arm(j.clock(timerQueued), s.deadline(s.clock.Now().Add(x.queueWait)))
	}
}

// expire ends a job whose QueueTimeout passed while it waited: its
// listeners get a Fail.
func (s *Sched) expire(sh *shard, j *Job) {
	sh.mu.Lock()
	if j.state != stateQueued || sh.job(j.id) != j {
		sh.mu.Unlock()
		return // grabbed or ended meanwhile
	}
	ls := collect(nil, j, true)
	sh.unplace(j)
	sh.count(j.fn, j.src, EventFailed)
	s.failed(j, FailQueueTimeout, nil, "", nil, false)
	sh.forget(j)
	sh.mu.Unlock()
	notifyAll(ls, j.id, &Update{Kind: Fail})
	s.ended(j)
}
