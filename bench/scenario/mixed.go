package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The mixed scenario puts every protocol's load on one switchyard: each
// load first alone for the duration, then all of them at once for the
// duration, so that the record shows each protocol's jobs/s and p99 with
// the server to itself and shared (record.Part). Every protocol feeds the
// same scheduler shards; a protocol whose share fell far below the others'
// would be starved by them. The loads are small and alike: each keeps
// clients x inflight jobs in flight (dwork: hosts x grab tasks).

var mixed = &Scenario{
	Name: "mixed",
	About: "every protocol against one server: Gearman fg, Gearman bg (with workers, clients x inflight jobs queued at most), " +
		"Periodic (as periodic-run), Worker–Controller (as controller), dwork (wide DAGs of the job count, one after the other) and MemoDB " +
		"(as memodb), each alone for the duration, then all at once for the duration: jobs/s is their sum at once, and each one's " +
		"jobs/s and p99 alone and at once are the row's parts",
	Uses:  []string{"clients", "workers", "inflight", "grab", "payload", "duration", "warmup", "jobs", "pulse", "timeout"},
	Mixed: true,
	// 7 phases of warmup + duration: 38.5 s, 15.75 s quick.
	Full:  Params{Clients: 2, Workers: 2, InFlight: 8, Grab: 16, Payload: 64, Duration: 5 * time.Second, Warmup: 500 * time.Millisecond, Jobs: 2000, Pulse: time.Second, Timeout: 2 * time.Minute},
	Quick: Params{Clients: 2, Workers: 2, InFlight: 8, Grab: 16, Payload: 64, Duration: 2 * time.Second, Warmup: 250 * time.Millisecond, Jobs: 500, Pulse: time.Second, Timeout: time.Minute},
	run:   runMixed,
}

// mixedLoad is one protocol's load.
type mixedLoad struct {
	name string
	// run starts the load's workers, runs its clients for ph and stops
	// the workers. tag tells one phase's functions and names from
	// another's.
	run func(ctx context.Context, t Target, p Params, ph *load.Phase, tag string) (mixedShare, error)
}

var mixedLoads = []mixedLoad{
	{"gearman-fg", mixedForeground},
	{"gearman-bg", mixedBackground},
	{"periodic", mixedPeriodic},
	{"controller", mixedController},
	{"dwork", mixedDwork},
	{"memodb", mixedMemodb},
}

// mixedShare is what one load did over a phase.
type mixedShare struct {
	jobs    int64
	seconds float64 // the time they took: the phase's window but for dwork
	latency *hdrhistogram.Histogram
}

// windowShare is the share of a load that counts the jobs done inside ph's
// window.
func windowShare(ph *load.Phase, jobs int64, latency *hdrhistogram.Histogram) mixedShare {
	return mixedShare{jobs: jobs, seconds: ph.End.Sub(ph.Start).Seconds(), latency: latency}
}

func (s mixedShare) record() record.Share {
	out := record.Share{Jobs: s.jobs, Latency: record.Summarize(s.latency)}
	if s.seconds > 0 {
		out.JobsPerSec = float64(s.jobs) / s.seconds
	}
	return out
}

