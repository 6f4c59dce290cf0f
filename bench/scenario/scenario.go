// Package scenario holds the benchmark scenarios of `make bench`: what load
// each one puts on a server, for how long, and what it measures.
package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/record"
)

// Target is the server a scenario runs against.
type Target struct {
	Addr string
	// PeriodicAddr is the server's Periodic listener, for the Periodic
	// scenarios ("" otherwise).
	PeriodicAddr string
	// ControllerSocket is the server's Worker–Controller main socket, for
	// the controller scenarios ("" otherwise).
	ControllerSocket string
	// DworkAddr is the server's dwork listener (HOST:PORT), for the dwork
	// scenarios ("" otherwise).
	DworkAddr string
	// MemodbURL is the server's MemoDB listener, tcp://HOST:PORT, for the
	// MemoDB scenario ("" otherwise).
	MemodbURL string
	// HTTPAddr is the server's listener of gearmand's HTTP protocol
	// (HOST:PORT), for the HTTP scenarios ("" otherwise).
	HTTPAddr string
	// Usage reads the server process's memory and CPU use.
	Usage func() (harness.Usage, error)
	// Restart, set for the durable scenarios, kills the server with
	// SIGKILL and starts it again on the same data, and returns where it
	// listens now and how long it took from its start to accepting
	// connections: the time its stored jobs took to come back. Usage
	// follows the new server and counts the old one's CPU time too.
	Restart func() (Target, time.Duration, error)
	// Cluster is the switchyard cluster of a cluster scenario's run on
	// switchyard (Addr is then empty: the scenario picks a node).
	Cluster *harness.Cluster
	// NATS is the JetStream cluster of a cluster scenario's run on its
	// peer (Addr is then empty).
	NATS *harness.NATSCluster
	// Note, when set, takes a line of progress for the terminal (a
	// scenario that runs for minutes, round after round).
	Note func(format string, args ...any)
}

// Scenario is one named benchmark.
type Scenario struct {
	Name  string
	About string
	Uses  []string // the Params fields it reads
	// Echo runs it against an echo process instead of the job servers.
	Echo bool
	// Periodic runs it against switchyard alone (gearmand has no Periodic),
	// started with a Periodic listener: Target.PeriodicAddr.
	Periodic bool
	// Controller runs it against switchyard alone (gearmand has no
	// Worker–Controller protocol), started with a main socket in a fresh
	// directory: Target.ControllerSocket.
	Controller bool
	// Dwork runs it against switchyard alone (gearmand has no dwork hub
	// protocol), started with a dwork listener: Target.DworkAddr.
	Dwork bool
	// Memodb runs it against switchyard alone (gearmand has no MemoDB),
	// started with a MemoDB listener: Target.MemodbURL.
	Memodb bool
	// HTTP runs it against both servers with gearmand's HTTP protocol on
	// (-r http, on a port the kernel picks): Target.HTTPAddr.
	HTTP bool
	// Mixed runs it against switchyard alone with every listener on:
	// Target has every address.
	Mixed bool
	// Cluster runs it against a cluster of three switchyard nodes on this
	// machine (Target.Cluster) instead of one server, and, when Peer is
	// set too, against three nats-server processes clustered with
	// JetStream on (Target.NATS): never against a single server.
	Cluster bool
	Peer    bool
	// Netns runs a cluster scenario's nodes in network namespaces of their
	// own, and its clients in one more (harness.ClusterConfig.Net), so
	// that it can cut a node off: it needs root.
	Netns bool
	// Via is the node a cluster scenario's clients talk to: ViaLeader or
	// ViaFollower (whose connections the node relays to the leader).
	Via string
	// ClusterTLS runs a cluster scenario with mutual TLS between the
	// nodes; Restarts, on a cluster whose nodes it can restart (their
	// operator API on, see harness.ClusterConfig.Ops).
	ClusterTLS, Restarts bool
	// Plain names the scenario a TLS one's rows are set against, run for
	// run in the same round (its tls_cost_pct).
	Plain string
	// Single names the single-node scenario a cluster scenario's rows are
	// set against, run for run in the same round (bg-durable).
	Single string
	// Durable runs it against the servers' durable queues: switchyard's
	// (-q durable) and gearmand's SQLite one (-q libsqlite3), each in a
	// fresh directory.
	Durable bool
	// Ceiling names the echo scenario that bounds its jobs/s, for the
	// scenarios whose every job costs a worker connection a round trip:
	// the record gives jobs/s as a fraction of the ceiling's measured in
	// the same run (record.Run.OfCeiling).
	Ceiling string
	Full    Params // defaults of `make bench`
	Quick   Params // defaults of --quick: a few seconds and smaller counts
	run     func(ctx context.Context, t Target, p Params, out *record.Run) error
	// runPaired, set instead of run, runs the scenario on several servers
	// at once, a step on each in turn (RunPaired).
	runPaired func(ctx context.Context, ts []Target, p Params, outs []*record.Run) []error
	// runFleet, set instead of run, starts the servers it sets side by
	// side itself, one after the other (RunFleet).
	runFleet func(ctx context.Context, f Fleet, p Params) []record.Run
}

