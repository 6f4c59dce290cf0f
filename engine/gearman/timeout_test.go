package gearman

import (
	"sync"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// stepClock is a sched.Clock that moves only when the test says.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *stepClock) Wall() time.Time { return c.Now() }

func (c *stepClock) pass(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// TestCanDoTimeout: a job that overruns CAN_DO_TIMEOUT is requeued and the
// late worker's result gets JOB_NOT_FOUND, unless the worker sent PRE_SLEEP
// while holding it: gearmand then drops the timeout and the result counts
// (libgearman's gearman_worker_timeout test depends on that).
func TestCanDoTimeout(t *testing.T) {
	for _, sleep := range []bool{false, true} {
		name := map[bool]string{false: "requeued", true: "pre_sleep keeps it"}[sleep]
		t.Run(name, func(t *testing.T) {
			clk := &stepClock{now: time.Unix(1000, 0)}
			addr, srv := startServer(t, Config{}, sched.Config{Clock: clk, Tick: -1})
			c, w := dial(t, addr), dial(t, addr)
			w.send(req(codec.CanDoTimeout, "f", "1000"))
			c.send(req(codec.SubmitJob, "f", "", "sleep"))
			h := c.handle()
			w.send(req(codec.GrabJob))
			w.expect(res(codec.JobAssign, h, "f", "sleep"))
			if sleep {
				w.send(req(codec.PreSleep))
			}
			w.send(req(codec.EchoReq, "sync")) // PRE_SLEEP is handled once this returns
			w.expect(res(codec.EchoRes, "sync"))

			srv.sched.Advance(clk.pass(2 * time.Second))
			w.send(req(codec.WorkComplete, h, "slept"))
			if sleep {
				c.expect(res(codec.WorkComplete, h, "slept"))
				return
			}
			w.expect(codec.AppendError(nil, "JOB_NOT_FOUND", "Job given in work result not found"))
			c.send(req(codec.GetStatus, h))
			c.expect(res(codec.StatusRes, h, "1", "0", "0", "0"))
		})
	}
}
