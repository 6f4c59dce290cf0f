package sched

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Waker is how sched tells a sleeping worker that work may be waiting.
// Wake is called at most once per Sleep, outside every scheduler lock, and
// must not block. origin is the Origin of the call that made the work
// (nil for timers): a frontend that recognises its own token knows it is
// on the goroutine that made the call.
type Waker interface {
	Wake(origin any)
}

// Worker sleep states.
const (
	awake int32 = iota
	asleep
	woken
)

// ability is one function a worker can run, linked into that function's
// sleeper list while the worker sleeps on it.
type ability struct {
	w            *Worker
	fn           *function
	sh           *shard
	timeout      time.Duration // 0 = none
	sprev, snext *ability
	inSleepers   bool
	woken        bool // woken for fn's jobs under WakeDemand, not yet heard from; guarded by sh.mu
	// rewake is armed while woken; a fired one finds its ability by its
	// offset (abilityOf), so that no timer needs a field for it.
	rewake timer
}

type abilityList struct{ head, tail *ability }

func (l *abilityList) push(a *ability) {
	a.snext = nil
	a.sprev = l.tail
	if l.tail != nil {
		l.tail.snext = a
	} else {
		l.head = a
	}
	l.tail = a
	a.inSleepers = true
}

func (l *abilityList) remove(a *ability) {
	if !a.inSleepers {
		return
	}
	if a.sprev != nil {
		a.sprev.snext = a.snext
	} else {
		l.head = a.snext
	}
	if a.snext != nil {
		a.snext.sprev = a.sprev
	} else {
		l.tail = a.sprev
	}
	a.sprev, a.snext = nil, nil
	a.inSleepers = false
}

// Worker is one connection that runs jobs. Its methods other than Wake
// bookkeeping must be called from one goroutine at a time (its connection's).
type Worker struct {
	s     *Sched
	id    uint64
	waker Waker
	// abilities in registration order; jobs are looked for from the end,
	// most recently registered first, as gearmand 1.1 does. Appending keeps
	// a worker that registers many functions linear, not quadratic.
	abilities []*ability
	byName    map[string]*ability // made once a worker has manyAbilities
	state     atomic.Int32

	// deadline, armed by ExpectWithin, lives in the wheel of the shard the
	// worker's id names; it and lapsed are guarded by that shard's lock.
	deadline timer
	lapsed   bool

	name atomic.Pointer[string] // SetName

	mu    sync.Mutex // guards the held list and ended; taken after a shard lock
	held  *Job
	nheld int
	// ended holds jobs this worker ran that another attempt finished (after
	// a run timeout): its own result for them is dropped without an error.
	ended []uint64

	scratch []*Client

	// freeAt is when it last let go of a job, or was made: a latency
	// reading (Config.Latency), for Idle.
	freeAt atomic.Int64

	// wokenBy is the ability a WakeDemand wake-up went through, for the
	// worker's next grab or sleep to settle: a hint, set under that
	// ability's shard lock; a hint lost to a race only leaves the mark
	// to its timer.
	wokenBy atomic.Pointer[ability]
}

// settleWake unmarks the ability the worker was last woken through, if
// any, and returns it. The Load first keeps the grab of a worker that was
// not woken (every grab of a busy one) free of a locked instruction.
func (w *Worker) settleWake() *ability {
	if w.wokenBy.Load() == nil {
		return nil
	}
	by := w.wokenBy.Swap(nil)
	if by != nil {
		w.s.heard(by)
	}
	return by
}

// abilityOf is the ability whose rewake timer t is.
func abilityOf(t *timer) *ability {
	return (*ability)(unsafe.Add(unsafe.Pointer(t), -int(unsafe.Offsetof(ability{}.rewake))))
}

// NewWorker registers a worker whose sleeps end with a call to waker.Wake.
func (s *Sched) NewWorker(waker Waker) *Worker {
	w := &Worker{s: s, waker: waker, id: atomic.AddUint64(&s.workerSeq, 1)}
	w.freeAt.Store(s.latency())
	return w
}

// SetName names the worker (a host, a location) for EndedJob and JobView.
func (w *Worker) SetName(name string) { w.name.Store(&name) }

// Name is what SetName set, or "".
func (w *Worker) Name() string {
	if p := w.name.Load(); p != nil {
		return *p
	}
	return ""
}

