package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// PeriodicClient submits Periodic jobs (SUBMIT_JOB) on one connection,
// keeping up to InFlight of them waiting for their SUCCESS. A job counts
// when its SUCCESS arrives, which is when the server has queued it, and its
// latency is submit to SUCCESS.
//
// Each job's workload starts with its submit time (Unix nanoseconds, in
// decimal) so that a PeriodicWorker can time it from submit to JOB_ASSIGN.
type PeriodicClient struct {
	Addr     string
	Function string
	// Name heads the job names, which go on with a sequence number. A
	// job's key is (func, name) and a resubmit replaces the job, so every
	// client of a function needs a Name of its own.
	Name string
	// Payload is the workload size in bytes (at least the submit time's).
	Payload  int
	InFlight int
	// Delay, when > 0, is how many seconds after the second it is
	// submitted in a job is due: sched_at = now.Unix() + Delay (the
	// protocol counts whole seconds). 0 sends sched_at 0: due at once.
	Delay int64
	// Interval, when > 0, paces the submits: the k-th is sent no earlier
	// than Interval*k after the client connected.
	Interval time.Duration
	// FromDue, with Interval, makes the pacing an open loop: each job is
	// timed (its SUCCESS, and its workload's stamp) from when it was due
	// by the pacing, not from when it went, so that a job held back by
	// InFlight, the Pool or a late wake-up counts its wait in full.
	FromDue bool
	// Pool, when set, bounds the jobs submitted and not yet handed to a
	// worker: a submit takes a token and the PeriodicWorker that receives
	// the job gives it back.
	Pool *Pool
}

// pendingSubmit is a SUBMIT_JOB waiting for its SUCCESS. Its slot in
// pclientConn.pending is its message id.
type pendingSubmit struct {
	submitted time.Time
	waiting   bool
}

// pclientConn is the state of one PeriodicClient.Run.
type pclientConn struct {
	*PeriodicClient
	ctx       context.Context
	ph        *Phase
	conn      net.Conn
	r         *periodicReader
	w         *bufio.Writer
	cancelled atomic.Bool
	res       ClientResult

	// Message ids are slot numbers in decimal: a slot is reused only
	// once its reply has come, so replies may come in any order.
	ids     [][]byte
	pending []pendingSubmit
	free    []int // free slots, a stack

	outstanding int
	submitting  bool
	begin       time.Time // when pacing starts
	deadline    time.Time // the read deadline set last
	grace       time.Time // the read deadline once submitting has ended
	job         []byte    // the JSON being built
	name        []byte
	workload    []byte
	token       bool // a Pool token taken and not yet spent on a submit
}

// Run connects, performs the client handshake and submits until the phase
// ends or its budget is spent, then waits for outstanding SUCCESS replies
// for up to the phase's grace period.
func (c *PeriodicClient) Run(ctx context.Context, ph *Phase) (ClientResult, error) {
	if c.InFlight < 1 {
		return ClientResult{}, fmt.Errorf("periodic client: InFlight %d < 1", c.InFlight)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return ClientResult{}, err
	}
	defer conn.Close()
	cc := &pclientConn{
		PeriodicClient: c,
		ctx:            ctx,
		ph:             ph,
		conn:           conn,
		r:              newPeriodicReader(conn, 64<<10),
		w:              bufio.NewWriterSize(conn, 64<<10),
		res:            ClientResult{Latency: NewLatencyHistogram()},
		ids:            make([][]byte, c.InFlight),
		pending:        make([]pendingSubmit, c.InFlight),
		free:           make([]int, c.InFlight),
		submitting:     true,
		begin:          time.Now(),
		name:           []byte(c.Name),
	}
	for i := range c.InFlight {
		cc.ids[i] = strconv.AppendInt(nil, int64(i), 10)
		cc.free[i] = c.InFlight - 1 - i // slot 0 first
	}
	cc.workload = make([]byte, max(c.Payload, 19))
	for i := range cc.workload {
		cc.workload[i] = 'x'
	}
	stop := context.AfterFunc(ctx, func() {
		cc.cancelled.Store(true)
		_ = conn.SetDeadline(time.Unix(1, 0)) // unblock the read
	})
	defer stop()
	err = cc.loop()
	if cc.token {
		c.Pool.Put()
	}
	// As Client.Run: jobs still out when the context ended or the grace
	// period ran out are given up on, which is not a failure of the run.
	if err != nil && (cc.cancelled.Load() || ctx.Err() != nil || (!cc.submitting && errors.Is(err, os.ErrDeadlineExceeded))) {
		cc.res.Abandoned = int64(cc.outstanding)
		err = nil
	}
	return cc.res, err
}

