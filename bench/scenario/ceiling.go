package scenario

import (
	"context"
	"time"

	"switchyard/bench/ceiling"
	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The ceiling scenarios run against an echo process instead of a job
// server: what this machine's loopback allows any server. A job for a
// libgearman-style worker costs at least one such round trip, so they
// bound fg, fg-sync and the bg drain measured in the same run.

var ceilingUses = []string{"clients", "payload", "duration", "warmup"}

var ceilingRoundTrips = &Scenario{
	Name:  "ceiling",
	About: "no job server: round trips to an echo process on 4 connections, the most any server could hand 4 libgearman-style workers on this machine",
	Uses:  ceilingUses,
	Echo:  true,
	Full:  Params{Clients: 4, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 4, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run:   runCeiling,
}

var ceilingSync = &Scenario{
	Name:  "ceiling-sync",
	About: "ceiling on one connection: the loopback round-trip latency floor",
	Uses:  ceilingUses,
	Echo:  true,
	Full:  Params{Clients: 1, Payload: 64, Duration: 10 * time.Second, Warmup: time.Second},
	Quick: Params{Clients: 1, Payload: 64, Duration: 3 * time.Second, Warmup: 500 * time.Millisecond},
	run:   runCeiling,
}

func runCeiling(ctx context.Context, t Target, p Params, out *record.Run) error {
	measureFrom := time.Now().Add(p.Warmup)
	ph := &load.Phase{Start: measureFrom, End: measureFrom.Add(p.Duration)}
	cpu := meterPhase(t, ph) // the echo process's CPU: the server's side of a round trip
	res, err := ceiling.Run(ctx, t.Addr, p.Clients, p.Payload, ph.Start, ph.End)
	cpu.perJob(out, res.RoundTrips)
	out.Jobs = res.RoundTrips
	out.Seconds = res.Window.Seconds()
	out.JobsPerSec = float64(res.RoundTrips) / res.Window.Seconds()
	out.Latency = record.Summarize(res.Latency)
	return err
}
