package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The open-loop scenarios (wrk2's way): jobs are sent on a fixed schedule
// at the offered rate, whatever became of the jobs before them, and each
// is timed from when it was due, so that a server that stalls is charged
// the stall for every job due meanwhile. The closed-loop scenarios (fg,
// http, memodb, periodic-run) let a slower server take fewer jobs and
// queue more of them; these put the same load on both servers, so their
// latencies compare at equal load. jobs/s is what the server finished in
// the window, to set beside the offered rate: below it, the server did
// not keep up and the latency is a backlog's.

var rateUses = []string{"rate", "clients", "workers", "grab", "payload", "duration", "warmup"}

// rateFull and rateQuick are the open-loop scenarios' defaults: 4,000
// jobs/s is a third of gearmand's closed-loop fg rate on the machine the
// bench was written on (2 shared vCPUs), a load both servers sustain.
var (
	rateFull  = Params{Rate: 4000, Clients: 4, Workers: 4, Grab: 1, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second}
	rateQuick = Params{Rate: 4000, Clients: 4, Workers: 4, Grab: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond}
)

var fgRate = &Scenario{
	Name: "fg-rate",
	About: "foreground jobs at the offered rate on a fixed schedule, dealt round-robin over the client connections, workers complete them; " +
		"latency is due time to WORK_COMPLETE",
	Uses:  rateUses,
	Full:  rateFull,
	Quick: rateQuick,
	run:   runFgRate,
}

var fgCurve = &Scenario{
	Name: "fg-curve",
	About: "fg-rate stepped: after one unmeasured step at the rate param, the offered rate from it up by 1.15x a step until two steps in a row are not sustained; " +
		"each step's p50/p99/p99.9 in the record's curve, and the knee (highest rate sustained with p99 under the bound)",
	Uses: rateUses,
	// Every server at once, a step on each in turn: see runFgCurve.
	// Steps of 4 s after 0.5 s of warm-up: 20 steps from 2,000 jobs/s
	// reach 28.5k, past both servers' knees on a 2-CPU machine. A step's
	// p99.9 is its 8th-worst job at 2,000/s: at 2 s, one stall of the
	// machine set the 4th-worst, and with it the step.
	//
	// 8 workers, not fg-rate's 4: a worker that holds one job at a time
	// does a job a round trip, and with 4 the pool, not the server, set
	// the knee. At 14,150 jobs/s switchyard kept p99 under 10 ms in 1 of
	// 4 runs with 4 workers and 3 of 4 with 8, and in curves with 8 both
	// servers' knees rose by about a third (gearmand's 7.04-8.09k to
	// 9.30-12.3k).
	Full:      Params{Rate: 2000, Clients: 4, Workers: 8, Grab: 1, Payload: 64, Duration: 4 * time.Second, Warmup: 500 * time.Millisecond},
	Quick:     Params{Rate: 2000, Clients: 4, Workers: 8, Grab: 1, Payload: 64, Duration: time.Second, Warmup: 300 * time.Millisecond},
	runPaired: runFgCurve,
}

var httpRate = &Scenario{
	Name: "http-rate",
	About: "foreground jobs over gearmand's HTTP protocol at the offered rate on a fixed schedule, taken by whichever client connection is free " +
		"(one request at a time each); latency is due time to the WORK_COMPLETE answer",
	Uses: rateUses,
	HTTP: true,
	// 64 connections: gearmand closes each after its answer, so a
	// connection's jobs/s is one over a connect plus a job.
	Full:  Params{Rate: 2000, Clients: 64, Workers: 16, Grab: 1, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick: Params{Rate: 2000, Clients: 64, Workers: 16, Grab: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run:   runHTTPRate,
}

var memodbRate = &Scenario{
	Name: "memodb-rate",
	About: "MemoDB JOBs at the offered rate on a fixed schedule, taken by whichever client context is free (clients x 16 contexts), " +
		"64 worker contexts answer; latency is due time to RESULT",
	Uses:   rateUses,
	Memodb: true,
	Full:   rateFull,
	Quick:  rateQuick,
	run:    runMemodbRate,
}

var periodicRate = &Scenario{
	Name: "periodic-rate",
	About: "Periodic SUBMIT_JOBs due at once, at the offered rate on a fixed schedule over the client connections, to workers with GRAB_JOBs parked; " +
		"latency is due time to JOB_ASSIGN of the jobs assigned in the window",
	Uses:     rateUses,
	Periodic: true,
	Full:     Params{Rate: 4000, Clients: 4, Workers: 4, Grab: 16, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick:    Params{Rate: 4000, Clients: 4, Workers: 4, Grab: 16, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run:      runPeriodicRate,
}

// rateGrace bounds the wait for the jobs out once an open-loop step's
// schedule is over: a server that kept up answers within milliseconds,
// and one that did not is not waited for.
const rateGrace = 2 * time.Second

// rateConns is each MemoDB client socket's contexts in memodb-rate.
const rateConns = 16

// recordRate fills out from one open-loop run's result.
func recordRate(out *record.Run, p Params, res load.RateResult) {
	out.Jobs = res.Measured
	out.Seconds = p.Duration.Seconds()
	out.JobsPerSec = float64(res.Done) / p.Duration.Seconds()
	out.Latency = record.Summarize(res.Latency)
	setExtra(out, "offered_jobs_per_s", float64(p.Rate))
	if res.Lag != nil && res.Lag.TotalCount() > 0 {
		setExtra(out, "pacer_lag_p99_us", float64(res.Lag.ValueAtQuantile(99)))
	}
	for key, v := range map[string]int64{"unsent": res.Due - res.Sent, "abandoned": res.Abandoned, "failed": res.Failed} {
		if v > 0 {
			setExtra(out, key, float64(v))
		}
	}
}

// fgRateStep runs one open-loop step of p.Rate against workers already
// registered for function, its measured window from start (its warm-up
// from now).
func fgRateStep(ctx context.Context, t Target, p Params, function string, start time.Time) (load.RateResult, error) {
	ph := &load.Phase{Start: start, End: start.Add(p.Duration), Grace: rateGrace}
	c := load.RateClient{Addr: t.Addr, Function: function, Payload: payloadOf(p.Payload), Conns: p.Clients, Rate: float64(p.Rate)}
	return c.Run(ctx, ph)
}

func runFgRate(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-fg-rate"
	if p.Rate <= 0 {
		return fmt.Errorf("rate %d: want jobs/s > 0", p.Rate)
	}
	workers := startWorkers(ctx, t.Addr, function, p, load.Worker{})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return errors.Join(err, werr)
	}
	start := time.Now().Add(p.Warmup)
	cpu := meterPhase(t, &load.Phase{Start: start, End: start.Add(p.Duration)})
	res, err := fgRateStep(ctx, t, p, function, start)
	cpu.perJob(out, res.Measured)
	if u, uerr := t.Usage(); uerr == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	_, werr := workers.stop()
	recordRate(out, p, res)
	if res.Measured == 0 && err == nil && werr == nil {
		return errors.New("no job completed in the measured time")
	}
	return errors.Join(err, werr)
}

// Curve steps: each 1.15x the last, at most curveSteps of them. At 1.3x
// two knees could only differ by 1.3x, 1.69x, ...: the steps were the
// knee's error bars.
const (
	curveFactor = 1.15
	curveSteps  = 24
)

// curveRates is the offered rates of a curve from first: the same for
// every server, so that their steps line up.
func curveRates(first int) []int {
	rates := make([]int, 0, curveSteps)
	r := float64(first)
	for range curveSteps {
		rates = append(rates, int(r+0.5))
		r *= curveFactor
	}
	return rates
}

// curveSide is one server of a paired fg-curve.
type curveSide struct {
	t       Target
	out     *record.Run
	workers *workerPool
	done    bool // past saturation, or failed
	errs    []error
}

// runFgCurve steps every target up the same rates, each step on every
// server in turn, always in the order given, so that a slow minute of
// the machine falls on both and every server's step comes after the
// other's: a server is as long idle before each of its steps. Reversing
// the order at every step gave each server two steps in a row, the
// first of them after twice the idle time, and in runs of one server
// against itself (docs/benchmarks.md, latency) that first step's p99 was
// 9-35% the worse. The caller alternates which server goes first by
// round. A server leaves the curve once past saturation; the curve ends
// when all have.
func runFgCurve(ctx context.Context, ts []Target, p Params, outs []*record.Run) []error {
	const function = "bench-fg-curve"
	errs := make([]error, len(ts))
	if p.Rate <= 0 {
		for i := range errs {
			errs[i] = fmt.Errorf("rate %d: want jobs/s > 0", p.Rate)
		}
		return errs
	}
	sides := make([]*curveSide, len(ts))
	for i, t := range ts {
		side := &curveSide{t: t, out: outs[i], workers: startWorkers(ctx, t.Addr, function, p, load.Worker{})}
		if err := side.workers.waitReady(ctx); err != nil {
			side.errs = append(side.errs, err)
			side.done = true
		}
		sides[i] = side
	}
	for _, side := range sides {
		if !side.done && ctx.Err() == nil {
			side.warm(ctx, p, function)
			side.drain(ctx, function)
		}
	}
	for _, rate := range curveRates(p.Rate) {
		if ctx.Err() != nil {
			break
		}
		stepped := false
		for _, side := range sides {
			if side.done {
				continue
			}
			stepped = true
			side.step(ctx, p, rate, function)
			side.drain(ctx, function)
		}
		if !stepped {
			break
		}
	}
	for i, side := range sides {
		_, werr := side.workers.stop()
		side.errs = append(side.errs, werr)
		side.finish(p)
		errs[i] = errors.Join(side.errs...)
	}
	return errs
}

// step runs one step of the curve at rate on the side's server.
func (side *curveSide) step(ctx context.Context, p Params, rate int, function string) {
	sp := p
	sp.Rate = rate
	start := time.Now().Add(p.Warmup)
	res, err := fgRateStep(ctx, side.t, sp, function, start)
	out := side.out
	out.Curve = append(out.Curve, record.Step{
		Offered:    float64(rate),
		Start:      start,
		JobsPerSec: float64(res.Done) / p.Duration.Seconds(),
		Latency:    record.Summarize(res.Latency),
		Unsent:     res.Due - res.Sent,
		Abandoned:  res.Abandoned,
		Histogram:  record.EncodeHistogram(res.Latency),
	})
	if err != nil {
		side.errs = append(side.errs, fmt.Errorf("%d jobs/s: %w", rate, err))
		side.done = true
		return
	}
	// Past saturation, by two steps in a row not sustained: one may be a
	// stall of a machine shared with other work, and the next would
	// only queue more.
	if n := len(out.Curve); n >= 2 && !out.Curve[n-1].Sustained() && !out.Curve[n-2].Sustained() {
		side.done = true
	}
}

// warm runs the curve's first step once on the side's server, unmeasured,
// so that whatever starts cold in a run is paid there and not by the
// first measured step of the server that goes first. In four drained
// runs without it that step (round 1's, 2,000 jobs/s, switchyard's) had
// p99 3.2-4.4 ms against 0.65-1.7 ms for the first steps of rounds 2 and
// 3, whose servers were as fresh; three of the four rates where
// switchyard's pooled p99 came out above gearmand's were that step's.
// What was cold is not known: four single-round runs did not show it,
// and one run since, after an idle machine, showed it after this pass.
func (side *curveSide) warm(ctx context.Context, p Params, function string) {
	res, err := fgRateStep(ctx, side.t, p, function, time.Now().Add(p.Warmup))
	setExtra(side.out, "warm_jobs", float64(res.Measured))
	if err != nil {
		side.errs = append(side.errs, fmt.Errorf("warming up at %d jobs/s: %w", p.Rate, err))
		side.done = true
	}
}

// drainFor bounds the wait for a server to finish the jobs a step left
// it: the backlog of a step past saturation, 4,096 jobs a connection at
// most, takes gearmand a few seconds.
const drainFor = 30 * time.Second

// drain waits until the side's server holds no job of function: a
// server past saturation still works through its backlog once its step
// is over, and whichever server stepped next would share the machine
// with it, at the rates that decide its knee.
func (side *curveSide) drain(ctx context.Context, function string) {
	deadline := time.Now().Add(drainFor)
	for {
		n, err := load.QueuedJobs(ctx, side.t.Addr, function)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				side.errs = append(side.errs, fmt.Errorf("draining: %w", err))
			}
			return
		case n == 0:
			return
		case time.Now().After(deadline):
			side.errs = append(side.errs, fmt.Errorf("%d jobs still held %v after a step", n, drainFor))
			return
		}
		select {
		case <-time.After(20 * time.Millisecond): // polling a server's queue, not synchronising
		case <-ctx.Done():
			return
		}
	}
}

// finish sets the run's headline figures from its curve: the knee.
func (side *curveSide) finish(p Params) {
	out := side.out
	if knee, ok := record.Knee(out.Curve, record.KneeP99Micros); ok {
		out.JobsPerSec = knee.Offered
		out.Latency = knee.Latency
		out.Jobs = knee.Latency.Count
		out.Seconds = p.Duration.Seconds()
		setExtra(out, "knee_jobs_per_s", knee.Offered)
	}
	setExtra(out, "knee_p99_bound_us", record.KneeP99Micros)
	setExtra(out, "steps", float64(len(out.Curve)))
	if len(out.Curve) > 0 && out.Curve[len(out.Curve)-1].Sustained() {
		side.errs = append(side.errs, fmt.Errorf("still sustained %v jobs/s after %d steps: start the curve higher (rate)", out.Curve[len(out.Curve)-1].Offered, curveSteps))
	}
}

func runHTTPRate(ctx context.Context, t Target, p Params, out *record.Run) error {
	if t.HTTPAddr == "" {
		return errors.New("the server has no HTTP listener")
	}
	if p.Rate <= 0 {
		return fmt.Errorf("rate %d: want jobs/s > 0", p.Rate)
	}
	const function = "bench-http-rate"
	workers := startWorkers(ctx, t.Addr, function, p, load.Worker{})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return errors.Join(err, werr)
	}
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration), Grace: rateGrace}
	cpu := meterPhase(t, ph)
	ph.Schedule = load.StartSchedule(ctx, float64(p.Rate), ph.End, nil)
	client := load.HTTPClient{Addr: t.HTTPAddr, Function: function, Payload: payloadOf(p.Payload)}
	res := runHTTPClients(ctx, p.Clients, client, ph)
	due, unsent, lag := ph.Schedule.Wait()
	cpu.perJob(out, res.measured)
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	_, werr := workers.stop()
	recordRate(out, p, load.RateResult{Measured: res.measured, Done: res.measured, Due: due, Sent: due - unsent, Failed: res.failed, Latency: res.latency, Lag: lag})
	if res.finished > 0 {
		setExtra(out, "connects_per_job", float64(res.connects)/float64(res.finished))
	}
	errs := []error{res.err, werr}
	if res.measured == 0 && res.err == nil {
		errs = append(errs, errors.New("no job completed in the measured time"))
	}
	return errors.Join(errs...)
}

