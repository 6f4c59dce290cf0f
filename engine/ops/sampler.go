package ops

import (
	"math"
	"sync"
	"time"

	"switchyard/sched"
)

// The sampler reads the scheduler's totals once a second into a ring of
// the last few minutes, for the status page's rates, percentiles and
// sparklines; and every function's counters every funcEvery, for each
// function's rates. One goroutine, a fixed ring: its cost does not grow
// with traffic, and with the number of functions only every funcEvery.
const (
	sampleEvery = time.Second
	ringSize    = 301 // five minutes of rates: 300 intervals
	funcEvery   = 10 * time.Second
)

// sample is the scheduler's cumulative figures at one moment.
type sample struct {
	at            time.Time
	events        sched.Counts // every source's, added up
	jobs, running int
	wait, run     sched.Histogram
}

// funcSnap is every function's counters at one moment.
type funcSnap struct {
	at     time.Time
	counts map[string]sched.Counts
}

type sampler struct {
	sc *sched.Sched

	mu    sync.Mutex
	ring  [ringSize]sample
	n     int // samples in the ring (at most ringSize)
	next  int // where the next one goes
	older *funcSnap
	newer *funcSnap

	stop chan struct{}
	done chan struct{}
}

func newSampler(sc *sched.Sched) *sampler {
	return &sampler{sc: sc}
}

// start runs the sampler until stop.
func (p *sampler) start() {
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		p.take(time.Now())
		p.snapFuncs(time.Now())
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		lastFuncs := time.Now()
		for {
			select {
			case <-p.stop:
				return
			case now := <-tick.C:
				p.take(now)
				if now.Sub(lastFuncs) >= funcEvery {
					p.snapFuncs(now)
					lastFuncs = now
				}
			}
		}
	}()
}

func (p *sampler) close() {
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
}

// take reads the totals into the ring.
func (p *sampler) take(now time.Time) {
	var st sched.Stats
	p.sc.Stats(&st)
	s := sample{at: now, jobs: p.sc.Len(), running: p.sc.Running(), wait: st.QueueWait, run: st.RunTime}
	for _, c := range st.Events {
		for e, n := range c {
			s.events[e] += n
		}
	}
	p.mu.Lock()
	p.ring[p.next] = s
	p.next = (p.next + 1) % ringSize
	p.n = min(p.n+1, ringSize)
	p.mu.Unlock()
}

// snapFuncs reads every function's counters, FuncsChunked's way.
func (p *sampler) snapFuncs(now time.Time) {
	snap := &funcSnap{at: now, counts: make(map[string]sched.Counts)}
	p.sc.FuncsChunked(func(fs []sched.FuncStat) {
		for i := range fs {
			snap.counts[fs[i].Name] = fs[i].Events
		}
	})
	p.mu.Lock()
	p.older, p.newer = p.newer, snap
	p.mu.Unlock()
}

// samples copies the ring out, oldest first.
func (p *sampler) samples() []sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]sample, 0, p.n)
	for i := range p.n {
		out = append(out, p.ring[(p.next-p.n+i+ringSize)%ringSize])
	}
	return out
}

// funcBase is the snapshot per-function rates are measured from: the
// older of the two, so that a rate spans funcEvery to twice that.
func (p *sampler) funcBase() *funcSnap {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.older != nil {
		return p.older
	}
	return p.newer
}

// diff is h less base, bucket by bucket.
func diff(h, base *sched.Histogram) sched.Histogram {
	var d sched.Histogram
	for i := range h.Buckets {
		d.Buckets[i] = h.Buckets[i] - base.Buckets[i]
	}
	d.Sum = h.Sum - base.Sum
	return d
}

// quantile estimates the q-quantile (0..1) of h in seconds, linearly
// within its bucket; NaN for an empty histogram. One beyond the last
// bound counts as that bound.
func quantile(h *sched.Histogram, q float64) float64 {
	n := h.Count()
	if n == 0 {
		return math.NaN()
	}
	rank := q * float64(n)
	var seen float64
	for i, c := range h.Buckets {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			if i == len(boundSeconds) {
				return boundSeconds[i-1]
			}
			lo := 0.0
			if i > 0 {
				lo = boundSeconds[i-1]
			}
			return lo + (boundSeconds[i]-lo)*(rank-seen)/float64(c)
		}
		seen += float64(c)
	}
	return boundSeconds[len(boundSeconds)-1]
}