// ID numbers workers from 1 in creation order.
func (w *Worker) ID() uint64 { return w.id }

// Abilities appends the worker's function names in the order Grab tries
// them: most recently registered first (rotated by RoundRobin).
func (w *Worker) Abilities(dst []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.abilities) - 1; i >= 0; i-- {
		dst = append(dst, w.abilities[i].fn.name)
	}
	return dst
}

// manyAbilities is where finding an ability by name switches from a scan
// to a map.
const manyAbilities = 16

func (w *Worker) find(name []byte) *ability {
	if w.byName != nil {
		return w.byName[string(name)]
	}
	for _, a := range w.abilities {
		if a.fn.name == string(name) {
			return a
		}
	}
	return nil
}

// CanDo registers (or re-registers with a new timeout) a function. A
// timeout > 0 requeues a job that runs longer than that.
func (w *Worker) CanDo(name []byte, timeout time.Duration) {
	if a := w.find(name); a != nil {
		a.sh.mu.Lock()
		a.timeout = timeout
		a.sh.mu.Unlock()
		return
	}
	sh := w.s.shardFor(name)
	sh.mu.Lock()
	f := w.s.function(sh, name)
	f.workers++
	a := &ability{w: w, fn: f, sh: sh, timeout: timeout}
	if w.state.Load() != awake {
		f.sleepers.push(a)
	}
	sh.mu.Unlock()
	w.mu.Lock()
	w.abilities = append(w.abilities, a)
	w.mu.Unlock()
	switch {
	case w.byName != nil:
		w.byName[f.name] = a
	case len(w.abilities) >= manyAbilities:
		w.byName = make(map[string]*ability, len(w.abilities))
		for _, a := range w.abilities {
			w.byName[a.fn.name] = a
		}
	}
}

// CantDo unregisters a function.
func (w *Worker) CantDo(name []byte) {
	a := w.find(name)
	if a == nil {
		return
	}
	w.drop(a)
	if w.byName != nil {
		delete(w.byName, a.fn.name)
	}
	i := slices.Index(w.abilities, a)
	w.mu.Lock()
	w.abilities = slices.Delete(w.abilities, i, i+1)
	w.mu.Unlock()
}

// Reset unregisters every function.
func (w *Worker) Reset() {
	for _, a := range w.abilities {
		w.drop(a)
	}
	w.mu.Lock()
	clear(w.abilities)
	w.abilities = w.abilities[:0]
	w.mu.Unlock()
	w.byName = nil
}

func (w *Worker) drop(a *ability) {
	a.sh.mu.Lock()
	a.fn.workers--
	a.fn.sleepers.remove(a)
	woken := a.woken
	w.s.unmark(a)
	a.sh.settle(a.fn)
	a.sh.mu.Unlock()
	if woken {
		w.s.cover(a.sh, a.fn) // its jobs wait for a worker still here
	}
}

// Attempt is what a job looked like as a worker's attempt at it began:
// the attributes that a requeue or a replace may change later, read under
// the lock that Grab holds anyway.
type Attempt struct {
	When    int64         // unix time the job was due at (0: at once)
	Timeout time.Duration // this attempt's run timeout (0: none)
	Counter int64
	// Started is when this attempt began; PrevStarted when the one before
	// it did (zero for a first attempt).
	Started, PrevStarted time.Time
}

// Grab hands the worker the next job from its functions, or nil. The job
// is the worker's until it reports a terminal Update, requeues it, times
// out or the worker closes.
func (w *Worker) Grab() *Job { return w.GrabAttempt(nil) }

// GrabAttempt is Grab that also fills a (when not nil) with the job's
// attributes as this attempt begins.
func (w *Worker) GrabAttempt(a *Attempt) *Job {
	w.state.Store(awake)
	by := w.settleWake()
	j := w.grab(a)
	if by != nil {
		// It may have taken another function's job, or found the one it
		// was woken for gone: whatever of by's function is still
		// waiting gets a worker of its own.
		w.s.cover(by.sh, by.fn)
	}
	return j
}

