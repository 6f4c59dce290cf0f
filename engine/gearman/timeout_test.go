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

// TestCanDoTimeout: a job that overruns CAN_DO_TIMEOUT is offered to the
// next worker, but the late worker's result still counts if it comes
// first (gearmand answers it JOB_NOT_FOUND), and the other attempt's result
// is then dropped. A worker that sent PRE_SLEEP while holding the
// job has no timeout on it any more, as in gearmand.
func TestCanDoTimeout(t *testing.T) {
	for _, tc := range []string{"late result counts", "first result wins", "pre_sleep keeps it"} {
		t.Run(tc, func(t *testing.T) {
			clk := &stepClock{now: time.Unix(1000, 0)}
			addr, srv := startServer(t, Config{}, sched.Config{Clock: clk, Tick: -1})
			c, w1, w2 := dial(t, addr), dial(t, addr), dial(t, addr)
			w1.send(req(codec.CanDoTimeout, "f", "1000"))
			w2.send(req(codec.CanDo, "f"))
			c.send(req(codec.SubmitJob, "f", "", "sleep"))
			h := c.handle()
			w1.send(req(codec.GrabJob))
			w1.expect(res(codec.JobAssign, h, "f", "sleep"))
			if tc == "pre_sleep keeps it" {
				w1.send(req(codec.PreSleep))
			}
			w1.send(req(codec.EchoReq, "sync")) // PRE_SLEEP is handled once this returns
			w1.expect(res(codec.EchoRes, "sync"))

			srv.sched.Advance(clk.pass(2 * time.Second))
			switch tc {
			case "first result wins":
				w2.send(req(codec.GrabJob))
				w2.expect(res(codec.JobAssign, h, "f", "sleep"))
			case "pre_sleep keeps it":
				w2.send(req(codec.GrabJob)) // still w1's
				w2.expect(res(codec.NoJob))
			}
			w1.send(req(codec.WorkComplete, h, "slept"))
			c.expect(res(codec.WorkComplete, h, "slept"))
			if tc == "first result wins" {
				// Dropped without an error: Perl's Gearman::Worker dies
				// on one.
				w2.send(req(codec.WorkComplete, h, "again"))
			}
			w2.send(req(codec.GrabJob)) // ended: nothing left to run
			w2.expect(res(codec.NoJob))
		})
	}
}
