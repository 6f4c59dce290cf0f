package sched

// The lease (Config.Lease): a scheduler whose state may no longer be the
// one to act on hands out nothing until it is again.

// leased says whether the scheduler may hand out work now. A no marks the
// lease lapsed and counts a timer, so that the ticker runs and leaseBack
// sees it return.
func (s *Sched) leased() bool {
	if s.lease == nil || s.lease() {
		return true
	}
	if s.leaseLapsed.CompareAndSwap(false, true) {
		s.timers.inc()
	}
	return false
}

// leaseBack, each tick, wakes the workers asleep on functions with jobs
// waiting once a lapsed lease holds again: the wakes it held back.
func (s *Sched) leaseBack() {
	if !s.leaseLapsed.Load() || !s.lease() || !s.leaseLapsed.CompareAndSwap(true, false) {
		return
	}
	s.timers.dec()
	for i := range s.shards {
		sh := &s.shards[i]
		var wls []wakeFor
		sh.mu.Lock()
		for _, f := range sh.funcs {
			if f.queued() > 0 && f.sleepers.head != nil {
				wf := wakeFor{f: f}
				s.collectSleepers(f, &wf.wl)
				wls = append(wls, wf)
			}
		}
		sh.mu.Unlock()
		for i := range wls {
			s.wakeAll(sh, wls[i].f, &wls[i].wl, nil)
		}
	}
}

type wakeFor struct {
	f  *function
	wl wakeList
}
