package load

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// PeriodicWorker serves one function on one Periodic connection until its
// context ends: handshake, CAN_DO, then Grab GRAB_JOBs outstanding, each
// with a message id of its own, as go-periodic's worker keeps one per free
// goroutine. The server parks a GRAB_JOB until a job is due and answers it
// with JOB_ASSIGN; the worker answers WORK_DONE at once and sends that
// GRAB_JOB again.
//
// It times each job from its submit (the time heading the workload, see
// PeriodicClient) and from its due time (sched_at, whole seconds, when not
// 0) to the arrival of its JOB_ASSIGN.
type PeriodicWorker struct {
	Addr     string
	Function string
	Grab     int
	// Phase, when set, limits the measured jobs to those assigned inside
	// its window. Its other fields are not used.
	Phase *Phase
	// Pool, when set, gets a token back per job assigned.
	Pool *Pool
	// Jobs, when set, is counted down once per job done.
	Jobs *Countdown
	// Ready, when set, is called once the server has registered the
	// worker: when the PONG to the PING sent after CAN_DO and the
	// GRAB_JOBs arrives (the server answers neither of those).
	Ready func()
}

// PeriodicWorkerResult is what one worker connection did.
type PeriodicWorkerResult struct {
	Jobs     int64 // jobs assigned and done
	Measured int64 // of them, assigned inside the phase's window
	// SinceSubmit is submit to JOB_ASSIGN of the measured jobs (µs).
	SinceSubmit *hdrhistogram.Histogram
	// SinceDue is sched_at to JOB_ASSIGN of the measured jobs that had
	// one (µs). A job assigned early is counted in Early instead.
	SinceDue *hdrhistogram.Histogram
	Early    int64         // jobs assigned before their due time, measured or not
	MaxEarly time.Duration // the earliest of them, by how much
}

// NewPeriodicWorkerResult returns an empty result, e.g. to Merge into.
func NewPeriodicWorkerResult() PeriodicWorkerResult {
	return PeriodicWorkerResult{SinceSubmit: NewLatencyHistogram(), SinceDue: NewLatencyHistogram()}
}

// Merge adds o to r.
func (r *PeriodicWorkerResult) Merge(o PeriodicWorkerResult) {
	r.Jobs += o.Jobs
	r.Measured += o.Measured
	r.SinceSubmit.Merge(o.SinceSubmit)
	r.SinceDue.Merge(o.SinceDue)
	r.Early += o.Early
	r.MaxEarly = max(r.MaxEarly, o.MaxEarly)
}

var pingID = []byte("ping")

// Run connects and works until ctx is done.
func (wk *PeriodicWorker) Run(ctx context.Context) (PeriodicWorkerResult, error) {
	res := NewPeriodicWorkerResult()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", wk.Addr)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	var cancelled atomic.Bool
	stop := context.AfterFunc(ctx, func() {
		cancelled.Store(true)
		_ = conn.SetDeadline(time.Unix(1, 0)) // unblock the read or write
	})
	defer stop()
	err = wk.loop(conn, &res)
	if cancelled.Load() {
		err = nil // how a worker is told to stop
	}
	return res, err
}

