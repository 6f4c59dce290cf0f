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

// drainWatch decides when to give memory back: after the live job count
// has fallen to an eighth of a peak of at least minPeak jobs.
type drainWatch struct {
	minPeak int
	peak    int
}

// observe takes the current job count and reports whether to free memory.
func (d *drainWatch) observe(n int) bool {
	if n > d.peak {
		d.peak = n
	}
	if d.peak >= d.minPeak && n <= d.peak/8 {
		d.peak = 0 // once per drain: the next peak starts from here
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
