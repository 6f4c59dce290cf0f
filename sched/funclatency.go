package sched

import "time"

// Each function's latency, with Config.Latency: its attempts' queue waits
// and run times, in the buckets of the scheduler's own histograms
// (LatencyBounds), counted where the shard's are, under the lock held
// there. Two windows of LatencyWindow each, the current and the one
// before, give every function its recent percentiles; with
// Config.FuncHistograms it also keeps totals since it was made, for a
// per-function Prometheus histogram. A function that never had a job
// taken costs a nil pointer.

// LatencyWindow is the span of a function's recent latency: what
// FuncLatency.RecentWait and RecentRun hold covers the last one to two
// of these.
const LatencyWindow = time.Minute

// window counts one LatencyWindow's durations by bucket. uint32 is plenty
// for a minute, and keeps a function's windows at 352 bytes.
type window [NumBuckets]uint32

// funcLatency is a function's latency. Guarded by its shard lock.
type funcLatency struct {
	gen       int64     // the window cur counts: latency reading / LatencyWindow
	cur, prev [2]window // [0] queue wait, [1] run time
	total     *[2]Histogram
}

// observe counts d, of kind 0 (queue wait) or 1 (run time), at now (a
// latency reading). Caller holds f's shard lock.
func (s *Sched) observe(f *function, kind int, now int64, d time.Duration) {
	l := f.lat
	if l == nil {
		l = &funcLatency{gen: now / int64(LatencyWindow)}
		if s.funcTotals {
			l.total = new([2]Histogram)
		}
		f.lat = l
	}
	l.roll(now)
	b := bucketOf(d)
	l.cur[kind][b]++
	if l.total != nil {
		l.total[kind].Buckets[b]++
		l.total[kind].Sum += d.Seconds()
	}
}

// roll moves l's windows on to the one now falls in.
func (l *funcLatency) roll(now int64) {
	g := now / int64(LatencyWindow)
	switch {
	case g == l.gen:
		return
	case g == l.gen+1:
		l.prev = l.cur
	default:
		l.prev = [2]window{}
	}
	l.cur = [2]window{}
	l.gen = g
}

// FuncLatency is one function's latency, as FuncLatencies hands it out.
type FuncLatency struct {
	Name string
	// RecentWait and RecentRun are the queue waits and run times of the
	// attempts of the last one to two LatencyWindows (without Sum).
	RecentWait, RecentRun Histogram
	// Wait and Run are every attempt's since the function was made, with
	// Config.FuncHistograms; empty without.
	Wait, Run Histogram
}

// latencyOf fills out from f's latency as of now. Caller holds f's
// shard lock.
func latencyOf(f *function, now int64, out *FuncLatency) {
	*out = FuncLatency{Name: f.name}
	l := f.lat
	if l == nil {
		return
	}
	l.roll(now)
	for i := range NumBuckets {
		out.RecentWait.Buckets[i] = uint64(l.cur[0][i]) + uint64(l.prev[0][i])
		out.RecentRun.Buckets[i] = uint64(l.cur[1][i]) + uint64(l.prev[1][i])
	}
	if l.total != nil {
		out.Wait, out.Run = l.total[0], l.total[1]
	}
}

// FuncLatencyOf is the latency of function name; false for a function
// the scheduler does not know.
func (s *Sched) FuncLatencyOf(name []byte) (FuncLatency, bool) {
	sh := s.shardFor(name)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f := sh.funcs[string(name)]
	if f == nil {
		return FuncLatency{}, false
	}
	var out FuncLatency
	latencyOf(f, s.latency(), &out)
	return out, true
}

// latencyChunk bounds the functions FuncLatencies copies per lock hold:
// a FuncLatency is 750 bytes.
const latencyChunk = 512

// FuncLatencies hands fn the latency of every function that has had a
// job taken, a chunk at a time, as FuncsChunked does: copied under a
// short hold of its shard's lock, fn running with no lock held, the slice
// reused once fn returns.
func (s *Sched) FuncLatencies(fn func([]FuncLatency)) {
	if !s.timed {
		return
	}
	eachChunk(s, latencyChunk, latencyChunk, func(buf []FuncLatency, f *function, now int64) []FuncLatency {
		if f.lat == nil {
			return buf
		}
		buf = append(buf, FuncLatency{})
		latencyOf(f, now, &buf[len(buf)-1])
		return buf
	}, fn)
}
