package sched

import "time"

// Source numbers where jobs come from: a frontend tags its clients with
// its own (Client.SetSource), and every event of a job is counted under
// the source of the client that submitted it. sched knows only the
// numbers; their names are the frontends'. Jobs restored by Replay, and
// those of a client never tagged, count under 0.
type Source uint8

// MaxSources bounds Source: the counters are a fixed array per shard.
const MaxSources = 16

// Event is something that happens to a job, counted per source and per
// function (see Stats and FuncStat).
type Event uint8

const (
	// EventSubmitted: a submit was accepted, whether it made a job,
	// joined a live one or replaced one.
	EventSubmitted Event = iota
	// EventCompleted: a worker reported the job complete.
	EventCompleted
	// EventFailed: a worker reported the job failed, or the job ended
	// failing: its retries used up (Config.JobRetries), or its wait in
	// the queue past its SubmitReq.QueueTimeout.
	EventFailed
	// EventException: a worker reported an exception.
	EventException
	// EventRetried: an attempt ended with the job back in its queue to be
	// tried again: its worker went away or lapsed, overran its run
	// timeout, gave it back with Worker.Retry, or failed a job that
	// retries for ever. A Worker.Requeue is no retry.
	EventRetried
	// EventTimedOut: an attempt overran its run timeout.
	EventTimedOut
	// NumEvents is the number of events.
	NumEvents
)

// Counts holds one count per Event.
type Counts [NumEvents]uint64

// LatencyBounds are the upper bounds of the latency histograms' buckets
// (a value equal to a bound falls in that bound's bucket); a last bucket
// takes what exceeds them all.
var LatencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour,
}

// NumBuckets is the number of buckets of a Histogram.
const NumBuckets = len(LatencyBounds) + 1

// Histogram counts durations in the buckets LatencyBounds makes.
type Histogram struct {
	// Buckets[i] counts the durations at most LatencyBounds[i] and above
	// the bound before it; the last bucket, those above every bound.
	Buckets [NumBuckets]uint64
	// Sum is the durations' total in seconds: a float, since nanoseconds
	// would overflow an int64 after 292 years of jobs, which a busy
	// server's long jobs add up to within months.
	Sum float64
}

// Observe counts d. It is not safe for concurrent use.
func (h *Histogram) Observe(d time.Duration) {
	h.Buckets[bucketOf(d)]++
	h.Sum += d.Seconds()
}

// Count is the number of durations observed.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Buckets {
		n += c
	}
	return n
}

// Add adds o's counts to h's.
func (h *Histogram) Add(o *Histogram) {
	for i, c := range o.Buckets {
		h.Buckets[i] += c
	}
	h.Sum += o.Sum
}

// bucketOf is d's bucket: most durations are short, so a scan from the
// first bound ends early.
func bucketOf(d time.Duration) int {
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	return i
}

// eventOf is the event a worker's terminal update counts as.
func eventOf(k UpdateKind) Event {
	switch k {
	case Complete:
		return EventCompleted
	case Exception:
		return EventException
	}
	return EventFailed
}

// failKindOf is the failure a worker's Fail or Exception is.
func failKindOf(k UpdateKind) FailKind {
	if k == Exception {
		return FailException
	}
	return FailReported
}

// Refusal is why a submit was refused, counted in Stats.Refused.
type Refusal uint8

const (
	// RefusedStore: the store could not keep the background job (a full
	// disk), or was down.
	RefusedStore Refusal = iota
	// RefusedQueueFull: the function's queue was at its maximum (the
	// admin "maxqueue").
	RefusedQueueFull
	// RefusedEnded: the submit named a job that has ended (see
	// SubmitReq.Remember).
	RefusedEnded
	// NumRefusals is the number of reasons.
	NumRefusals
)

// String is the reason as a metric's label has it.
func (r Refusal) String() string {
	switch r {
	case RefusedStore:
		return "store"
	case RefusedQueueFull:
		return "queue_full"
	case RefusedEnded:
		return "ended"
	}
	return "unknown"
}

// Stats is what the scheduler has counted since it started.
type Stats struct {
	// Events counts each Event by the Source of the job it happened to.
	Events [MaxSources]Counts
	// Refused counts the submits refused, by reason, whatever protocol
	// they came by.
	Refused [NumRefusals]uint64
	// QueueWait is how long jobs waited in their queue before a worker
	// took them (each attempt's wait: from the submit, the due time, the
	// release by their predecessors, or the requeue); RunTime how long
	// each attempt lasted, from the grab to its end however it ended.
	// Both stay empty without Config.Latency.
	QueueWait, RunTime Histogram
}

// shardStats is a shard's share of Stats, guarded by its lock: a count is
// a plain increment where the event is handled, under the lock already
// held there.
type shardStats struct {
	events         [MaxSources]Counts
	queueWait, run Histogram
}

// Stats adds up every shard's counters into st, one shard lock at a time.
func (s *Sched) Stats(st *Stats) {
	*st = Stats{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for src := range sh.stats.events {
			for e, n := range sh.stats.events[src] {
				st.Events[src][e] += n
			}
		}
		st.QueueWait.Add(&sh.stats.queueWait)
		st.RunTime.Add(&sh.stats.run)
		sh.mu.Unlock()
	}
	for r := range s.refused {
		st.Refused[r] = s.refused[r].Load()
	}
}

// SetSource tags the jobs c submits from now on as coming from src (see
// Source). Call it before c's first Submit.
func (c *Client) SetSource(src Source) {
	if src >= MaxSources {
		panic("sched: source out of range")
	}
	c.src = src
}

// count notes that event e happened to a job of f that came from src.
// Caller holds sh.mu.
func (sh *shard) count(f *function, src Source, e Event) {
	f.events[e]++
	sh.stats.events[src][e]++
}

// latency is the clock of the latency histograms: 1 + ns since the
// scheduler's epoch, or 0 without Config.Latency. A job's stamp holds it
// from when the job enters its queue, and again from when an attempt
// begins. The system clock is read with time.Since, one monotonic
// reading, half the cost of time.Now's two.
func (s *Sched) latency() int64 {
	if !s.timed {
		return 0
	}
	if _, ok := s.clock.(systemClock); ok {
		return int64(time.Since(s.epoch)) + 1
	}
	return int64(s.clock.Now().Sub(s.epoch)) + 1
}

// queuedAt stamps a job entering its queue. Caller holds its shard lock.
func (s *Sched) queuedAt(j *Job) { j.stamp = s.latency() }

// begun counts the queue wait of a job a worker just took and stamps the
// attempt's start. Caller holds sh.mu.
func (s *Sched) begun(sh *shard, j *Job) {
	if !s.timed {
		return
	}
	now := s.latency()
	if j.stamp != 0 {
		d := time.Duration(now - j.stamp)
		sh.stats.queueWait.Observe(d)
		s.observe(j.fn, 0, now, d)
	}
	j.stamp = now
}

// ranFor counts the run time of an attempt that has just ended. Caller
// holds sh.mu.
func (s *Sched) ranFor(sh *shard, j *Job) {
	if !s.timed || j.stamp == 0 {
		return
	}
	now := s.latency()
	d := time.Duration(now - j.stamp)
	sh.stats.run.Observe(d)
	s.observe(j.fn, 1, now, d)
	if j.worker != nil {
		j.worker.freeAt.Store(now)
	}
	j.stamp = 0
}
