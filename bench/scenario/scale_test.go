package scenario

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/bench/cgroup"
	"switchyard/bench/harness"
	"switchyard/bench/record"
)

func TestScaleConfigs(t *testing.T) {
	names := func(cs []scaleConfig) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.server)
		}
		return out
	}
	tests := []struct {
		name         string
		p            Params
		groups, nats bool
		want         []string
		wantGroups   []int
	}{
		{"today's binary, no nats-server", Params{}, false, false,
			[]string{"switchyard-durable", "switchyard-durable-x3", "switchyard-cluster-3", "switchyard-cluster-5"}, []int{0, 0, 0, 0}},
		{"today's binary", Params{}, false, true,
			[]string{"switchyard-durable", "switchyard-durable-x3", "switchyard-cluster-3", "switchyard-cluster-5", "jetstream-3", "jetstream-5"}, []int{0, 0, 0, 0, 0, 0}},
		{"with groups, four a node", Params{}, true, true,
			[]string{"switchyard-durable", "switchyard-durable-x3", "switchyard-cluster-3", "switchyard-cluster-5", "switchyard-cluster-3-g1", "switchyard-cluster-5-g1", "jetstream-3", "jetstream-5"},
			[]int{0, 0, 12, 20, 1, 1, 0, 0}},
		{"with 15 groups", Params{Groups: 15}, true, false,
			[]string{"switchyard-durable", "switchyard-durable-x3", "switchyard-cluster-3", "switchyard-cluster-5", "switchyard-cluster-3-g1", "switchyard-cluster-5-g1"},
			[]int{0, 0, 15, 15, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := scaleConfigs(tt.p, tt.groups, tt.nats)
			var groups []int
			for _, c := range cs {
				groups = append(groups, c.groups)
			}
			if !reflect.DeepEqual(names(cs), tt.want) || !reflect.DeepEqual(groups, tt.wantGroups) {
				t.Errorf("%q with groups %v, want %q, %v", names(cs), groups, tt.want, tt.wantGroups)
			}
		})
	}
}

// TestRelateScale: every run against the durable server's with a node's
// load, and with its own load where there is such a run; a five-node one
// against the three-node one of its kind; failed runs are set against
// nothing and nothing against them.
func TestRelateScale(t *testing.T) {
	configs := scaleConfigs(Params{}, true, true)
	rates := []float64{100, 125, 130, 200, 80, 120, 50, 60}
	runs := make([]record.Run, len(configs))
	for i, r := range rates {
		runs[i].JobsPerSec = r
	}
	relateScale(configs, runs)
	want := []map[string]float64{
		nil,
		{"vs_single_x": 1.25},
		{"vs_single_x": 1.3, "vs_single_same_load_x": 1.04},
		{"vs_single_x": 2, "vs_3_nodes_x": 200.0 / 130},
		{"vs_single_x": 0.8, "vs_single_same_load_x": 0.64},
		{"vs_single_x": 1.2, "vs_3_nodes_x": 1.5},
		{"vs_single_x": 0.5, "vs_single_same_load_x": 0.4},
		{"vs_single_x": 0.6, "vs_3_nodes_x": 1.2},
	}
	for i := range runs {
		if !reflect.DeepEqual(runs[i].Extra, want[i]) {
			t.Errorf("%s: %v, want %v", configs[i].server, runs[i].Extra, want[i])
		}
	}

	runs = make([]record.Run, len(configs))
	for i, r := range rates {
		runs[i].JobsPerSec = r
	}
	runs[2].Error = "failed"
	relateScale(configs, runs)
	if runs[2].Extra != nil || runs[3].Extra["vs_3_nodes_x"] != 0 || runs[3].Extra["vs_single_x"] != 2 {
		t.Errorf("with the 3-node cluster failed: %v, %v", runs[2].Extra, runs[3].Extra)
	}
}

func TestRotate(t *testing.T) {
	fs := []string{"a", "b", "c"}
	for k, want := range []string{"a b c", "b c a", "c a b", "a b c"} {
		if got := strings.Join(rotate(fs, k), " "); got != want {
			t.Errorf("rotate by %d: %q, want %q", k, got, want)
		}
	}
	if strings.Join(fs, " ") != "a b c" {
		t.Error("rotate changed its input")
	}
}

// TestLedger: a job acknowledged and not seen is lost; one seen twice,
// or seen and not acknowledged, is not; a job no client tagged is a
// stray.
func TestLedger(t *testing.T) {
	l := newLedger()
	l.add("c0", []uint64{1, 2, 3, 64, 65, 200})
	l.add("c1", []uint64{1})
	for _, u := range []string{"c0-1 x", "c0-2", "c0-2 again", "c0-64 y", "c0-65", "c0-4", "c1-1", "c9-1", "nonsense"} {
		l.see([]byte(u))
	}
	if l.total() != 7 {
		t.Errorf("total %d", l.total())
	}
	lost, first := l.missing()
	if lost != 2 || (first != "c0-3" && first != "c0-200") {
		t.Errorf("missing %d, first %q; want 2 (c0-3, c0-200)", lost, first)
	}
	if l.strays() != 2 {
		t.Errorf("strays %d, want 2", l.strays())
	}
	l.see([]byte("c0-3 z"))
	l.see([]byte("c0-200 z"))
	if lost, _ := l.missing(); lost != 0 {
		t.Errorf("%d lost once every one was seen", lost)
	}
}

