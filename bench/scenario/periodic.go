package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The Periodic scenarios (Lupino's periodic v0.1.7 protocol, served from
// the same scheduler as Gearman). They run against switchyard alone: the
// real periodic server cannot be installed here and gearmand has no
// Periodic. Every run gets a fresh server, so one function per scenario is
// enough.

var periodicSubmit = &Scenario{
	Name:     "periodic-submit",
	About:    "Periodic SUBMIT_JOB of jobs due at once with no worker, for the duration (or the job count): jobs/s of SUCCESS; latency is submit to SUCCESS",
	Uses:     []string{"clients", "inflight", "payload", "duration", "jobs"},
	Periodic: true,
	// The job cap keeps the queue moderate, as in bg.
	Full:  Params{Clients: 4, InFlight: 64, Payload: 64, Duration: 10 * time.Second, Jobs: 300_000},
	Quick: Params{Clients: 4, InFlight: 64, Payload: 64, Duration: 3 * time.Second, Jobs: 100_000},
	run:   runPeriodicSubmit,
}

var periodicRun = &Scenario{
	Name: "periodic-run",
	About: "Periodic workers keep GRAB_JOBs parked while clients submit jobs due at once, at most clients x inflight of them in the server: " +
		"jobs/s assigned to workers; latency is submit to JOB_ASSIGN",
	Uses:     []string{"clients", "workers", "inflight", "grab", "payload", "duration", "warmup"},
	Periodic: true,
	Full:     Params{Clients: 4, Workers: 4, InFlight: 16, Grab: 16, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick:    Params{Clients: 4, Workers: 4, InFlight: 16, Grab: 16, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run:      runPeriodicRun,
}

var periodicDue = &Scenario{
	Name: "periodic-due",
	About: "the job count submitted evenly over the duration, each due the delay after the second it is submitted in, to parked Periodic workers: " +
		"latency is due time (sched_at) to JOB_ASSIGN; jobs/s is the rate at which they fall due; a job assigned early is an error",
	Uses:     []string{"clients", "workers", "inflight", "grab", "payload", "duration", "jobs", "delay"},
	Periodic: true,
	// 64 GRAB_JOBs per worker: a second's worth of jobs falls due at
	// once and finds a parked GRAB_JOB each, so the latency is the
	// server's timer and dispatch, not a worker round trip per job.
	Full:  Params{Clients: 1, Workers: 4, InFlight: 16, Grab: 64, Payload: 64, Duration: 10 * time.Second, Jobs: 2000, Delay: 2 * time.Second},
	Quick: Params{Clients: 1, Workers: 4, InFlight: 16, Grab: 64, Payload: 64, Duration: 3 * time.Second, Jobs: 600, Delay: 2 * time.Second},
	run:   runPeriodicDue,
}

var periodicDelayed1M = &Scenario{
	Name: "periodic-delayed-1m",
	About: "submit the job count of Periodic jobs due the delay (an hour) later: submit rate of each tenth (first, last, slowest), " +
		"server RSS when full and per job, then STATUS must count them all",
	Uses:     []string{"clients", "inflight", "payload", "jobs", "delay", "timeout"},
	Periodic: true,
	Full:     Params{Clients: 4, InFlight: 64, Payload: 64, Jobs: 1_000_000, Delay: time.Hour, Timeout: 180 * time.Second},
	Quick:    Params{Clients: 4, InFlight: 64, Payload: 64, Jobs: 100_000, Delay: time.Hour, Timeout: 60 * time.Second},
	run:      runPeriodicDelayed,
}

// periodicClients runs n Periodic clients in one phase and sums their
// results. Client i names its jobs "c<i>-<seq>".
func periodicClients(ctx context.Context, n int, c load.PeriodicClient, ph *load.Phase) clientsResult {
	sum := clientsResult{latency: load.NewLatencyHistogram()}
	sum.err = runAll(n, "periodic client", func(i int) (load.ClientResult, error) {
		ci := c
		ci.Name = fmt.Sprintf("c%d-", i)
		return ci.Run(ctx, ph)
	}, sum.add)
	return sum
}

// periodicWorkerPool is a set of running Periodic worker connections.
type periodicWorkerPool struct {
	cancel context.CancelFunc
	ready  sync.WaitGroup
	done   sync.WaitGroup
	mu     sync.Mutex
	res    load.PeriodicWorkerResult
	errs   []error
}

// startPeriodicWorkers starts p.Workers workers of function with p.Grab
// GRAB_JOBs each; w gives the other fields of each.
func startPeriodicWorkers(ctx context.Context, addr, function string, p Params, w load.PeriodicWorker) *periodicWorkerPool {
	ctx, cancel := context.WithCancel(ctx)
	pool := &periodicWorkerPool{cancel: cancel, res: load.NewPeriodicWorkerResult()}
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
			pool.res.Merge(res)
			if err != nil {
				pool.errs = append(pool.errs, fmt.Errorf("periodic worker: %w", err))
			}
			pool.mu.Unlock()
		})
	}
	return pool
}

