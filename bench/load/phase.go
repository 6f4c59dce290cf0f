package load

import (
	"sync"
	"sync/atomic"
	"time"
)

// Phase bounds one stretch of load shared by several connections.
type Phase struct {
	// Start: jobs finishing before it are not measured (warm-up).
	Start time.Time
	// End: no job is submitted at or after it; zero means no time bound.
	End time.Time
	// Budget caps the number of jobs submitted; nil means no count bound.
	Budget *Budget
	// Progress, when set, is told about every finished job.
	Progress *Progress
	// Grace is how long a client waits for its outstanding jobs once it
	// stops submitting; what is still outstanding then is abandoned.
	Grace time.Duration
	// Schedule, when set, makes the synchronous clients (HTTPClient,
	// RunMemodb's) open-loop: they take each job from it, time it from
	// its due time, and stop when it is over (it holds End and Budget).
	Schedule *Schedule
}

// measured reports whether a job finishing at t counts.
func (p *Phase) measured(t time.Time) bool {
	return !t.Before(p.Start) && (p.End.IsZero() || t.Before(p.End))
}

// Budget is a number of jobs that connections take from one at a time.
type Budget struct{ left atomic.Int64 }

// NewBudget returns a budget of n jobs.
func NewBudget(n int64) *Budget {
	b := &Budget{}
	b.left.Store(n)
	return b
}

// Take takes one job from the budget, reporting false when it is spent.
func (b *Budget) Take() bool {
	if b == nil {
		return true
	}
	if b.left.Add(-1) < 0 {
		b.left.Add(1) // keep Left honest; racing takers all see < 0
		return false
	}
	return true
}

// spent reports whether no job is left, without taking one.
func (b *Budget) spent() bool { return b != nil && b.left.Load() <= 0 }

// Left is the number of jobs not yet taken.
func (b *Budget) Left() int64 { return max(b.left.Load(), 0) }

// Progress records when a run of Total jobs crossed each percent, so that
// a scenario can compute the rate of its first and last tenth.
type Progress struct {
	Total int64
	// OnMark, when set, is called with each percent as it is crossed,
	// on the goroutine whose Add crossed it: it must be quick.
	OnMark func(pct int)
	done   atomic.Int64
	// marks[i] is the UnixNano time at which i% of Total had finished;
	// marks[0] is set by Begin.
	marks [101]atomic.Int64
}

// NewProgress starts tracking total jobs from now.
func NewProgress(total int64) *Progress {
	p := &Progress{Total: total}
	p.marks[0].Store(time.Now().UnixNano())
	return p
}

// Add records n more finished jobs.
func (p *Progress) Add(n int64) {
	if p == nil || p.Total <= 0 {
		return
	}
	after := p.done.Add(n)
	before := after - n
	// Percent marks crossed by this add; usually none.
	for pct := before*100/p.Total + 1; pct <= min(after*100/p.Total, 100); pct++ {
		p.marks[pct].Store(time.Now().UnixNano())
		if p.OnMark != nil {
			p.OnMark(int(pct))
		}
	}
}

// Done is the number of jobs finished so far.
func (p *Progress) Done() int64 { return p.done.Load() }

// Mark returns when pct% of Total had finished, or false if it has not.
func (p *Progress) Mark(pct int) (time.Time, bool) {
	ns := p.marks[pct].Load()
	if ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// Countdown fires once after n jobs, e.g. to end a drain when the queue is
// empty.
type Countdown struct {
	left atomic.Int64
	once sync.Once
	fire func()
}

// NewCountdown calls fire once n calls to Dec have been made.
func NewCountdown(n int64, fire func()) *Countdown {
	c := &Countdown{fire: fire}
	c.left.Store(n)
	if n <= 0 {
		c.once.Do(fire)
	}
	return c
}

// Dec counts one job.
func (c *Countdown) Dec() {
	if c != nil && c.left.Add(-1) == 0 {
		c.once.Do(c.fire)
	}
}

// Pool is a number of tokens shared by clients and workers: a client
// (PeriodicClient, or a background Client) takes one per job it submits
// and the worker the job goes to (PeriodicWorker, Worker) gives it back.
// It bounds the jobs in the server, so that clients that can submit faster
// than workers can run do not only grow a queue.
type Pool struct{ tokens chan struct{} }

// NewPool returns a pool of n tokens.
func NewPool(n int) *Pool { return &Pool{tokens: make(chan struct{}, n)} }

func (p *Pool) tryTake() bool {
	select {
	case p.tokens <- struct{}{}:
		return true
	default:
		return false
	}
}

// Put gives a token back. Putting more than were taken is ignored.
func (p *Pool) Put() {
	if p == nil {
		return
	}
	select {
	case <-p.tokens:
	default:
	}
}

// InUse is the number of tokens taken.
func (p *Pool) InUse() int {
	if p == nil {
		return 0
	}
	return len(p.tokens)
}
