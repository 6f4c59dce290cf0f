package scenario

import (
	"context"
	"errors"
	"time"

	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The MemoDB scenario (docs/memodb.md) runs against switchyard
// alone: gearmand has no such protocol, and memodb-broker is gone from
// bcdb and packaged nowhere. Its clients and workers are load.Memodb's:
// mangos REQ sockets in this process, many contexts on each.

var memodbRun = &Scenario{
	Name: "memodb",
	About: "MemoDB clients (NNG REQ sockets, 16 contexts each, one JOB at a time per context) keep jobs in flight, " +
		"run by 64 MemoDB worker contexts on one socket that answer each JOB at once; latency is JOB to RESULT",
	Uses:   []string{"clients", "workers", "inflight", "payload", "duration", "warmup"},
	Memodb: true,
	// As many worker contexts as jobs in flight: a worker runs one at a time.
	Full:  Params{Clients: 4, Workers: 64, InFlight: 16, Payload: 64, Duration: 20 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 4, Workers: 64, InFlight: 16, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run:   runMemodb,
}

// memodbService is the service (function) of the scenario's jobs.
const memodbService = "bench-memodb"

func runMemodb(ctx context.Context, t Target, p Params, out *record.Run) error {
	if t.MemodbURL == "" {
		return errors.New("the server has no MemoDB listener")
	}
	start := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: start, End: start.Add(p.Duration)}
	cpu := meterPhase(t, ph)
	rss := sampleRSS(t, ph.End.Add(-p.Duration/10)) // under load, near its end
	res, err := load.RunMemodb(ctx, load.Memodb{
		URL: t.MemodbURL, Service: memodbService,
		Clients: p.Clients, InFlight: p.InFlight, Workers: p.Workers,
		Payload: payloadOf(p.Payload), TimeoutMS: 60_000,
	}, ph)
	cpu.perJob(out, res.Measured)
	out.RSSMB = rss.MB()
	out.Jobs = res.Measured
	out.Seconds = p.Duration.Seconds()
	out.JobsPerSec = float64(res.Measured) / p.Duration.Seconds()
	out.Latency = record.Summarize(res.Latency)
	setExtra(out, "contexts", float64(p.Clients*p.InFlight+p.Workers))
	errs := []error{err}
	if res.Measured == 0 {
		errs = append(errs, errors.New("no job completed in the measured time"))
	}
	if res.Ran < res.Finished {
		errs = append(errs, errors.New("more results than jobs the workers ran"))
	}
	return errors.Join(errs...)
}
