package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The Gearman scenarios. Every run gets a fresh server, so one function
// name per scenario is enough.

var fgUses = []string{"clients", "workers", "inflight", "grab", "payload", "duration", "warmup"}

var fg = &Scenario{
	Name:  "fg",
	About: "foreground jobs: clients keep jobs in flight, workers complete them; latency is submit to WORK_COMPLETE",
	Uses:  fgUses,
	Full:  Params{Clients: 4, Workers: 4, InFlight: 16, Grab: 1, Payload: 64, Duration: 20 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 4, Workers: 4, InFlight: 16, Grab: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	// Each job costs one of the 4 workers a round trip (GRAB_JOB,
	// JOB_ASSIGN), as ceiling's 4 connections do.
	Ceiling: "ceiling",
	run:     foreground,
}

var fgSync = &Scenario{
	Name:  "fg-sync",
	About: "one client, one worker, one job in flight: the round trip through the server",
	Uses:  fgUses,
	Full:  Params{Clients: 1, Workers: 1, InFlight: 1, Grab: 1, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 1, Workers: 1, InFlight: 1, Grab: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	// A job is several round trips one after the other (submit, the
	// sleeping worker's NOOP, GRAB_JOB, JOB_ASSIGN, WORK_COMPLETE), each
	// bounded by ceiling-sync's on one connection.
	Ceiling: "ceiling-sync",
	run:     foreground,
}

var fgMany = &Scenario{
	Name:  "fg-many",
	About: "fg with 64 clients and 64 workers",
	Uses:  fgUses,
	Full:  Params{Clients: 64, Workers: 64, InFlight: 16, Grab: 1, Payload: 64, Duration: 20 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 64, Workers: 64, InFlight: 16, Grab: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run:   foreground,
}

var payload1M = &Scenario{
	Name:  "payload-1m",
	About: "fg with 1 MiB payloads, echoed back by the workers",
	Uses:  fgUses,
	Full:  Params{Clients: 2, Workers: 2, InFlight: 2, Grab: 1, Payload: 1 << 20, Duration: 10 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 2, Workers: 2, InFlight: 2, Grab: 1, Payload: 1 << 20, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run:   foreground,
}

var conns10K = &Scenario{
	Name:    "conns-10k",
	About:   "fg while 10,000 idle connections are held open",
	Uses:    append([]string{"conns"}, fgUses...),
	Full:    Params{Conns: 10_000, Clients: 4, Workers: 4, InFlight: 16, Grab: 1, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick:   Params{Conns: 10_000, Clients: 4, Workers: 4, InFlight: 16, Grab: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	Ceiling: "ceiling", // as fg
	run:     runConns,
}

var bgUses = []string{"clients", "inflight", "payload", "duration", "jobs", "workers", "grab", "timeout"}

var bg = &Scenario{
	Name:  "bg",
	About: "background submits with no worker for the duration (or the job count), then workers drain the queue; latency is submit to JOB_CREATED",
	Uses:  bgUses,
	// The job cap keeps the queue moderate: queue-1m is the large one.
	Full:  Params{Clients: 4, InFlight: 64, Payload: 64, Duration: 10 * time.Second, Jobs: 300_000, Workers: 4, Grab: 1, Timeout: 120 * time.Second},
	Quick: Params{Clients: 4, InFlight: 64, Payload: 64, Duration: 3 * time.Second, Jobs: 100_000, Workers: 4, Grab: 1, Timeout: 60 * time.Second},
	run:   runBackground,
}

// The queue-1m scenarios send a unique with every job, a UUID as
// libgearman does: every real client sends one, and the server keeps it
// and indexes it for as long as the job is queued.
var queueUses = append(bgUses[:len(bgUses):len(bgUses)], "settle", "unique")

var queue1M = &Scenario{
	Name: "queue-1m",
	About: "queue the job count in the background with no worker, each job with a unique of its own (a UUID, as libgearman sends): " +
		"submit rate of the first and the last 10% and the one over the other (last/first 10%), " +
		"RSS when full and per job (less the RSS before the fill), then drain and RSS after",
	Uses:  queueUses,
	Full:  Params{Clients: 4, InFlight: 64, Payload: 64, Unique: load.UUIDLen, Jobs: 1_000_000, Workers: 4, Grab: 1, Timeout: 180 * time.Second, Settle: 5 * time.Second},
	Quick: Params{Clients: 4, InFlight: 64, Payload: 64, Unique: load.UUIDLen, Jobs: 100_000, Workers: 4, Grab: 1, Timeout: 60 * time.Second, Settle: time.Second},
	run:   runQueue,
}

var bgDurable = &Scenario{
	Name:    "bg-durable",
	About:   "bg against the durable queues (switchyard -q durable, gearmand -q libsqlite3): a submit is acknowledged once on disk",
	Uses:    bgUses,
	Durable: true,
	Full:    Params{Clients: 4, InFlight: 64, Payload: 64, Duration: 10 * time.Second, Jobs: 300_000, Workers: 4, Grab: 1, Timeout: 120 * time.Second},
	Quick:   Params{Clients: 4, InFlight: 64, Payload: 64, Duration: 3 * time.Second, Jobs: 100_000, Workers: 4, Grab: 1, Timeout: 60 * time.Second},
	run:     runBackground,
}

var queue1MDurable = &Scenario{
	Name:    "queue-1m-durable",
	About:   "queue-1m against the durable queues (switchyard -q durable, gearmand -q libsqlite3), with a kill -9 and a restart between the fill and the drain: restart_s is how long the restarted server took to accept connections, its stored jobs back",
	Uses:    queueUses,
	Durable: true,
	Full:    Params{Clients: 4, InFlight: 64, Payload: 64, Unique: load.UUIDLen, Jobs: 1_000_000, Workers: 4, Grab: 1, Timeout: 180 * time.Second, Settle: 5 * time.Second},
	Quick:   Params{Clients: 4, InFlight: 64, Payload: 64, Unique: load.UUIDLen, Jobs: 100_000, Workers: 4, Grab: 1, Timeout: 60 * time.Second, Settle: time.Second},
	run:     runQueue,
}

// grace is how long clients wait for their outstanding jobs once the
// measured time is over.
const grace = 5 * time.Second

// readyTimeout bounds how long workers may take to register.
const readyTimeout = 10 * time.Second

func payloadOf(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }

// workerPool is a set of running worker connections.
type workerPool struct {
	cancel context.CancelFunc
	ready  sync.WaitGroup
	done   sync.WaitGroup
	mu     sync.Mutex
	jobs   int64
	errs   []error
}

// startWorkers starts p.Workers workers of function with p.Grab GRAB_JOBs
// each; w gives the other fields of each (Jobs, Pool).
func startWorkers(ctx context.Context, addr, function string, p Params, w load.Worker) *workerPool {
	ctx, cancel := context.WithCancel(ctx)
	pool := &workerPool{cancel: cancel}
	pool.ready.Add(p.Workers)
	for range p.Workers {
		var once sync.Once
		ready := func() { once.Do(pool.ready.Done) }
		wk := w
		wk.Addr, wk.Function, wk.Grab, wk.Ready = addr, function, p.Grab, ready
		pool.done.Go(func() {
			res, err := wk.Run(ctx)
			ready() // a worker that failed is not waited for
			pool.mu.Lock()
			pool.jobs += res.Jobs
			if err != nil {
				pool.errs = append(pool.errs, fmt.Errorf("worker: %w", err))
			}
			pool.mu.Unlock()
		})
	}
	return pool
}

// exited returns a channel closed once every worker has returned.
func (pool *workerPool) exited() <-chan struct{} {
	ch := make(chan struct{})
	go func() { pool.done.Wait(); close(ch) }()
	return ch
}

// waitReady waits until every worker has registered (or failed).
func (pool *workerPool) waitReady(ctx context.Context) error {
	done := make(chan struct{})
	go func() { pool.ready.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(readyTimeout):
		return fmt.Errorf("workers not registered after %v", readyTimeout)
	}
}

// stop stops the workers and returns their job count and errors.
func (pool *workerPool) stop() (int64, error) {
	pool.cancel()
	pool.done.Wait()
	return pool.jobs, errors.Join(firstErrors(pool.errs)...)
}

// recordJobs fills out from a closed-loop phase: jobs finished in took,
// and their latencies.
func recordJobs(out *record.Run, jobs int64, took time.Duration, latency *hdrhistogram.Histogram) {
	out.Jobs = jobs
	out.Seconds = took.Seconds()
	out.JobsPerSec = float64(jobs) / took.Seconds()
	out.Latency = record.Summarize(latency)
}

// clientsResult is the sum of several clients' results.
type clientsResult struct {
	measured, finished, submitted, failed, abandoned int64
	latency                                          *hdrhistogram.Histogram
	err                                              error
}

// add sums one client's result in.
func (s *clientsResult) add(res load.ClientResult) {
	s.measured += res.Measured
	s.finished += res.Finished
	s.submitted += res.Submitted
	s.failed += res.Failed
	s.abandoned += res.Abandoned
	s.latency.Merge(res.Latency)
}

// runClients runs n clients in one phase and sums their results.
func runClients(ctx context.Context, n int, c load.Client, ph *load.Phase) clientsResult {
	sum := clientsResult{latency: load.NewLatencyHistogram()}
	sum.err = runAll(n, "client", func(int) (load.ClientResult, error) { return c.Run(ctx, ph) }, sum.add)
	return sum
}

// runAll runs run(0) to run(n-1) at once, hands each result to add, one
// at a time, and returns the first few errors, each prefixed with what.
func runAll[R any](n int, what string, run func(i int) (R, error), add func(R)) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := run(i)
			mu.Lock()
			defer mu.Unlock()
			add(res)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			}
		})
	}
	wg.Wait()
	return errors.Join(firstErrors(errs)...)
}

// firstErrors keeps error lists readable when many connections fail alike.
func firstErrors(errs []error) []error {
	const keep = 3
	if len(errs) <= keep {
		return errs
	}
	return append(errs[:keep:keep], fmt.Errorf("... and %d more", len(errs)-keep))
}

// foreground runs workers and clients for the warm-up plus the measured
// time and fills out's throughput and latency.
func foreground(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-fg"
	workers := startWorkers(ctx, t.Addr, function, p, load.Worker{})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return errors.Join(err, werr)
	}
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration), Grace: grace}
	cpu := meterPhase(t, ph)
	client := load.Client{Addr: t.Addr, Function: function, Payload: payloadOf(p.Payload), InFlight: p.InFlight}
	res := runClients(ctx, p.Clients, client, ph)
	cpu.perJob(out, res.measured)
	// RSS under load, before the workers go.
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	_, werr := workers.stop()

	out.Jobs = res.measured
	out.Seconds = p.Duration.Seconds()
	out.JobsPerSec = float64(res.measured) / p.Duration.Seconds()
	out.Latency = record.Summarize(res.latency)
	if res.failed > 0 {
		setExtra(out, "failed", float64(res.failed))
	}
	if res.abandoned > 0 {
		setExtra(out, "abandoned", float64(res.abandoned))
	}
	if res.measured == 0 && res.err == nil && werr == nil {
		return errors.New("no job completed in the measured time")
	}
	return errors.Join(res.err, werr)
}

