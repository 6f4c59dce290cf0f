package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histograms are in microseconds, from 1 µs to 1 minute, with three
// significant digits.
const (
	latencyMinMicros = 1
	latencyMaxMicros = 60_000_000
	latencyDigits    = 3
)

// NewLatencyHistogram returns an empty histogram in the load generators'
// unit (microseconds) and range.
func NewLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(latencyMinMicros, latencyMaxMicros, latencyDigits)
}

func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	_ = h.RecordValue(min(max(us, latencyMinMicros), latencyMaxMicros)) // in range by construction
}

// Client submits jobs on one connection, keeping InFlight of them
// outstanding.
//
// A foreground client (SUBMIT_JOB) counts a job when its WORK_COMPLETE
// arrives and measures latency from submit to WORK_COMPLETE. A background
// client (SUBMIT_JOB_BG) counts a job when its JOB_CREATED arrives, which is
// when the server has queued it, and measures submit to JOB_CREATED.
type Client struct {
	Addr     string
	Function string
	// Functions, when set, are submitted to in turn instead of Function,
	// from the first.
	Functions  []string
	Payload    []byte
	InFlight   int
	Background bool
	// Unique is the length of the unique each submit carries: UUIDLen, a
	// UUID in text as libgearman sends with every job, different for every
	// job; or 0, none.
	Unique int
	// Tag, when set instead, makes every job a unique one the drain can
	// check off: the n-th submit's unique is Tag-n (from 1), its payload
	// starts with it and a space (UniqueOf, TagSeq), and the result lists
	// the n of each one acknowledged (background only). Tag has no space.
	Tag string
	// Pool, when set, bounds the jobs in the server: each submit takes a
	// token first, which the worker that gets the job gives back
	// (Worker.Pool). It is for background jobs, which leave the client
	// as soon as they are queued.
	Pool *Pool
}

// ClientResult is what one client connection did.
type ClientResult struct {
	Measured  int64 // jobs finished inside the phase's window
	Finished  int64 // jobs finished at any time
	Submitted int64
	Failed    int64 // WORK_FAIL or WORK_EXCEPTION (foreground only)
	Abandoned int64 // outstanding when the grace period ran out or ctx ended
	Latency   *hdrhistogram.Histogram
	// AckedSeqs are the numbers of the jobs acknowledged, with a Tag.
	AckedSeqs []uint64
}

// runningJob is a foreground job the server has acknowledged.
type runningJob struct {
	handle    []byte
	submitted time.Time
}

// earlyResult is a WORK_COMPLETE that overtook its JOB_CREATED.
type earlyResult struct {
	handle   []byte
	finished time.Time
	failed   bool
}

// clientConn is the state of one Client.Run.
type clientConn struct {
	*Client
	ctx        context.Context
	ph         *Phase
	conn       net.Conn
	r          *packetReader
	w          *bufio.Writer
	submitType uint32
	cancelled  atomic.Bool
	res        ClientResult

	// Submit times of jobs waiting for JOB_CREATED, a ring, oldest first:
	// the server answers a connection's submits in order.
	awaitingCreated         []time.Time
	awaitingSeq             []uint64 // with Tag: the jobs' numbers, the same ring
	createdHead, createdLen int
	// Foreground jobs waiting for WORK_COMPLETE. Searched linearly: InFlight
	// is small and this way a lookup neither hashes nor allocates.
	running     []runningJob
	early       []earlyResult
	outstanding int
	submitting  bool
	token       bool      // a Pool token taken for the next submit
	uniques     *uuidText // nil: submits carry no unique
	functions   [][]byte  // Functions, or Function
	nextFunc    int
	seq         uint64 // with Tag: jobs submitted
	tagged      []byte // with Tag: the unique, then the payload, reused
}

