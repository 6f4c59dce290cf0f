package sched

import "time"

// function is everything a shard knows about one function name.
type function struct {
	name     string
	seq      uint64 // creation order, for listings
	queues   [numPriorities]jobList
	delayed  int // jobs waiting in the wheel
	blocked  int // jobs waiting for their predecessors
	running  int
	workers  int                // registered abilities
	maxQueue [numPriorities]int // 0 = unlimited
	kept     bool               // made by CreateFunc: never forgotten for idleness
	unique   *keyIndex          // coalescing index: key -> live job; nil when empty
	peak     int                // most keys unique held since it was made
	sleepers abilityList        // abilities whose worker slept on this function
	woken    int                // abilities woken for its jobs that have not asked for work since (WakeDemand)
	events   Counts             // what happened to its jobs, see shard.count
	paused   bool               // Pause: its jobs are handed to no worker
	lat      *funcLatency       // its attempts' latency, with Config.Latency: made at its first
	fails    *failRing          // its latest failures, with Config.Failures: made at its first

	idleSince    time.Time // on the Clock's Now scale, while inIdle
	iprev, inext *function // shard's idle list
	inIdle       bool
}

func newFunction(name string, seq uint64) *function {
	return &function{name: name, seq: seq}
}

func (f *function) queued() int {
	return f.queues[High].n + f.queues[Normal].n + f.queues[Low].n
}

// total is what gearmand reports as TOTAL: queued, delayed and running.
func (f *function) total() int { return f.queued() + f.delayed + f.blocked + f.running }

func (f *function) pop() *Job {
	for p := range f.queues {
		if j := f.queues[p].popFront(); j != nil {
			return j
		}
	}
	return nil
}

// uniqueKeep is the size below which an emptied unique index is kept for
// reuse rather than dropped: a function whose few unique jobs come and go
// does not make a new map for each.
const uniqueKeep = 256

// addUnique indexes j under key (in place of the job there, if any); j
// is in sh's job table already. Caller holds sh.mu.
func (sh *shard) addUnique(f *function, key string, j *Job) {
	if f.unique == nil {
		f.unique = newKeyIndex(&sh.jobs, sh.bits)
	}
	if f.unique.len() == 0 {
		if sh.keyed == nil {
			sh.keyed = make(map[*function]struct{})
		}
		sh.keyed[f] = struct{}{}
	}
	f.unique.set(key, j)
	f.peak = max(f.peak, f.unique.len())
}

// uniqueJob is the live job f indexes under key, or nil. Caller holds sh.mu.
func (f *function) uniqueJob(key string) *Job {
	if f.unique == nil {
		return nil
	}
	return f.unique.get(key)
}

// forgetUnique removes key, whose job is still in sh's job table. An
// index that held many keys is dropped once it empties: a million
// distinct uniques drained would otherwise pin its table for good. Caller
// holds sh.mu.
func (sh *shard) forgetUnique(f *function, key string) {
	f.unique.del(key)
	if f.unique.len() > 0 {
		return
	}
	delete(sh.keyed, f)
	if f.peak > uniqueKeep {
		f.unique.free()
		f.unique, f.peak = nil, 0
	}
}

// idle reports whether nothing refers to f: no job, no worker, no admin
// setting (a pause is one).
func (f *function) idle() bool {
	return f.workers == 0 && f.total() == 0 && !f.kept && !f.paused && f.maxQueue == [numPriorities]int{}
}

// settle starts f's idle time if it has just become idle, so that
// ForgetIdle drops it once Config.FunctionTTL has passed. Caller holds
// sh.mu.
func (sh *shard) settle(f *function) {
	if f.inIdle || sh.s.ttl <= 0 || !f.idle() {
		return
	}
	f.idleSince = sh.s.clock.Now()
	sh.idle.push(f)
	sh.s.idle.inc()
}

// busy takes f off the idle list. Caller holds sh.mu.
func (sh *shard) busy(f *function) {
	if f.inIdle {
		sh.idle.remove(f)
		sh.s.idle.dec()
	}
}

// funcList is an intrusive FIFO of idle functions: they join at the tail
// when they become idle, so the head is always the one idle longest.
type funcList struct{ head, tail *function }

func (l *funcList) push(f *function) {
	f.inext = nil
	f.iprev = l.tail
	if l.tail != nil {
		l.tail.inext = f
	} else {
		l.head = f
	}
	l.tail = f
	f.inIdle = true
}

func (l *funcList) remove(f *function) {
	if f.iprev != nil {
		f.iprev.inext = f.inext
	} else {
		l.head = f.inext
	}
	if f.inext != nil {
		f.inext.iprev = f.iprev
	} else {
		l.tail = f.iprev
	}
	f.iprev, f.inext = nil, nil
	f.inIdle = false
}

// forgetChunk bounds how many functions ForgetIdle drops per shard lock
// hold, so that submitters on other goroutines wait microseconds, not the
// whole sweep.
const forgetChunk = 4096

// ForgetIdle forgets every function that has been idle (no job, no worker,
// no admin setting) for Config.FunctionTTL as of now, and returns how many
// it forgot. A goroutine of the scheduler calls it; with Tick < 0 the owner
// does.
func (s *Sched) ForgetIdle(now time.Time) int {
	if s.ttl <= 0 {
		return 0
	}
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		for more := true; more; {
			sh.mu.Lock()
			more = false
			for k := 0; ; k++ {
				f := sh.idle.head
				if f == nil || now.Sub(f.idleSince) < s.ttl {
					break
				}
				if k == forgetChunk {
					more = true
					break
				}
				sh.busy(f)
				delete(sh.funcs, f.name)
				n++
			}
			if !more {
				sh.shrink()
			}
			sh.mu.Unlock()
		}
	}
	return n
}

// shrink rebuilds the shard's function map once it holds a quarter of what
// it once did: like the unique index, a Go map keeps the room it grew to.
// The copy is paid for by the deletions since the last one. Caller holds
// sh.mu.
func (sh *shard) shrink() {
	if sh.peak < 128 || len(sh.funcs) > sh.peak/4 {
		return
	}
	m := make(map[string]*function, len(sh.funcs))
	for k, f := range sh.funcs {
		m[k] = f
	}
	sh.funcs, sh.peak = m, len(m)
}