// runConns opens the idle connections, then runs fg beside them.
func runConns(ctx context.Context, t Target, p Params, out *record.Run) error {
	begin := time.Now()
	conns, err := load.OpenIdle(ctx, t.Addr, p.Conns, 16)
	if err != nil {
		return err
	}
	defer load.CloseAll(conns)
	setExtra(out, "idle_conns", float64(len(conns)))
	setExtra(out, "open_conns_s", time.Since(begin).Seconds())
	if u, err := t.Usage(); err == nil {
		setExtra(out, "rss_idle_mb", megabytes(u.RSS))
	}
	return foreground(ctx, t, p, out)
}

// fill submits background jobs until the phase ends and returns how many
// the server acknowledged and how long that took.
func fill(ctx context.Context, t Target, p Params, function string, ph *load.Phase, out *record.Run) (clientsResult, time.Duration) {
	begin := time.Now()
	cpu := startCPU(t)
	client := load.Client{Addr: t.Addr, Function: function, Payload: payloadOf(p.Payload), Unique: p.Unique, InFlight: p.InFlight, Background: true}
	res := runClients(ctx, p.Clients, client, ph)
	took := time.Since(begin)
	cpu.perJob(out, res.finished)
	return res, took
}

// drain runs workers until they have done want jobs or the timeout passes,
// and returns how many they did and how long it took; its CPU per job goes
// in out's extras.
func drain(ctx context.Context, t Target, p Params, function string, want int64, out *record.Run) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	begin := time.Now()
	var end time.Time
	cpu := startCPU(t)
	countdown := load.NewCountdown(want, func() { end = time.Now(); cancel() })
	workers := startWorkers(ctx, t.Addr, function, p, load.Worker{Jobs: countdown})
	select {
	case <-ctx.Done():
	case <-workers.exited(): // all failed
	}
	done, err := workers.stop()
	cpu.perJobExtra(out, "drain_", done)
	if end.IsZero() {
		end = time.Now()
		err = errors.Join(err, fmt.Errorf("drain: %d of %d jobs done after %v", done, want, p.Timeout))
	}
	return done, end.Sub(begin), err
}