func (cc *pclientConn) loop() error {
	if err := writePeriodicHandshake(cc.w, periodicClient); err != nil {
		return err
	}
	for {
		now := time.Now()
		if err := cc.fill(now); err != nil {
			return err
		}
		if !cc.r.complete() {
			if err := cc.w.Flush(); err != nil {
				return err
			}
		}
		if cc.outstanding == 0 {
			if !cc.submitting {
				return nil
			}
			// Nothing to read: wait for the next paced submit or a
			// token, without a read to wake us.
			if err := cc.wait(now); err != nil {
				return err
			}
			continue
		}
		if err := cc.setDeadline(now); err != nil {
			return err
		}
		payload, err := cc.r.next()
		if err != nil {
			if cc.paced() && errors.Is(err, os.ErrDeadlineExceeded) && !cc.cancelled.Load() && !time.Now().Before(cc.nextSubmit()) {
				continue // the pacing timer, not the server
			}
			return err
		}
		if err := cc.handle(payload, time.Now()); err != nil {
			return err
		}
	}
}

func (cc *pclientConn) paced() bool { return cc.Interval > 0 && cc.submitting }

func (cc *pclientConn) nextSubmit() time.Time {
	return cc.begin.Add(time.Duration(cc.res.Submitted) * cc.Interval)
}

// setDeadline bounds the next read: by the end of the phase plus its grace
// while submitting (a server that stops answering must not hold the client
// longer), by the grace period once submitting has ended, and by the next
// paced submit.
func (cc *pclientConn) setDeadline(now time.Time) error {
	d := cc.grace
	if cc.submitting {
		d = time.Time{}
		if !cc.ph.End.IsZero() {
			d = cc.ph.End.Add(cc.ph.Grace)
		}
		// The pacing wakes a read only for a submit still to come: one
		// already due is held back by InFlight (or the Pool), so a past
		// deadline would fail every read at once and no reply, the thing
		// that frees a slot, would ever be read.
		if next := cc.nextSubmit(); cc.paced() && next.After(now) && (d.IsZero() || next.Before(d)) {
			d = next
		}
	}
	if d.Equal(cc.deadline) {
		return nil
	}
	cc.deadline = d
	if err := cc.conn.SetReadDeadline(d); err != nil {
		return err
	}
	// The context's AfterFunc stores cancelled before it sets its deadline
	// in the past: if it is not stored yet, that deadline comes after ours.
	if cc.cancelled.Load() {
		return cc.ctx.Err()
	}
	return nil
}

// wait blocks until the next paced submit is due or a Pool token is free,
// the phase ends or the context does.
func (cc *pclientConn) wait(now time.Time) error {
	var until time.Time
	switch {
	case cc.paced() && now.Before(cc.nextSubmit()):
		until = cc.nextSubmit()
	case cc.Pool != nil && !cc.token:
		until = cc.ph.End // zero: no bound but the context
	default:
		return fmt.Errorf("periodic client: stuck with %d outstanding", cc.outstanding)
	}
	var timeout <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(until.Sub(now))
		defer t.Stop()
		timeout = t.C
	}
	var take chan<- struct{}
	if cc.Pool != nil && !cc.token {
		take = cc.Pool.tokens
	}
	select {
	case take <- struct{}{}:
		cc.token = true
	case <-timeout:
	case <-cc.ctx.Done():
		return cc.ctx.Err()
	}
	return nil
}

