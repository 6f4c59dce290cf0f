package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"switchyard/bench/harness"
	"switchyard/bench/netns"
	"switchyard/bench/record"
	"switchyard/bench/scenario"
)

// step is one scenario's round.
type step struct {
	sc    *scenario.Scenario
	round int
}

// schedule orders the runs: every round of a scenario before the next
// scenario, or with interleave each round of every scenario before the
// next round, so that runs set against each other across scenarios
// (cluster-bg against bg-durable) share the machine's state of the same
// minutes.
func schedule(scenarios []*scenario.Scenario, rounds int, interleave bool) []step {
	var out []step
	if interleave {
		for round := 1; round <= rounds; round++ {
			for _, sc := range scenarios {
				out = append(out, step{sc, round})
			}
		}
		return out
	}
	for _, sc := range scenarios {
		for round := 1; round <= rounds; round++ {
			out = append(out, step{sc, round})
		}
	}
	return out
}

// runsOn says whether scenario sc runs on the server named server: the
// echo scenarios on the echo process alone; the cluster scenarios on
// switchyard's cluster, and on JetStream when they have a peer; the
// others on switchyard, and on gearmand unless they speak a protocol it
// has not.
func runsOn(sc *scenario.Scenario, server string) bool {
	if sc.StartsOwn() {
		return false // RunFleet
	}
	switch server {
	case echoServer:
		return sc.Echo
	case clusterServer:
		return sc.Cluster
	case jetstreamServer:
		return sc.Cluster && sc.Peer
	case "switchyard":
		return !sc.Echo && !sc.Cluster
	default: // gearmand
		return !sc.Echo && !sc.Cluster && !sc.SwitchyardOnly()
	}
}

// clusterConfigs returns the cluster scenarios' servers: switchyard's
// nodes, and JetStream's when nats-server is there and a scenario has a
// peer. A node's command line is a single server's, every listener but
// Gearman's off; StartCluster adds the cluster's flags.
func clusterConfigs(opts *options, fdLimit uint64, scenarios []*scenario.Scenario) []serverSpec {
	metrics := "off"
	if opts.clusterMetrics {
		metrics = "127.0.0.1:0"
	}
	args := []string{"-L", "127.0.0.1", "-p", "0", "-t", strconv.Itoa(opts.switchyardLoops), "-f", strconv.FormatUint(fdLimit, 10)}
	help := helpText(opts.switchyard)
	for _, l := range listeners {
		if l.on != nil || !strings.Contains(help, l.flag) {
			continue
		}
		value := "off"
		if l.flag == "--metrics-listen" {
			value = metrics
		}
		args = append(args, l.flag, value)
	}
	args = append(args, strings.Fields(opts.switchyardArgs)...)
	spec := newServerSpec(clusterServer, opts.switchyard, args)
	spec.record.Args = append([]string{"--node-id", "nN", "--cluster-listen", "127.0.0.1:0", "--data-dir", "DIR/nN", "-l", "stderr",
		"--cluster-peers", "n1@127.0.0.1:0,n2@ADDR2,n3@ADDR3 (n1 only, started last: n2 and n3 start without it and follow n1)",
		"(cluster-bg-tls: --cluster-tls-cert DIR/certs/nN.pem --cluster-tls-key DIR/certs/nN.key --cluster-tls-ca DIR/certs/ca.pem)",
		"(cluster-failover: --ops-token-file DIR/ops-token --metrics-listen 127.0.0.1:0, for the restarted node's new address)"}, args...)
	spec.cluster = strings.Contains(help, "--node-id")
	servers := []serverSpec{spec}

	if opts.natsServer == "" || opts.natsServer == "none" ||
		!slices.ContainsFunc(scenarios, func(s *scenario.Scenario) bool { return s.Peer }) {
		return servers
	}
	if _, err := os.Stat(opts.natsServer); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s is not installed (make bench-deps installs it); the cluster scenarios run without their JetStream peer\n", opts.natsServer)
		return servers
	}
	js := newServerSpec(jetstreamServer, opts.natsServer, []string{"-c", "DIR/nN/nats.conf"})
	js.record.Args = append(js.record.Args, "(n0, a seed without jetstream, started first, only routes; n2's:) "+strings.ReplaceAll(
		harness.NATSServerConfig("n2", "DIR/n2", []string{"nats://127.0.0.1:ROUTE_PORT_OF_n0"}, true), "\n", " "))
	return append(servers, js)
}

