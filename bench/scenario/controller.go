package scenario

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The Worker–Controller scenarios (docs/controller.md) run against
// switchyard alone: gearmand has no such protocol. The workers are
// load.ControllerWorkers, many in this process, each listening on its own
// socket beside the server's main socket.

var controllerRun = &Scenario{
	Name: "controller",
	About: "Gearman clients keep foreground jobs of function controller in flight, which Worker–Controller workers run " +
		"(SET_TASK, FETCH_ME, FETCH: three unix connections a job) and finish at once; latency is submit to WORK_COMPLETE",
	Uses:       []string{"clients", "workers", "inflight", "payload", "duration", "warmup", "pulse"},
	Controller: true,
	// As many workers as jobs in flight: a worker runs one task at a time.
	Full:  Params{Clients: 4, Workers: 64, InFlight: 16, Payload: 64, Duration: 20 * time.Second, Warmup: time.Second, Pulse: time.Second},
	Quick: Params{Clients: 4, Workers: 64, InFlight: 16, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond, Pulse: time.Second},
	run:   runController,
}

var controllerPulses = &Scenario{
	Name: "controller-pulses",
	About: "1,000 registered Worker–Controller workers pulse OK every second (next_pulse 2 s) and no job runs: " +
		"the server's CPU per pulse and per second for exact pulse deadlines, and its RSS; jobs/s is pulses/s, latency a pulse's round trip",
	Uses:       []string{"workers", "duration", "warmup", "pulse"},
	Controller: true,
	// The warm-up lets registration's burst of pulses spread into the
	// steady stagger.
	Full:  Params{Workers: 1000, Duration: 20 * time.Second, Warmup: 2 * time.Second, Pulse: time.Second},
	Quick: Params{Workers: 1000, Duration: 3 * time.Second, Warmup: time.Second, Pulse: time.Second},
	run:   runControllerPulses,
}

// controllerFunction is what controller workers serve: switchyard's default
// --controller-func.
const controllerFunction = "controller"

// nextPulse is the next_pulse (whole seconds) announced by workers that
// pulse every interval: twice that, so that one late pulse is no lapse.
func nextPulse(interval time.Duration) uint64 {
	return uint64(max((2*interval+time.Second-1)/time.Second, 1))
}

// needController checks that the server has a main socket and waits until
// it accepts: switchyard opens it after its TCP ports, which are what the
// harness waits for.
func needController(ctx context.Context, t Target) error {
	if t.ControllerSocket == "" {
		return errors.New("the server has no Worker–Controller socket")
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", t.ControllerSocket)
		if err == nil {
			return c.Close() // no pulse: the server just closes it
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("controller socket: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond): // polling a starting server
		}
	}
}

func startControllerWorkers(ctx context.Context, t Target, p Params) (*load.ControllerPool, error) {
	if p.Pulse <= 0 {
		return nil, fmt.Errorf("pulse %v: want a positive interval", p.Pulse)
	}
	return load.StartControllerWorkers(ctx, load.ControllerWorkers{
		Socket: t.ControllerSocket, Workers: p.Workers, Pulse: p.Pulse, NextPulse: nextPulse(p.Pulse),
	})
}

// controllerExtras records what the workers did beyond the jobs.
func controllerExtras(out *record.Run, w load.ControllerResult) {
	setExtra(out, "workers", float64(w.Registered))
	for name, n := range map[string]int64{"busy": w.Busy, "restarted": w.Restarted, "unknown_id": w.Unknown, "get_status": w.Statuses} {
		if n > 0 {
			setExtra(out, name, float64(n))
		}
	}
}

// runController: Gearman clients' foreground jobs, run by controller
// workers.
func runController(ctx context.Context, t Target, p Params, out *record.Run) error {
	if err := needController(ctx, t); err != nil {
		return err
	}
	pool, err := startControllerWorkers(ctx, t, p)
	if err != nil {
		return err
	}
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration), Grace: grace}
	cpu := meterPhase(t, ph)
	client := load.Client{Addr: t.Addr, Function: controllerFunction, Payload: payloadOf(p.Payload), InFlight: p.InFlight}
	res := runClients(ctx, p.Clients, client, ph)
	cpu.perJob(out, res.measured)
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS) // under load, before the workers go
	}
	wres, werr := pool.Stop()

	out.Jobs = res.measured
	out.Seconds = p.Duration.Seconds()
	out.JobsPerSec = float64(res.measured) / p.Duration.Seconds()
	out.Latency = record.Summarize(res.latency)
	controllerExtras(out, wres)
	if res.failed > 0 {
		setExtra(out, "failed", float64(res.failed))
	}
	if res.abandoned > 0 {
		setExtra(out, "abandoned", float64(res.abandoned))
	}
	errs := []error{res.err, werr}
	if res.measured == 0 {
		errs = append(errs, errors.New("no job completed in the measured time"))
	}
	// Every job a client saw complete was a result a worker handed over.
	if wres.Results < res.finished {
		errs = append(errs, fmt.Errorf("%d jobs completed, %d results fetched from the workers", res.finished, wres.Results))
	}
	return errors.Join(errs...)
}