// fill submits jobs until InFlight are outstanding, the pacing says wait,
// the Pool is empty or submitting ends.
func (cc *pclientConn) fill(now time.Time) error {
	ph := cc.ph
	for cc.submitting {
		if cc.cancelled.Load() || (!ph.End.IsZero() && !now.Before(ph.End)) || ph.Budget.spent() {
			return cc.stopSubmitting(now)
		}
		if cc.outstanding >= cc.InFlight || (cc.Interval > 0 && now.Before(cc.nextSubmit())) {
			return nil
		}
		if cc.Pool != nil && !cc.token {
			if !cc.Pool.tryTake() {
				return nil
			}
			cc.token = true
		}
		if !ph.Budget.Take() {
			return cc.stopSubmitting(now)
		}
		cc.token = false
		if err := cc.submit(now); err != nil {
			return err
		}
	}
	return nil
}

func (cc *pclientConn) submit(now time.Time) error {
	slot := cc.free[len(cc.free)-1]
	cc.free = cc.free[:len(cc.free)-1]
	if cc.paced() && cc.FromDue {
		now = cc.nextSubmit() // this submit's due time
	}
	cc.pending[slot] = pendingSubmit{submitted: now, waiting: true}
	var schedAt int64
	if cc.Delay > 0 {
		schedAt = now.Unix() + cc.Delay
	}
	cc.name = strconv.AppendInt(cc.name[:len(cc.Name)], cc.res.Submitted, 10)
	// 19 digits until the year 2286, and cc.job is free scratch here.
	copy(cc.workload, strconv.AppendInt(cc.job[:0], now.UnixNano(), 10))
	cc.job = appendPeriodicJob(cc.job[:0], cc.Function, cc.name, cc.workload, schedAt)
	if err := writePeriodic(cc.w, cc.ids[slot], pcmdSubmitJob, cc.job); err != nil {
		return err
	}
	cc.outstanding++
	cc.res.Submitted++
	return nil
}

// stopSubmitting ends submitting: from now on only outstanding jobs are
// awaited, and not for ever.
func (cc *pclientConn) stopSubmitting(now time.Time) error {
	cc.submitting = false
	cc.grace = now.Add(cc.ph.Grace)
	if cc.cancelled.Load() {
		cc.grace = time.Unix(1, 0)
	}
	return nil // setDeadline applies it before the next read
}

func (cc *pclientConn) handle(payload []byte, now time.Time) error {
	msgID, cmd, data, err := parsePeriodic(payload)
	if err != nil {
		return err
	}
	slot, ok := slotOf(msgID, len(cc.pending))
	if !ok || !cc.pending[slot].waiting {
		return fmt.Errorf("periodic client: reply %q to no outstanding submit", payload)
	}
	if cmd != pcmdSuccess {
		return fmt.Errorf("periodic client: SUBMIT_JOB answered with command %d: %q", cmd, data)
	}
	p := &cc.pending[slot]
	p.waiting = false
	cc.free = append(cc.free, slot)
	cc.outstanding--
	cc.res.Finished++
	cc.ph.Progress.Add(1)
	if cc.ph.measured(now) {
		cc.res.Measured++
		recordLatency(cc.res.Latency, now.Sub(p.submitted))
	}
	return nil
}

// slotOf parses a message id made of a slot number below n.
func slotOf(msgID []byte, n int) (int, bool) {
	if len(msgID) == 0 || len(msgID) > 9 {
		return 0, false
	}
	slot := 0
	for _, c := range msgID {
		if c < '0' || c > '9' {
			return 0, false
		}
		slot = slot*10 + int(c-'0')
	}
	return slot, slot < n
}
