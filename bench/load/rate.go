package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// RateClient submits foreground Gearman jobs open-loop: a Pacer releases
// them at Rate, dealt round-robin over Conns connections and written at
// once, however many are still out; a reader per connection matches each
// JOB_CREATED to its submit (the server answers a connection's submits
// in order) and each WORK_COMPLETE to its handle. A job's latency runs
// from its due time to its WORK_COMPLETE (WORK_FAIL and WORK_EXCEPTION
// count as failed), so it includes the Pacer's lag and any time the job
// waited in the load generator.
type RateClient struct {
	Addr     string
	Function string
	Payload  []byte
	Conns    int
	Rate     float64
	// MaxOutstanding bounds the jobs out on one connection; a job due
	// past it waits, its latency running. 0 = DefaultMaxOutstanding.
	MaxOutstanding int
}

// DefaultMaxOutstanding is RateClient's bound on one connection's jobs
// out: far past what a sustained rate keeps out, it bounds the memory of
// a run past saturation.
const DefaultMaxOutstanding = 4096

// RateResult is what an open-loop load did. The measured jobs are those
// due inside the phase's window (Start to End): the warm-up's are not.
type RateResult struct {
	Offered float64 // the rate asked for, jobs/s
	// Due and Sent are the jobs that fell due before the phase's End and
	// those of them sent; the rest waited for the load generator's bound
	// on jobs out (MaxOutstanding) until the end.
	Due, Sent int64
	// Measured is the jobs due inside the window that finished; Done the
	// jobs that finished inside the window, whenever due: Done over the
	// window's length is the rate the server kept up.
	Measured, Done int64
	Failed         int64 // WORK_FAIL or WORK_EXCEPTION, measured or not
	// Abandoned is the jobs out when the grace period ran out (or ctx
	// ended). Those due in the window are in Latency at the wait they
	// had then, the least their latency would have been.
	Abandoned int64
	// Latency is due to result of the measured jobs (µs).
	Latency *hdrhistogram.Histogram
	// Lag is how late the Pacer released each job (µs).
	Lag *hdrhistogram.Histogram
}

// NewRateResult returns an empty result, e.g. to Merge into.
func NewRateResult() RateResult {
	return RateResult{Latency: NewLatencyHistogram(), Lag: NewLatencyHistogram()}
}

// Merge adds o to r (Offered is r's).
func (r *RateResult) Merge(o RateResult) {
	r.Due += o.Due
	r.Sent += o.Sent
	r.Measured += o.Measured
	r.Done += o.Done
	r.Failed += o.Failed
	r.Abandoned += o.Abandoned
	r.Latency.Merge(o.Latency)
	r.Lag.Merge(o.Lag)
}

// rateConn is one connection of a RateClient.Run. The Pacer's goroutine
// owns w; the reader goroutine owns the rest but the atomics and created.
type rateConn struct {
	conn net.Conn
	w    *bufio.Writer
	// created carries the due time of each submit written to the reader,
	// which takes it at the JOB_CREATED that answers it.
	created     chan time.Time
	outstanding atomic.Int64 // submitted and not finished
	res         RateResult   // the reader's counts
	running     map[string]time.Time
	early       map[string]earlyResult // results that overtook their JOB_CREATED
}

