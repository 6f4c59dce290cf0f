package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"switchyard/bench/cgroup"
	"switchyard/bench/scenario"
)

// TestTakesClusterGroups: a binary takes --cluster-groups when its
// --check-args with it exits 0, alone or with a node's flags; one that
// refuses it, or that is not there, does not.
func TestTakesClusterGroups(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	takes := script("takes", `[ "$*" = "--check-args --cluster-groups 1" ]`)
	withNode := script("with-node", `[ "$*" = "--check-args --node-id n1 --cluster-listen 127.0.0.1:0 --cluster-groups 1" ]`)
	refuses := script("refuses", `echo "unrecognised option '$2'" >&2; exit 1`)
	if !takesClusterGroups(takes) || !takesClusterGroups(withNode) {
		t.Error("a binary that takes the flag does not")
	}
	if takesClusterGroups(refuses) || takesClusterGroups(filepath.Join(dir, "absent")) {
		t.Error("a binary that refuses the flag, or none, takes it")
	}
	if acceptsArgs(takes, "--cluster-groups", "2") {
		t.Error("other arguments accepted")
	}
}

func TestFleetRunnable(t *testing.T) {
	sc := lookup(t, "cluster-scale")[0]
	if why := fleetRunnable(sc, scenario.Params{CPU: 0}); why != "" {
		t.Errorf("without a quota: %q", why)
	}
	why := fleetRunnable(sc, scenario.Params{CPU: 0.3})
	if avail := cgroup.Available(); (avail == nil) != (why == "") || (why != "" && !strings.Contains(why, "--cluster-scale.cpu 0")) {
		t.Errorf("with a quota: %q (cgroups: %v)", why, avail)
	}
}

// TestClusterScaleEndToEnd builds switchyard and the bench and runs
// cluster-scale short, without JetStream, as make bench would: its own
// servers, one record per configuration, each with its nodes, the record
// listing the servers it started, and the table of nodes printed.
func TestClusterScaleEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bench and clusters; skipped with -short")
	}
	dir := t.TempDir()
	bin, server := buildBoth(t, dir)
	cpu := "0.3"
	if err := cgroup.Available(); err != nil {
		t.Logf("the servers run without a CPU quota: %v", err)
		cpu = "0"
	}
	out, stderr, rec := runBench(t, bin, filepath.Join(dir, "results"), "--scenarios", "cluster-scale", "--switchyard", server, "--gearmand", "none",
		"--nats-server", "none", "--cgroup-prefix", "sysc", "--cluster-scale.cpu", cpu, "--cluster-scale.functions", "4",
		"--cluster-scale.clients", "1", "--cluster-scale.inflight", "8", "--cluster-scale.warmup", "200ms", "--cluster-scale.duration", "1s",
		"--cluster-scale.workers", "1", "--cluster-scale.timeout", "1m")
	var names []string
	for _, r := range rec.Runs {
		names = append(names, r.Server)
		if r.Scenario != "cluster-scale" || r.Round != 1 || r.Error != "" || r.JobsPerSec <= 0 || len(r.Nodes) == 0 || r.Params["cpu"] != cpu {
			t.Errorf("run %+v", r)
		}
	}
	if want := []string{"switchyard-durable", "switchyard-durable-x3", "switchyard-cluster-3", "switchyard-cluster-5"}; !slices.Equal(names, want) {
		t.Errorf("runs on %q, want %q\n%s", names, want, stderr)
	}
	var servers []string
	for _, s := range rec.Servers {
		servers = append(servers, s.Name)
	}
	if !slices.Contains(servers, fleetDurable) || !slices.Contains(servers, fleetCluster) || slices.Contains(servers, fleetJetStream) {
		t.Errorf("the record's servers %q", servers)
	}
	d := rec.Find("cluster-scale", "switchyard-durable", 1)
	if d == nil || !slices.Contains(rec.Servers[slices.Index(servers, fleetDurable)].Args, "durable") {
		t.Errorf("the durable server's record: %+v", rec.Servers)
	}
	if !strings.Contains(string(out), "| cluster-scale | switchyard-cluster-5 | 1 |") || !strings.Contains(stderr, "takes --cluster-groups: false") {
		t.Errorf("no table of nodes, or no word on --cluster-groups:\n%s\n%s", out, stderr)
	}
	if r := rec.Find("cluster-scale", "switchyard-cluster-5", 1); r == nil || r.Extra["vs_3_nodes_x"] <= 0 || r.Extra["vs_single_x"] <= 0 {
		t.Errorf("the five nodes not set against the three and the durable server: %+v", r)
	}
}