// StartsOwn reports whether the scenario starts its own servers, a fleet
// of configurations side by side (RunFleet), rather than running on the
// servers it is given.
func (s *Scenario) StartsOwn() bool { return s.runFleet != nil }

// RunFleet runs a scenario that starts its own servers: one record per
// configuration, each with its server's name (Round left for the caller).
func (s *Scenario) RunFleet(ctx context.Context, f Fleet, p Params) []record.Run {
	runs := s.runFleet(ctx, f, p)
	for i := range runs {
		runs[i].Scenario, runs[i].Params = s.Name, p.Strings(s.Uses)
	}
	return runs
}

// Paired reports whether the scenario runs on every server at once
// (RunPaired) rather than on one at a time.
func (s *Scenario) Paired() bool { return s.runPaired != nil }

// SwitchyardOnly reports whether the scenario speaks a protocol gearmand
// has not, and so runs against switchyard alone.
func (s *Scenario) SwitchyardOnly() bool {
	return s.Periodic || s.Controller || s.Dwork || s.Memodb || s.Mixed
}

// The nodes a cluster scenario's clients may talk to (Scenario.Via).
const (
	ViaLeader   = "leader"
	ViaFollower = "follower"
)

// Run runs the scenario and returns its record (Server and Round left for
// the caller). A failure is recorded in Run.Error with whatever was measured.
func (s *Scenario) Run(ctx context.Context, t Target, p Params) record.Run {
	if s.runPaired != nil {
		return s.RunPaired(ctx, []Target{t}, p)[0]
	}
	if s.runFleet != nil {
		return record.Run{Scenario: s.Name, Params: p.Strings(s.Uses), Error: s.Name + " starts its own servers (RunFleet)"}
	}
	out := record.Run{Scenario: s.Name, Params: p.Strings(s.Uses)}
	m := meter(t)
	loadBefore := selfCPU()
	err := s.run(ctx, t, p, &out)
	out.LoadCPU = (selfCPU() - loadBefore).Seconds()
	m.finish(&out, err)
	return out
}

// RunPaired runs a paired scenario on every target at once: the servers
// all run, and take its steps in turn, so that the minutes a slow spell
// of a shared machine falls on are shared too, where one server's whole
// run after the other's would give one of them all of it. One record per
// target, in order; LoadCPU, the load generator's, is the whole run's.
func (s *Scenario) RunPaired(ctx context.Context, ts []Target, p Params) []record.Run {
	outs := make([]record.Run, len(ts))
	ptrs := make([]*record.Run, len(ts))
	meters := make([]metered, len(ts))
	for i, t := range ts {
		outs[i] = record.Run{Scenario: s.Name, Params: p.Strings(s.Uses)}
		ptrs[i] = &outs[i]
		meters[i] = meter(t)
	}
	loadBefore := selfCPU()
	errs := s.runPaired(ctx, ts, p, ptrs)
	loadCPU := (selfCPU() - loadBefore).Seconds()
	for i := range outs {
		outs[i].LoadCPU = loadCPU
		var err error
		if i < len(errs) {
			err = errs[i]
		}
		meters[i].finish(&outs[i], err)
	}
	return outs
}

// metered is a target's usage as a scenario began on it.
type metered struct {
	t      Target
	before harness.Usage
	err    error
}

func meter(t Target) metered {
	before, err := t.Usage()
	return metered{t: t, before: before, err: err}
}

// finish sets out's server CPU and RSS from the target's usage since
// meter, and its Error from err and any failure to read the usage.
func (m metered) finish(out *record.Run, err error) {
	after, errAfter := m.t.Usage()
	if m.err == nil && errAfter == nil {
		out.CPUSeconds = (after.CPU - m.before.CPU).Seconds()
		out.PeakRSSMB = megabytes(after.PeakRSS)
		if out.RSSMB == 0 { // not sampled by the scenario at a better moment
			out.RSSMB = megabytes(after.RSS)
		}
	}
	if err := errors.Join(err, errAfter); err != nil {
		out.Error = err.Error()
	}
}

// All is every scenario, in the order `make bench` runs them.
var All = []*Scenario{ceilingRoundTrips, ceilingSync, fg, fgSync, fgMany, bg, queue1M, payload1M, conns10K,
	fgRate, fgCurve,
	httpFg, httpBg, httpRate,
	periodicSubmit, periodicRun, periodicDue, periodicDelayed1M, periodicRate, controllerRun, controllerPulses, dworkWide, dworkChain, memodbRun, memodbRate, mixed, bgDurable, queue1MDurable,
	clusterBg, clusterBgTLS, clusterBgFollower, clusterFailover, clusterFailoverCut, clusterScale}

// Lookup finds scenarios by name, in the order given.
func Lookup(names []string) ([]*Scenario, error) {
	var out []*Scenario
	for _, name := range names {
		i := slices.IndexFunc(All, func(s *Scenario) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q", name)
		}
		out = append(out, All[i])
	}
	return out, nil
}

// Names lists the names of All.
func Names() []string {
	names := make([]string, len(All))
	for i, s := range All {
		names[i] = s.Name
	}
	return names
}

func megabytes(b int64) float64 { return float64(b) / (1 << 20) }

// selfCPU is the bench process's own user+system time, to show how much of
// the machine the load generator took from the server.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
