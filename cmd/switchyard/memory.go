package main

import (
	"context"
	"runtime/debug"
	"time"
)

// After a large queue drains, the Go heap shrinks at the next collection
// but the runtime hands the pages back to the kernel only slowly, so RSS
// stays at its peak for minutes. gearmand users know that pain; returning
// the memory once the queue is mostly gone is cheap by comparison.

// drainWatch decides when to give memory back after a peak of at least
// minPeak live jobs: once the count has fallen to an eighth of the peak, and
// again when it reaches zero, because the scheduler drops some indexes
// (a function's unique index) only once they are empty.
type drainWatch struct {
	minPeak int
	peak    int
	early   bool // freed at an eighth of this peak already
}

// observe takes the current job count and reports whether to free memory.
func (d *drainWatch) observe(n int) bool {
	if n > d.peak {
		d.peak = n
	}
	switch {
	case d.peak < d.minPeak:
		return false
	case n == 0:
		d.peak, d.early = 0, false // the next peak starts from here
		return true
	case n <= d.peak/8 && !d.early:
		d.early = true
		return true
	}
	return false
}

// returnMemory polls the job count every interval until ctx ends.
func returnMemory(ctx context.Context, jobs func() int, interval time.Duration) {
	d := drainWatch{minPeak: 100_000}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if d.observe(jobs()) {
				debug.FreeOSMemory()
			}
		}
	}
}
