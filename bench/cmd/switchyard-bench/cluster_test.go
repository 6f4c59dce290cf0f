package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"switchyard/bench/record"
	"switchyard/bench/scenario"
)

func lookup(t *testing.T, names ...string) []*scenario.Scenario {
	t.Helper()
	scs, err := scenario.Lookup(names)
	if err != nil {
		t.Fatal(err)
	}
	return scs
}

func TestRunsOn(t *testing.T) {
	servers := []string{"switchyard", record.Baseline, echoServer, clusterServer, jetstreamServer}
	tests := []struct {
		scenario string
		want     []string
	}{
		{"fg", []string{"switchyard", record.Baseline}},
		{"bg-durable", []string{"switchyard", record.Baseline}},
		{"periodic-run", []string{"switchyard"}},
		{"ceiling", []string{echoServer}},
		{"cluster-bg", []string{clusterServer, jetstreamServer}},
		{"cluster-bg-follower", []string{clusterServer, jetstreamServer}},
		{"cluster-failover", []string{clusterServer}},
		{"cluster-scale", nil}, // its own servers
	}
	for _, tt := range tests {
		sc := lookup(t, tt.scenario)[0]
		var got []string
		for _, s := range servers {
			if runsOn(sc, s) {
				got = append(got, s)
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s runs on %q, want %q", tt.scenario, got, tt.want)
		}
	}
}

func TestSchedule(t *testing.T) {
	scs := lookup(t, "bg-durable", "cluster-bg")
	names := func(steps []step) []string {
		var out []string
		for _, s := range steps {
			out = append(out, s.sc.Name+"/"+string(rune('0'+s.round)))
		}
		return out
	}
	if got, want := names(schedule(scs, 2, false)), []string{"bg-durable/1", "bg-durable/2", "cluster-bg/1", "cluster-bg/2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("scenario after scenario: %q, want %q", got, want)
	}
	if got, want := names(schedule(scs, 2, true)), []string{"bg-durable/1", "cluster-bg/1", "bg-durable/2", "cluster-bg/2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("interleaved: %q, want %q", got, want)
	}
}

// TestRelateCluster: each cluster run is set against switchyard's
// bg-durable of its round, and switchyard's cluster against JetStream's
// run of its scenario and round; nothing else is touched.
func TestRelateCluster(t *testing.T) {
	run := func(sc, server string, round int, rate float64, p99 int64) record.Run {
		return record.Run{Scenario: sc, Server: server, Round: round, JobsPerSec: rate, Latency: record.Latency{P99: p99}}
	}
	rec := &record.Record{Runs: []record.Run{
		run("bg-durable", "switchyard", 1, 100_000, 5000),
		run("bg-durable", record.Baseline, 1, 600, 90_000),
		run("cluster-bg", clusterServer, 1, 40_000, 20_000),
		run("cluster-bg", jetstreamServer, 1, 20_000, 40_000),
		run("bg-durable", "switchyard", 2, 80_000, 5000),
		run("cluster-bg", clusterServer, 2, 40_000, 20_000), // no JetStream run in round 2
		run("cluster-failover", clusterServer, 1, 300, 2_000_000),
	}}
	relateCluster(rec, lookup(t, "bg-durable", "cluster-bg", "cluster-failover"))
	want := []map[string]float64{
		nil,
		nil,
		{"of_bg_durable_pct": 40, "vs_jetstream_x": 2, "vs_jetstream_p99_x": 0.5},
		{"of_bg_durable_pct": 20},
		nil,
		{"of_bg_durable_pct": 50},
		nil,
	}
	for i, r := range rec.Runs {
		if !reflect.DeepEqual(r.Extra, want[i]) {
			t.Errorf("%s on %s, round %d: %v, want %v", r.Scenario, r.Server, r.Round, r.Extra, want[i])
		}
	}
}

// TestClusterEndToEnd builds switchyard and the bench and runs bg-durable,
// cluster-bg and cluster-failover with tiny counts, interleaved, as make
// bench would: a cluster of three nodes for each cluster run, JetStream's
// three servers for cluster-bg's peer run when nats-server is installed,
// and the record relating them (the cluster's share of bg-durable, its
// ratio to JetStream) and holding the kill's failover time.
func TestClusterEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bench and a cluster; skipped with -short")
	}
	_, err := os.Stat(defaultNATSServer)
	withNATS := err == nil
	dir := t.TempDir()
	bin, server := buildBoth(t, dir)
	results := filepath.Join(dir, "results")
	args := []string{"--scenarios", "bg-durable,cluster-bg,cluster-failover", "--interleave", "--switchyard", server, "--gearmand", "none",
		"--bg-durable.jobs", "400", "--bg-durable.clients", "2", "--bg-durable.inflight", "8", "--bg-durable.duration", "2s", "--bg-durable.timeout", "1m",
		"--cluster-bg.jobs", "400", "--cluster-bg.clients", "2", "--cluster-bg.inflight", "8", "--cluster-bg.duration", "2s", "--cluster-bg.timeout", "1m",
		"--cluster-failover.kills", "1", "--cluster-failover.warmup", "100ms", "--cluster-failover.timeout", "30s", "--cluster-failover.duration", "2m"}
	if !withNATS {
		t.Logf("%s is not installed: the cluster runs without their JetStream peer", defaultNATSServer)
		args = append(args, "--nats-server", "none")
	}
	out, stderr, rec := runBench(t, bin, results, args...)
	single, cluster, failover := rec.Find("bg-durable", "switchyard", 1), rec.Find("cluster-bg", clusterServer, 1), rec.Find("cluster-failover", clusterServer, 1)
	if single == nil || cluster == nil || failover == nil {
		t.Fatalf("runs missing from the record:\n%s\n%s", out, stderr)
	}
	for _, run := range []*record.Run{single, cluster, failover} {
		if run.Error != "" || run.Jobs <= 0 {
			t.Errorf("%s on %s: error %q, %d jobs", run.Scenario, run.Server, run.Error, run.Jobs)
		}
	}
	if want := 100 * cluster.JobsPerSec / single.JobsPerSec; cluster.Extra["of_bg_durable_pct"] != want {
		t.Errorf("cluster-bg's share of bg-durable %v, want %v", cluster.Extra["of_bg_durable_pct"], want)
	}
	if failover.Extra["kills"] != 1 || failover.Latency.Count != 1 || failover.Latency.Max <= 0 {
		t.Errorf("cluster-failover: %v kills, latency %+v", failover.Extra["kills"], failover.Latency)
	}
	if rec.Find("cluster-failover", jetstreamServer, 1) != nil {
		t.Error("cluster-failover ran on JetStream, which has no such run")
	}
	js := rec.Find("cluster-bg", jetstreamServer, 1)
	if !withNATS {
		if js != nil {
			t.Error("a JetStream run with --nats-server none")
		}
		return
	}
	if js == nil || js.Error != "" || js.Jobs != 400 {
		t.Fatalf("cluster-bg on JetStream: %+v", js)
	}
	if want := cluster.JobsPerSec / js.JobsPerSec; cluster.Extra["vs_jetstream_x"] != want {
		t.Errorf("cluster-bg against JetStream %v, want %v", cluster.Extra["vs_jetstream_x"], want)
	}
}