func runMixed(ctx context.Context, t Target, p Params, out *record.Run) error {
	if t.PeriodicAddr == "" || t.ControllerSocket == "" || t.DworkAddr == "" || t.MemodbURL == "" {
		return errors.New("the server lacks a listener: mixed needs Periodic, Worker–Controller, dwork and MemoDB ones")
	}
	if err := needController(ctx, t); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	phase := func() *load.Phase {
		start := time.Now().Add(p.Warmup)
		return &load.Phase{Start: start, End: start.Add(p.Duration), Grace: grace}
	}
	var errs []error
	out.Parts = make([]record.Part, len(mixedLoads))
	for i, l := range mixedLoads {
		ph := phase()
		cpu := meterPhase(t, ph)
		share, err := l.run(ctx, t, p, ph, "alone")
		part := &out.Parts[i]
		part.Name, part.Alone = l.name, share.record()
		part.Alone.ServerCPUPerJob, part.Alone.LoadCPUPerJob, _ = cpu.end(share.jobs)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s alone: %w", l.name, err))
		}
	}

	ph := phase()
	cpu := meterPhase(t, ph)
	rss := sampleRSS(t, ph.End.Add(-p.Duration/10)) // under load, near its end
	shares := make([]mixedShare, len(mixedLoads))
	loadErrs := make([]error, len(mixedLoads))
	var wg sync.WaitGroup
	for i, l := range mixedLoads {
		wg.Go(func() { shares[i], loadErrs[i] = l.run(ctx, t, p, ph, "mixed") })
	}
	wg.Wait()
	out.RSSMB = rss.MB()
	var ratios []float64
	for i, s := range shares {
		part := &out.Parts[i]
		part.Mixed = s.record()
		out.Jobs += s.jobs
		out.JobsPerSec += part.Mixed.JobsPerSec
		if loadErrs[i] != nil {
			errs = append(errs, fmt.Errorf("%s mixed: %w", part.Name, loadErrs[i]))
		}
		if part.Alone.JobsPerSec > 0 {
			ratios = append(ratios, part.Mixed.JobsPerSec/part.Alone.JobsPerSec)
		}
	}
	cpu.perJob(out, out.Jobs)
	out.Seconds = p.Duration.Seconds()
	if len(ratios) > 0 {
		sum := 0.0
		for _, r := range ratios {
			sum += r
		}
		setExtra(out, "mixed_vs_alone_min_pct", 100*slices.Min(ratios))
		setExtra(out, "mixed_vs_alone_max_pct", 100*slices.Max(ratios))
		// 100% would be the server doing as much at once as the loads
		// did one at a time, each with it to itself.
		setExtra(out, "mixed_vs_alone_sum_pct", 100*sum)
	}
	return errors.Join(errs...)
}

// mixedForeground: Gearman foreground jobs, as fg.
func mixedForeground(ctx context.Context, t Target, p Params, ph *load.Phase, tag string) (mixedShare, error) {
	function := "mixed-fg-" + tag
	wp := p
	wp.Grab = 1 // like libgearman, as fg's
	workers := startWorkers(ctx, t.Addr, function, wp, load.Worker{})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return mixedShare{}, errors.Join(err, werr)
	}
	client := load.Client{Addr: t.Addr, Function: function, Payload: payloadOf(p.Payload), InFlight: p.InFlight}
	res := runClients(ctx, p.Clients, client, ph)
	_, werr := workers.stop()
	return windowShare(ph, res.measured, res.latency), errors.Join(res.err, werr)
}

// mixedBackground: Gearman background jobs with workers running them, at
// most clients x inflight in the server; its jobs/s is JOB_CREATEDs, which
// the bound makes the rate at which the workers run them.
func mixedBackground(ctx context.Context, t Target, p Params, ph *load.Phase, tag string) (mixedShare, error) {
	function := "mixed-bg-" + tag
	tokens := load.NewPool(p.Clients * p.InFlight)
	wp := p
	wp.Grab = 1
	workers := startWorkers(ctx, t.Addr, function, wp, load.Worker{Pool: tokens})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return mixedShare{}, errors.Join(err, werr)
	}
	client := load.Client{Addr: t.Addr, Function: function, Payload: payloadOf(p.Payload), InFlight: p.InFlight, Background: true, Pool: tokens}
	res := runClients(ctx, p.Clients, client, ph)
	left := waitTokens(ctx, tokens)
	_, werr := workers.stop()
	errs := []error{res.err, werr}
	if left > 0 {
		errs = append(errs, fmt.Errorf("%d queued jobs not assigned %v after the last submit", left, grace))
	}
	return windowShare(ph, res.measured, res.latency), errors.Join(errs...)
}

// mixedPeriodic: Periodic jobs due at once to parked workers, as
// periodic-run.
func mixedPeriodic(ctx context.Context, t Target, p Params, ph *load.Phase, tag string) (mixedShare, error) {
	function := "mixed-periodic-" + tag
	tokens := load.NewPool(p.Clients * p.InFlight)
	workers := startPeriodicWorkers(ctx, t.PeriodicAddr, function, p, load.PeriodicWorker{Phase: ph, Pool: tokens})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return mixedShare{}, errors.Join(err, werr)
	}
	client := load.PeriodicClient{Addr: t.PeriodicAddr, Function: function, Payload: p.Payload, InFlight: p.InFlight, Pool: tokens}
	res := periodicClients(ctx, p.Clients, client, ph)
	left := waitTokens(ctx, tokens)
	wres, werr := workers.stop()
	errs := []error{res.err, werr}
	if left > 0 {
		errs = append(errs, fmt.Errorf("%d submitted jobs not assigned %v after the last submit", left, grace))
	}
	return windowShare(ph, wres.Measured, wres.SinceSubmit), errors.Join(errs...)
}