func (w *Worker) grab(a *Attempt) *Job {
	if !w.s.leased() {
		return nil
	}
	for i := len(w.abilities) - 1; i >= 0; i-- {
		ab := w.abilities[i]
		sh := ab.sh
		sh.mu.Lock()
		if ab.fn.paused { // see Pause
			sh.mu.Unlock()
			continue
		}
		j := ab.fn.pop()
		if j == nil {
			sh.mu.Unlock()
			continue
		}
		j.stopClock(&sh.wheel) // its QueueTimeout, if it has one
		j.state = stateRunning
		j.worker = w
		ab.fn.running++
		w.s.begun(sh, j)
		timeout := ab.timeout
		if j.ext != nil && j.ext.timeout > 0 {
			timeout = j.ext.timeout
		}
		// The clock is read only for a job that shows when it ran (a caller
		// that asks for the Attempt, a job with attributes) or that will
		// time out: a plain Gearman grab does without it.
		if a != nil || timeout > 0 || j.ext != nil || j.is(flagForever) {
			now := w.s.clock.Now()
			x := j.more()
			x.prevStart = x.started
			x.started = int64(now.Sub(w.s.epoch)) + 1 // never 0: 0 means never started
			if timeout > 0 {
				sh.wheel.arm(j.clock(timerTimeout), w.s.deadline(now.Add(timeout)))
			}
		}
		if a != nil {
			w.s.attempt(j, timeout, a)
		}
		w.hold(j)
		sh.mu.Unlock()
		if w.s.rr && len(w.abilities) > 1 {
			// Tried last next time.
			w.mu.Lock()
			copy(w.abilities[1:i+1], w.abilities[:i])
			w.abilities[0] = ab
			w.mu.Unlock()
		}
		return j
	}
	return nil
}

// attempt fills a for a job just grabbed. Caller holds j's shard lock.
func (s *Sched) attempt(j *Job, timeout time.Duration, a *Attempt) {
	*a = Attempt{Timeout: timeout, Started: s.wallOf(j.started())}
	if x := j.ext; x != nil {
		a.When, a.Counter, a.PrevStarted = x.when, x.counter, s.wallOf(x.prevStart)
	}
}

// wallOf turns a started value into the calendar time it stands for, by
// the wall clock's offset now.
func (s *Sched) wallOf(started int64) time.Time {
	if started == 0 {
		return time.Time{}
	}
	ago := s.clock.Now().Sub(s.epoch.Add(time.Duration(started - 1)))
	return s.clock.Wall().Add(-ago)
}

// Sleep records that the worker waits for work. It returns true when work
// is already waiting (answer at once); otherwise the worker's Waker is
// called once work arrives.
func (w *Worker) Sleep() bool {
	w.settleWake() // before it may be woken again: one rewake armed at a time
	w.state.Store(asleep)
	leased := w.s.leased()
	if w.s.lyingDown != nil {
		w.s.lyingDown()
	}
	ready := w.sleepOn(leased)
	if !ready && !leased && w.s.leased() {
		// The lease came back while we lay down: the tick that saw it
		// back may have looked for sleepers before we were among them,
		// and will not look again. So look ourselves.
		ready = w.sleepOn(true)
	}
	// If someone else woke us meanwhile, their Wake carries the news.
	return ready && w.state.CompareAndSwap(asleep, woken)
}

// sleepOn puts the worker among the sleepers of each of its functions
// until one has work it may take (leased: the lease holds), and says
// whether one had.
func (w *Worker) sleepOn(leased bool) bool {
	for _, a := range w.abilities {
		sh := a.sh
		sh.mu.Lock()
		ready := leased && a.fn.queued() > 0 && !a.fn.paused
		if !ready && !a.inSleepers {
			a.fn.sleepers.push(a)
		}
		sh.mu.Unlock()
		if ready {
			return true
		}
	}
	return false
}

// ClearTimeouts disarms the run timeouts of the jobs the worker holds now:
// each runs as long as the worker takes. Jobs grabbed later get their
// ability's timeout as usual.
func (w *Worker) ClearTimeouts() {
	w.mu.Lock()
	if w.nheld == 0 {
		w.mu.Unlock()
		return
	}
	ids := make([]uint64, 0, w.nheld)
	for j := w.held; j != nil; j = j.next {
		ids = append(ids, j.id)
	}
	w.mu.Unlock()
	for _, id := range ids { // shard lock before worker lock, so one at a time
		sh := w.s.shardOf(id)
		sh.mu.Lock()
		if j := sh.job(id); j != nil && j.worker == w && j.state == stateRunning {
			j.stopClock(&sh.wheel)
		}
		sh.mu.Unlock()
	}
}