// waitReady waits until every worker has registered (or failed).
func (pool *periodicWorkerPool) waitReady(ctx context.Context) error {
	done := make(chan struct{})
	go func() { pool.ready.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(readyTimeout):
		return fmt.Errorf("periodic workers not registered after %v", readyTimeout)
	}
}

// stop stops the workers and returns their sum and errors.
func (pool *periodicWorkerPool) stop() (load.PeriodicWorkerResult, error) {
	pool.cancel()
	pool.done.Wait()
	return pool.res, errors.Join(firstErrors(pool.errs)...)
}

func needPeriodic(t Target) error {
	if t.PeriodicAddr == "" {
		return errors.New("the server has no Periodic listener")
	}
	return nil
}

// checkStatus asks STATUS how many jobs function has and says if that is
// not want.
func checkStatus(ctx context.Context, t Target, function string, want int64, out *record.Run) error {
	st, err := load.PeriodicStatus(ctx, t.PeriodicAddr)
	if err != nil {
		return err
	}
	got := st[function].Jobs
	setExtra(out, "status_jobs", float64(got))
	if got != want {
		return fmt.Errorf("STATUS counts %d jobs of %s, want %d", got, function, want)
	}
	return nil
}

// runPeriodicSubmit: submit due jobs with no worker for the duration (or
// the job count).
func runPeriodicSubmit(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-periodic-submit"
	if err := needPeriodic(t); err != nil {
		return err
	}
	cpu := startCPU(t)
	begin := time.Now()
	ph := &load.Phase{Start: begin, End: begin.Add(p.Duration), Budget: load.NewBudget(int64(p.Jobs)), Grace: grace}
	client := load.PeriodicClient{Addr: t.PeriodicAddr, Function: function, Payload: p.Payload, InFlight: p.InFlight}
	res := periodicClients(ctx, p.Clients, client, ph)
	took := time.Since(begin)
	cpu.perJob(out, res.finished)
	recordJobs(out, res.finished, took, res.latency)
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	if res.abandoned > 0 {
		setExtra(out, "abandoned", float64(res.abandoned))
	}
	if res.err != nil {
		return res.err
	}
	return checkStatus(ctx, t, function, res.finished, out)
}

// runPeriodicRun: parked workers, clients submitting due jobs with at most
// clients x inflight of them in the server.
func runPeriodicRun(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-periodic-run"
	if err := needPeriodic(t); err != nil {
		return err
	}
	tokens := load.NewPool(p.Clients * p.InFlight)
	// The warm-up starts before the workers register (a few ms): they
	// share the phase, which must not change once they run.
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration), Grace: grace}
	workers := startPeriodicWorkers(ctx, t.PeriodicAddr, function, p, load.PeriodicWorker{Phase: ph, Pool: tokens})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return errors.Join(err, werr)
	}
	cpu := meterPhase(t, ph)
	client := load.PeriodicClient{Addr: t.PeriodicAddr, Function: function, Payload: p.Payload, InFlight: p.InFlight, Pool: tokens}
	res := periodicClients(ctx, p.Clients, client, ph)
	unassigned := waitTokens(ctx, tokens)
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS) // under load, before the workers go
	}
	wres, werr := workers.stop()
	cpu.perJob(out, wres.Measured)

	out.Jobs = wres.Measured
	out.Seconds = p.Duration.Seconds()
	out.JobsPerSec = float64(wres.Measured) / p.Duration.Seconds()
	out.Latency = record.Summarize(wres.SinceSubmit)
	setExtra(out, "submit_p99_ms", float64(res.latency.ValueAtQuantile(99))/1e3)
	errs := []error{res.err, werr}
	if unassigned > 0 {
		setExtra(out, "unassigned", float64(unassigned))
		errs = append(errs, fmt.Errorf("%d submitted jobs not assigned %v after the last submit", unassigned, grace))
	}
	if res.abandoned > 0 {
		setExtra(out, "abandoned", float64(res.abandoned))
	}
	if wres.Measured == 0 {
		errs = append(errs, errors.New("no job assigned in the measured time"))
	}
	return errors.Join(errs...)
}

// waitTokens waits up to grace for every job submitted under tokens to
// reach a worker (its token comes back) and returns how many have not.
func waitTokens(ctx context.Context, tokens *load.Pool) int {
	for deadline := time.Now().Add(grace); tokens.InUse() > 0 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(10 * time.Millisecond) // end of run, not a measurement
	}
	return tokens.InUse()
}

// wholeSeconds converts a delay to sched_at's unit.
func wholeSeconds(d time.Duration) (int64, error) {
	if d < time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("delay %v: want whole seconds, at least one (sched_at counts seconds)", d)
	}
	return int64(d / time.Second), nil
}

