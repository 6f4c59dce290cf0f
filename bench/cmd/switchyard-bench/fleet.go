package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"switchyard/bench/cgroup"
	"switchyard/bench/harness"
	"switchyard/bench/record"
	"switchyard/bench/scenario"
)

// The servers of cluster-scale's records: the configurations it sets side
// by side, each started by the scenario itself (scenario.Fleet).
const (
	fleetDurable   = "switchyard-durable"
	fleetCluster   = "switchyard-cluster-N"
	fleetJetStream = "jetstream-N"
)

// fleetFor returns what the scenarios that start their own servers start
// them with, and the servers' records: a durable switchyard with a single
// server's command line, cluster nodes with the cluster scenarios', and
// JetStream's servers when nats-server is there. log, when it points to a
// writer, receives every server's output.
func fleetFor(opts *options, single serverSpec, fdLimit uint64, log *io.Writer, note func(string, ...any)) (scenario.Fleet, []record.Server) {
	nodes := clusterConfigs(opts, fdLimit, []*scenario.Scenario{{Peer: true}})
	groups := takesClusterGroups(opts.switchyard)
	f := scenario.Fleet{Groups: groups, CgroupPrefix: opts.cgroupPrefix, Note: note}
	durable := single.record.Args
	f.Durable = func(ctx context.Context, b *harness.CPUBudget) (*harness.Server, func() error, error) {
		dir, err := os.MkdirTemp("", "switchyard-bench-data-")
		if err != nil {
			return nil, nil, err
		}
		srv, err := harness.Start(ctx, harness.Config{Name: "switchyard", Path: opts.switchyard, Args: durableArgs("switchyard", durable, dir), Log: *log, Budget: b})
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		return srv, func() error { defer os.RemoveAll(dir); return srv.Stop() }, nil
	}
	nodeArgs := nodes[0].config.Args
	f.Cluster = func(ctx context.Context, n int, extra []string, b *harness.CPUBudget) (*harness.Cluster, func() error, error) {
		if !nodes[0].cluster {
			return nil, nil, fmt.Errorf("%s has no --node-id: it cannot run as a cluster", opts.switchyard)
		}
		dir, err := os.MkdirTemp("", "switchyard-bench-cluster-")
		if err != nil {
			return nil, nil, err
		}
		c, err := harness.StartCluster(ctx, harness.ClusterConfig{Path: opts.switchyard, Nodes: n, Args: append(slices.Clip(nodeArgs), extra...),
			Dir: dir, Log: *log, Budget: b})
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
		return c, func() error { defer os.RemoveAll(dir); return c.Stop() }, nil
	}

	durableRec := single.record
	durableRec.Name, durableRec.Args = fleetDurable, durableArgs("switchyard", durable, "DIR")
	clusterRec := nodes[0].record
	clusterRec.Name = fleetCluster
	if groups {
		clusterRec.Args = append(slices.Clip(clusterRec.Args), "--cluster-groups N (switchyard-cluster-N: the scenario's groups, 0 four a node; switchyard-cluster-N-g1: 1)")
	} else {
		clusterRec.Args = append(slices.Clip(clusterRec.Args), "(no --cluster-groups: the binary does not take it)")
	}
	servers := []record.Server{durableRec, clusterRec}
	if len(nodes) > 1 {
		natsPath := nodes[1].config.Path
		f.NATS = func(ctx context.Context, n int, b *harness.CPUBudget) (*harness.NATSCluster, func() error, error) {
			dir, err := os.MkdirTemp("", "switchyard-bench-nats-")
			if err != nil {
				return nil, nil, err
			}
			c, err := harness.StartNATS(ctx, harness.NATSConfig{Path: natsPath, Nodes: n, Dir: dir, Log: *log, Budget: b})
			if err != nil {
				os.RemoveAll(dir)
				return nil, nil, err
			}
			return c, func() error { defer os.RemoveAll(dir); return c.Stop() }, nil
		}
		js := nodes[1].record
		js.Name = fleetJetStream
		servers = append(servers, js)
	}
	return f, servers
}

// takesClusterGroups says whether the switchyard at path takes
// --cluster-groups: alone, or beside the flags of a cluster node, which a
// binary may want with it.
func takesClusterGroups(path string) bool {
	return acceptsArgs(path, "--cluster-groups", "1") ||
		acceptsArgs(path, "--node-id", "n1", "--cluster-listen", "127.0.0.1:0", "--cluster-groups", "1")
}

// acceptsArgs says whether the binary at path takes the arguments: its
// --check-args (validate the command line, then exit) accepts them.
func acceptsArgs(path string, args ...string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, path, append([]string{"--check-args"}, args...)...).Run() == nil
}

// fleetRunnable says why a scenario that starts its own servers cannot
// run here ("" if it can): a CPU quota needs cgroups, and root.
func fleetRunnable(sc *scenario.Scenario, p scenario.Params) string {
	if p.CPU <= 0 {
		return ""
	}
	if err := cgroup.Available(); err != nil {
		return fmt.Sprintf("it gives each server process a CPU quota (--%s.cpu 0 for none), and %v", sc.Name, err)
	}
	return ""
}

// sweepCgroups removes the cgroups that runs of the bench killed before
// they could clean up left behind.
func sweepCgroups(prefix string, note func(string, ...any)) {
	removed, err := cgroup.Sweep(prefix)
	if len(removed) > 0 {
		note("removed cgroups left by earlier runs: %s", strings.Join(removed, ", "))
	}
	if err != nil {
		note("removing cgroups left by earlier runs: %v", err)
	}
}