func (wk *PeriodicWorker) loop(conn net.Conn, res *PeriodicWorkerResult) error {
	grab := max(wk.Grab, 1)
	r := newPeriodicReader(conn, 64<<10)
	w := bufio.NewWriterSize(conn, 64<<10)
	if err := writePeriodicHandshake(w, periodicWorker); err != nil {
		return err
	}
	// CAN_DO gets no reply: any message id will do.
	if err := writePeriodic(w, []byte("cando"), pcmdCanDo, []byte(wk.Function)); err != nil {
		return err
	}
	ids := make([][]byte, grab)
	grabbing := make([]bool, grab) // sent and not answered, by slot
	for i := range grab {
		ids[i] = strconv.AppendInt(nil, int64(i), 10)
		if err := writePeriodic(w, ids[i], pcmdGrabJob); err != nil {
			return err
		}
		grabbing[i] = true
	}
	if err := writePeriodic(w, pingID, pcmdPing); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	ready := wk.Ready
	for {
		payload, err := r.next()
		if err != nil {
			return err
		}
		now := time.Now()
		msgID, cmd, data, err := parsePeriodic(payload)
		if err != nil {
			return err
		}
		switch cmd {
		case pcmdJobAssign:
			slot, ok := slotOf(msgID, grab)
			if !ok || !grabbing[slot] {
				return fmt.Errorf("periodic worker: JOB_ASSIGN %q to no outstanding GRAB_JOB", payload)
			}
			handle, job, ok := bytes.Cut(data, periodicSep)
			if !ok || len(handle) == 0 {
				return fmt.Errorf("periodic worker: JOB_ASSIGN %q has no job handle and JSON", payload)
			}
			wk.Pool.Put()
			wk.time(job, now, res)
			if err := writePeriodic(w, msgID, pcmdWorkDone, handle); err != nil {
				return err
			}
			if err := writePeriodic(w, msgID, pcmdGrabJob); err != nil {
				return err
			}
			res.Jobs++
			wk.Jobs.Dec()
		case pcmdPong:
			if ready != nil && bytes.Equal(msgID, pingID) {
				ready()
				ready = nil
			}
		case pcmdNoop:
		case pcmdUnknown:
			return fmt.Errorf("periodic worker: server answered UNKNOWN: %q", data)
		default:
			// NO_JOB included: the server parks GRAB_JOB instead.
			return fmt.Errorf("periodic worker: unexpected command %d in %q", cmd, payload)
		}
		if !r.complete() {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// time records the latencies of a job assigned at now.
func (wk *PeriodicWorker) time(job []byte, now time.Time, res *PeriodicWorkerResult) {
	schedAt, hasDue := jsonInt(job, `"sched_at"`)
	if hasDue && schedAt > 0 {
		if early := time.Unix(schedAt, 0).Sub(now); early > 0 {
			res.Early++
			res.MaxEarly = max(res.MaxEarly, early)
			hasDue = false
		}
	}
	if wk.Phase != nil && !wk.Phase.measured(now) {
		return
	}
	res.Measured++
	if submitted, ok := jsonStringPrefixInt(job, `"workload"`); ok {
		recordLatency(res.SinceSubmit, now.Sub(time.Unix(0, submitted)))
	}
	if hasDue && schedAt > 0 {
		recordLatency(res.SinceDue, now.Sub(time.Unix(schedAt, 0)))
	}
}

// PeriodicFuncStatus is one line of the Periodic STATUS reply.
type PeriodicFuncStatus struct {
	Workers, Jobs, Processing int64
}

// PeriodicStatus asks a Periodic server for STATUS on a connection of its
// own and returns the lines by function.
func PeriodicStatus(ctx context.Context, addr string) (map[string]PeriodicFuncStatus, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	w := bufio.NewWriter(conn)
	_ = writePeriodicHandshake(w, periodicClient)
	_ = writePeriodic(w, []byte("status"), pcmdStatus)
	if err := w.Flush(); err != nil {
		return nil, err
	}
	payload, err := newPeriodicReader(conn, 64<<10).next()
	if err != nil {
		return nil, fmt.Errorf("STATUS: %w", err)
	}
	msgID, text, ok := bytes.Cut(payload, periodicSep)
	if !ok || string(msgID) != "status" {
		return nil, fmt.Errorf("STATUS answered with %q", payload)
	}
	return parsePeriodicStatus(string(text))
}

// parsePeriodicStatus parses STATUS lines: func,workers,jobs,processing.
func parsePeriodicStatus(text string) (map[string]PeriodicFuncStatus, error) {
	out := make(map[string]PeriodicFuncStatus)
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 4 {
			return nil, fmt.Errorf("STATUS line %q: want func,workers,jobs,processing", line)
		}
		// A function name may hold commas: the numbers are the last three.
		n := len(f)
		var st PeriodicFuncStatus
		for i, dst := range []*int64{&st.Workers, &st.Jobs, &st.Processing} {
			v, err := strconv.ParseInt(f[n-3+i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("STATUS line %q: %w", line, err)
			}
			*dst = v
		}
		out[strings.Join(f[:n-3], ",")] = st
	}
	return out, nil
}