// hold adds j, just taken off its queue, to the worker's held list: its
// prev and next, free while it runs, link it there. Caller holds j's shard
// lock.
func (w *Worker) hold(j *Job) {
	w.mu.Lock()
	j.prev = nil
	j.next = w.held
	if w.held != nil {
		w.held.prev = j
	}
	w.held = j
	w.nheld++
	w.mu.Unlock()
}

// release removes j from its worker's held list, before j goes anywhere
// else. Caller holds j's shard lock.
func (j *Job) release() {
	w := j.worker
	w.mu.Lock()
	if j.prev != nil {
		j.prev.next = j.next
	} else {
		w.held = j.next
	}
	if j.next != nil {
		j.next.prev = j.prev
	}
	j.prev, j.next = nil, nil
	w.nheld--
	w.mu.Unlock()
	j.worker = nil
}

// Running is the number of jobs the worker holds.
func (w *Worker) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nheld
}

// Update reports on a job the worker holds and delivers it to the job's
// listeners. A terminal kind ends the job. ErrNotFound means the worker
// does not hold that job (unknown, finished, or taken back on timeout).
func (w *Worker) Update(id uint64, u *Update) error {
	sh := w.s.shardOf(id)
	sh.mu.Lock()
	j := sh.job(id)
	if j == nil || (j.worker != w || j.state != stateRunning) && !j.reportedBy(w) {
		sh.mu.Unlock()
		if w.forgetEnded(id, u.Kind.Terminal()) {
			return nil
		}
		return ErrNotFound
	}
	if u.Kind == Status {
		x := j.more()
		x.num, x.den = atou32(u.Data), atou32(u.Den)
	}
	if j.is(flagForever) && (u.Kind == Fail || u.Kind == Exception) {
		// A failed attempt at a job that retries for ever is no news for
		// its listeners: back to the queue (unless w's attempt was already
		// given up on, see reportedBy).
		var wake wakeList
		ended := false
		if j.worker == w && j.state == stateRunning {
			sh.count(j.fn, j.src, eventOf(u.Kind))
			w.s.failed(j, failKindOf(u.Kind), w, u.Reason, u.Data, !j.superseded())
			if ended = w.s.putBack(sh, j, 0, false, &wake); !ended {
				sh.count(j.fn, j.src, EventRetried)
			}
		} else {
			j.heardFrom(w)
		}
		f := j.fn
		sh.mu.Unlock()
		if ended {
			w.s.ended(j)
		}
		w.s.wakeAll(sh, f, &wake, u.Origin)
		return nil
	}
	ls := collect(w.scratch[:0], j, u.Kind.Terminal())
	if u.Kind.Terminal() {
		j.heardFrom(w)
		sh.count(j.fn, j.src, eventOf(u.Kind))
		if u.Kind != Complete {
			w.s.failed(j, failKindOf(u.Kind), w, u.Reason, u.Data, false)
		}
		switch {
		case j.state == stateQueued: // a late result: it need not run again
			j.fn.queues[j.prio].remove(j)
			sh.forget(j)
		case j.worker != w: // a late result: the second attempt is not wanted
			j.worker.addEnded(j.id)
			w.s.finish(sh, j)
		default:
			w.s.finish(sh, j)
		}
	}
	sh.mu.Unlock()
	notifyAll(ls, id, u)
	clear(ls)
	w.scratch = ls[:0]
	if u.Kind.Terminal() {
		w.s.ended(j)
	}
	return nil
}

// reportedBy says whether w may report on j: it holds j, or j overran
// w's run timeout and has not ended. A timeout sends the job to be tried
// again, but the attempt that overran is not void: the first attempt to
// finish gives the job's result, and the others' results are dropped
// (see Worker.ended). Caller holds j's shard lock.
func (j *Job) reportedBy(w *Worker) bool {
	switch j.state {
	case stateRunning:
		return j.worker == w || j.overran(w)
	case stateQueued:
		return j.overran(w)
	}
	return false
}