// runBackground: submit for the duration (or the job count), then drain.
func runBackground(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-bg"
	begin := time.Now()
	ph := &load.Phase{Start: begin, End: begin.Add(p.Duration), Budget: load.NewBudget(int64(p.Jobs)), Grace: grace}
	res, took := fill(ctx, t, p, function, ph, out)
	recordJobs(out, res.finished, took, res.latency)
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	if res.err != nil {
		return res.err
	}
	done, drainTook, err := drain(ctx, t, p, function, res.finished, out)
	setExtra(out, "drain_jobs_per_s", float64(done)/drainTook.Seconds())
	setExtra(out, "drain_s", drainTook.Seconds())
	return err
}

// runQueue: queue the job count, then drain, watching rate and memory.
func runQueue(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-queue"
	var rssIdle int64
	if u, err := t.Usage(); err == nil {
		rssIdle = u.RSS
		setExtra(out, "rss_idle_mb", megabytes(u.RSS))
	}
	fillCtx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	progress := load.NewProgress(int64(p.Jobs))
	cpu := cpuAtTenths(t, progress)
	ph := &load.Phase{Start: time.Now(), Budget: load.NewBudget(int64(p.Jobs)), Progress: progress, Grace: grace}
	res, took := fill(fillCtx, t, p, function, ph, out)
	cancel()
	recordJobs(out, res.finished, took, res.latency)
	var errs []error
	if res.err != nil {
		errs = append(errs, res.err)
	}
	if res.finished < int64(p.Jobs) {
		errs = append(errs, fmt.Errorf("queued %d of %d jobs in %v", res.finished, p.Jobs, took.Round(time.Millisecond)))
	}
	if first, last, ok := tenthRates(progress); ok {
		setExtra(out, "submit_first10_jobs_per_s", first)
		setExtra(out, "submit_last10_jobs_per_s", last)
		out.LastVsFirst10 = last / first
	}
	if first, last, ok := cpu.perJob(int64(p.Jobs)); ok {
		setExtra(out, "submit_first10_cpu_us_per_job", first)
		setExtra(out, "submit_last10_cpu_us_per_job", last)
		setExtra(out, "submit_cpu_last10_vs_first10_x", last/first)
	}
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
		setExtra(out, "rss_full_mb", megabytes(u.RSS))
		out.RSSBytesPerJob = rssPerJob(rssIdle, u.RSS, res.finished)
	}
	if res.finished > 0 && res.err == nil {
		want := res.finished
		if t.Restart != nil {
			next, took, err := t.Restart()
			if err != nil {
				return errors.Join(append(errs, fmt.Errorf("restart: %w", err))...)
			}
			setExtra(out, "restart_s", took.Seconds())
			t = next
			// Every job acknowledged must be back; the drain takes
			// what is, so that a server that lost some does not make
			// it wait for them until its timeout.
			if want, err = load.QueuedJobs(ctx, t.Addr, function); err != nil {
				return errors.Join(append(errs, fmt.Errorf("after the restart: %w", err))...)
			}
			if want != res.finished {
				errs = append(errs, fmt.Errorf("after the kill and restart, %d of the %d jobs acknowledged are queued", want, res.finished))
			}
		}
		done, drainTook, err := drain(ctx, t, p, function, want, out)
		setExtra(out, "drain_jobs_per_s", float64(done)/drainTook.Seconds())
		setExtra(out, "drain_s", drainTook.Seconds())
		if err != nil {
			errs = append(errs, err)
		}
		select {
		case <-time.After(p.Settle): // let the server give memory back
		case <-ctx.Done():
		}
		if u, err := t.Usage(); err == nil {
			setExtra(out, "rss_drained_mb", megabytes(u.RSS))
		}
	}
	return errors.Join(errs...)
}

