package main

import (
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
