package scenario

import (
	"context"
	"errors"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The HTTP scenarios speak gearmand's HTTP protocol (-r http) to both
// servers: HTTP clients, one request at a time on each connection, asking
// to keep it open (gearmand closes it after every answer all the same, so
// its clients connect once per request), and Gearman workers.

var httpUses = []string{"clients", "workers", "payload", "duration", "warmup"}

var httpFg = &Scenario{
	Name: "http",
	About: "foreground jobs over gearmand's HTTP protocol: HTTP clients (one request at a time, keep-alive asked for) " +
		"POST jobs that Gearman workers complete; latency is request to WORK_COMPLETE answer",
	Uses:  httpUses,
	HTTP:  true,
	Full:  Params{Clients: 16, Workers: 16, Grab: 1, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 16, Workers: 16, Grab: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run: func(ctx context.Context, t Target, p Params, out *record.Run) error {
		return runHTTP(ctx, t, p, out, false)
	},
}

var httpBg = &Scenario{
	Name: "http-bg",
	About: "background jobs over gearmand's HTTP protocol (X-Gearman-Background: true), Gearman workers running them meanwhile; " +
		"latency is request to JOB_CREATED answer",
	Uses:  httpUses,
	HTTP:  true,
	Full:  Params{Clients: 16, Workers: 4, Grab: 1, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 16, Workers: 4, Grab: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run: func(ctx context.Context, t Target, p Params, out *record.Run) error {
		return runHTTP(ctx, t, p, out, true)
	},
}

func runHTTP(ctx context.Context, t Target, p Params, out *record.Run, background bool) error {
	if t.HTTPAddr == "" {
		return errors.New("the server has no HTTP listener")
	}
	function := "bench-" + out.Scenario
	workers := startWorkers(ctx, t.Addr, function, p, load.Worker{})
	if err := workers.waitReady(ctx); err != nil {
		_, werr := workers.stop()
		return errors.Join(err, werr)
	}
	cpu := startCPU(t)
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration), Grace: grace}
	client := load.HTTPClient{Addr: t.HTTPAddr, Function: function, Payload: payloadOf(p.Payload), Background: background}
	res := runHTTPClients(ctx, p.Clients, client, ph)
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS) // under load, before the workers go
	}
	_, werr := workers.stop()
	cpu.perJob(out, res.finished)

	out.Jobs = res.measured
	out.Seconds = p.Duration.Seconds()
	out.JobsPerSec = float64(res.measured) / p.Duration.Seconds()
	out.Latency = record.Summarize(res.latency)
	if res.finished > 0 {
		setExtra(out, "connects_per_job", float64(res.connects)/float64(res.finished))
	}
	if res.failed > 0 {
		setExtra(out, "failed", float64(res.failed))
	}
	errs := []error{res.err, werr}
	if res.measured == 0 && res.err == nil {
		errs = append(errs, errors.New("no job completed in the measured time"))
	}
	return errors.Join(errs...)
}

type httpClientsResult struct {
	measured, finished, failed, connects int64
	latency                              *hdrhistogram.Histogram
	err                                  error
}

// runHTTPClients runs n HTTP clients in one phase and sums their results.
func runHTTPClients(ctx context.Context, n int, c load.HTTPClient, ph *load.Phase) httpClientsResult {
	sum := httpClientsResult{latency: load.NewLatencyHistogram()}
	sum.err = runAll(n, "http client", func(int) (load.HTTPResult, error) { return c.Run(ctx, ph) }, func(res load.HTTPResult) {
		sum.measured += res.Measured
		sum.finished += res.Finished
		sum.failed += res.Failed
		sum.connects += res.Connects
		sum.latency.Merge(res.Latency)
	})
	return sum
}
