package record

import (
	"strings"
	"testing"
)

func TestShortOfQuota(t *testing.T) {
	tests := []struct {
		name              string
		cpus, quota, idle float64
		want              bool
	}{
		{"at its quota", 0.29, 0.3, 0, false},
		{"under it, the machine full", 0.2, 0.3, 0.05, true},
		{"under it, the machine with a quota idle", 0.1, 0.3, 0.4, false},
		{"just at 85%", 0.255, 0.3, 0, false},
		{"no quota", 0.1, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShortOfQuota(tt.cpus, tt.quota, tt.idle); got != tt.want {
				t.Errorf("ShortOfQuota(%v, %v, %v) = %v", tt.cpus, tt.quota, tt.idle, got)
			}
		})
	}
}

func TestNodeString(t *testing.T) {
	tests := []struct {
		n    Node
		want string
	}{
		{Node{Name: "n1", Role: "leader", Quota: 0.3, CPUs: 0.294, Throttled: 0.62, CPUPerJob: 6.51}, "n1 leader 0.29/0.30 thr 62% 6.51µs"},
		{Node{Name: "n2", Role: "follower", Quota: 0.3, CPUs: 0.1, CPUPerJob: 2.2, Short: true}, "n2 follower 0.10/0.30* 2.20µs"},
		{Node{Name: "switchyard", CPUs: 1.25}, "switchyard 1.25"},
	}
	for _, tt := range tests {
		if got := tt.n.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestNodesMarkdown(t *testing.T) {
	rec := &Record{Runs: []Run{
		{Scenario: "bg", Server: "switchyard", Round: 1, JobsPerSec: 1000},
		{Scenario: "cluster-scale", Server: "switchyard-durable", Round: 1, JobsPerSec: 40_000, ServerCPUPerJob: 6.5,
			Extra: map[string]float64{"drain_jobs_per_s": 20_000, "machine_idle_cpus": 0.41},
			Nodes: []Node{{Name: "switchyard", Quota: 0.3, CPUs: 0.3, Throttled: 0.5}}},
		{Scenario: "cluster-scale", Server: "switchyard-cluster-5", Round: 1, JobsPerSec: 30_000, Error: "drain: 3 of 5 jobs | lost",
			Extra: map[string]float64{"vs_single_x": 0.75, "vs_single_same_load_x": 0.9, "vs_3_nodes_x": 1.2, "short_nodes": 2},
			Nodes: []Node{{Name: "n1", Role: "leader", Quota: 0.3, CPUs: 0.3}, {Name: "n2", Quota: 0.3, CPUs: 0.1, Short: true}}},
	}}
	got := rec.NodesMarkdown()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header, a rule and two rows:\n%s", got)
	}
	for _, want := range []string{
		"| cluster-scale | switchyard-durable | 1 | 40.0k |  |  |  | 20.0k | 6.50 | 0.41 | 0 | switchyard 0.30/0.30 thr 50% |",
		"| cluster-scale | switchyard-cluster-5 | 1 | 30.0k (**error**: drain: 3 of 5 jobs \\| lost) | 0.75x | 0.90x | 1.20x | 0 | - | 0.00 | 2 | n1 leader 0.30/0.30; n2 0.10/0.30* |",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no row %q in\n%s", want, got)
		}
	}
	if (&Record{Runs: rec.Runs[:1]}).NodesMarkdown() != "" {
		t.Error("a table for runs without nodes")
	}
}