// mixedController: Gearman clients' jobs run by Worker–Controller
// workers, as controller: one worker per job in flight.
func mixedController(ctx context.Context, t Target, p Params, ph *load.Phase, _ string) (mixedShare, error) {
	cp := p
	cp.Workers = p.Clients * p.InFlight
	pool, err := startControllerWorkers(ctx, t, cp)
	if err != nil {
		return mixedShare{}, err
	}
	client := load.Client{Addr: t.Addr, Function: controllerFunction, Payload: payloadOf(p.Payload), InFlight: p.InFlight}
	res := runClients(ctx, p.Clients, client, ph)
	wres, werr := pool.Stop()
	errs := []error{res.err, werr}
	if wres.Results < res.finished {
		errs = append(errs, fmt.Errorf("%d jobs completed, %d results fetched from the workers", res.finished, wres.Results))
	}
	return windowShare(ph, res.measured, res.latency), errors.Join(errs...)
}

// mixedMemodb: MemoDB clients' jobs run by MemoDB worker contexts, as
// memodb: one worker context per job in flight.
func mixedMemodb(ctx context.Context, t Target, p Params, ph *load.Phase, tag string) (mixedShare, error) {
	res, err := load.RunMemodb(ctx, load.Memodb{
		URL: t.MemodbURL, Service: "mixed-memodb-" + tag,
		Clients: p.Clients, InFlight: p.InFlight, Workers: p.Clients * p.InFlight,
		Payload: payloadOf(p.Payload), TimeoutMS: 60_000,
	}, ph)
	return windowShare(ph, res.Measured, res.Latency), err
}

// mixedDwork: wide DAGs of the job count, created and run one after the
// other by workers hosts stealing up to grab tasks at a time, until the
// phase ends. A DAG runs to its end, so it counts the DAGs begun inside
// the phase's window, from the first one's Create to the last one's end.
func mixedDwork(ctx context.Context, t Target, p Params, ph *load.Phase, tag string) (mixedShare, error) {
	share := mixedShare{latency: load.NewLatencyHistogram()}
	creator, err := load.DialDwork(ctx, t.DworkAddr)
	if err != nil {
		return share, err
	}
	defer creator.Close()
	hosts := load.DworkHosts{Addr: t.DworkAddr, Hosts: p.Workers, Steal: int32(p.Grab), Name: "mixed-host"}
	var first, last time.Time
	var warm mixedShare // the last DAG begun in the warm-up, see below
	var warmBegin, warmEnd time.Time
	for n := 0; time.Now().Before(ph.End); n++ {
		begin := time.Now()
		dag := load.WideDAG(fmt.Sprintf("%s-%d-", tag, n), p.Jobs)
		if _, err := dag.Create(creator); err != nil {
			return share, err
		}
		res, err := hosts.Run(ctx, dag)
		if err != nil {
			return share, err
		}
		if begin.Before(ph.Start) {
			warm.jobs, warmBegin, warmEnd = res.Done, begin, res.End
			warm.latency = res.StealLatency
			continue // warm-up
		}
		if first.IsZero() {
			first = begin
		}
		last = res.End
		share.jobs += res.Done
		share.latency.Merge(res.StealLatency)
	}
	if first.IsZero() {
		// One DAG outlasted the whole window (a short phase on a loaded
		// machine): it is the measure, from its Create to its end, rather
		// than none.
		if warmBegin.IsZero() {
			return share, fmt.Errorf("no DAG of %d tasks ran inside the measured time", p.Jobs)
		}
		share.jobs = warm.jobs
		share.latency.Merge(warm.latency)
		share.seconds = warmEnd.Sub(warmBegin).Seconds()
		return share, nil
	}
	share.seconds = last.Sub(first).Seconds()
	return share, nil
}