// runCluster starts a switchyard cluster, runs one scenario against it
// and stops it. A cluster that does not come up is the run's error.
func runCluster(ctx context.Context, sc *scenario.Scenario, p scenario.Params, s serverSpec, netnsPrefix string, note func(string, ...any)) (record.Run, error) {
	failed := func(err error) (record.Run, error) {
		return record.Run{Scenario: sc.Name, Params: p.Strings(sc.Uses), Error: err.Error()}, nil
	}
	if !s.cluster {
		return failed(fmt.Errorf("%s has no --node-id: it cannot run as a cluster", s.config.Path))
	}
	dir, err := os.MkdirTemp("", "switchyard-bench-cluster-")
	if err != nil {
		return record.Run{}, err
	}
	defer os.RemoveAll(dir)
	cfg := harness.ClusterConfig{Path: s.config.Path, Args: s.config.Args, Dir: dir, Log: s.config.Log,
		Ops: sc.Restarts, TLS: sc.ClusterTLS}
	if sc.Netns {
		n, err := netns.New(netnsPrefix)
		if err != nil {
			return failed(err)
		}
		defer n.Close() // after the cluster's Stop: its processes gone
		cfg.Net = n
	}
	c, err := harness.StartCluster(ctx, cfg)
	if err != nil {
		return failed(err)
	}
	if note != nil {
		for _, n := range c.Nodes {
			note("%s %s: gearman %s, metrics %q, role %s, pid %d", clusterServer, n.ID, n.Addr("gearman"), n.Addr("metrics"), n.Role(), n.PID())
		}
	}
	run := sc.Run(ctx, scenario.Target{Cluster: c, Usage: c.Usage, Note: note}, p)
	if err := c.Stop(); err != nil && run.Error == "" {
		run.Error = err.Error()
	}
	return run, nil
}

// runJetStream starts the NATS cluster, runs one scenario's peer run
// against it and stops it.
func runJetStream(ctx context.Context, sc *scenario.Scenario, p scenario.Params, s serverSpec) (record.Run, error) {
	dir, err := os.MkdirTemp("", "switchyard-bench-nats-")
	if err != nil {
		return record.Run{}, err
	}
	defer os.RemoveAll(dir)
	c, err := harness.StartNATS(ctx, harness.NATSConfig{Path: s.config.Path, Dir: dir, Log: s.config.Log})
	if err != nil {
		return record.Run{Scenario: sc.Name, Params: p.Strings(sc.Uses), Error: err.Error()}, nil
	}
	run := sc.Run(ctx, scenario.Target{NATS: c, Usage: c.Usage}, p)
	if err := c.Stop(); err != nil && run.Error == "" {
		run.Error = err.Error()
	}
	return run, nil
}

// relateCluster sets each cluster scenario's runs against the runs of the
// same round they are compared with, in their notes: switchyard's
// single-node scenario (of_bg_durable_pct: the cluster's jobs/s as a share
// of one durable server's), for switchyard's cluster JetStream's run
// (vs_jetstream_x, vs_jetstream_p99_x), and for a TLS scenario its plain
// one's (tls_cost_pct: how much lower its jobs/s are).
func relateCluster(rec *record.Record, scenarios []*scenario.Scenario) {
	for i := range rec.Runs {
		run := &rec.Runs[i]
		j := slices.IndexFunc(scenarios, func(s *scenario.Scenario) bool { return s.Name == run.Scenario })
		if j < 0 || !scenarios[j].Cluster {
			continue
		}
		sc := scenarios[j]
		if sc.Single != "" {
			if single := rec.Find(sc.Single, "switchyard", run.Round); single != nil && single.JobsPerSec > 0 && run.JobsPerSec > 0 {
				setExtra(run, "of_"+strings.ReplaceAll(sc.Single, "-", "_")+"_pct", 100*run.JobsPerSec/single.JobsPerSec)
			}
		}
		if run.Server != clusterServer {
			continue
		}
		if sc.Plain != "" {
			if plain := rec.Find(sc.Plain, clusterServer, run.Round); plain != nil && plain.JobsPerSec > 0 && run.JobsPerSec > 0 {
				setExtra(run, "tls_cost_pct", 100*(1-run.JobsPerSec/plain.JobsPerSec))
			}
		}
		if js := rec.Find(sc.Name, jetstreamServer, run.Round); js != nil && js.JobsPerSec > 0 && run.JobsPerSec > 0 {
			setExtra(run, "vs_jetstream_x", run.JobsPerSec/js.JobsPerSec)
			if js.Latency.P99 > 0 && run.Latency.P99 > 0 {
				setExtra(run, "vs_jetstream_p99_x", float64(run.Latency.P99)/float64(js.Latency.P99))
			}
		}
	}
}

func setExtra(run *record.Run, key string, v float64) {
	if run.Extra == nil {
		run.Extra = make(map[string]float64)
	}
	run.Extra[key] = v
}