// Run connects, releases jobs from now until the phase's End (the
// phase's Start, later, begins the measured window), then waits for the
// jobs out for up to the phase's grace period.
func (c *RateClient) Run(ctx context.Context, ph *Phase) (RateResult, error) {
	res := NewRateResult()
	res.Offered = c.Rate
	if c.Conns < 1 || c.Rate <= 0 {
		return res, fmt.Errorf("rate client: %d connections at %v jobs/s", c.Conns, c.Rate)
	}
	limit := c.MaxOutstanding
	if limit <= 0 {
		limit = DefaultMaxOutstanding
	}
	conns := make([]*rateConn, 0, c.Conns)
	defer func() {
		for _, rc := range conns {
			rc.conn.Close()
		}
	}()
	var d net.Dialer
	for range c.Conns {
		conn, err := d.DialContext(ctx, "tcp", c.Addr)
		if err != nil {
			return res, err
		}
		conns = append(conns, &rateConn{
			conn:    conn,
			w:       bufio.NewWriterSize(conn, 64<<10),
			created: make(chan time.Time, limit),
			res:     NewRateResult(),
			running: make(map[string]time.Time),
			early:   make(map[string]earlyResult),
		})
	}
	var stopping atomic.Bool // the Pacer is done: readers end once nothing is out
	var cancelled atomic.Bool
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	for i, rc := range conns {
		wg.Go(func() { errs[i] = rc.read(ph, &stopping, &cancelled) })
	}
	stop := context.AfterFunc(ctx, func() {
		cancelled.Store(true)
		for _, rc := range conns {
			_ = rc.conn.SetDeadline(time.Unix(1, 0))
		}
	})
	defer stop()

	// A server that stops reading must not hold the Pacer past the end.
	for _, rc := range conns {
		if err := rc.conn.SetWriteDeadline(ph.End.Add(ph.Grace)); err != nil {
			return res, err
		}
	}
	function := []byte(c.Function)
	dirty := make([]bool, len(conns))
	pacer := Pacer{Rate: c.Rate, Begin: time.Now(), End: ph.End, Budget: ph.Budget}
	pres, perr := pacer.Run(ctx, func(k int64, due time.Time) (bool, error) {
		i := int(k % int64(len(conns)))
		rc := conns[i]
		if rc.outstanding.Load() >= int64(limit) {
			return false, nil
		}
		rc.outstanding.Add(1)
		rc.created <- due // room: created holds at most limit
		dirty[i] = true
		return true, writePacket(rc.w, typeSubmitJob, function, nil, c.Payload)
	}, func() error {
		for i, rc := range conns {
			if dirty[i] {
				dirty[i] = false
				if err := rc.w.Flush(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if cancelled.Load() {
		perr = nil // the run was stopped, not failed
	}

	// Readers end once their connection has nothing out, or at the
	// grace period's end. stopping is stored before outstanding is read
	// and a reader decrements outstanding before it reads stopping, so
	// one of the two sees the other.
	stopping.Store(true)
	graceEnd := time.Now().Add(ph.Grace)
	for _, rc := range conns {
		deadline := graceEnd
		if rc.outstanding.Load() == 0 {
			deadline = time.Unix(1, 0)
		}
		_ = rc.conn.SetReadDeadline(deadline)
	}
	wg.Wait()
	res.Due, res.Sent = pres.Due, pres.Released
	res.Lag = pres.Lag
	for _, rc := range conns {
		res.Merge(rc.res)
	}
	return res, errors.Join(append(errs, perr)...)
}

// read handles one connection's replies until it has nothing out once
// the Pacer is done, or its deadline passes.
func (rc *rateConn) read(ph *Phase, stopping, cancelled *atomic.Bool) error {
	r := newPacketReader(rc.conn, 64<<10)
	for {
		if stopping.Load() && rc.outstanding.Load() == 0 {
			return nil
		}
		typ, body, err := r.next()
		if err != nil {
			if stopping.Load() && rc.outstanding.Load() == 0 {
				return nil
			}
			if cancelled.Load() || errors.Is(err, os.ErrDeadlineExceeded) {
				rc.abandon(ph, time.Now())
				return nil
			}
			return err
		}
		now := time.Now()
		switch typ {
		case typeJobCreated:
			var due time.Time
			select {
			case due = <-rc.created:
			default:
				return fmt.Errorf("rate client: JOB_CREATED %q with no submit outstanding", body)
			}
			if e, ok := rc.early[string(body)]; ok {
				delete(rc.early, string(body))
				rc.finish(ph, due, e.finished, e.failed)
				continue
			}
			rc.running[string(body)] = due
		case typeWorkComplete, typeWorkFail, typeWorkExcept:
			handle, _ := splitArg(body)
			failed := typ != typeWorkComplete
			due, ok := rc.running[string(handle)]
			if !ok {
				rc.early[string(handle)] = earlyResult{finished: now, failed: failed}
				continue
			}
			delete(rc.running, string(handle))
			rc.finish(ph, due, now, failed)
		case typeError:
			return serverError(body)
		default:
			// WORK_DATA, WORK_STATUS, WORK_WARNING: nothing to do.
		}
	}
}

// finish counts a job due at due that finished at at.
func (rc *rateConn) finish(ph *Phase, due, at time.Time, failed bool) {
	rc.outstanding.Add(-1)
	ph.Progress.Add(1)
	if failed {
		rc.res.Failed++
		return
	}
	if ph.measured(at) {
		rc.res.Done++
	}
	if ph.measured(due) {
		rc.res.Measured++
		recordLatency(rc.res.Latency, at.Sub(due))
	}
}

// abandon gives up on the jobs still out at now: those due in the window
// go into the latency at the wait they have had.
func (rc *rateConn) abandon(ph *Phase, now time.Time) {
	rc.res.Abandoned = rc.outstanding.Load()
	for _, due := range rc.running {
		if ph.measured(due) {
			recordLatency(rc.res.Latency, now.Sub(due))
		}
	}
	for {
		select {
		case due := <-rc.created:
			if ph.measured(due) {
				recordLatency(rc.res.Latency, now.Sub(due))
			}
		default:
			return
		}
	}
}