// heardFrom drops w from the workers that overran j: it has had its say
// (see Sched.forget). Caller holds j's shard lock.
func (j *Job) heardFrom(w *Worker) {
	if j.ext != nil {
		j.ext.late = slices.DeleteFunc(j.ext.late, func(x *Worker) bool { return x == w })
	}
}

func (j *Job) overran(w *Worker) bool {
	return slices.Contains(j.late(), w)
}

// maxLate bounds the workers a job remembers as having overran it, and
// maxEnded the jobs a worker remembers as finished by another attempt: a
// job that overruns every worker, or a worker that never reports, costs a
// bounded amount. Past them, a late result gets ErrNotFound as in gearmand.
const (
	maxLate  = 8
	maxEnded = 64
)

// addEnded records that another attempt finished job id. Caller holds the
// job's shard lock.
func (w *Worker) addEnded(id uint64) {
	w.mu.Lock()
	if len(w.ended) == maxEnded {
		w.ended = append(w.ended[:0], w.ended[1:]...)
	}
	w.ended = append(w.ended, id)
	w.mu.Unlock()
}

// forgetEnded reports whether another attempt finished job id, and with
// last forgets it: w's final word on it has come.
func (w *Worker) forgetEnded(id uint64, last bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.Index(w.ended, id)
	if i >= 0 && last {
		w.ended = slices.Delete(w.ended, i, i+1)
	}
	return i >= 0
}

// finish removes a running job for good. Caller holds sh.mu.
func (s *Sched) finish(sh *shard, j *Job) {
	sh.note(j) // while it knows its worker
	s.ranFor(sh, j)
	j.stopClock(&sh.wheel)
	j.release()
	j.fn.running--
	sh.forget(j)
}

// Close gives the worker's jobs back: each goes to the tail of its queue as
// a retry (or fails when it has used up its retries), and the worker's
// abilities and deadline are dropped.
func (w *Worker) Close() {
	w.ExpectWithin(0)
	w.Reset()
	w.takeBack()
}

// takeBack retries every job the worker holds. Safe from any goroutine.
func (w *Worker) takeBack() {
	for {
		w.mu.Lock()
		j := w.held
		w.mu.Unlock()
		if j == nil {
			return
		}
		w.s.retry(j, w, false)
	}
}

// Expirer is a Waker that hears when its worker's deadline passes (see
// ExpectWithin).
type Expirer interface {
	Expired()
}

// ExpectWithin says the worker must be heard from again within d: a
// frontend calls it on every sign of life (a pulse, a heartbeat), and each
// call moves the deadline; d <= 0 clears it. The deadline is a timer in a
// shard's wheel, so it fires within a tick of its time, idle worker or not.
// If it passes, the jobs the worker holds go back to their queues as
// retries, as if it had disconnected, and its Waker, if it is an Expirer,
// hears Expired (from the timer's goroutine, outside every lock); the
// frontend then Closes the worker from its own goroutine.
func (w *Worker) ExpectWithin(d time.Duration) {
	sh := w.deadlineShard()
	sh.mu.Lock()
	if d <= 0 {
		sh.wheel.cancel(&w.deadline)
	} else {
		w.deadline.kind, w.deadline.worker = timerDeadline, w
		sh.wheel.arm(&w.deadline, w.s.deadline(w.s.clock.Now().Add(d)))
	}
	w.lapsed = false
	sh.mu.Unlock()
}

func (w *Worker) deadlineShard() *shard {
	return &w.s.shards[w.id&uint64(len(w.s.shards)-1)]
}

// lapse is what a passed deadline does, unless ExpectWithin moved or
// cleared it since it fired.
func (w *Worker) lapse() {
	sh := w.deadlineShard()
	sh.mu.Lock()
	lapsed := w.lapsed
	w.lapsed = false
	sh.mu.Unlock()
	if !lapsed {
		return
	}
	w.takeBack()
	if e, ok := w.waker.(Expirer); ok {
		e.Expired()
	}
}

// Holding appends the ids of the jobs the worker holds to dst.
func (w *Worker) Holding(dst []uint64) []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for j := w.held; j != nil; j = j.next {
		dst = append(dst, j.id)
	}
	return dst
}