// testFleet starts what cluster-scale starts as the bench does, bin's
// listeners but Gearman's off, and JetStream when nats-server is there.
func testFleet(t *testing.T, bin string) Fleet {
	args := []string{"-L", "127.0.0.1", "-p", "0", "-t", "0", "--periodic-listen", "off", "--controller-socket", "off",
		"--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off"}
	f := Fleet{
		Durable: func(ctx context.Context, b *harness.CPUBudget) (*harness.Server, func() error, error) {
			srv, err := harness.Start(ctx, harness.Config{Name: "switchyard", Path: bin, Budget: b,
				Args: append(slices.Clone(args), "-l", "stderr", "-q", "durable", "--data-dir", t.TempDir())})
			if err != nil {
				return nil, nil, err
			}
			return srv, srv.Stop, nil
		},
		Cluster: func(ctx context.Context, n int, extra []string, b *harness.CPUBudget) (*harness.Cluster, func() error, error) {
			c, err := harness.StartCluster(ctx, harness.ClusterConfig{Path: bin, Nodes: n, Dir: t.TempDir(), Budget: b,
				Args: append(slices.Clone(args), extra...)})
			if err != nil {
				return nil, nil, err
			}
			return c, c.Stop, nil
		},
		CgroupPrefix: "sysc",
		Note:         t.Logf,
	}
	const nats = "/usr/sbin/nats-server"
	if _, err := os.Stat(nats); err == nil {
		f.NATS = func(ctx context.Context, n int, b *harness.CPUBudget) (*harness.NATSCluster, func() error, error) {
			c, err := harness.StartNATS(ctx, harness.NATSConfig{Path: nats, Nodes: n, Dir: t.TempDir(), Budget: b})
			if err != nil {
				return nil, nil, err
			}
			return c, c.Stop, nil
		}
	} else {
		t.Logf("%s is not installed: no JetStream runs", nats)
	}
	return f
}

// TestClusterScale runs cluster-scale once, short, on today's binary: the
// durable server, clusters of three and five nodes and, with nats-server,
// JetStream's three and five servers, each node under a quota of 0.3 CPU
// when the test may make cgroups. Every run fills, drains with every job
// acknowledged checked off, and has its nodes' CPU and its ratios. It
// checks that the scenario works end to end, not how fast.
func TestClusterScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs clusters; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := testFleet(t, bin)
	p := Params{CPU: 0.3, Functions: 4, Clients: 1, InFlight: 8, Payload: 64, Warmup: 200 * time.Millisecond, Duration: time.Second,
		Jobs: 1_000_000, Workers: 1, Grab: 1, Timeout: time.Minute}
	if err := cgroup.Available(); err != nil {
		t.Logf("the servers run without a CPU quota: %v", err)
		p.CPU = 0
	}
	runs := clusterScale.RunFleet(ctx, f, p)
	want := []string{"switchyard-durable", "switchyard-durable-x3", "switchyard-cluster-3", "switchyard-cluster-5"}
	if f.NATS != nil {
		want = append(want, "jetstream-3", "jetstream-5")
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.Server)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("runs on %q, want %q", got, want)
	}
	procs := map[string]int{"switchyard-durable": 1, "switchyard-durable-x3": 1, "switchyard-cluster-3": 3, "switchyard-cluster-5": 5, "jetstream-3": 4, "jetstream-5": 6}
	for _, r := range runs {
		if r.Error != "" {
			t.Errorf("%s: %s", r.Server, r.Error)
			continue
		}
		if r.Scenario != "cluster-scale" || r.Params["cpu"] == "" || r.JobsPerSec <= 0 || r.Jobs <= 0 || r.Latency.Count != r.Jobs ||
			r.Extra["acked_jobs"] < float64(r.Jobs) || r.Extra["drain_jobs_per_s"] <= 0 || r.ServerCPUPerJob <= 0 || r.Extra["stray_jobs"] != 0 {
			t.Errorf("%s: implausible run %+v", r.Server, r)
		}
		if len(r.Nodes) != procs[r.Server] {
			t.Errorf("%s: nodes %+v", r.Server, r.Nodes)
		}
		for _, n := range r.Nodes {
			// JetStream's seed, n0, may not have run in the measured second.
			if n.Quota != p.CPU || n.CPUs < 0 || (n.CPUs == 0 && n.Role != "seed") || (p.CPU > 0 && n.CPUs > 3*p.CPU) {
				t.Errorf("%s: node %+v", r.Server, n)
			}
		}
		if _, ok := r.Extra["cluster_groups"]; ok {
			t.Errorf("%s: --cluster-groups given to today's binary", r.Server)
		}
		if r.Server != "switchyard-durable" && r.Extra["vs_single_x"] <= 0 {
			t.Errorf("%s: not set against the durable server: %v", r.Server, r.Extra)
		}
		if strings.HasSuffix(r.Server, "-5") && r.Extra["vs_3_nodes_x"] <= 0 {
			t.Errorf("%s: not set against three nodes: %v", r.Server, r.Extra)
		}
		if strings.HasSuffix(r.Server, "-3") && r.Extra["vs_single_same_load_x"] <= 0 {
			t.Errorf("%s: not set against the durable server with its load: %v", r.Server, r.Extra)
		}
	}
	if x3 := runs[1]; x3.Extra["load_of_nodes"] != 3 || x3.Extra["acked_jobs"] <= 0 {
		t.Errorf("the durable server with three nodes' load: %v", x3.Extra)
	}
	// The cluster's nodes say their roles: one leads.
	if r := runs[2]; len(r.Nodes) == 3 && slices.IndexFunc(r.Nodes, func(n record.Node) bool { return n.Role == "leader" }) < 0 {
		t.Errorf("no leader among %+v", r.Nodes)
	}
}
