package sched

import (
	"errors"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Errors a frontend turns into its protocol's reply.
var (
	ErrQueueFull    = errors.New("sched: job queue is full")
	ErrNotFound     = errors.New("sched: job not found")
	ErrNoFunction   = errors.New("sched: function not found")
	ErrFunctionBusy = errors.New("sched: function has workers or jobs")
	ErrClosed       = errors.New("sched: client closed")
	// ErrEnded: a submit with Remember named a job that has ended (see
	// EndedJob); Submit returns that job's id with it.
	ErrEnded = errors.New("sched: job has ended")
)

// Config tunes a scheduler. The zero value is usable.
type Config struct {
	// Shards is rounded up to a power of two; 0 means DefaultShards. Job
	// ids carry their shard, so a Store's jobs replay under the same ids
	// only into a scheduler with the same number of shards.
	Shards int
	// WorkerWakeup caps how many sleeping workers a new job wakes; 0 = all
	// of them (gearmand's default), WakeDemand one per job waiting.
	WorkerWakeup int
	// JobRetries fails a job after this many lost attempts; 0 = never.
	JobRetries int
	// RoundRobin rotates a worker's functions after each grab instead of
	// always trying them in registration order (gearmand -R).
	RoundRobin bool
	// Tick is the timer resolution; 0 = 10ms. Negative disables the ticker:
	// the owner then drives timers with Advance (tests do).
	Tick time.Duration
	// Clock is the time source; nil means the system's.
	Clock Clock
	// FunctionTTL forgets a function that has had no job, no worker and no
	// admin setting (CreateFunc, SetMaxQueue) for this long; 0 keeps every
	// function for ever.
	FunctionTTL time.Duration
	// Store persists background jobs; nil keeps them in memory only.
	Store Store
	// EndedRetention is how long the note of a job submitted with
	// SubmitReq.Remember is kept once it ends; 0 = DefaultEndedRetention.
	// EndedMax bounds the notes kept (0 = DefaultEndedMax); past it the
	// oldest go first.
	EndedRetention time.Duration
	EndedMax       int
	// Latency measures how long jobs wait in their queues and how long
	// each attempt runs, into the histograms of Stats: it reads the
	// monotonic clock as a job enters its queue, as a worker takes it and
	// as the attempt ends. Off, those histograms stay empty.
	// Each function's recent latency (FuncLatencies) and the age of its
	// oldest waiting job (FuncStat.OldestWait) are read from the same
	// clock readings, and are there only with it.
	Latency bool
	// FuncHistograms keeps, with Latency, each function's latency
	// histograms since it was made (FuncLatency.Wait and Run), for
	// per-function metrics: 368 bytes more per function that has had a
	// job taken.
	FuncHistograms bool
	// Failures is how many of each function's latest failures are kept
	// for Failures (a worker's fail or exception, retries used up, a
	// queue timeout), each with up to MaxFailureText bytes of why; 0
	// keeps none.
	Failures int
	// Lease, if set, says whether the scheduler's state is still the one
	// to act on: a cluster leader's hold on its term, which another node
	// may take over once it lapses (a leader frozen, then thawed, acts on
	// its old state at once, before it learns of the new one). While it
	// says no, Grab hands out nothing, Sleep finds no work waiting and no
	// job wakes a worker, as if every function were paused; once it says
	// yes again (it is looked at each tick) the workers asleep on
	// functions with jobs waiting are woken. It is called on every grab:
	// it must be quick and must not block.
	Lease func() bool
}

// WakeDemand, as Config.WorkerWakeup, wakes as many sleeping workers as
// a function has jobs waiting beyond the workers already woken for it,
// instead of all of them: one new job, one worker woken, where waking
// every sleeper sends all but one of them round the NOOP, GRAB_JOB,
// NO_JOB, PRE_SLEEP cycle for nothing. A woken worker that has not asked
// for work within RewakeAfter (a frozen process, a host gone without a
// FIN) is given up on, and every other sleeper of the function is woken,
// as 0 would have at once.
const WakeDemand = -1

// RewakeAfter is how long a worker woken under WakeDemand has to ask for
// work before the function's other sleepers are woken; the timer fires
// within a tick of it.
const RewakeAfter = 10 * time.Millisecond

// DefaultShards is the number of shards unless Config.Shards says
// otherwise: fixed, not derived from the CPU count, so that job ids (which
// name their shard) mean the same after a restart on another machine or
// with another GOMAXPROCS. 256 is 4 per CPU up to 64 CPUs.
const DefaultShards = 256

// Sched is the scheduler shared by every frontend.
type Sched struct {
	shards     []shard
	shardBits  uint
	wakeup     int
	retries    uint32
	rr         bool
	tick       time.Duration
	epoch      time.Time // tick 0, on clock.Now's scale
	clock      Clock
	ttl        time.Duration // Config.FunctionTTL
	store      Store
	durable    bool
	timers     *timerCount
	idle       timerCount // functions waiting out their TTL, see ForgetIdle
	stop       chan struct{}
	done       sync.WaitGroup
	workerSeq  uint64
	funcSeq    atomic.Uint64
	endedKeep  time.Duration              // Config.EndedRetention
	endedMax   int                        // notes per shard, see Config.EndedMax
	timed      bool                       // Config.Latency
	funcTotals bool                       // Config.FuncHistograms
	failKeep   int                        // Config.Failures
	refused    [NumRefusals]atomic.Uint64 // submits refused, by reason (rare: atomics, no lock)
	lease      func() bool                // Config.Lease
	// leaseLapsed is set when the lease said no to a hand-out or a wake,
	// with a timer counted so that the ticker looks for its return.
	leaseLapsed atomic.Bool
	// lyingDown, in tests, runs in Sleep between its look at the lease
	// and its lying down among the sleepers.
	lyingDown func()
	// releases take back the payloads their frontends lent (OwnPayload),
	// by the submitter's Source: see SetRelease.
	releases [MaxSources]atomic.Pointer[func([]byte)]
}

// SetRelease has every payload a client of src lends (SubmitReq.OwnPayload)
// handed to release once its job has ended and the scheduler no longer
// refers to it, so that the frontend can reuse the buffer. release runs
// under a shard lock and must be quick. A frontend sets it for its own
// Source before its first submit; without it, a lent payload is left to
// the garbage collector.
func (s *Sched) SetRelease(src Source, release func(payload []byte)) {
	s.releases[src].Store(&release)
}

// giveBack hands a lent payload back to its frontend.
func (s *Sched) giveBack(src Source, payload []byte) {
	if f := s.releases[src].Load(); f != nil {
		(*f)(payload)
	}
}

type shard struct {
	mu    sync.Mutex
	funcs map[string]*function
	jobs  jobTable
	seq   atomic.Uint64
	wheel wheel
	idx   uint64
	bits  uint // shard bits: a job's sequence number is id >> bits
	s     *Sched
	idle  funcList               // functions with nothing in them, oldest first
	peak  int                    // most functions held since funcs was last rebuilt
	keyed map[*function]struct{} // functions whose unique index is not empty
	ended endedNotes             // jobs submitted with Remember that ended, see ended.go
	stats shardStats             // this shard's share of Stats
	_     [64]byte               // keep neighbouring shard locks off one cache line
}

// New starts a scheduler; Close stops its ticker.
func New(cfg Config) *Sched {
	n := cfg.Shards
	if n <= 0 {
		n = DefaultShards
	}
	b := uint(bits.Len(uint(n - 1)))
	s := &Sched{
		shards:     make([]shard, 1<<b),
		shardBits:  b,
		wakeup:     cfg.WorkerWakeup,
		retries:    uint32(cfg.JobRetries),
		rr:         cfg.RoundRobin,
		tick:       cfg.Tick,
		clock:      cfg.Clock,
		ttl:        cfg.FunctionTTL,
		store:      cfg.Store,
		timed:      cfg.Latency,
		funcTotals: cfg.Latency && cfg.FuncHistograms,
		failKeep:   max(cfg.Failures, 0),
		lease:      cfg.Lease,
		stop:       make(chan struct{}),
		timers:     newTimerCount(),
	}
	if s.clock == nil {
		s.clock = systemClock{}
	}
	s.epoch = s.clock.Now()
	s.idle.kick = make(chan struct{}, 1)
	s.durable = s.store != nil
	if !s.durable {
		s.store = memStore{}
	}
	if r, ok := s.store.(Resyncer); ok {
		r.Attach(s)
	}
	if s.tick == 0 {
		s.tick = 10 * time.Millisecond
	}
	s.endedKeep, s.endedMax = cfg.EndedRetention, cfg.EndedMax
	if s.endedKeep <= 0 {
		s.endedKeep = DefaultEndedRetention
	}
	if s.endedMax <= 0 {
		s.endedMax = DefaultEndedMax
	}
	s.endedMax = max(1, s.endedMax/len(s.shards))
	for i := range s.shards {
		s.shards[i] = shard{funcs: make(map[string]*function), idx: uint64(i), bits: b, s: s}
		s.shards[i].wheel.count = s.timers
	}
	if s.tick > 0 {
		// One ticker advances every wheel; another forgets idle functions
		// about eight times per TTL (at most once a minute).
		s.done.Add(1)
		go s.every(s.tick, s.timers, func() { s.Advance(s.clock.Now()) })
		if s.ttl > 0 {
			s.done.Add(1)
			go s.every(min(max(s.ttl/8, 10*time.Millisecond), time.Minute), &s.idle,
				func() { s.ForgetIdle(s.clock.Now()) })
		}
	}
	return s
}

// Close stops the ticker. Jobs stay where they are.
func (s *Sched) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.done.Wait()
}