// Retry gives back a job the worker holds as a lost attempt: it counts
// against Config.JobRetries, and fails when they are used up, as when a
// worker dies holding it. For a worker that says it could not run the job.
// ErrNotFound means the worker does not hold the job.
func (w *Worker) Retry(id uint64) error {
	sh := w.s.shardOf(id)
	sh.mu.Lock()
	j := sh.job(id)
	held := j != nil && j.worker == w && j.state == stateRunning
	sh.mu.Unlock()
	if !held {
		return ErrNotFound
	}
	w.s.retry(j, w, false)
	return nil
}

// RequeueReq says how a job a worker holds goes back to its queue.
type RequeueReq struct {
	// Delay runs the job no earlier than this long from now; 0 = at once.
	// The job's due time (Attempt.When) becomes now + Delay, in whole
	// seconds.
	Delay time.Duration
	// Step is added to the job's counter.
	Step int64
	// Front puts the job back at the head of its queue, not the tail (with
	// no Delay): for a job the worker turned down without starting it.
	Front bool
}

// Requeue gives back a job the worker holds, to run again after r.Delay.
// The attempt does not count against Config.JobRetries. A job replaced
// while it ran (SubmitReq.Replace) ends instead: its successor already
// waits. ErrNotFound means the worker does not hold the job.
func (w *Worker) Requeue(id uint64, r RequeueReq) error {
	sh := w.s.shardOf(id)
	var wake wakeList
	sh.mu.Lock()
	j := sh.job(id)
	if j == nil || j.worker != w || j.state != stateRunning {
		sh.mu.Unlock()
		return ErrNotFound
	}
	if r.Step != 0 {
		j.more().counter += r.Step
	}
	if r.Delay > 0 {
		j.more().when = w.s.clock.Wall().Add(r.Delay).Unix()
	}
	ended := w.s.putBack(sh, j, r.Delay, r.Front, &wake)
	if !ended && j.background && w.s.durable && (r.Delay > 0 || r.Step != 0) {
		w.s.store.Put(j.id, w.s.encode(j, j.fn.name), nil) // its new due time and counter
	}
	f := j.fn
	sh.mu.Unlock()
	if ended {
		w.s.ended(j)
	}
	w.s.wakeAll(sh, f, &wake, nil)
	return nil
}

// putBack returns a running job to its queue, or to the wheel for delay:
// its worker lets go of it. It reports whether the job ended instead,
// because a replace made a successor while it ran. Caller holds sh.mu.
func (s *Sched) putBack(sh *shard, j *Job, delay time.Duration, front bool, wake *wakeList) (ended bool) {
	s.ranFor(sh, j)
	j.stopClock(&sh.wheel)
	j.release()
	j.fn.running--
	if j.superseded() {
		sh.forget(j)
		return true
	}
	switch {
	case delay > 0:
		s.placeAt(sh, j, s.deadline(s.clock.Now().Add(delay)), true, wake)
	case front:
		j.state = stateQueued
		j.fn.queues[j.prio].pushFront(j)
		s.queuedAt(j)
		s.queueClock(sh, j)
		s.collectSleepers(j.fn, wake)
	default:
		s.placeAt(sh, j, 0, false, wake)
	}
	return false
}

// superseded reports whether a replace gave j's key to another job.
// Caller holds j's shard lock.
func (j *Job) superseded() bool {
	k := j.key()
	return k != "" && j.fn.uniqueJob(k) != j
}

// retry takes a running job back from worker w: gone, or too slow
// (timedOut), in which case w may still report its result.
func (s *Sched) retry(j *Job, w *Worker, timedOut bool) {
	sh := s.shardOf(j.id)
	var wake wakeList
	var failed []*Client
	sh.mu.Lock()
	if j.worker != w || j.state != stateRunning {
		sh.mu.Unlock()
		return
	}
	if timedOut && !j.overran(w) {
		x := j.more()
		if len(x.late) == maxLate {
			x.late = append(x.late[:0], x.late[1:]...)
		}
		x.late = append(x.late, w)
	}
	f := j.fn
	if !j.is(flagForever) {
		j.retries++
	}
	if timedOut {
		sh.count(f, j.src, EventTimedOut)
	}
	switch {
	case !j.is(flagForever) && s.retries > 0 && j.retries >= s.retries:
		failed = collect(nil, j, true)
		sh.count(f, j.src, EventFailed)
		s.failed(j, FailRetries, w, "", nil, false)
		s.finish(sh, j)
	case !j.background && j.listeners == nil:
		s.finish(sh, j) // nobody is waiting for it any more
	default:
		if !s.putBack(sh, j, 0, false, &wake) {
			sh.count(f, j.src, EventRetried)
		}
	}
	done := j.state == stateDone
	sh.mu.Unlock()
	if failed != nil {
		notifyAll(failed, j.id, &Update{Kind: Fail})
	}
	if done {
		s.ended(j)
	}
	s.wakeAll(sh, f, &wake, nil)
}