func runMemodbRate(ctx context.Context, t Target, p Params, out *record.Run) error {
	if t.MemodbURL == "" {
		return errors.New("the server has no MemoDB listener")
	}
	if p.Rate <= 0 {
		return fmt.Errorf("rate %d: want jobs/s > 0", p.Rate)
	}
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration)}
	cpu := meterPhase(t, ph)
	ph.Schedule = load.StartSchedule(ctx, float64(p.Rate), ph.End, nil)
	res, err := load.RunMemodb(ctx, load.Memodb{
		URL: t.MemodbURL, Service: memodbService + "-rate",
		Clients: p.Clients, InFlight: rateConns, Workers: 64,
		Payload: payloadOf(p.Payload), TimeoutMS: 60_000,
	}, ph)
	due, unsent, lag := ph.Schedule.Wait()
	cpu.perJob(out, res.Measured)
	if u, uerr := t.Usage(); uerr == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	recordRate(out, p, load.RateResult{Measured: res.Measured, Done: res.Measured, Due: due, Sent: due - unsent, Latency: res.Latency, Lag: lag})
	errs := []error{err}
	if res.Measured == 0 {
		errs = append(errs, errors.New("no job completed in the measured time"))
	}
	return errors.Join(errs...)
}

func runPeriodicRate(ctx context.Context, t Target, p Params, out *record.Run) error {
	const function = "bench-periodic-rate"
	if err := needPeriodic(t); err != nil {
		return err
	}
	if p.Rate <= 0 || p.Clients < 1 {
		return fmt.Errorf("rate %d over %d clients: want both > 0", p.Rate, p.Clients)
	}
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration), Grace: rateGrace}
	workers := startPeriodicWorkers(ctx, t.PeriodicAddr, function, p, load.PeriodicWorker{Phase: ph})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return errors.Join(err, werr)
	}
	cpu := meterPhase(t, ph)
	// Each client paces its share of the rate; 1024 submits out each
	// bound a run past saturation and never hold back a sustained one.
	client := load.PeriodicClient{Addr: t.PeriodicAddr, Function: function, Payload: p.Payload, InFlight: 1024,
		Interval: time.Duration(float64(time.Second) * float64(p.Clients) / float64(p.Rate)), FromDue: true}
	res := periodicClients(ctx, p.Clients, client, ph)
	// The last jobs due reach the workers within the grace period.
	select {
	case <-time.After(time.Until(ph.End.Add(100 * time.Millisecond))):
	case <-ctx.Done():
	}
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	wres, werr := workers.stop()
	cpu.perJob(out, wres.Measured)
	recordRate(out, p, load.RateResult{Measured: wres.Measured, Done: wres.Measured, Due: res.submitted, Sent: res.submitted, Abandoned: res.abandoned, Latency: wres.SinceSubmit})
	setExtra(out, "submit_p99_ms", float64(res.latency.ValueAtQuantile(99))/1e3)
	errs := []error{res.err, werr}
	if wres.Measured == 0 {
		errs = append(errs, errors.New("no job assigned in the measured time"))
	}
	return errors.Join(errs...)
}