// every calls fn each d while c counts anything, sleeps while it counts
// nothing, and returns once the scheduler is closed.
func (s *Sched) every(d time.Duration, c *timerCount, fn func()) {
	defer s.done.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		if c.armed.Load() == 0 {
			t.Stop()
			select {
			case <-s.stop:
				return
			case <-c.kick:
			}
			t.Reset(d)
		}
		select {
		case <-s.stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// shardFor is the shard of a function. The hash is FNV-1a, the same in
// every process, so a function's shard, and with it the ids of its jobs,
// survive a restart. (A seeded hash would let no one steer names into one
// shard, but that costs parallelism only: each shard's maps are Go's own,
// randomly seeded.)
func (s *Sched) shardFor(name []byte) *shard {
	h := uint64(14695981039346656037)
	for _, c := range name {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 32 // FNV's low bits mix poorly; the shard index is the low bits
	return &s.shards[h&uint64(len(s.shards)-1)]
}

func (s *Sched) shardOf(id uint64) *shard {
	return &s.shards[id&uint64(len(s.shards)-1)]
}

// job finds a live job by id. Caller holds sh.mu.
func (sh *shard) job(id uint64) *Job { return sh.jobs.get(id >> sh.bits) }

// ticks converts a time on the Clock's Now scale to the wheel's tick count:
// the tick that time falls in.
func (s *Sched) ticks(t time.Time) int64 {
	d := t.Sub(s.epoch)
	if d < 0 {
		return 0
	}
	return int64(d / s.tickLen())
}

// deadline is the first tick that starts at or after t: a timer armed for
// it never fires before t (ticks would, by up to a tick, since ticks start
// at the scheduler's epoch and not on whole seconds).
func (s *Sched) deadline(t time.Time) int64 {
	return s.ticks(t.Add(s.tickLen() - 1))
}

func (s *Sched) tickLen() time.Duration {
	if s.tick < 0 {
		return time.Millisecond // manual mode: Advance(t) with ms resolution
	}
	return s.tick
}

// function returns sh's function for name, creating it, and takes it off
// the idle list: the caller is about to put something in it, or must call
// sh.settle(f) if it does not. Caller holds sh.mu.
func (s *Sched) function(sh *shard, name []byte) *function {
	f := sh.funcs[string(name)]
	if f == nil {
		f = newFunction(string(name), s.funcSeq.Add(1))
		sh.funcs[f.name] = f
		sh.peak = max(sh.peak, len(sh.funcs))
	} else {
		sh.busy(f)
	}
	return f
}

// forget removes a finished job from the shard's indexes. Caller holds sh.mu.
func (sh *shard) forget(j *Job) {
	sh.note(j)
	if k := j.key(); k != "" && j.fn.uniqueJob(k) == j {
		sh.forgetUnique(j.fn, k) // first: the index finds its jobs in the table
	}
	sh.jobs.remove(j.id>>sh.bits, sh.seq.Load())
	j.state = stateDone
	if j.ext != nil {
		for _, w := range j.ext.late {
			if w != j.worker {
				w.addEnded(j.id) // its result, if it comes, is dropped
			}
		}
		j.ext.late = nil
	}
	if j.is(flagOwned) {
		sh.s.giveBack(j.src, j.lent())
		j.setPayload(nil)
	}
	sh.settle(j.fn)
}

// SubmitReq describes a job to submit. Byte slices are copied, except
// Payload when OwnPayload is set.
type SubmitReq struct {
	Func       []byte
	Unique     []byte
	Payload    []byte
	Reducer    []byte
	Priority   Priority
	Background bool
	// CoalesceOnPayload makes the payload the coalescing key (gearman's
	// unique "-").
	CoalesceOnPayload bool
	// When runs the job no earlier than this unix time; 0 = now.
	When int64
	// Timeout bounds each attempt: a job a worker holds longer goes back to
	// its queue, as with an ability's timeout, which this overrides.
	Timeout time.Duration
	// Counter is the job's starting counter, see RequeueReq.Step.
	Counter int64
	// RetryForever makes the job end only by completing (or by Remove,
	// Cancel, Purge): a Fail or Exception from its worker puts it back in
	// its queue, and neither that nor a lost attempt (timeout, worker gone)
	// counts against Config.JobRetries.
	RetryForever bool
	// Replace makes a submit whose (function, key) names a live job replace
	// that job instead of joining it: a waiting job takes the new payload,
	// due time, priority and attributes and keeps its id (and its
	// listeners); a running one is left to finish as it was, and the new
	// job is queued under a new id in its place (the old one is dropped if
	// it comes back, see Worker.Requeue).
	Replace bool
	// Stored is how a frontend learns that a background job (which a
	// durable Store must keep) is on disk, so that it acknowledges only
	// then without waiting itself: Submit returns at once with Waiting set,
	// and Stored is called later, from the store's goroutine, with the
	// job's id (that of the job it joined or replaced) and nil, or the
	// error that kept it off disk, in which case the job is withdrawn as
	// by Cancel. Without Stored, Submit waits for the store. Submits by
	// one goroutine are answered in the order they were made.
	Stored func(id uint64, err error)
	// Waiting is set by Submit when Stored will be called.
	Waiting bool
	// Origin is the frontend's token for the goroutine submitting; it is
	// handed to the Wakers this submit wakes.
	Origin any
	// OwnPayload lets the job keep Payload itself, not a copy: the caller
	// promises never to touch that memory again. Frontends set it for large
	// payloads they read into a buffer of their own.
	OwnPayload bool
	// Kept is set by Submit when a job keeps the lent Payload (OwnPayload):
	// it comes back through the release (SetRelease) once the job ends.
	// Otherwise (the submit joined a job, or was refused) the buffer is
	// the caller's again when Submit returns.
	Kept bool
	// QueueTimeout bounds each wait of the job in its queue for a worker
	// (at submit, and again after a worker gives it back): past it the job
	// ends, and its listeners get a Fail. 0 = no bound.
	QueueTimeout time.Duration
	// Remember keeps a note of the job once it ends (see EndedJob): a later
	// submit of its name gets ErrEnded instead of running it again.
	Remember bool
	// After names the jobs this one waits for: it runs once each has
	// ended (completed, failed, cancelled or removed). A name with no live
	// job has ended already. A submit that joins a live job that is not
	// running adds After to what it waits for.
	After []Key
}

// Submit queues a job, or joins an existing one with the same function and
// unique (or replaces it, see Replace). For a foreground request
// (Background false) c is attached and hears the job's updates. It returns
// the job's id.
func (c *Client) Submit(r *SubmitReq) (uint64, error) {
	return c.s.submit(c, r)
}

func (s *Sched) submit(c *Client, r *SubmitReq) (uint64, error) {
	sh := s.shardFor(r.Func)
	// Build the job before taking the lock: the copy may be megabytes, and a
	// durable store must have it before anyone can see it.
	j := buildJob(r)
	j.id = sh.seq.Add(1)<<s.shardBits | sh.idx
	j.src = c.src
	var rec []byte // the record a durable store gets, made outside the lock
	if r.Background && s.durable {
		rec = s.encode(j, string(r.Func))
	}
	r.Waiting, r.Kept = false, false

	var wake wakeList
	sh.mu.Lock()
	f := s.function(sh, r.Func)
	key := j.key()
	if key != "" {
		if existing := f.uniqueJob(key); existing != nil {
			if r.Replace && existing.state != stateRunning {
				return s.replace(sh, c, existing, j, r, rec)
			}
			if !r.Replace {
				return s.join(sh, c, existing, r)
			}
			// Replacing a running job: j takes its key below.
		}
	}
	if r.Remember && key != "" {
		sh.expire(s.clock.Now())
		if i, ok := sh.ended.byKey[Key{f.name, key}]; ok {
			id := sh.ended.fifo[i].note.ID
			sh.settle(f)
			sh.mu.Unlock()
			s.refused[RefusedEnded].Add(1)
			return id, ErrEnded
		}
	}
	if max := f.maxQueue[r.Priority]; max > 0 && f.total() >= max {
		sh.settle(f)
		sh.mu.Unlock()
		s.refused[RefusedQueueFull].Add(1)
		return 0, ErrQueueFull
	}
	j.fn = f
	if !r.Background && !c.link(j) {
		sh.settle(f)
		sh.mu.Unlock()
		return 0, ErrClosed
	}
	sh.jobs.put(j.id>>s.shardBits, j)
	if key != "" {
		sh.addUnique(f, key, j) // after: the index finds its jobs in the table
	}
	r.Kept = j.is(flagOwned)
	sh.count(f, j.src, EventSubmitted)
	if len(r.After) > 0 {
		sh.block(j)
	} else {
		s.place(sh, j, &wake)
	}
	var wait chan error
	if rec != nil {
		wait = s.put(j.id, rec, r, true)
	}
	sh.mu.Unlock()
	s.wakeAll(sh, f, &wake, r.Origin)
	if len(r.After) > 0 {
		s.link(sh, j.id, r.After)
	}
	return j.id, s.await(j.id, wait, true)
}

// put queues a job's record, and flush a barrier for a submit that joined
// a job already stored (its record may still be queued); each arranges
// the submit's answer, see answer. fresh says the submit made the job.
// Caller holds the job's shard lock.
func (s *Sched) put(id uint64, rec []byte, r *SubmitReq, fresh bool) chan error {
	done, wait := s.answer(id, r, fresh)
	s.store.Put(id, rec, done)
	return wait
}

func (s *Sched) flush(id uint64, r *SubmitReq) chan error {
	done, wait := s.answer(id, r, false)
	s.store.Flush(done)
	return wait
}

// answer is the store's done for a submit of job id: it reaches r.Stored
// (a fresh job withdrawn first if the write failed), or, without Stored,
// the channel returned, for await. A refused submit that joined or
// replaced a live job leaves that job alone: another submitter may have
// been told it is stored, and a store that recovers writes it again from
// what the scheduler holds (see Resyncer).
func (s *Sched) answer(id uint64, r *SubmitReq, fresh bool) (done func(error), wait chan error) {
	if r.Stored == nil {
		wait = make(chan error, 1)
		return func(err error) { wait <- err }, wait
	}
	r.Waiting = true
	stored := r.Stored
	return func(err error) {
		if err != nil {
			s.refused[RefusedStore].Add(1)
			if fresh {
				s.Cancel(id) // never acknowledged: it must not run
			}
		}
		stored(id, err)
	}, nil
}

// await waits for the store's answer on wait, if any, withdrawing a fresh
// job when its record did not make it to disk (see answer).
func (s *Sched) await(id uint64, wait chan error, fresh bool) error {
	if wait == nil {
		return nil
	}
	if err := <-wait; err != nil {
		s.refused[RefusedStore].Add(1)
		if fresh {
			s.Cancel(id)
		}
		return err
	}
	return nil
}

// place puts a job that is in no list yet where it waits: its queue, or the
// wheel until its due time. Caller holds sh.mu.
func (s *Sched) place(sh *shard, j *Job, wake *wakeList) {
	due, later := int64(0), false
	if w := j.when(); w > 0 { // the clocks only for delayed jobs
		due, later = s.dueTick(w)
	}
	s.placeAt(sh, j, due, later, wake)
}

func (s *Sched) placeAt(sh *shard, j *Job, due int64, later bool, wake *wakeList) {
	if later {
		j.state = stateDelayed
		j.fn.delayed++
		sh.wheel.arm(j.clock(timerDue), due)
		return
	}
	j.state = stateQueued
	j.fn.queues[j.prio].pushBack(j)
	s.queuedAt(j)
	s.queueClock(sh, j)
	s.collectSleepers(j.fn, wake)
}

// unplace takes a waiting job out of its queue or the wheel. Caller holds
// sh.mu.
func (sh *shard) unplace(j *Job) {
	switch j.state {
	case stateQueued:
		j.fn.queues[j.prio].remove(j)
		j.stopClock(&sh.wheel)
	case stateDelayed:
		j.stopClock(&sh.wheel)
		j.fn.delayed--
	case stateBlocked:
		j.fn.blocked--
	}
}

// join attaches a submit to the live job it coalesces with. Called with
// sh.mu held; returns with it released.
func (s *Sched) join(sh *shard, c *Client, existing *Job, r *SubmitReq) (uint64, error) {
	var wait chan error
	relink := len(r.After) > 0 && sh.rewait(existing, r.After)
	if relink && existing.background && s.durable && !r.Background {
		s.store.Put(existing.id, s.encode(existing, existing.fn.name), nil) // its new predecessors
	}
	if r.Background {
		// This submitter is told the job exists, so it must run even if
		// every foreground client of it leaves, and survive a restart.
		if s.durable {
			if existing.background && !relink {
				wait = s.flush(existing.id, r) // its record may still be queued
			} else {
				wait = s.put(existing.id, s.encode(existing, existing.fn.name), r, false)
			}
		}
		existing.background = true
	} else if !c.link(existing) {
		sh.mu.Unlock()
		if relink {
			s.link(sh, existing.id, r.After)
		}
		return 0, ErrClosed
	}
	sh.count(existing.fn, c.src, EventSubmitted)
	sh.mu.Unlock()
	if relink {
		s.link(sh, existing.id, r.After)
	}
	return existing.id, s.await(existing.id, wait, false)
}

// replace gives a waiting job the content of fresh, built for this submit,
// and puts it where its new due time says. The job keeps its id, its
// listeners and its place in the indexes. Called with sh.mu held; returns
// with it released.
func (s *Sched) replace(sh *shard, c *Client, j, fresh *Job, r *SubmitReq, rec []byte) (uint64, error) {
	if !r.Background && !c.link(j) {
		sh.mu.Unlock()
		return 0, ErrClosed
	}
	sh.count(j.fn, c.src, EventSubmitted)
	blocked := j.state == stateBlocked
	if !blocked {
		sh.unplace(j)
	}
	if j.is(flagOwned) {
		sh.s.giveBack(j.src, j.lent())
	}
	// fresh's payload may lie in fresh's own allocation; j keeps it alive.
	p := fresh.payload()
	if fresh.is(flagOwned) {
		p = fresh.lent() // whole, for its release
	}
	j.set(flagOwned, fresh.is(flagOwned))
	j.setPayload(p)
	r.Kept = fresh.is(flagOwned)
	j.setReducer(fresh.Reducer())
	j.prio = fresh.prio
	j.background = j.background || fresh.background
	j.set(flagForever, fresh.is(flagForever))
	j.retries = 0
	if fresh.ext != nil || j.ext != nil {
		x, y := j.more(), fresh.more()
		x.when, x.timeout, x.counter = y.when, y.timeout, y.counter
	}
	var wake wakeList
	if !blocked { // else it waits on, and is placed when released
		s.place(sh, j, &wake)
	}
	var wait chan error
	if j.background && s.durable {
		if rec == nil { // a foreground replace of a stored job
			rec = s.encode(j, j.fn.name)
		}
		wait = s.put(j.id, rec, r, false)
	}
	sh.mu.Unlock()
	s.wakeAll(sh, j.fn, &wake, r.Origin)
	return j.id, s.await(j.id, wait, false)
}

// buildJob makes the job r describes, its id and function still unset.
// Submit and Replay both make jobs here.
func buildJob(r *SubmitReq) *Job {
	j := newJob(r)
	if len(r.Reducer) > 0 {
		j.setReducer(string(r.Reducer))
	}
	j.prio = r.Priority
	j.background = r.Background
	j.set(flagForever, r.RetryForever)
	if r.CoalesceOnPayload {
		j.attrs |= attrByPayload
	}
	j.set(flagRemember, r.Remember)
	if r.When != 0 || r.Timeout != 0 || r.Counter != 0 || len(r.After) > 0 || r.QueueTimeout > 0 {
		x := j.more()
		x.when, x.timeout, x.counter, x.queueWait = r.When, r.Timeout, r.Counter, r.QueueTimeout
		x.after = append([]Key(nil), r.After...)
	}
	return j
}

// encode is the record the store keeps of j, whose function is fn, from
// Store.Encode.
func (s *Sched) encode(j *Job, fn string) []byte {
	r := records.Get().(*Record)
	*r = Record{ID: j.id, Func: fn, Unique: j.Unique(), Payload: j.payload(), Reducer: j.Reducer(),
		Priority: j.prio, RetryForever: j.is(flagForever), CoalesceOnPayload: j.attrs&attrByPayload != 0, Remember: j.is(flagRemember)}
	if x := j.ext; x != nil {
		r.When, r.Timeout, r.Counter, r.After = x.when, x.timeout, x.counter, x.after
	}
	rec := s.store.Encode(r)
	*r = Record{}
	records.Put(r)
	return rec
}

// records lends encode the Records it hands Store.Encode, which copies
// what it keeps: a Record passed through the interface escapes, and one
// allocated per stored submit cost more than the encoding.
var records = sync.Pool{New: func() any { return new(Record) }}