// wakeList gathers sleepers to wake once the shard lock is released.
type wakeList struct {
	w     [16]*Worker
	n     int
	total int // woken so far for this job
	limit int // the wake-up limit it was collected under
}

// collectSleepers pops sleeping workers of f into wl, honouring the
// wake-up limit. Caller holds f's shard lock.
func (s *Sched) collectSleepers(f *function, wl *wakeList) {
	s.collect(f, wl, s.wakeup)
}

// collect is collectSleepers under the wake-up limit given. Caller holds
// f's shard lock.
func (s *Sched) collect(f *function, wl *wakeList, limit int) {
	wl.limit = limit
	if f.paused || !s.leased() {
		return // they stay asleep on it: Resume, or the lease back, wakes them
	}
	for wl.n < len(wl.w) {
		switch {
		case limit > 0 && wl.total >= limit:
			return
		case limit == WakeDemand && f.queued() <= f.woken:
			return
		}
		a := f.sleepers.head
		if a == nil {
			return
		}
		f.sleepers.remove(a)
		if a.w.state.CompareAndSwap(asleep, woken) {
			wl.w[wl.n] = a.w
			wl.n++
			wl.total++
			if limit == WakeDemand {
				s.mark(a)
			}
		}
	}
}

// mark counts a, just woken, as woken for its function's jobs until its
// worker asks for work, and arms its rewake. Caller holds a.sh.mu.
func (s *Sched) mark(a *ability) {
	if !a.woken {
		a.woken = true
		a.fn.woken++
	}
	a.rewake.kind = timerRewake
	a.sh.wheel.arm(&a.rewake, s.deadline(s.clock.Now().Add(RewakeAfter)))
	a.w.wokenBy.Store(a)
}

// unmark undoes mark. Caller holds a.sh.mu.
func (s *Sched) unmark(a *ability) {
	if a.woken {
		a.woken = false
		a.fn.woken--
		a.sh.wheel.cancel(&a.rewake)
	}
}

// heard settles a wake-up through a: its worker asked for work.
func (s *Sched) heard(a *ability) {
	a.sh.mu.Lock()
	s.unmark(a)
	a.sh.mu.Unlock()
}

// cover wakes sleepers of f for the jobs of f that no woken worker will
// take (WakeDemand).
func (s *Sched) cover(sh *shard, f *function) {
	if s.wakeup != WakeDemand {
		return
	}
	var wl wakeList
	sh.mu.Lock()
	s.collect(f, &wl, WakeDemand)
	sh.mu.Unlock()
	s.wakeAll(sh, f, &wl, nil)
}

// rewoken is what a passed rewake does: a worker woken for a's function
// did not ask for work in time, so every other sleeper of the function is
// woken, as without WakeDemand. Caller holds a.sh.mu; the list is woken
// after it is let go.
func (s *Sched) rewoken(a *ability, wl *wakeList) {
	if !a.woken {
		return // settled since it fired
	}
	s.unmark(a)
	if a.fn.queued() > 0 {
		s.collect(a.fn, wl, 0)
	}
}

// wakeAll wakes the collected workers outside the lock, going back for
// more when the list filled up.
func (s *Sched) wakeAll(sh *shard, f *function, wl *wakeList, origin any) {
	for wl.n > 0 {
		full := wl.n == len(wl.w)
		for i := 0; i < wl.n; i++ {
			wl.w[i].waker.Wake(origin)
			wl.w[i] = nil
		}
		wl.n = 0
		if !full {
			return
		}
		sh.mu.Lock()
		s.collect(f, wl, wl.limit)
		sh.mu.Unlock()
	}
}

func atou32(b []byte) uint32 {
	var n uint32
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint32(c-'0')
	}
	return n
}

// bytesString views b as a string; b must never change afterwards.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