// runControllerPulses: registered workers pulsing, no jobs; the server's
// cost of it.
func runControllerPulses(ctx context.Context, t Target, p Params, out *record.Run) error {
	if err := needController(ctx, t); err != nil {
		return err
	}
	idle, idleErr := t.Usage()
	begin := time.Now()
	pool, err := startControllerWorkers(ctx, t, p)
	if err != nil {
		return err
	}
	setExtra(out, "register_s", time.Since(begin).Seconds())
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration)}
	// What the rest of the machine had meanwhile (the server counted with
	// it: Target has no PID), for the bound on the pulses below.
	others, loadErr := harness.NewLoad(os.Getpid())
	pool.Measure(ph)
	cpu := meterPhase(t, ph)
	var errs []error
	select {
	case <-time.After(time.Until(ph.End)):
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	u, uerr := t.Usage() // every worker still registered
	wres, werr := pool.Stop()
	errs = append(errs, uerr, werr)
	// A pulse is this scenario's job.
	cpu.perJob(out, wres.Measured)

	out.Jobs = wres.Measured
	out.Seconds = p.Duration.Seconds()
	out.JobsPerSec = float64(wres.Measured) / p.Duration.Seconds()
	out.Latency = record.Summarize(wres.PulseLatency)
	controllerExtras(out, wres)
	if out.ServerCPUPerJob > 0 {
		setExtra(out, "cpu_ms_per_sec", out.ServerCPUPerJob*float64(wres.Measured)/1e3/p.Duration.Seconds())
	}
	if uerr == nil {
		out.RSSMB = megabytes(u.RSS)
		if idleErr == nil {
			setExtra(out, "rss_idle_mb", megabytes(idle.RSS))
			if wres.Registered > 0 {
				setExtra(out, "rss_bytes_per_worker", float64(u.RSS-idle.RSS)/float64(wres.Registered))
			}
		}
	}
	// The pulsers must have kept up: otherwise this measured a slow load
	// generator, and workers came near their deadlines.
	// A pulser that others keep from the CPU past its next pulse sends one,
	// not two: on a busy machine the least is cut by what others had of it
	// (harness.Stretch), as every time bound of the tests is.
	want := float64(p.Workers) * p.Duration.Seconds() / p.Pulse.Seconds()
	least, share := 0.9*want, 0.0
	if loadErr == nil {
		share = others.Share()
		least = least * float64(time.Second) / float64(harness.Stretch(time.Second, share))
	}
	if float64(wres.Measured) < least {
		errs = append(errs, fmt.Errorf("%d pulses in the measured time, want about %.0f (at least %.0f: others had %.0f%% of the machine)",
			wres.Measured, want, least, 100*share))
	}
	return errors.Join(errs...)
}