// Run connects and submits until the phase ends or its budget is spent,
// then waits for outstanding jobs for up to the phase's grace period.
func (c *Client) Run(ctx context.Context, ph *Phase) (ClientResult, error) {
	if c.InFlight < 1 {
		return ClientResult{}, fmt.Errorf("client: InFlight %d < 1", c.InFlight)
	}
	if c.Unique != 0 && c.Unique != UUIDLen {
		return ClientResult{}, fmt.Errorf("client: Unique %d: want %d (a UUID) or 0", c.Unique, UUIDLen)
	}
	if c.Tag != "" && (c.Unique != 0 || !c.Background || strings.Contains(c.Tag, " ")) {
		return ClientResult{}, fmt.Errorf("client: Tag %q: for background jobs with no other unique, and without a space", c.Tag)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return ClientResult{}, err
	}
	defer conn.Close()
	cc := &clientConn{
		Client:          c,
		ctx:             ctx,
		ph:              ph,
		conn:            conn,
		r:               newPacketReader(conn, 64<<10),
		w:               bufio.NewWriterSize(conn, 64<<10),
		submitType:      typeSubmitJob,
		res:             ClientResult{Latency: NewLatencyHistogram()},
		awaitingCreated: make([]time.Time, c.InFlight),
		running:         make([]runningJob, 0, c.InFlight),
		submitting:      true,
	}
	if c.Background {
		cc.submitType = typeSubmitJobBg
	}
	if c.Unique != 0 {
		cc.uniques = newUUIDText()
	}
	if c.Tag != "" {
		cc.awaitingSeq = make([]uint64, c.InFlight)
	}
	cc.functions = [][]byte{[]byte(c.Function)}
	if len(c.Functions) > 0 {
		cc.functions = cc.functions[:0]
		for _, f := range c.Functions {
			cc.functions = append(cc.functions, []byte(f))
		}
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
	// Jobs still out when the context ended or the grace period ran out
	// are given up on, which is not a failure of the run.
	if err != nil && (cc.cancelled.Load() || ctx.Err() != nil || (!cc.submitting && errors.Is(err, os.ErrDeadlineExceeded))) {
		cc.res.Abandoned = int64(cc.outstanding)
		err = nil
	}
	return cc.res, err
}

func (cc *clientConn) loop() error {
	// A server that stops answering must not hold the client past the
	// phase: until submitting ends and sets a nearer one, this deadline
	// bounds every read.
	if !cc.ph.End.IsZero() {
		if err := cc.conn.SetReadDeadline(cc.ph.End.Add(cc.ph.Grace)); err != nil {
			return err
		}
	}
	if err := cc.fill(time.Now()); err != nil {
		return err
	}
	if err := cc.w.Flush(); err != nil {
		return err
	}
	for cc.outstanding > 0 || cc.submitting {
		if cc.outstanding == 0 {
			// fill stopped short of InFlight with submitting on: the
			// Pool is empty, and there is nothing to read.
			if err := cc.waitToken(); err != nil {
				return err
			}
			if err := cc.fill(time.Now()); err != nil {
				return err
			}
			if err := cc.w.Flush(); err != nil {
				return err
			}
			continue
		}
		typ, body, err := cc.r.next()
		if err != nil {
			return err
		}
		now := time.Now()
		if err := cc.handle(typ, body, now); err != nil {
			return err
		}
		if err := cc.fill(now); err != nil {
			return err
		}
		if !cc.r.complete() {
			if err := cc.w.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// fill submits jobs until InFlight are outstanding or submitting ends.
func (cc *clientConn) fill(now time.Time) error {
	ph := cc.ph
	for cc.submitting {
		// Checked even when no slot is free, so that the grace period
		// starts when submitting ends, not when the next job finishes.
		if cc.cancelled.Load() || (!ph.End.IsZero() && !now.Before(ph.End)) || ph.Budget.spent() {
			return cc.stopSubmitting(now)
		}
		if cc.outstanding >= cc.InFlight {
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
		var unique []byte
		payload := cc.Payload
		if cc.uniques != nil {
			unique = cc.uniques.next()
		}
		slot := (cc.createdHead + cc.createdLen) % len(cc.awaitingCreated)
		if cc.Tag != "" {
			cc.seq++
			cc.awaitingSeq[slot] = cc.seq
			unique, payload = cc.tag()
		}
		function := cc.functions[cc.nextFunc]
		cc.nextFunc = (cc.nextFunc + 1) % len(cc.functions)
		if err := writePacket(cc.w, cc.submitType, function, unique, payload); err != nil {
			return err
		}
		cc.awaitingCreated[slot] = now
		cc.createdLen++
		cc.outstanding++
		cc.res.Submitted++
	}
	return nil
}

// waitToken blocks until a Pool token is free, the phase ends or the
// context does.
func (cc *clientConn) waitToken() error {
	var end <-chan time.Time
	if !cc.ph.End.IsZero() {
		t := time.NewTimer(time.Until(cc.ph.End))
		defer t.Stop()
		end = t.C
	}
	select {
	case cc.Pool.tokens <- struct{}{}:
		cc.token = true
	case <-end: // fill stops submitting
	case <-cc.ctx.Done():
		return cc.ctx.Err()
	}
	return nil
}

// stopSubmitting ends submitting: from now on only outstanding jobs are
// awaited, and not for ever.
func (cc *clientConn) stopSubmitting(now time.Time) error {
	cc.submitting = false
	deadline := now.Add(cc.ph.Grace)
	if cc.cancelled.Load() {
		deadline = time.Unix(1, 0)
	}
	return cc.conn.SetReadDeadline(deadline)
}

func (cc *clientConn) handle(typ uint32, body []byte, now time.Time) error {
	switch typ {
	case typeJobCreated:
		if cc.createdLen == 0 {
			return fmt.Errorf("client: JOB_CREATED %q with no submit outstanding", body)
		}
		submitted := cc.awaitingCreated[cc.createdHead]
		if cc.Tag != "" {
			cc.res.AckedSeqs = append(cc.res.AckedSeqs, cc.awaitingSeq[cc.createdHead])
		}
		cc.createdHead = (cc.createdHead + 1) % len(cc.awaitingCreated)
		cc.createdLen--
		if cc.Background {
			cc.finish(submitted, now, false)
			return nil
		}
		if i := findEarly(cc.early, body); i >= 0 {
			e := cc.early[i]
			cc.early = append(cc.early[:i], cc.early[i+1:]...)
			cc.finish(submitted, e.finished, e.failed)
			return nil
		}
		// Reuse a handle buffer left in the slice's spare capacity.
		cc.running = cc.running[:len(cc.running)+1]
		job := &cc.running[len(cc.running)-1]
		job.handle = append(job.handle[:0], body...)
		job.submitted = submitted
	case typeWorkComplete, typeWorkFail, typeWorkExcept:
		handle, _ := splitArg(body)
		failed := typ != typeWorkComplete
		i := findRunning(cc.running, handle)
		if i < 0 {
			cc.early = append(cc.early, earlyResult{handle: bytes.Clone(handle), finished: now, failed: failed})
			return nil
		}
		submitted := cc.running[i].submitted
		last := len(cc.running) - 1
		cc.running[i], cc.running[last] = cc.running[last], cc.running[i]
		cc.running = cc.running[:last]
		cc.finish(submitted, now, failed)
	case typeError:
		return serverError(body)
	default:
		// WORK_DATA, WORK_STATUS, WORK_WARNING, NOOP: nothing to do.
	}
	return nil
}

func (cc *clientConn) finish(submitted, at time.Time, failed bool) {
	cc.outstanding--
	cc.res.Finished++
	cc.ph.Progress.Add(1)
	if failed {
		cc.res.Failed++
		return
	}
	if cc.ph.measured(at) {
		cc.res.Measured++
		recordLatency(cc.res.Latency, at.Sub(submitted))
	}
}

// tag returns the unique of job cc.seq, Tag-seq, and its payload: the
// unique, a space, and the rest of Payload after as many bytes, so that
// the payload's size stays Payload's (or the unique's and a byte, if
// larger). Both are slices of one buffer, reused by the next submit.
func (cc *clientConn) tag() (unique, payload []byte) {
	cc.tagged = tagged(cc.tagged[:0], cc.Tag, cc.seq, cc.Payload)
	return cc.tagged[:bytes.IndexByte(cc.tagged, ' ')], cc.tagged
}

// TagSeq parses a unique a Client with a Tag made, Tag-n: the tag and n.
func TagSeq(unique string) (tag string, n uint64, ok bool) {
	i := strings.LastIndexByte(unique, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(unique[i+1:], 10, 64)
	return unique[:i], n, err == nil
}

func findRunning(jobs []runningJob, handle []byte) int {
	for i := range jobs {
		if bytes.Equal(jobs[i].handle, handle) {
			return i
		}
	}
	return -1
}

func findEarly(results []earlyResult, handle []byte) int {
	for i := range results {
		if bytes.Equal(results[i].handle, handle) {
			return i
		}
	}
	return -1
}