// tenthRates returns the submit rate of the first and of the last 10% of
// the jobs queued. When the fill stopped short, the last 10% is the last ten
// percent marks reached.
func tenthRates(p *load.Progress) (first, last float64, ok bool) {
	reached := 0
	for pct := 100; pct > 0; pct-- {
		if _, ok := p.Mark(pct); ok {
			reached = pct
			break
		}
	}
	if reached < 20 {
		return 0, 0, false
	}
	rate := func(from, to int) float64 {
		a, _ := p.Mark(from)
		b, _ := p.Mark(to)
		jobs := float64(p.Total) * float64(to-from) / 100
		return jobs / b.Sub(a).Seconds()
	}
	return rate(0, 10), rate(reached-10, reached), true
}

// tenthsCPU is the server's CPU time as a fill began and as it crossed
// 10%, 90% and 100% of its jobs. The submit rate of a tenth is what the
// server got of a shared machine as much as what a job cost it; the CPU
// it spent on each job of the tenth is the cost alone, much less moved
// by other work on the machine.
type tenthsCPU struct {
	mu sync.Mutex
	at [4]time.Duration // 0, 10, 90, 100%
	ok [4]bool
}

// cpuAtTenths reads t's CPU time now and as p crosses 10%, 90% and 100%.
func cpuAtTenths(t Target, p *load.Progress) *tenthsCPU {
	c := &tenthsCPU{}
	c.read(t, 0)
	p.OnMark = func(pct int) {
		switch pct {
		case 10:
			c.read(t, 1)
		case 90:
			c.read(t, 2)
		case 100:
			c.read(t, 3)
		}
	}
	return c
}

func (c *tenthsCPU) read(t Target, i int) {
	u, err := t.Usage()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at[i], c.ok[i] = u.CPU, err == nil
}

// perJob is the server's CPU per job, in µs, in the first and the last
// tenth of jobs; ok is false unless all four readings were made and both
// tenths took a measurable time (/proc counts in ticks of 10 ms).
func (c *tenthsCPU) perJob(jobs int64) (first, last float64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok != [4]bool{true, true, true, true} || jobs < 10 {
		return 0, 0, false
	}
	tenth := float64(jobs) / 10
	first = float64(c.at[1]-c.at[0]) / float64(time.Microsecond) / tenth
	last = float64(c.at[3]-c.at[2]) / float64(time.Microsecond) / tenth
	return first, last, first > 0 && last > 0
}

// rssPerJob is what each of jobs queued added to the server's RSS, idle
// before and full after the fill; 0 when either is unknown.
func rssPerJob(idle, full, jobs int64) float64 {
	if idle <= 0 || full <= 0 || jobs <= 0 {
		return 0
	}
	return float64(full-idle) / float64(jobs)
}

func setExtra(out *record.Run, key string, v float64) {
	if out.Extra == nil {
		out.Extra = make(map[string]float64)
	}
	out.Extra[key] = v
}