// runPeriodicDue: a steady trickle of jobs due the delay later, to parked
// workers; how late after its due time each one is assigned.
func runPeriodicDue(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-periodic-due"
	if err := needPeriodic(t); err != nil {
		return err
	}
	delay, err := wholeSeconds(p.Delay)
	if err != nil {
		return err
	}
	if p.Jobs < 1 || p.Clients < 1 {
		return fmt.Errorf("jobs %d, clients %d: want at least one of each", p.Jobs, p.Clients)
	}
	allAssigned := make(chan struct{})
	countdown := load.NewCountdown(int64(p.Jobs), func() { close(allAssigned) })
	workers := startPeriodicWorkers(ctx, t.PeriodicAddr, function, p, load.PeriodicWorker{Jobs: countdown})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return errors.Join(err, werr)
	}
	cpu := startCPU(t)
	begin := time.Now()
	// Each client paces its share; the budget stops them at the count.
	interval := p.Duration * time.Duration(p.Clients) / time.Duration(p.Jobs)
	ph := &load.Phase{Start: begin, End: begin.Add(p.Duration + time.Second), Budget: load.NewBudget(int64(p.Jobs)), Grace: grace}
	client := load.PeriodicClient{Addr: t.PeriodicAddr, Function: function, Payload: p.Payload, InFlight: p.InFlight,
		Delay: delay, Interval: interval}
	res := periodicClients(ctx, p.Clients, client, ph)
	span := time.Since(begin)
	// The last job is due at most delay seconds after its submit.
	var errs []error
	if res.err != nil {
		errs = append(errs, res.err)
	}
	wait := time.NewTimer(p.Delay + time.Second + grace)
	select {
	case <-allAssigned:
	case <-wait.C:
		errs = append(errs, fmt.Errorf("not every job assigned %v after the last submit", p.Delay+time.Second+grace))
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	wait.Stop()
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	wres, werr := workers.stop()
	cpu.perJob(out, wres.Jobs)
	if werr != nil {
		errs = append(errs, werr)
	}
	out.Jobs = wres.SinceDue.TotalCount()
	out.Seconds = span.Seconds()
	out.JobsPerSec = float64(res.finished) / span.Seconds()
	out.Latency = record.Summarize(wres.SinceDue)
	setExtra(out, "assigned", float64(wres.Jobs))
	if wres.Jobs != res.finished {
		errs = append(errs, fmt.Errorf("%d jobs submitted, %d assigned", res.finished, wres.Jobs))
	}
	if wres.Early > 0 {
		setExtra(out, "early", float64(wres.Early))
		setExtra(out, "earliest_ms", float64(wres.MaxEarly.Microseconds())/1e3)
		errs = append(errs, fmt.Errorf("%d jobs assigned before their due time, one %v early", wres.Early, wres.MaxEarly))
	}
	return errors.Join(errs...)
}

// runPeriodicDelayed: queue the job count due an hour later, watching the
// submit rate per tenth and the memory, then count them with STATUS.
func runPeriodicDelayed(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-periodic-delayed"
	if err := needPeriodic(t); err != nil {
		return err
	}
	delay, err := wholeSeconds(p.Delay)
	if err != nil {
		return err
	}
	var rssIdle int64
	if u, err := t.Usage(); err == nil {
		rssIdle = u.RSS
		setExtra(out, "rss_idle_mb", megabytes(u.RSS))
	}
	fillCtx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	cpu := startCPU(t)
	progress := load.NewProgress(int64(p.Jobs))
	begin := time.Now()
	ph := &load.Phase{Start: begin, Budget: load.NewBudget(int64(p.Jobs)), Progress: progress, Grace: grace}
	client := load.PeriodicClient{Addr: t.PeriodicAddr, Function: function, Payload: p.Payload, InFlight: p.InFlight, Delay: delay}
	res := periodicClients(fillCtx, p.Clients, client, ph)
	took := time.Since(begin)
	cancel()
	cpu.perJob(out, res.finished)
	recordJobs(out, res.finished, took, res.latency)
	var errs []error
	if res.err != nil {
		errs = append(errs, res.err)
	}
	if res.finished < int64(p.Jobs) {
		errs = append(errs, fmt.Errorf("queued %d of %d jobs in %v", res.finished, p.Jobs, took.Round(time.Millisecond)))
	}
	if steps := stepRates(progress); len(steps) >= 2 {
		first, last, slowest := steps[0], steps[len(steps)-1], steps[0]
		for _, r := range steps {
			slowest = min(slowest, r)
		}
		setExtra(out, "submit_first_step_jobs_per_s", first)
		setExtra(out, "submit_last_step_jobs_per_s", last)
		setExtra(out, "submit_slowest_step_jobs_per_s", slowest)
		out.LastVsFirst10 = last / first
	}
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
		setExtra(out, "rss_full_mb", megabytes(u.RSS))
		out.RSSBytesPerJob = rssPerJob(rssIdle, u.RSS, res.finished)
	}
	if res.err == nil {
		if err := checkStatus(ctx, t, function, res.finished, out); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stepRates returns the submit rate of each tenth of the jobs queued, in
// order, as far as the fill got.
func stepRates(p *load.Progress) []float64 {
	var rates []float64
	for pct := 10; pct <= 100; pct += 10 {
		a, _ := p.Mark(pct - 10)
		b, ok := p.Mark(pct)
		if !ok {
			break
		}
		rates = append(rates, float64(p.Total)/10/b.Sub(a).Seconds())
	}
	return rates
}
