package scenario

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/netns"
)

// startCluster starts a three-node switchyard cluster as the bench does,
// in the test's temporary directory.
func startCluster(ctx context.Context, t *testing.T, bin string) *harness.Cluster {
	t.Helper()
	c, err := harness.StartCluster(ctx, harness.ClusterConfig{Path: bin, Dir: t.TempDir(),
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-t", "0", "--periodic-listen", "off", "--controller-socket", "off",
			"--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// TestClusterAgainstSwitchyard builds switchyard, starts a cluster of three
// and runs the cluster scenarios against it with tiny counts: submits
// through the leader and through a follower, and two kills of the leader
// with their restarts. It checks that the harness, the streams and the
// checks work end to end, not how fast.
func TestClusterAgainstSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a cluster; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := startCluster(ctx, t, bin)
	target := Target{Cluster: c, Usage: c.Usage, Note: t.Logf}
	// The job count ends the fill; the duration only bounds it: 400 jobs
	// in a second would be a speed, which a busy machine can miss (301
	// beside other builds and two busy loops).
	bgParams := Params{Clients: 2, InFlight: 8, Payload: 64, Duration: time.Minute, Jobs: 400, Workers: 2, Grab: 1, Timeout: time.Minute}
	for _, sc := range []*Scenario{clusterBg, clusterBgFollower} {
		t.Run(sc.Name, func(t *testing.T) {
			run := sc.Run(ctx, target, bgParams)
			if run.Error != "" {
				t.Fatalf("run failed: %s", run.Error)
			}
			if run.Jobs != 400 || run.JobsPerSec <= 0 || run.Latency.Count != 400 || run.Extra["drain_jobs_per_s"] <= 0 || run.CPUSeconds <= 0 {
				t.Errorf("implausible run: %+v", run)
			}
		})
	}
	t.Run("cluster-failover", func(t *testing.T) {
		// Timeout bounds each wait: not a figure (make bench's runs have
		// that), a guard against a hung cluster. Beside other builds and
		// two busy loops one round took 22 s to acknowledge again, where
		// the bench's own 30 s would have been too near.
		p := Params{Kills: 2, Clients: 1, InFlight: 4, Payload: 64, Warmup: 200 * time.Millisecond, Workers: 2, Grab: 1,
			Timeout: 2 * time.Minute, Duration: 6 * time.Minute}
		run := clusterFailover.Run(ctx, target, p)
		if run.Error != "" {
			t.Fatalf("run failed: %s", run.Error)
		}
		// An election cannot be quicker than the followers' heartbeat
		// timeout (a second).
		if run.Latency.Count != 2 || run.Latency.P50 < 500_000 || run.Latency.Max > p.Timeout.Microseconds() ||
			run.Extra["kills"] != 2 || run.Extra["failover_min_s"] <= 0 || run.Extra["restart_p50_s"] <= 0 ||
			run.Extra["failover_every_node_max_s"] < run.Extra["failover_min_s"] || run.Jobs <= 0 {
			t.Errorf("implausible run: %+v", run)
		}
	})
	// Every node is back and serves.
	for _, n := range c.Nodes {
		if err := c.WaitServing(ctx, n); err != nil {
			t.Error(err)
		}
	}
}

// TestClusterBgAgainstJetStream runs cluster-bg's JetStream runs, on the
// stream leader's server and on another, with tiny counts.
func TestClusterBgAgainstJetStream(t *testing.T) {
	const path = "/usr/sbin/nats-server"
	if _, err := os.Stat(path); err != nil {
		t.Skip("nats-server is not installed (make bench-deps)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, sc := range []*Scenario{clusterBg, clusterBgFollower} {
		t.Run(sc.Name, func(t *testing.T) {
			c, err := harness.StartNATS(ctx, harness.NATSConfig{Path: path, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := c.Stop(); err != nil {
					t.Error(err)
				}
			}()
			// As in TestClusterAgainstSwitchyard, the count ends the fill.
			run := sc.Run(ctx, Target{NATS: c, Usage: c.Usage}, Params{Clients: 2, InFlight: 8, Payload: 64, Duration: time.Minute, Jobs: 400, Timeout: time.Minute})
			if run.Error != "" {
				t.Fatalf("run failed: %s", run.Error)
			}
			if run.Jobs != 400 || run.JobsPerSec <= 0 || run.Latency.Count != 400 || run.CPUSeconds <= 0 || run.LoadCPUPerJob <= 0 {
				t.Errorf("implausible run: %+v", run)
			}
		})
	}
}

// afterElection bounds, in TestClusterFailoverCut, the time from the new
// leader's election to the first acknowledgement after a cut (the round's
// longest time without one, less the election, measured in the same
// round: Raft's part, which a busy machine stretches, is taken out). A new
// leader that waited on its relays' connections to the old leader, cut
// off, took 4.7 s; one that does not, about a tenth of a second.
const afterElection = 3 * time.Second

// TestClusterFailoverCut runs cluster-failover-cut's rounds against a
// cluster of three nodes, each in a network namespace of its own, the
// clients in a fourth: the leader is cut off from the other two (its
// clients still reach it) for two seconds, three times. Every acknowledged
// job is drained from the new leader, and submits are acknowledged again
// within afterElection of the new leader's election.
func TestClusterFailoverCut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a cluster; skipped with -short")
	}
	if err := netns.Available(); err != nil {
		t.Skip(err) // needs root, ip and iptables
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := netns.New("syr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	c, err := harness.StartCluster(ctx, harness.ClusterConfig{Path: bin, Dir: t.TempDir(), Net: n,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-t", "0", "--periodic-listen", "off", "--controller-socket", "off",
			"--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the namespaces go
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	p := Params{Clients: 1, InFlight: 8, Payload: 64, Warmup: 300 * time.Millisecond, Workers: 2, Grab: 1,
		Timeout: 30 * time.Second, Hold: 2 * time.Second}
	for k := 1; k <= 3; k++ {
		r, err := failover(ctx, c, p, faultCut, fmt.Sprintf("cut-%d", k))
		t.Logf("round %d: %s cut off; elected after %v, acknowledged again after %v (every node %v); longest without %v; %d acknowledged, %d queued, %d errors; back in %v",
			k, r.leader, r.elected, r.first, r.every, r.gap, r.counts.Acked, r.queued, r.counts.Errors, r.back)
		if err != nil {
			t.Fatal(err)
		}
		if r.elected <= 0 || r.gap <= 0 {
			t.Fatalf("round %d: implausible: %+v", k, r)
		}
		if after := r.gap - r.elected; after > afterElection {
			t.Errorf("round %d: no submit acknowledged for %v after the new leader's election (bound %v)", k, after, afterElection)
		}
	}
}
